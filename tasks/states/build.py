"""Build SaNSA node states from staged syslog, jobs, reservations and topology.

Steps (each a plain function, testable without Prefect):

1. :func:`classify_syslog` turns staged syslog rows into evidence events (vectorised with
   pyarrow.compute; slurmctld hostlists expanded once per distinct expression);
2. :func:`job_layers` / :func:`reservation_layers` turn jobs and reservations into interval layers;
3. :func:`nodewatch.models.states.machine.derive_states` resolves the timeline;
4. :func:`timeline_table` / :func:`failure_events_table` / :func:`write_cube` publish the staged
   tables ``node_states`` and ``failure_events`` and ``cubes/state.zarr``; :func:`carry_table` the
   losses still in effect at each built day's end (``state_carry``).

:func:`build_states` runs them against a :class:`~nodewatch.tasks.core.store.Store` for a window of UTC days and
counts every input row that is ignored (unknown node, invalid name, missing times, ...). Windows are
independent of how a range is cut into builds: losses in effect at the previous day's end are seeded
from ``state_carry`` at their real start, and failure events carry their episode's own start and
end (an episode still open at a window's end is updated in place by the next build).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.states.machine import (
    NS_PER_S,
    Boots,
    Event,
    Events,
    Layers,
    Losses,
    Source,
    State,
    Timeline,
    derive_states,
    loss_table,
    losses_active_at,
    to_grid,
)
from nodewatch.schemas.cubes import compressors, string_encoding, time_encoding
from nodewatch.schemas.names import is_valid_node_name
from nodewatch.schemas.states import (
    CUBE_PATH,
    CUBE_TIME_CHUNK,
    CUBE_VARIABLE,
    FAILURE_EVENTS,
    FILL_CODE,
    NODE_STATES,
    STATE_CARRY,
    STATE_NAMES,
    cube_attrs,
)

DAY_NS = 86400 * NS_PER_S
MIN_NS = 60 * NS_PER_S
_PREFIX = r"^(?:\[[^\]]*\] )?"  # optional "[2018-06-09T03:29:13.803] " / "[    0.000000] " prefix
_CTLD_RE = _PREFIX + r"(?:error: )?Nodes? .+? (?:not|now) responding"
_SYSTEMD_RE = _PREFIX + r"Startup finished in "
_KERNEL_RE = _PREFIX + r"(?:Linux version |Command line: BOOT_IMAGE=)"
_NOT_RESP_RE = r"Nodes? (?P<hl>.+?) not responding"
_NOW_RESP_RE = r"Nodes? (?P<hl>.+?) now responding"
_DUR_RE = re.compile(r"(?P<v>\d+(?:\.\d+)?)\s*(?P<u>h|min|ms|us|s)\b")
_UNIT_NS = {"h": 3600 * NS_PER_S, "min": 60 * NS_PER_S, "s": NS_PER_S, "ms": 1_000_000, "us": 1_000}


class StatesError(ValueError):
    """A user-facing error of the state build (one line)."""


def parse_systemd_duration(text: str) -> int | None:
    """``"11min 17.957s"`` -> ns; ``None`` if no component parses (paper Sec. II-C systemd record)."""
    total, found = 0, False
    for m in _DUR_RE.finditer(text):
        total += int(round(float(m.group("v")) * _UNIT_NS[m.group("u")]))
        found = True
    return total if found else None


def _expand(expr: str) -> list[str] | None:
    from nodewatch.tasks.ingest.hostlist import HostlistError, expand_hostlist

    try:
        return expand_hostlist(expr.strip())
    except HostlistError:
        return None


def _ns(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Timestamps as int64 ns since epoch (nulls -> int64 min)."""
    a = pc.cast(arr, pa.timestamp("ns", tz="UTC"))
    return pc.fill_null(a.cast(pa.int64()), np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)


def _node_idx(names: pa.Array | pa.ChunkedArray, nodes: pa.Array) -> np.ndarray:
    """Index of each name in ``nodes`` (-1 if unknown)."""
    return pc.fill_null(pc.index_in(names, value_set=nodes), -1).to_numpy(zero_copy_only=False).astype(np.int64)


@dataclass
class Classified:
    """Evidence events and per-node last syslog time, with counts of ignored rows."""

    events: Events
    last_seen: np.ndarray
    counts: Counter = field(default_factory=Counter)


