"""Build SaNSA node states from staged syslog, jobs, reservations and topology.

Steps (each a plain function, testable without Prefect):

1. :func:`classify_syslog` turns staged syslog rows into evidence events (vectorised with
   pyarrow.compute; slurmctld hostlists expanded once per distinct expression);
2. :func:`job_layers` / :func:`reservation_layers` turn jobs and reservations into interval layers;
3. :func:`models.states.derive_states` resolves the timeline;
4. :func:`timeline_table` / :func:`failure_events_table` / :func:`write_cube` publish the staged
   tables ``node_states`` and ``failure_events`` and ``cubes/state.zarr``.

:func:`build_states` runs them against a :class:`~tasks.store.Store` for a window of UTC days and
counts every input row that is ignored (unknown node, invalid name, missing times, ...).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from models.states import NS_PER_S, Event, Events, Layers, Source, State, Timeline, derive_states, to_grid
from schemas.cubes import compressors, string_encoding, time_encoding
from schemas.names import is_valid_node_name
from schemas.states import (
    CUBE_PATH,
    CUBE_TIME_CHUNK,
    CUBE_VARIABLE,
    FAILURE_EVENTS,
    FILL_CODE,
    NODE_STATES,
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
    from tasks.ingest.hostlist import HostlistError, expand_hostlist

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
        parts.append((ni[good], tt[good], np.full(int(good.sum()), kind, np.int8), np.zeros(int(good.sum()), np.int64)))
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
        parts.append((ni[good], t_all[rows][good], np.full(int(good.sum()), Event.STARTUP_FINISHED, np.int8), d[good]))
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
            )
        )
    if not parts:
        return Classified(Events.empty(), last_seen, counts)
    ev = Events(*(np.concatenate([p[i] for p in parts]) for i in range(4)))
    # exact duplicate evidence (same line ingested twice) is harmless but counted
    key = np.stack([ev.node, ev.time, ev.kind.astype(np.int64), ev.duration], axis=1)
    counts["events"] = int(ev.node.size)
    counts["events_duplicate"] = int(ev.node.size - np.unique(key, axis=0).shape[0]) if ev.node.size else 0
    return Classified(ev, last_seen, counts)


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
class StateBuild:
    """Result of deriving states for a window (before publishing)."""

    nodes: list[str]
    t_start: int
    t_end: int
    timeline: Timeline
    timeline_no_overlay: Timeline
    job_labels: pa.Array
    resv_labels: pa.Array
    counts: Counter


def derive_from_tables(
    syslog: pa.Table | None,
    jobs: pa.Table | None,
    reservations: pa.Table | None,
    nodes: list[str],
    t_start: int,
    t_end: int,
) -> StateBuild:
    """Classify, build layers and derive both timelines (with and without overlays)."""
    bad_names = [n for n in nodes if not is_valid_node_name(n)]
    if bad_names:
        raise StatesError(f"invalid node name(s) in node set, e.g. {bad_names[0]!r}")
    node_arr = pa.array(nodes, pa.string())
    cl = classify_syslog(syslog, node_arr)
    (jn, js, je, jr), jlab, jc = job_layers(jobs, node_arr, t_end)
    (rn, rs, re_, rst, rr), rlab, rc = reservation_layers(reservations, node_arr)
    layers = Layers(jn, js, je, jr, rn, rs, re_, rst, rr)
    tl = derive_states(cl.events, layers, len(nodes), t_start, t_end, last_seen=cl.last_seen, overlay=True)
    tl0 = derive_states(cl.events, layers, len(nodes), t_start, t_end, last_seen=cl.last_seen, overlay=False)
    counts = cl.counts + jc + rc + Counter({k: v for k, v in tl.counts.items() if v})
    return StateBuild(nodes, t_start, t_end, tl, tl0, jlab, rlab, counts)


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


def failure_events_table(b: StateBuild, racks: dict[str, str] | None = None) -> pa.Table:
    """Failure episodes: a DOWN interval plus the DOWN/BOOTING intervals contiguous with it (overlaid timeline)."""
    tl = b.timeline
    down_like = (tl.state == State.DOWN) | (tl.state == State.BOOTING)
    same_node_prev = np.zeros(tl.node.size, bool)
    same_node_prev[1:] = (tl.node[1:] == tl.node[:-1]) & (tl.start[1:] == tl.end[:-1])
    prev_down_like = np.zeros(tl.node.size, bool)
    prev_down_like[1:] = down_like[:-1]
    run_start = down_like & ~(same_node_prev & prev_down_like)
    run_id = np.cumsum(run_start) - 1
    run_id = np.where(down_like, run_id, -1)
    n_runs = int(run_start.sum())
    has_down = np.zeros(n_runs, bool)
    dmask = (tl.state == State.DOWN) & (run_id >= 0)
    has_down[run_id[dmask]] = True
    end = np.zeros(n_runs, np.int64)
    np.maximum.at(end, run_id[down_like], tl.end[down_like])
    # first DOWN interval of each run gives start and cause
    first_down = np.full(n_runs, -1, np.int64)
    di = np.nonzero(dmask)[0]
    rid = run_id[di]
    firsts = np.unique(rid, return_index=True)[1]
    first_down[rid[firsts]] = di[firsts]
    sel = np.nonzero(has_down)[0]
    fd = first_down[sel]
    start_of_run = np.nonzero(run_start)[0][sel]
    start = tl.start[start_of_run]
    cause = np.where(tl.source[fd] == Source.LOSS_SILENT, "loss+silent", "loss+boot")
    evid = np.array(
        [
            "slurmctld not responding; node silent afterwards"
            if c == "loss+silent"
            else "slurmctld not responding, then boot (systemd/kernel)"
            for c in cause
        ],
        object,
    )
    node_names = [b.nodes[i] for i in tl.node[fd]]
    rack = [racks.get(n) if racks else None for n in node_names]
    return pa.table(
        {
            "node": pa.array(node_names, pa.string()),
            "start": pa.array(start, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "end": pa.array(end[sel], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "cause": pa.array(cause.tolist(), pa.string()),
            "evidence": pa.array(evid.tolist(), pa.string()),
            "rack": pa.array(rack, pa.string()),
        },
        schema=FAILURE_EVENTS.arrow_schema(),
    )


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


def build_states(
    store,
    start: date,
    end: date,
    run_id: str,
    lookback_days: int = 1,
    rebuild_cube: bool = False,  # noqa: ANN001
    nodes: list[str] | None = None,
    job_lookback_days: int = 14,
) -> dict[str, object]:
    """Derive states for UTC days ``[start, end)`` from staged inputs and publish all outputs.

    Syslog and jobs are read from ``lookback_days`` before the window (a loss or job that began
    earlier) to one day after (a "now responding" or boot that ends a loss inside the window);
    jobs from ``job_lookback_days`` before (they are partitioned by submit time).
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
    t0, t1 = _day_ns(start), _day_ns(end)
    b = derive_from_tables(syslog, jobs, resv, node_set, t0, t1)
    b.counts.update(ncounts)
    ns_on = timeline_table(b, overlay=True)
    ns_off = timeline_table(b, overlay=False)
    table = pa.concat_tables([ns_on, ns_off])
    rows_states = write_staged_by_day(store, "node_states", table, days, run_id)
    fe = failure_events_table(b, racks)
    rows_fail = write_staged_by_day(store, "failure_events", fe, days, run_id)
    grid = to_grid(b.timeline, len(node_set), t0, t1)
    cube = write_cube(store, grid, node_set, t0, rebuild=rebuild_cube)
    return {
        "build": b,
        "node_states_rows": sum(rows_states.values()),
        "failure_events_rows": sum(rows_fail.values()),
        "cube": cube,
        "racks": racks,
        "days": days,
        "input_rows": {k: (v.num_rows if v is not None else 0) for k, v in tables.items()},
    }
