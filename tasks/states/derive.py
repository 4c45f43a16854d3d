"""Derivation of a window's SaNSA states from classified inputs (Agarwal et al., "SaNSA", Sec. II-B/II-C).

:func:`derive_from_tables` classifies staged rows (:mod:`nodewatch.tasks.states.classify`), seeds the
losses carried over from the previous day (:class:`Carry`, :func:`seed_events`) and resolves the
timelines with :func:`nodewatch.models.states.machine.derive_states` (with and without the
ADMIN_RESV / UNSCHEDULED_RESV overlays, plus the episode timeline over all evidence read) into a
:class:`StateBuild`, before anything is published.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from nodewatch.models.states.machine import Boots, Losses, derive_states, loss_table
from nodewatch.models.states.timeline import Event, Events, Layers, State, Timeline
from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.states.classify import classify_syslog, job_layers, reservation_layers
from nodewatch.tasks.states.common import StatesError


@dataclass
class Carry:
    """Losses in effect at the start of a window, carried over from the previous day's build (``state_carry``).

    ``node`` indices into the build's node list, ``loss_start`` / ``last_seen`` int64 ns (``last_seen``
    int64 min if unknown).
    """

    node: np.ndarray
    loss_start: np.ndarray
    last_seen: np.ndarray

    @staticmethod
    def empty() -> Carry:
        """No carried losses."""
        i = np.zeros(0, np.int64)
        return Carry(i, i, i)


@dataclass
class StateBuild:
    """Result of deriving states for a window (before publishing).

    ``timeline`` / ``timeline_no_overlay`` tile ``[t_start, t_end)``. ``episodes_timeline`` is the
    timeline without overlays over all evidence read (``[ext_start, ext_end)``: from the earliest
    evidence, carried losses included, to the end of the look-ahead), from which failure episodes get
    their real start and end; ``losses`` / ``boots`` are the unclipped loss and boot tables behind it;
    ``overlays`` the (node, start, end, state code) of the ADMIN_RESV / UNSCHEDULED_RESV reservations.
    """

    nodes: list[str]
    t_start: int
    t_end: int
    timeline: Timeline
    timeline_no_overlay: Timeline
    job_labels: pa.Array
    resv_labels: pa.Array
    counts: Counter
    episodes_timeline: Timeline | None = None
    ext_start: int = 0
    ext_end: int = 0
    losses: Losses | None = None
    boots: Boots | None = None
    last_seen: np.ndarray | None = None
    overlays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None


def seed_events(events: Events, carry: Carry, read_start: int) -> tuple[Events, int]:
    """Add a "not responding" at the real start of every carried loss that began before ``read_start``.

    Losses that began inside the read syslog are already in ``events``. Returns the events and the
    number of seeds added.
    """
    m = carry.loss_start < read_start
    k = int(m.sum())
    if not k:
        return events, 0
    return (
        Events(
            np.concatenate([events.node, carry.node[m]]).astype(np.int64),
            np.concatenate([events.time, carry.loss_start[m]]).astype(np.int64),
            np.concatenate([events.kind, np.full(k, Event.NOT_RESPONDING, np.int8)]).astype(np.int8),
            np.concatenate([events.duration, np.zeros(k, np.int64)]).astype(np.int64),
        ),
        k,
    )


def derive_from_tables(
    syslog: pa.Table | None,
    jobs: pa.Table | None,
    reservations: pa.Table | None,
    nodes: list[str],
    t_start: int,
    t_end: int,
    carry: Carry | None = None,
    read_start: int | None = None,
    read_end: int | None = None,
) -> StateBuild:
    """Classify, build layers and derive both timelines (with and without overlays) plus the episode timeline.

    Args:
        syslog, jobs, reservations: staged rows (syslog read over ``[read_start, read_end)``).
        nodes: node set (valid names).
        t_start, t_end: window, int64 ns.
        carry: losses in effect at ``read_start`` from the previous build (seeded if they began before it).
        read_start, read_end: the syslog range read (default: the window).
    """
    bad_names = [n for n in nodes if not is_valid_node_name(n)]
    if bad_names:
        raise StatesError(f"invalid node name(s) in node set, e.g. {bad_names[0]!r}")
    read_start = t_start if read_start is None else read_start
    read_end = t_end if read_end is None else max(read_end, t_end)
    node_arr = pa.array(nodes, pa.string())
    cl = classify_syslog(syslog, node_arr)
    carry = carry or Carry.empty()
    events, n_seeds = seed_events(cl.events, carry, read_start)
    last_seen = cl.last_seen.copy()
    if carry.node.size:
        np.maximum.at(last_seen, carry.node, carry.last_seen)
    (jn, js, je, jr), jlab, jc = job_layers(jobs, node_arr, t_end)
    (rn, rs, re_, rst, rr), rlab, rc = reservation_layers(reservations, node_arr)
    layers = Layers(jn, js, je, jr, rn, rs, re_, rst, rr)
    n = len(nodes)
    tl = derive_states(events, layers, n, t_start, t_end, last_seen=last_seen, overlay=True)
    tl0 = derive_states(events, layers, n, t_start, t_end, last_seen=last_seen, overlay=False)
    # episodes: the same derivation over all evidence read, so failures keep their real start and end
    ext_start = min(
        read_start,
        t_start,
        int(events.time.min(initial=read_start)),
        int((events.time - events.duration).min(initial=read_start)),
    )
    tle = derive_states(events, layers, n, ext_start, read_end, last_seen=last_seen, overlay=False)
    losses, boots = loss_table(events, n, read_end, last_seen=last_seen)
    counts = cl.counts + jc + rc + Counter({k: v for k, v in tl.counts.items() if v})
    if n_seeds:
        counts["losses_carried_in"] = n_seeds
    ov = np.isin(rst, [int(State.ADMIN_RESV), int(State.UNSCHEDULED_RESV)])
    overlays = (rn[ov].astype(np.int64), rs[ov].astype(np.int64), re_[ov].astype(np.int64), rst[ov].astype(np.int64))
    return StateBuild(
        nodes, t_start, t_end, tl, tl0, jlab, rlab, counts, tle, ext_start, read_end, losses, boots, last_seen, overlays
    )