def classify_syslog(table: pa.Table | None, nodes: pa.Array) -> Classified:
    """Staged syslog rows -> SaNSA evidence events (paper Sec. II-C queries).

    * slurmctld ``Nodes <hostlist> not responding, setting DOWN`` -> NOT_RESPONDING per expanded node;
    * slurmctld ``Node <node> now responding`` -> NOW_RESPONDING;
    * systemd ``Startup finished in ... = <total>`` -> STARTUP_FINISHED with the total as duration;
    * kernel ``Linux version ...`` / ``Command line: BOOT_IMAGE=...`` -> KERNEL_BOOT.

    Rows are first split by ``app`` (cheap equality on short strings); substring searches run only on
    the slurmctld / systemd / kernel subsets. Hostlists are expanded once per distinct expression.
    """
    n_nodes = len(nodes)
    counts: Counter = Counter()
    last_seen = np.full(n_nodes, np.iinfo(np.int64).min, np.int64)
    if table is None or table.num_rows == 0:
        return Classified(Events.empty(), last_seen, counts)
    counts["syslog_rows"] = table.num_rows
    ni_all = _node_idx(table["node"], nodes)
    t_all = _ns(table["time"])
    known = ni_all >= 0
    np.maximum.at(last_seen, ni_all[known], t_all[known])  # last line of each node (activity check)
    app = pc.fill_null(table["app"], "")
    msg = table["message"]

    def subset(name: str) -> tuple[np.ndarray, pa.Array]:
        rows = np.nonzero(pc.equal(app, name).to_numpy(zero_copy_only=False))[0]
        return rows, msg.take(pa.array(rows))

    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    ctld_rows, ctld_msg = subset("slurmctld")
    # anchored regexes fail at the first characters of unrelated lines (much cheaper than substring scans)
    resp = pc.match_substring_regex(ctld_msg, _CTLD_RE).to_numpy(zero_copy_only=False)
    resp_msg = ctld_msg.filter(pa.array(resp))
    resp_rows = ctld_rows[resp]
    for kind, needle, rex in (
        (Event.NOT_RESPONDING, "not responding", _NOT_RESP_RE),
        (Event.NOW_RESPONDING, "now responding", _NOW_RESP_RE),
    ):
        hit = pc.match_substring(resp_msg, needle).to_numpy(zero_copy_only=False)
        if not hit.any():
            continue
        rows = resp_rows[hit]
        hl = pc.struct_field(pc.extract_regex(resp_msg.filter(pa.array(hit)), rex), "hl")
        hl = hl.combine_chunks() if isinstance(hl, pa.ChunkedArray) else hl
        uniq = pc.unique(hl)
        code = pc.index_in(hl, value_set=uniq).to_numpy(zero_copy_only=False)
        expanded = [_expand(x) if x is not None else None for x in uniq.to_pylist()]
        lens = np.array([len(e) if e else 0 for e in expanded], np.int64)
        counts[f"{kind.name.lower()}_unparsed_hostlist"] += int(np.isin(code, np.nonzero(lens == 0)[0]).sum())
        # node index of every expanded name, laid out per distinct expression
        flat_idx = _node_idx(pa.array([h for e in expanded for h in (e or [])], pa.string()), nodes)
        offs = np.concatenate([[0], np.cumsum(lens)])
        rep = lens[code]
        take = np.repeat(offs[code], rep) + (np.arange(rep.sum()) - np.repeat(np.cumsum(rep) - rep, rep))
        ni = flat_idx[take]
        tt = np.repeat(t_all[rows], rep)
        counts["events_unknown_node"] += int((ni < 0).sum())
        good = ni >= 0
        parts.append(
            (
                ni[good],
                tt[good],
                np.full(int(good.sum()), kind, np.int8),
                np.zeros(int(good.sum()), np.int64),
                np.repeat(rows, rep)[good],
            )
        )
    sys_rows, sys_msg = subset("systemd")
    hit = pc.match_substring_regex(sys_msg, _SYSTEMD_RE).to_numpy(zero_copy_only=False)
    if hit.any():
        rows = sys_rows[hit]
        totals = pc.struct_field(pc.extract_regex(sys_msg.filter(pa.array(hit)), r"= (?P<tot>[^=]+?)\.?\s*$"), "tot").to_pylist()
        parsed = [parse_systemd_duration(x) if x else None for x in totals]
        bad = np.array([p is None for p in parsed], bool)
        counts["startup_finished_unparsed"] += int(bad.sum())
        d = np.array([p or 0 for p in parsed], np.int64)
        ni = ni_all[rows]
        counts["events_unknown_node"] += int(((ni < 0) & ~bad).sum())
        good = (ni >= 0) & ~bad
        parts.append(
            (ni[good], t_all[rows][good], np.full(int(good.sum()), Event.STARTUP_FINISHED, np.int8), d[good], rows[good])
        )
    k_rows, k_msg = subset("kernel")
    hit = pc.match_substring_regex(k_msg, _KERNEL_RE).to_numpy(zero_copy_only=False)
    if hit.any():
        rows = k_rows[hit]
        ni = ni_all[rows]
        counts["events_unknown_node"] += int((ni < 0).sum())
        good = ni >= 0
        parts.append(
            (
                ni[good],
                t_all[rows][good],
                np.full(int(good.sum()), Event.KERNEL_BOOT, np.int8),
                np.zeros(int(good.sum()), np.int64),
                rows[good],
            )
        )
    if not parts:
        return Classified(Events.empty(), last_seen, counts)
    ev = Events(*(np.concatenate([p[i] for p in parts]) for i in range(4)))
    row = np.concatenate([p[4] for p in parts]).astype(np.int64)
    # exact duplicate evidence (same line ingested twice) is harmless but counted
    key = np.stack([ev.node, ev.time, ev.kind.astype(np.int64), ev.duration], axis=1)
    counts["events"] = int(ev.node.size)
    counts["events_duplicate"] = int(ev.node.size - np.unique(key, axis=0).shape[0]) if ev.node.size else 0
    counts["events_out_of_order"] = out_of_order(ev.node, ev.time, row)
    return Classified(ev, last_seen, counts)


