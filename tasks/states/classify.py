"""Classification of staged rows into SaNSA evidence and interval layers (Agarwal et al., "SaNSA", Sec. II-C).

* :func:`classify_syslog` turns staged syslog rows into evidence events (vectorised with
  pyarrow.compute; slurmctld hostlists expanded once per distinct expression);
* :func:`job_layers` / :func:`reservation_layers` turn jobs and reservations into interval layers
  (reservation classes by :func:`reservation_state`).

Every input row that is ignored (unknown node, unparsed hostlist, missing times, ...) is counted.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.states.timeline import NS_PER_S, Event, Events, State
from nodewatch.tasks.states.common import _expand, _node_idx, _ns

_PREFIX = r"^(?:\[[^\]]*\] )?"  # optional "[2018-06-09T03:29:13.803] " / "[    0.000000] " prefix
_CTLD_RE = _PREFIX + r"(?:error: )?Nodes? .+? (?:not|now) responding"
_SYSTEMD_RE = _PREFIX + r"Startup finished in "
_KERNEL_RE = _PREFIX + r"(?:Linux version |Command line: BOOT_IMAGE=)"
_NOT_RESP_RE = r"Nodes? (?P<hl>.+?) not responding"
_NOW_RESP_RE = r"Nodes? (?P<hl>.+?) now responding"
_DUR_RE = re.compile(r"(?P<v>\d+(?:\.\d+)?)\s*(?P<u>h|min|ms|us|s)\b")
_UNIT_NS = {"h": 3600 * NS_PER_S, "min": 60 * NS_PER_S, "s": NS_PER_S, "ms": 1_000_000, "us": 1_000}


def parse_systemd_duration(text: str) -> int | None:
    """``"11min 17.957s"`` -> ns; ``None`` if no component parses (paper Sec. II-C systemd record)."""
    total, found = 0, False
    for m in _DUR_RE.finditer(text):
        total += int(round(float(m.group("v")) * _UNIT_NS[m.group("u")]))
        found = True
    return total if found else None


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
