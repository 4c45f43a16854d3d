"""SaNSA node-state vocabulary and the Timeline type (Agarwal et al., "SaNSA", Sec. II-B/II-C).

* :class:`State` -- the eight node states of Sec. II-B, numbered as in the paper; :data:`PRIORITY`
  their resolution order (Sec. II-C) and :data:`OVERLAY_STATES` the administrative overlays;
* :class:`Event` / :class:`Source` -- kinds of classified syslog evidence and which evidence produced
  an interval;
* the inputs :class:`Events` / :class:`Layers` and tunables :class:`Params` of the derivations in
  :mod:`nodewatch.models.states.machine` and :mod:`nodewatch.models.states.reference`;
* :class:`Timeline` -- their output, intervals ``(node, start, end, state, source, ref)`` tiling
  ``[t_start, t_end)`` per node, and :func:`to_grid`, its sampling on a regular time grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

NS_PER_S = 1_000_000_000


class State(IntEnum):
    """The eight SaNSA node states (paper Sec. II-B, numbered as in the paper)."""

    DOWN = 1
    CONNECTION_LOSS = 2
    BOOTING = 3
    IDLE = 4
    JOB_RUNNING = 5
    ADMIN_RESV = 6
    RESERVED_IDLE = 7
    UNSCHEDULED_RESV = 8


#: Resolution order, lowest priority first (paper Sec. II-C: UNSCHEDULED_RESV and ADMIN_RESV are the
#: highest, BOOTING beats CONNECTION_LOSS; a job beats its user reservation; IDLE fills the gaps).
PRIORITY: tuple[State, ...] = (
    State.IDLE,
    State.RESERVED_IDLE,
    State.JOB_RUNNING,
    State.CONNECTION_LOSS,
    State.DOWN,
    State.BOOTING,
    State.ADMIN_RESV,
    State.UNSCHEDULED_RESV,
)
OVERLAY_STATES: frozenset[State] = frozenset({State.ADMIN_RESV, State.UNSCHEDULED_RESV})


class Event(IntEnum):
    """Kinds of classified syslog evidence."""

    NOT_RESPONDING = 1
    NOW_RESPONDING = 2
    STARTUP_FINISHED = 3
    KERNEL_BOOT = 4


class Source(IntEnum):
    """Which evidence produced an interval (the ``evidence`` column of ``node_states``)."""

    GAP = 0  # IDLE: no other evidence (gap fill)
    LOSS = 1  # slurmctld not responding .. now responding
    LOSS_BOOT = 2  # DOWN: loss followed by a boot
    LOSS_SILENT = 3  # DOWN: loss never resolved and node silent afterwards
    LOSS_OPEN = 4  # CONNECTION_LOSS never resolved, node still logging
    BOOT_SYSTEMD = 5  # systemd Startup finished
    BOOT_KERNEL = 6  # kernel banner without Startup finished
    JOB = 7  # job allocation (ref = job id)
    RESERVATION = 8  # reservation (ref = reservation row)


@dataclass(frozen=True)
class Params:
    """Tunables of the derivation (all in seconds)."""

    pre_s: int = 600  # a boot ending up to this long before "not responding" still explains the loss
    grace_s: int = 900  # a boot starting up to this long after "now responding" still explains the loss
    max_boot_s: int = 3600  # kernel banner without "Startup finished" within this: boot of at most this long
    banner_merge_s: int = 600  # banner lines closer than this belong to one boot


@dataclass
class Layers:
    """Interval layers (already clipped or not) besides syslog: jobs and reservations.

    ``*_node`` int, ``*_start``/``*_end`` int64 ns, ``job_ref`` job ids, ``resv_state`` one of
    ADMIN_RESV / UNSCHEDULED_RESV / RESERVED_IDLE, ``resv_ref`` an id of the reservation.
    """

    job_node: np.ndarray
    job_start: np.ndarray
    job_end: np.ndarray
    job_ref: np.ndarray
    resv_node: np.ndarray
    resv_start: np.ndarray
    resv_end: np.ndarray
    resv_state: np.ndarray
    resv_ref: np.ndarray

    @staticmethod
    def empty() -> Layers:
        """No jobs, no reservations."""
        i = np.zeros(0, np.int64)
        return Layers(i, i, i, i, i, i, i, i, i)


@dataclass
class Events:
    """Classified syslog events: node index, time (ns), kind (:class:`Event`), duration (ns, boots)."""

    node: np.ndarray
    time: np.ndarray
    kind: np.ndarray
    duration: np.ndarray

    @staticmethod
    def empty() -> Events:
        """No events."""
        i = np.zeros(0, np.int64)
        return Events(i, i, np.zeros(0, np.int8), i)


@dataclass
class Timeline:
    """Derived timeline: intervals tiling ``[t_start, t_end)`` per node, sorted by (node, start)."""

    node: np.ndarray
    start: np.ndarray
    end: np.ndarray
    state: np.ndarray
    source: np.ndarray
    ref: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.node.size)

    def equals(self, other: Timeline) -> bool:
        """Same intervals (all columns)."""
        return all(
            np.array_equal(np.asarray(getattr(self, k), np.int64), np.asarray(getattr(other, k), np.int64))
            for k in ("node", "start", "end", "state", "source", "ref")
        )


def to_grid(tl: Timeline, n_nodes: int, t_start: int, t_end: int, step_ns: int = 60 * NS_PER_S) -> np.ndarray:
    """Sample a timeline on a regular grid: state at the start of each step (node × time int8).

    The timeline must tile ``[t_start, t_end)`` for each of ``n_nodes`` nodes (as derive_states
    returns); ``(t_end - t_start)`` must be a multiple of ``step_ns``. Paper Sec. II-C states per time.
    """
    if (t_end - t_start) % step_ns:
        raise ValueError("window length must be a multiple of the grid step")
    n_t = (t_end - t_start) // step_ns
    first = -((t_start - tl.start) // step_ns)  # ceil((start - t0) / step)
    last = -((t_start - tl.end) // step_ns)
    counts = last - first
    grid = np.repeat(tl.state.astype(np.int8), counts)
    if grid.size != n_nodes * n_t:
        raise ValueError("timeline does not tile the window for every node")
    return grid.reshape(n_nodes, n_t)