def out_of_order(node: np.ndarray, time: np.ndarray, row: np.ndarray) -> int:
    """Evidence lines earlier in time than an evidence line of the same node that precedes them in the input.

    Vectorised: sort by (node, input row), rank the times, and compare each rank with the running
    maximum of the node's earlier ranks (one int64 key ``node * n_ranks + rank`` per event).
    """
    if node.size < 2:
        return 0
    o = np.lexsort((row, node))
    n_sorted = np.asarray(node, np.int64)[o]
    rank = np.unique(np.asarray(time, np.int64)[o], return_inverse=True)[1].astype(np.int64)
    key = n_sorted * (int(rank.max()) + 1) + rank
    run_max = np.maximum.accumulate(key)
    same = n_sorted[1:] == n_sorted[:-1]
    return int((same & (key[1:] < run_max[:-1])).sum())


def _flatten_nodes(table: pa.Table, column: str, nodes: pa.Array) -> tuple[np.ndarray, np.ndarray, int]:
    """(row index, node index) per listed node; also the number of unknown node entries."""
    lists = table[column].combine_chunks()
    if pa.types.is_string(lists.type) or pa.types.is_large_string(lists.type):
        lists = pa.array([_expand(x) or [] if x else [] for x in lists.to_pylist()], pa.list_(pa.string()))
    flat = pc.list_flatten(lists)
    parent = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    ni = _node_idx(flat, nodes)
    return parent[ni >= 0], ni[ni >= 0], int((ni < 0).sum())


def job_layers(jobs: pa.Table | None, nodes: pa.Array, t_end: int) -> tuple[tuple, pa.Array, Counter]:
    """JOB_RUNNING intervals from job allocations (paper Sec. II-C JOBCOMP record); refs index the labels."""
    counts: Counter = Counter()
    empty = (np.zeros(0, np.int64),) * 4
    if jobs is None or jobs.num_rows == 0:
        return empty, pa.array([], pa.string()), counts
    counts["job_rows"] = jobs.num_rows
    if "step" in jobs.column_names:
        alloc = pc.is_null(jobs["step"])
        counts["job_steps_ignored"] = int(jobs.num_rows - pc.sum(alloc).as_py())
        jobs = jobs.filter(alloc)
    started = pc.is_valid(jobs["start_time"])
    counts["jobs_never_started"] = int(jobs.num_rows - pc.sum(started).as_py()) if jobs.num_rows else 0
    jobs = jobs.filter(started)
    if jobs.num_rows == 0:
        return empty, pa.array([], pa.string()), counts
    s = _ns(jobs["start_time"])
    e = _ns(jobs["end_time"])
    e = np.where(e == np.iinfo(np.int64).min, t_end, e)  # still running
    inverted = e < s
    counts["jobs_end_before_start"] = int(inverted.sum())
    row, ni, unknown = _flatten_nodes(jobs, "node_list", nodes)
    counts["job_node_entries_unknown_node"] = unknown
    keep = ~inverted[row]
    row, ni = row[keep], ni[keep]
    labels = pc.binary_join_element_wise("job", pc.cast(jobs["job_id"], pa.string()), " ").combine_chunks()
    return (ni, s[row], e[row], row), labels, counts


def reservation_state(name: str | None, flags: object) -> State:
    """Class of a reservation (paper Sec. II-C): MAINT -> ADMIN_RESV, unscheduled/emergency -> UNSCHEDULED_RESV, else user."""
    f = " ".join(flags) if isinstance(flags, list | tuple) else str(flags or "")
    text = f"{name or ''} {f}".upper()
    if re.search(r"UNSCHED|EMERG|OUTAGE", text):
        return State.UNSCHEDULED_RESV
    if re.search(r"\bMAINT", f.upper()) or re.search(r"^(ROOT|ADMIN|MAINT)", (name or "").upper()):
        return State.ADMIN_RESV
    return State.RESERVED_IDLE


def reservation_layers(resv: pa.Table | None, nodes: pa.Array) -> tuple[tuple, pa.Array, Counter]:
    """ADMIN_RESV / UNSCHEDULED_RESV / RESERVED_IDLE intervals from reservations."""
    counts: Counter = Counter()
    empty = (np.zeros(0, np.int64),) * 5
    if resv is None or resv.num_rows == 0:
        return empty, pa.array([], pa.string()), counts
    counts["reservation_rows"] = resv.num_rows
    col = "node_list" if "node_list" in resv.column_names else "nodes"
    s, e = _ns(resv["start"]), _ns(resv["end"])
    bad = (s == np.iinfo(np.int64).min) | (e == np.iinfo(np.int64).min) | (e <= s)
    counts["reservations_bad_times"] = int(bad.sum())
    names = resv["name"].to_pylist()
    flags = resv["flags"].to_pylist() if "flags" in resv.column_names else [None] * resv.num_rows
    st = np.array([reservation_state(n, f) for n, f in zip(names, flags, strict=True)], np.int64)
    row, ni, unknown = _flatten_nodes(resv, col, nodes)
    counts["reservation_node_entries_unknown_node"] = unknown
    keep = ~bad[row]
    row, ni = row[keep], ni[keep]
    labels = pa.array([f"reservation {n}" for n in names], pa.string())
    return (ni, s[row], e[row], st[row], row), labels, counts


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


_SOURCE_TEXT = {
    Source.GAP: "gap",
    Source.LOSS: "slurmctld not responding..now responding",
    Source.LOSS_BOOT: "slurmctld loss + boot",
    Source.LOSS_SILENT: "slurmctld loss, node silent, no recovery",
    Source.LOSS_OPEN: "slurmctld loss, no recovery in data",
    Source.BOOT_SYSTEMD: "systemd Startup finished",
    Source.BOOT_KERNEL: "kernel boot banner",
}


def evidence_strings(tl: Timeline, job_labels: pa.Array | list[str], resv_labels: pa.Array | list[str]) -> pa.Array:
    """Human evidence per interval: fixed text per source, or the job / reservation label (one Arrow take)."""
    base = pa.array([_SOURCE_TEXT.get(Source(i), "") for i in range(len(Source))], pa.string())
    jl = job_labels if isinstance(job_labels, pa.Array) else pa.array(job_labels, pa.string())
    rl = resv_labels if isinstance(resv_labels, pa.Array) else pa.array(resv_labels, pa.string())
    idx = tl.source.astype(np.int64)
    j = tl.source == Source.JOB
    idx[j] = len(base) + tl.ref[j]
    r = tl.source == Source.RESERVATION
    idx[r] = len(base) + len(jl) + tl.ref[r]
    return pa.concat_arrays([base, jl.cast(pa.string()), rl.cast(pa.string())]).take(pa.array(idx))


def split_at_days(tl: Timeline) -> Timeline:
    """Cut intervals at UTC midnight so every piece lies inside one date partition."""
    first_day = tl.start // DAY_NS
    last_day = (tl.end - 1) // DAY_NS
    reps = (last_day - first_day + 1).astype(np.int64)
    idx = np.repeat(np.arange(tl.node.size), reps)
    k = np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps)
    day = first_day[idx] + k
    s = np.maximum(tl.start[idx], day * DAY_NS)
    e = np.minimum(tl.end[idx], (day + 1) * DAY_NS)
    return Timeline(tl.node[idx], s, e, tl.state[idx], tl.source[idx], tl.ref[idx], dict(tl.counts))


def timeline_table(b: StateBuild, overlay: bool = True) -> pa.Table:
    """The ``node_states`` rows of one timeline, split at UTC midnight."""
    tl = split_at_days(b.timeline if overlay else b.timeline_no_overlay)
    names = pa.array(b.nodes, pa.string()).take(pa.array(tl.node))
    state_names = pa.array(STATE_NAMES, pa.string()).take(pa.array(tl.state.astype(np.int64) - 1))
    return pa.table(
        {
            "node": names,
            "start": pa.array(tl.start, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "end": pa.array(tl.end, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "state": state_names,
            "state_code": pa.array(tl.state, pa.int8()),
            "overlay": pa.array(np.full(tl.node.size, overlay), pa.bool_()),
            "evidence": evidence_strings(tl, b.job_labels, b.resv_labels),
        },
        schema=NODE_STATES.arrow_schema(),
    )


def _iso(ns: int) -> str:
    """``2026-01-01T22:00:00Z`` (fractions of a second only when present)."""
    t = np.datetime64(int(ns), "ns").astype("datetime64[ms]")
    txt = str(t)
    return (txt[:-4] if txt.endswith(".000") else txt) + "Z"


def _dur(ns: int) -> str:
    """Duration as systemd prints it: ``1h 2min 3.5s``, ``11min 17.957s``."""
    sec = ns / NS_PER_S
    h, rem = divmod(sec, 3600)
    m, sec = divmod(rem, 60)
    parts = ([f"{int(h)}h"] if h else []) + ([f"{int(m)}min"] if m else []) + [f"{sec:.3f}".rstrip("0").rstrip(".") + "s"]
    return " ".join(parts)


def episode_evidence(b: StateBuild, loss: int, open_at: int | None) -> str:
    """Evidence of one failure episode from its loss: "not responding", the boot (end + duration), "now responding".

    ``open_at``: the episode is unresolved in the data read; it is reported as still down at this time.
    """
    ls, bt = b.losses, b.boots
    if ls is None or bt is None or loss < 0:
        return "DOWN in the derived timeline (no slurmctld loss found)"
    parts = [f"not responding {_iso(ls.start[loss])}"]
    k = int(ls.boot[loss])
    if k >= 0:
        if bt.source[k] == Source.BOOT_SYSTEMD:
            parts.append(f"boot finished {_iso(bt.end[k])} after {_dur(int(bt.end[k] - bt.start[k]))} (systemd)")
        else:
            parts.append(f"kernel boot banner {_iso(bt.start[k])}, boot taken to end {_iso(bt.end[k])}")
    if ls.responding[loss] >= 0:
        parts.append(f"now responding {_iso(ls.responding[loss])}")
    if ls.source[loss] == Source.LOSS_SILENT:
        last = b.last_seen[ls.node[loss]] if b.last_seen is not None else np.iinfo(np.int64).min
        seen = f"last line of the node {_iso(last)}" if last > np.iinfo(np.int64).min else "no line of the node"
        parts.append(f"node silent ({seen})")
    if open_at is not None:
        parts.append(f"no boot or now responding by {_iso(open_at)}")
    return "; ".join(parts)


def failure_episodes(b: StateBuild) -> dict[str, np.ndarray]:
    """Failure episodes of the episode timeline: a DOWN interval plus the DOWN/BOOTING intervals contiguous with it.

    The timeline is the one without overlays, so an overlay never cuts an episode; an episode that
    *begins* inside an ADMIN_RESV / UNSCHEDULED_RESV overlay of its node is shadowed (paper Sec. II-C:
    events during administrative windows are not counted in its statistics, but stay available "under
    the shadowed overlay") and flagged in ``shadowed``; ``shadowed_by`` is the overlay's state code (0:
    none; inside both, UNSCHEDULED_RESV, the higher priority).

    Returns arrays ``node``, ``start``, ``end`` (real, not clipped to the window or an overlay),
    ``open`` (unresolved at the end of the data read; ``end`` is then the window end),
    ``cause_silent``, ``loss`` (index of the loss behind the first DOWN interval, -1 if none),
    ``shadowed`` and ``shadowed_by``.
    """
    tl = b.episodes_timeline if b.episodes_timeline is not None else b.timeline
    ext_end = b.ext_end if b.episodes_timeline is not None else b.t_end
    down_like = (tl.state == State.DOWN) | (tl.state == State.BOOTING)
    same_node_prev = np.zeros(tl.node.size, bool)
    same_node_prev[1:] = (tl.node[1:] == tl.node[:-1]) & (tl.start[1:] == tl.end[:-1])
    prev_down_like = np.zeros(tl.node.size, bool)
    prev_down_like[1:] = down_like[:-1]
    run_start = down_like & ~(same_node_prev & prev_down_like)
    run_id = np.where(down_like, np.cumsum(run_start) - 1, -1)
    n_runs = int(run_start.sum())
    has_down = np.zeros(n_runs, bool)
    dmask = (tl.state == State.DOWN) & (run_id >= 0)
    has_down[run_id[dmask]] = True
    end = np.zeros(n_runs, np.int64)
    np.maximum.at(end, run_id[down_like], tl.end[down_like])
    # first DOWN interval of each run gives the cause and the loss behind it
    first_down = np.full(n_runs, -1, np.int64)
    di = np.nonzero(dmask)[0]
    rid = run_id[di]
    firsts = np.unique(rid, return_index=True)[1]
    first_down[rid[firsts]] = di[firsts]
    sel = np.nonzero(has_down)[0]
    fd = first_down[sel]
    node = tl.node[fd].astype(np.int64)
    start = tl.start[np.nonzero(run_start)[0][sel]]
    end = end[sel]
    is_open = end >= ext_end
    end = np.where(is_open, np.maximum(b.t_end, start), end)
    loss = np.full(node.size, -1, np.int64)
    if b.losses is not None and b.losses.node.size:
        ln, lst = b.losses.node, b.losses.start
        for i, (nd, t) in enumerate(zip(node.tolist(), tl.start[fd].tolist(), strict=True)):
            lo, hi = np.searchsorted(ln, nd, "left"), np.searchsorted(ln, nd, "right")
            j = lo + int(np.searchsorted(lst[lo:hi], t, "right")) - 1
            loss[i] = j if j >= lo else -1
    shadowed_by = np.zeros(node.size, np.int64)
    if b.overlays is not None and b.overlays[0].size:
        on, os_, oe, ost = b.overlays
        for i, (nd, t) in enumerate(zip(node.tolist(), start.tolist(), strict=True)):
            inside = (on == nd) & (os_ <= t) & (oe > t)
            if inside.any():
                # UNSCHEDULED_RESV (8) outranks ADMIN_RESV (6): the overlay in effect at the start
                shadowed_by[i] = int(ost[inside].max())
    shadowed = shadowed_by > 0
    return {
        "node": node,
        "start": start,
        "end": end,
        "open": is_open,
        "cause_silent": tl.source[fd] == Source.LOSS_SILENT,
        "loss": loss,
        "shadowed": shadowed,
        "shadowed_by": shadowed_by,
    }


def failure_events_table(b: StateBuild, racks: dict[str, str] | None = None) -> pa.Table:
    """Failure events of the build: episodes starting in the window or still in effect at its start.

    Paper Sec. II-C: a DOWN episode (DOWN and the BOOTING that ends it). Every episode is listed; one
    that begins inside an ADMIN_RESV / UNSCHEDULED_RESV overlay of its node is shadowed and names the
    overlay in ``shadowed_by`` (kept "under the shadowed overlay"; consumers choose: Table III leaves
    them out, correlated rack failures and the failure fits keep UNSCHEDULED_RESV ones). Start and end
    are the episode's own (not cut at window edges or overlays); an episode unresolved in the data read
    ends at the window end. Rows starting before the window update earlier partitions.
    """
    ep = failure_episodes(b)
    keep = (ep["start"] < b.t_end) & ((ep["start"] >= b.t_start) | (ep["end"] > b.t_start))
    in_window = keep & (ep["start"] >= b.t_start)
    n_shadowed = int((in_window & ep["shadowed"]).sum())
    if n_shadowed:
        b.counts["failure_episodes_shadowed_by_overlay"] = n_shadowed
        for st in (State.ADMIN_RESV, State.UNSCHEDULED_RESV):
            k = int((in_window & (ep["shadowed_by"] == int(st))).sum())
            if k:
                b.counts[f"failure_episodes_shadowed_by_{st.name.lower()}"] = k
    idx = np.nonzero(keep)[0]
    node_names = [b.nodes[i] for i in ep["node"][idx]]
    cause = ["loss+silent" if c else "loss+boot" for c in ep["cause_silent"][idx]]
    evid = [episode_evidence(b, int(ep["loss"][i]), b.t_end if ep["open"][i] else None) for i in idx]
    rack = [racks.get(n) if racks else None for n in node_names]
    shadow = [STATE_NAMES[c - 1] if c > 0 else None for c in ep["shadowed_by"][idx].tolist()]
    return pa.table(
        {
            "node": pa.array(node_names, pa.string()),
            "start": pa.array(ep["start"][idx], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "end": pa.array(ep["end"][idx], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "cause": pa.array(cause, pa.string()),
            "evidence": pa.array(evid, pa.string()),
            "rack": pa.array(rack, pa.string()),
            "shadowed_by": pa.array(shadow, pa.string()),
        },
        schema=FAILURE_EVENTS.arrow_schema(),
    )


def carry_table(b: StateBuild, days: list[str]) -> dict[str, pa.Table]:
    """Per built day, the losses still in effect at its end (staged ``state_carry``)."""
    out: dict[str, pa.Table] = {}
    ls = b.losses if b.losses is not None else loss_table(Events.empty(), len(b.nodes), b.t_end)[0]
    names = pa.array(b.nodes, pa.string())
    for day in days:
        at = _day_ns(date.fromisoformat(day)) + DAY_NS
        i = losses_active_at(ls, at)
        seen = b.last_seen[ls.node[i]] if b.last_seen is not None else np.full(i.size, np.iinfo(np.int64).min)
        out[day] = pa.table(
            {
                "node": names.take(pa.array(ls.node[i])),
                "as_of": pa.array(np.full(i.size, at, np.int64), pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
                "loss_start": pa.array(ls.start[i], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
                "last_seen": pa.array(seen, pa.int64(), mask=seen == np.iinfo(np.int64).min).cast(pa.timestamp("ns", tz="UTC")),
                "state": pa.array(np.array(STATE_NAMES, object)[ls.state[i].astype(np.int64) - 1].tolist(), pa.string()),
            },
            schema=STATE_CARRY.arrow_schema(),
        )
    return out


def read_carry(store, day: date, nodes: list[str]) -> tuple[Carry | None, int]:  # noqa: ANN001
    """Losses in effect at the end of ``day`` from its ``state_carry`` partition (``None`` if that day was never built).

    Also returns the number of carried rows on nodes outside ``nodes`` (dropped).
    """
    t = store.read_staged(STATE_CARRY.name, [day.isoformat()])
    if t is None:
        return None, 0
    ni = _node_idx(t["node"], pa.array(nodes, pa.string()))
    ok = ni >= 0
    return Carry(ni[ok], _ns(t["loss_start"])[ok], _ns(t["last_seen"])[ok]), int((~ok).sum())


# ------------------------------------------------------------------ store I/O
def day_range(start: date, end: date) -> list[str]:
    """ISO dates of the UTC days in ``[start, end)``."""
    if end <= start:
        raise StatesError(f"--end {end} must be after --start {start}")
    return [(start + timedelta(days=i)).isoformat() for i in range((end - start).days)]


def _day_ns(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()) * NS_PER_S


def read_node_set(store, tables: dict[str, pa.Table | None]) -> tuple[list[str], dict[str, str], Counter]:  # noqa: ANN001
    """Nodes from staged topology; without topology, every valid node name seen in the inputs."""
    counts: Counter = Counter()
    topo = store.read_staged("topology")
    if topo is not None and topo.num_rows:
        if "valid_from" in topo.column_names:  # several snapshots: the latest one wins
            topo = topo.sort_by([("valid_from", "ascending")])
        names = topo["node"].to_pylist()
        racks_col = topo["rack"].to_pylist() if "rack" in topo.column_names else [None] * len(names)
        racks = {n: (str(r) if r is not None else None) for n, r in zip(names, racks_col, strict=True)}
        valid = sorted({n for n in names if is_valid_node_name(n)})
        counts["topology_invalid_names"] = len(set(names)) - len(valid)
        return valid, racks, counts
    seen: set[str] = set()
    if tables.get("syslog") is not None:
        sys_ = tables["syslog"]
        ctld = pc.equal(pc.fill_null(sys_["app"], ""), "slurmctld")
        seen |= set(pc.unique(sys_.filter(pc.invert(ctld))["node"]).to_pylist())
    if tables.get("jobs") is not None:
        seen |= set(pc.unique(pc.list_flatten(tables["jobs"]["node_list"])).to_pylist())
    valid = sorted(n for n in seen if n and is_valid_node_name(n))
    counts["node_set_from_inputs"] = len(valid)
    counts["invalid_node_names_in_inputs"] = len(seen) - len(valid)
    return valid, {}, counts


def _replace_partition(store, table_name: str, day: str, run_id: str, table: pa.Table) -> None:  # noqa: ANN001
    """Write one date partition and remove older parts of that date (re-runs replace, never duplicate)."""
    key = store.staged_key(table_name, day, run_id)
    old = [p for p in store.staged_files(table_name, [day]) if not p.endswith(key.rsplit("/", 1)[1])]
    store.write_parquet(table, key)
    for p in old:
        store.fs.rm(p)


def write_staged_by_day(store, table_name: str, table: pa.Table, days: list[str], run_id: str) -> dict[str, int]:  # noqa: ANN001
    """Write ``table`` into one partition per day (by its time column); returns rows per day."""
    col = "start"
    d = pc.strftime(table[col], format="%Y-%m-%d") if table.num_rows else pa.array([], pa.string())
    out: dict[str, int] = {}
    for day in days:
        part = table.filter(pc.equal(d, day)) if table.num_rows else table
        _replace_partition(store, table_name, day, run_id, part)
        out[day] = part.num_rows
    return out


def write_cube(store, grid: np.ndarray, nodes: list[str], t_start: int, rebuild: bool = False) -> str:  # noqa: ANN001
    """Write the node × minute state grid into ``cubes/state.zarr`` by day-aligned regions.

    A new cube is created for the window; a later window extends the time axis by appending
    fill-valued days first, then writes its region (days never share a chunk, so two builds of
    different days never touch the same chunk).
    """
    import xarray as xr

    url = store.url_of(*CUBE_PATH.split("/"))
    n_t = grid.shape[1]
    if t_start % DAY_NS or n_t % CUBE_TIME_CHUNK:
        raise StatesError("state cube windows must be whole UTC days")
    times = (np.datetime64(t_start, "ns") + np.arange(n_t) * np.timedelta64(1, "m")).astype("datetime64[ns]")
    node_chunk = max(1, min(len(nodes), (16 << 20) // CUBE_TIME_CHUNK))
    node_coord = np.array(nodes, dtype=object)  # Zarr v3 variable-length string (has a v3 spec)
    da = xr.DataArray(
        grid.astype(np.int8),
        dims=("node", "time"),
        coords={"node": node_coord, "time": times},
        name=CUBE_VARIABLE,
        attrs=cube_attrs(),
    )
    ds = da.to_dataset()
    # int8 codes without CF masking (readers get int8, 0 = NOT_BUILT is the Zarr fill value), zstd, day chunks
    enc = {
        CUBE_VARIABLE: {
            "chunks": (node_chunk, CUBE_TIME_CHUNK),
            "_FillValue": None,
            "dtype": "int8",
            "compressors": compressors(),
        },
        "time": {**time_encoding(CUBE_TIME_CHUNK), "units": "minutes since 1970-01-01"},
        "node": string_encoding(len(nodes)),
    }
    if rebuild and store.exists(*CUBE_PATH.split("/")):
        store.fs.rm(store.path(*CUBE_PATH.split("/")), recursive=True)
    if not store.exists(*CUBE_PATH.split("/")):
        ds.to_zarr(url, mode="w-", encoding=enc, zarr_format=3, consolidated=False)
        return url
    existing = xr.open_zarr(url, consolidated=False, zarr_format=3)
    if list(existing["node"].values) != list(nodes):
        raise StatesError(f"{CUBE_PATH} has a different node set ({existing.sizes['node']} nodes); rebuild with --rebuild")
    t0 = int(existing["time"].values[0].astype("datetime64[ns]").astype(np.int64))
    t_last = int(existing["time"].values[-1].astype("datetime64[ns]").astype(np.int64)) + MIN_NS
    if t_start < t0:
        raise StatesError(f"{CUBE_PATH} starts {np.datetime64(t0, 'ns')}; earlier days need --rebuild")
    t_stop = t_start + n_t * MIN_NS
    if t_stop > t_last:
        n_new = (t_stop - t_last) // MIN_NS
        pad_times = (np.datetime64(t_last, "ns") + np.arange(n_new) * np.timedelta64(1, "m")).astype("datetime64[ns]")
        pad = xr.DataArray(
            np.full((len(nodes), n_new), FILL_CODE, np.int8),
            dims=("node", "time"),
            coords={"node": node_coord, "time": pad_times},
            name=CUBE_VARIABLE,
            attrs=cube_attrs(),
        ).to_dataset()
        pad.to_zarr(url, append_dim="time", zarr_format=3, consolidated=False)
    i0 = int((t_start - t0) // MIN_NS)
    ds.drop_vars("node").to_zarr(
        url, region={"time": slice(i0, i0 + n_t), "node": slice(None)}, zarr_format=3, consolidated=False
    )
    return url


def conform_failure_events(t: pa.Table) -> pa.Table:
    """``t`` in the current ``failure_events`` schema: a partition staged before ``shadowed_by`` existed gets it as null.

    Extra columns (``source_offset`` ...) are dropped, the rest cast to the schema's types.
    """
    schema = FAILURE_EVENTS.arrow_schema()
    cols = [t[f.name] if f.name in t.column_names else pa.nulls(t.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays([c.cast(f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)


def write_failure_events(store, fe: pa.Table, days: list[str], run_id: str, t_start: int) -> tuple[int, int]:  # noqa: ANN001
    """Publish failure events: window partitions are replaced; episodes that began earlier update their own partition.

    An episode that began before the window (still in effect at its start, e.g. open at the previous
    day's end) replaces the row(s) of the same node overlapping it in the partition of its start date,
    so day-by-day builds keep one row per episode. Returns (rows in the window, rows updated before it).
    """
    start_ns = pc.cast(fe["start"], pa.int64())
    before = pc.less(start_ns, t_start)
    rows = write_staged_by_day(store, FAILURE_EVENTS.name, fe.filter(pc.invert(before)), days, run_id)
    early = fe.filter(before)
    updated = 0
    if early.num_rows:
        d = pc.strftime(early["start"], format="%Y-%m-%d")
        for day in sorted(set(d.to_pylist())):
            new = early.filter(pc.equal(d, day))
            old = store.read_staged(FAILURE_EVENTS.name, [day])
            if old is not None and old.num_rows:
                o_node, o_s, o_e = old["node"].to_pylist(), _ns(old["start"]), _ns(old["end"])
                n_node, n_s, n_e = new["node"].to_pylist(), _ns(new["start"]), _ns(new["end"])
                drop = np.zeros(old.num_rows, bool)
                for nd, a, z in zip(n_node, n_s, n_e, strict=True):
                    drop |= (np.array(o_node, object) == nd) & (o_s <= z) & (o_e >= a)
                new = pa.concat_tables([conform_failure_events(old.filter(pa.array(~drop))), new])
            new = new.sort_by([("start", "ascending"), ("node", "ascending")])
            _replace_partition(store, FAILURE_EVENTS.name, day, run_id, new)
            updated += early.filter(pc.equal(d, day)).num_rows
    return sum(rows.values()), updated


def build_states(
    store,  # noqa: ANN001
    start: date,
    end: date,
    run_id: str,
    lookback_days: int = 1,
    rebuild_cube: bool = False,
    nodes: list[str] | None = None,
    job_lookback_days: int = 14,
) -> dict[str, object]:
    """Derive states for UTC days ``[start, end)`` from staged inputs and publish all outputs.

    Syslog is read from ``lookback_days`` before the window to one day after (a "now responding" or
    boot that ends a loss inside the window); jobs from ``job_lookback_days`` before (they are
    partitioned by submit time). Losses still in effect at the end of the previous day (its
    ``state_carry`` partition) are seeded at their real start, so day-by-day builds give the same
    states and failure events as one build of the whole range, however long a node stays down.
    """
    days = day_range(start, end)
    ctx_days = day_range(start - timedelta(days=lookback_days), end + timedelta(days=1))
    syslog = store.read_staged("syslog", ctx_days, columns=["time", "node", "app", "message"])
    # jobs are partitioned by submit time: a job running in the window may have been submitted long before
    job_days = day_range(start - timedelta(days=job_lookback_days), end + timedelta(days=1))
    jobs = store.read_staged("jobs", job_days, columns=["job_id", "step", "start_time", "end_time", "node_list"])
    resv = store.read_staged("reservations")
    tables = {"syslog": syslog, "jobs": jobs, "reservations": resv}
    node_set, racks, ncounts = read_node_set(store, tables)
    if nodes is not None:
        node_set = sorted(nodes)
    if not node_set:
        raise StatesError("no nodes: stage topology or syslog/jobs first (nodewatch ingest ...)")
    carry, carry_unknown = read_carry(store, start - timedelta(days=1), node_set)
    t0, t1 = _day_ns(start), _day_ns(end)
    read_start, read_end = _day_ns(start - timedelta(days=lookback_days)), _day_ns(end + timedelta(days=1))
    b = derive_from_tables(syslog, jobs, resv, node_set, t0, t1, carry=carry, read_start=read_start, read_end=read_end)
    b.counts.update(ncounts)
    if carry is None:
        b.counts["carry_previous_day_not_built"] = 1
    if carry_unknown:
        b.counts["carry_unknown_node"] = carry_unknown
    ns_on = timeline_table(b, overlay=True)
    ns_off = timeline_table(b, overlay=False)
    table = pa.concat_tables([ns_on, ns_off])
    rows_states = write_staged_by_day(store, "node_states", table, days, run_id)
    fe = failure_events_table(b, racks)
    rows_fail, rows_updated = write_failure_events(store, fe, days, run_id, t0)
    if rows_updated:
        b.counts["failure_events_updated_before_window"] = rows_updated
    for day, t in carry_table(b, days).items():
        _replace_partition(store, STATE_CARRY.name, day, run_id, t)
    grid = to_grid(b.timeline, len(node_set), t0, t1)
    cube = write_cube(store, grid, node_set, t0, rebuild=rebuild_cube)
    return {
        "build": b,
        "node_states_rows": sum(rows_states.values()),
        "failure_events_rows": rows_fail,
        "failure_events_updated": rows_updated,
        "cube": cube,
        "racks": racks,
        "days": days,
        "input_rows": {k: (v.num_rows if v is not None else 0) for k, v in tables.items()},
    }
