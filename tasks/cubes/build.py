"""Build cube days as a Dask graph: scan slabs → merge per node batch → region write → day marker.

Graph of one telemetry day (every arrow is a Dask task dependency)::

    scan(slab 0) ─┐             ┌─> merge+write Region(day, 0) into fork 0 ─┐
    scan(slab 1) ─┼─ split by ──┼─> merge+write Region(day, 1) into fork 1 ─┼─> merge forks + marker, commit
    ...          ─┘  node batch └─> ...                                     ┘     (client side, one commit a day)

Every write task writes into its own fork of the day's Icechunk session (:mod:`nodewatch.tasks.cubes.repo`);
the client merges the forks, sets the day's marker and commits: readers see the whole day or the
previous commit of it, never some variables or batches of it.

A scan streams whole row groups of one staged file into window statistics over the day's full
node × time × metric grid and splits them into node batches, so only one batch's state moves to
the task that merges (in slab order: deterministic) and writes it. Days are submitted with a bounded
number in flight, which bounds memory independently of the range length. Runs on a
``distributed.LocalCluster`` by default, on Slurm jobs (``NODEWATCH_DASK=slurm``) or on any scheduler address
(:mod:`nodewatch.tasks.cubes.cluster`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd

from nodewatch.schemas.cubes import SYSLOG, TELEMETRY, CubeSpec, spec_for
from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.cluster import (
    dask_client,  # noqa: F401  (re-exported: callers import it from here)
    tune_malloc,
)
from nodewatch.tasks.cubes.layout import Region, batches
from nodewatch.tasks.cubes.syslog import count_lines, syslog_nodes
from nodewatch.tasks.cubes.telemetry import (
    DEFAULT_SLAB_ROWS,
    ScanReport,
    WindowStats,
    merge_all,
    plan_slabs,
    scan_nodes_metrics,
    scan_slab,
    split_by_batch,
)
from nodewatch.tasks.cubes.writer import (
    Geometry,
    ensure_cube,
    input_fingerprint,
    read_geometry,
    read_marker,
    write_marker,
    write_region,
)

DEFAULT_MAX_NODES = 100_000
"""Default of the setting ``max_cube_nodes``: more distinct node names than this is refused before any
grid is allocated (1M names from a bad input died after 2 min with a MemoryError at 5.7 GB)."""


class TooManyNodesError(ValueError):
    """The staged data name more distinct nodes than the cube may hold (one-line message)."""


@dataclass
class DayResult:
    """What building one day of one cube did."""

    kind: str
    day: date
    status: str  # "built" | "no-data"
    report: dict[str, Any] = field(default_factory=dict)
    regions: int = 0
    seconds: float = 0.0


def days_between(start: date, end: date) -> list[date]:
    """Inclusive list of days from ``start`` to ``end``."""
    if end < start:
        raise ValueError(f"end {end} is before start {start}")
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]


def read_topology(store: Store) -> dict[str, dict[str, str]]:
    """``node → {"rack", "row"}`` from the staged ``topology`` table (last staged value wins)."""
    tbl = store.read_staged("topology")
    if tbl is None:
        return {}
    cols = [c for c in ("node", "rack", "row") if c in tbl.column_names]
    df = tbl.select(cols).to_pandas()
    out: dict[str, dict[str, str]] = {}
    for rec in df.to_dict("records"):
        n = rec["node"]
        if is_valid_node_name(n):
            out[n] = {k: ("" if rec.get(k) is None or pd.isna(rec.get(k)) else str(rec[k])) for k in ("rack", "row")}
    return out


# ----------------------------------------------------------------------------- task bodies (run on workers)
Missed = tuple[frozenset[str], frozenset[str]]
"""Node and metric names a scan met in its files' dictionaries that are not on the cube's axes."""
NO_MISS: Missed = (frozenset(), frozenset())


class _Recording(dict):  # type: ignore[type-arg]
    """A name -> axis index map that records every name looked up with ``get`` and not found.

    The scan maps each distinct string of a record batch's dictionary through ``get`` (``telemetry._lookup``),
    so after a scan ``missed`` holds every name of the slab's dictionaries that is off the axes: a superset
    of the names of its rows (a dictionary may hold names of no row), found without a pass of its own.
    """

    def __init__(self, index: dict[str, int]) -> None:
        super().__init__(index)
        self.missed: set[str] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        """The index of ``key``, or ``default`` (and ``key`` recorded as missed)."""
        if key in self:
            return self[key]
        if key is not None:
            self.missed.add(key)
        return default


def _scan_split(
    url: str, slab: Any, day: date, step: pd.Timedelta, nodes: dict[str, int], metrics: dict[str, int], node_chunk: int
) -> tuple[list[WindowStats], ScanReport, Missed]:
    tune_malloc()  # a worker process started by a nanny (see cluster.tune_malloc); once per process
    t0 = time.perf_counter()
    rec_n, rec_m = _Recording(nodes), _Recording(metrics)
    stats, rep, time_major = scan_slab(Store(url), slab, day, step, rec_n, rec_m)
    grid = (len(nodes), int(pd.Timedelta("1D") / step), len(metrics))
    parts = split_by_batch(stats, node_chunk, grid, time_major)
    rep.seconds = time.perf_counter() - t0
    return parts, rep, (frozenset(rec_n.missed), frozenset(rec_m.missed))


def _batch_of(scan: tuple[list[WindowStats], ScanReport, Missed], b: int) -> WindowStats:
    return scan[0][b]


def _report_of(scan: tuple[list[WindowStats], ScanReport, Missed]) -> tuple[ScanReport, Missed]:
    return scan[1], scan[2]


def _union(missed: list[Missed]) -> Missed:
    return frozenset().union(*(m[0] for m in missed)), frozenset().union(*(m[1] for m in missed))


def _merge_write_telemetry(url: str, step: str, geo: Geometry, region: Region, fork: Any,
                           *parts: WindowStats) -> tuple[int, int, float, Any]:
    return _write_stats(url, step, geo, region, fork, merge_all(list(parts)), time.perf_counter())


def _telemetry_day(url: str, step: str, geo: Geometry, day: date, slabs: list[Any], nodes: dict[str, int],
                   metrics: dict[str, int], regions: list[Region],
                   forks: list[Any]) -> tuple[list[Any], list[ScanReport], Missed]:
    """A whole telemetry day in one task (workers in other processes: Slurm jobs, a remote scheduler).

    The same scans, the same slab-order merges (a left fold, as :func:`merge_all`) and the same region
    writes as the fine-grained graph, run in one worker: only the day's plan goes in and the forks come
    back, instead of every slab's window state crossing process boundaries (the chunks are byte-identical).
    """
    spec = spec_for(TELEMETRY, step)
    acc: list[WindowStats | None] = [None] * len(regions)
    reports: list[ScanReport] = []
    missed: list[Missed] = []
    for s in slabs:
        parts, rep, miss = _scan_split(url, s, day, spec.steps["time"], nodes, metrics, geo.node_chunk)
        reports.append(rep)
        missed.append(miss)
        for j, r in enumerate(regions):
            p = parts[r.node_batch]
            if acc[j] is None:
                acc[j] = p.slice(0, len(p))
            else:
                acc[j].merge(p)
        del parts
    written = [_write_stats(url, step, geo, r, f, a, time.perf_counter()) for r, f, a in zip(regions, forks, acc, strict=True)]
    return written, reports, _union(missed)


def _telemetry_days(url: str, step: str, geo: Geometry, nodes: dict[str, int], metrics: dict[str, int],
                    plans: list[tuple[date, list[Any], list[Region], Any]]) -> list[tuple[list[Any], list[ScanReport], Missed]]:
    """Several telemetry days in one task, one after the other (:func:`_telemetry_day` each, in the given order).

    Each plan is ``(day, slabs, regions, fork)``: one fork of the day's session takes all its regions (written
    in turn by this one process), so one small object per day crosses the process boundary each way. Grouping
    days pays the task's fixed costs (scheduling, the fork's storage client in a fresh process) once per group.
    """
    return [_telemetry_day(url, step, geo, day, slabs, nodes, metrics, regions, [fork] * len(regions))
            for day, slabs, regions, fork in plans]


MAX_DAYS_PER_TASK = 3
"""Largest group of :func:`day_groups` (commits follow a group's end; workers that join late still get work)."""


def day_groups(days: list[date], workers: int, max_size: int | None = None) -> list[list[date]]:
    """Consecutive groups of ``days`` for whole-day tasks: two per worker, at most ``max_size`` days each, even.

    Two groups per worker, not one: the workers finish within a group of each other (7 days on 2 workers as
    3, 2, 2 left one worker with 5 days and the other with 2: 5.7 s where 4 + 3 days need ~4.5 s, 28 Nov).
    7 days on 2 workers -> 2, 2, 2, 1 days (4 and 3 per worker, as one day per task, in 4 tasks instead of 7);
    7 days on 4 workers -> 7 tasks of one day; 30 days on 2 workers -> 10 groups of 3.
    """
    n = len(days)
    max_size = MAX_DAYS_PER_TASK if max_size is None else max_size  # read at call time (benchmarks set it to 1)
    k = max(1, min(n, max(2 * workers, -(-n // max(1, max_size)))))
    size, extra = divmod(n, k)
    out, i = [], 0
    for g in range(k):
        m = size + (1 if g < extra else 0)
        out.append(days[i:i + m])
        i += m
    return [g for g in out if g]


def _write_stats(url: str, step: str, geo: Geometry, region: Region, fork: Any, stats: WindowStats,
                 t0: float) -> tuple[int, int, float, Any]:
    spec = spec_for(TELEMETRY, step)
    sl = region.node_slice(geo.node_chunk, len(geo.nodes))
    arrays = stats.finalize((sl.stop - sl.start, spec.steps_per_day("time"), len(geo.metrics)))
    write_region(Store(url), spec, geo, region, arrays, fork.store)
    has = arrays["count"] > 0
    return int(has.any(axis=(1, 2)).sum()), int(has.sum()), time.perf_counter() - t0, fork


def _count_syslog(url: str, files: list[str], day: date, nodes: dict[str, int]) -> tuple[np.ndarray, np.ndarray, ScanReport]:
    return count_lines(Store(url), files, day, nodes)


def _write_syslog(
    url: str, geo: Geometry, region: Region, fork: Any, counts: tuple[np.ndarray, np.ndarray, ScanReport]
) -> tuple[int, int, float, Any]:
    t0 = time.perf_counter()
    sl = region.node_slice(geo.node_chunk, len(geo.nodes))
    coarse, fine = counts[0][sl], counts[1][sl]
    write_region(Store(url), spec_for(SYSLOG), geo, region, {"lines": coarse, "lines_1min": fine}, fork.store)
    per_window = coarse.sum(axis=2) > 0
    return int(per_window.any(axis=1).sum()), int(per_window.sum()), time.perf_counter() - t0, fork


def _syslog_report(counts: tuple[np.ndarray, np.ndarray, ScanReport]) -> tuple[ScanReport, Missed]:
    return counts[2], NO_MISS


# ----------------------------------------------------------------------------- driver
def _axes(client: Any, store: Store, kind: str, day_files: dict[date, list[str]]) -> tuple[set[str], set[str], list[str]]:
    """Node and metric names in the staged files (computed on the cluster, one task per file)."""
    files = [f for fs in day_files.values() for f in fs]
    if kind == TELEMETRY:
        futs = client.map(lambda p: scan_nodes_metrics(Store(store.url), [p]), files, pure=False)
        res = client.gather(futs)
        nodes = set().union(*(r[0] for r in res)) if res else set()
        metrics = set().union(*(r[1] for r in res)) if res else set()
    else:
        futs = client.map(lambda p: syslog_nodes(Store(store.url), [p]), files, pure=False)
        nodes = set().union(*client.gather(futs)) if files else set()
        metrics = set()
    bad = sorted(n for n in nodes if not is_valid_node_name(n))
    return {n for n in nodes if is_valid_node_name(n)}, metrics, bad


def build_days(
    store: Store,
    kind: str,
    days: list[date],
    client: Any,
    step: str = "15min",
    node_batch: int = 50,
    epoch: date | None = None,
    slab_rows: int = DEFAULT_SLAB_ROWS,
    max_days_in_flight: int | None = None,
    run_id: str | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    _retries: int = 3,
    day_tasks: bool | None = None,
    _axes_known: tuple[set[str], set[str], list[str]] | None = None,
) -> list[DayResult]:
    """Aggregate staged ``kind`` (``telemetry``/``syslog``) of ``days`` into its cube on ``client``.

    Idempotent: a day's regions are fully rewritten from all staged parts of that day and committed
    with its coverage marker in one Icechunk commit. Days without staged data are reported as
    ``no-data`` and untouched. A day whose commit conflicts with a concurrent axis change (another build
    grew the time/node/metric axis after this day's session started) is rebuilt on the new axes (up to
    ``_retries`` times). More than ``max_nodes`` distinct node names (topology + staged) is a
    :class:`TooManyNodesError` before anything is allocated or written. ``day_tasks`` builds each telemetry
    day as one task (default: when the workers run in other processes, where moving window states costs
    more than it parallelises; the chunks are the same bytes either way).

    Axes: a telemetry cube that exists already is built on its own node and metric axes (plus the staged
    topology) **without a pass over the staged names**; each scan records the names of its files'
    dictionaries that are off the axes (:class:`_Recording`). The first day whose scans met such a name
    (or dropped a row as off the axes) is not committed: the names of every day are then read
    (:func:`_axes`, one task per file) and, if the axes must grow, the build starts again on the grown
    axes (what the scan first would have built; the days committed before are rewritten). A new cube, a
    syslog cube, and that restart read the names first.
    """
    from distributed import wait

    spec: CubeSpec = spec_for(kind, step)
    day_files = {d: store.staged_files(kind, [d.isoformat()]) for d in sorted(set(days))}
    results = [DayResult(kind, d, "no-data") for d, fs in day_files.items() if not fs]
    day_files = {d: fs for d, fs in day_files.items() if fs}
    if not day_files:
        return results
    t_setup = time.perf_counter()
    topo = read_topology(store)
    known = read_geometry(store, spec) if kind == TELEMETRY and _axes_known is None else None
    speculative = known is not None and bool(known.metrics)
    if speculative:  # build on the cube's axes; the scans say whether they suffice
        nodes, metrics, bad = set(known.nodes), set(known.metrics), []
    else:
        nodes, metrics, bad = _axes_known or _axes(client, store, kind, day_files)
    n_all = len(nodes | set(topo))
    if n_all > max_nodes:
        raise TooManyNodesError(
            f"staged {kind} of {min(day_files)}..{max(day_files)} names {n_all:,} distinct nodes "
            f"({len(topo):,} in the staged topology), more than max_cube_nodes={max_nodes:,}: check the input's node "
            "column, or raise the setting max_cube_nodes (env NODEWATCH_MAX_CUBE_NODES)")
    t_axes = time.perf_counter()
    geo = ensure_cube(store, spec, list(day_files), nodes | set(topo), topo, metrics, node_batch, epoch)
    setup = {"axes_scan_s": round(t_axes - t_setup, 3), "ensure_cube_s": round(time.perf_counter() - t_axes, 3),
             "axes": "cube" if speculative else "scan"}
    n_nodes = len(geo.nodes)
    node_idx, metric_idx = geo.node_index, geo.metric_index
    url = store.url
    tok = run_id or f"{time.time_ns():x}"
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    if day_tasks is None:
        day_tasks = not str(client.scheduler.address).startswith("inproc://")
    pending: list[tuple[date, float, list[str], list[Any], Any, Any]] = []  # reports: futures, or index in a group
    ic_repo = repo.open_repo(store, spec.key)
    conflicted: list[date] = []
    sessions_ahead: dict[date, Any] = {}  # sessions of the later days of a group, made when the group is submitted
    exact: list[tuple[set[str], set[str], list[str]]] = []  # the names read after a scan met one off the axes
    restart: list[bool] = []  # the axes must grow: commit nothing more, build again on the grown axes

    def axes_suffice(missed: Missed, rep: ScanReport) -> bool:
        """Whether a speculative day may be committed (reads every day's names the first time it is unsure)."""
        if restart:
            return False
        off = rep.dropped.get("node not on the cube axis", 0) + rep.dropped.get("metric not on the cube axis", 0)
        if not speculative or exact or not (missed[0] or missed[1] or off):
            return True
        exact.append(_axes(client, store, kind, day_files))
        grow = (exact[0][0] | set(topo)) - set(geo.nodes) or exact[0][1] - set(geo.metrics)
        if grow:
            restart.append(True)
            return False
        bad.extend(exact[0][2])  # names of no row, or invalid ones (dropped, reported): the day stands
        return True

    def finish(entry: tuple[date, float, list[str], list[Any], Any, Any]) -> None:
        try:
            _finish(entry)
        except repo.CubeError:
            raise
        except repo.io_errors() as e:
            raise repo.CubeError(f"{spec.key} {entry[0].isoformat()}: write failed ({repo.first_line(e)}); nothing of the "
                                 "day was published (readers keep its previous state): fix the cause and re-run") from None

    def _finish(entry: tuple[date, float, list[str], list[Any], Any, Any]) -> None:
        day, t0, files, writes, reports, session = entry
        if isinstance(reports, int):  # a group task built the day (and others): its entry `reports` of the result
            written, scan_reports, missed = client.gather(writes)[0][reports]
        else:
            pairs = client.gather(reports)
            written, scan_reports, missed = client.gather(writes), [p[0] for p in pairs], _union([p[1] for p in pairs])
        forks = list({id(w[3]): w[3] for w in written}.values())
        with_data = sum(w[0] for w in written)
        first = next(iter(spec.steps))
        windows = n_nodes * spec.steps_per_day(first) * (len(geo.metrics) if kind == TELEMETRY else 1)
        rep = ScanReport()
        for r in scan_reports:
            rep = rep.merge(r)
        if not axes_suffice(missed, rep):
            return
        payload = {
            "day": day.isoformat(),
            "cube": spec.key,
            "inputs": input_fingerprint(store, files),
            **rep.as_dict(),
            "nodes": n_nodes,
            "nodes_with_data": with_data,
            "metrics": len(geo.metrics),
            "step_seconds": int(spec.steps[first].total_seconds()),
            "windows": windows,
            "windows_with_data": sum(w[1] for w in written),
            "write_task_s": round(sum(w[2] for w in written), 3),
            "build_setup": setup,
            "run_id": run_id,
            "regions": len(written),
        }
        session.merge(*forks)
        write_marker(session.store, day, payload)
        try:
            repo.commit(store, spec.key, session, f"{spec.key} {day.isoformat()}", {"run_id": run_id, "day": day.isoformat()})
        except repo.CubeConflictError:
            conflicted.append(day)
            return
        results.append(DayResult(kind, day, "built", payload, len(writes), time.perf_counter() - t0))

    # whole-day tasks: consecutive days grouped into at most `workers` tasks (see day_groups)
    group_of = {d: g for g in (day_groups(list(day_files), workers) if kind == TELEMETRY and day_tasks else [])
                for d in g}
    group_futures: dict[date, Any] = {}
    for day, files in day_files.items():
        t0 = time.perf_counter()
        regions = [Region(day, b) for b in batches(n_nodes, geo.node_chunk)]
        pre = f"{kind}-{day.isoformat()}-{tok}"
        session = sessions_ahead.pop(day) if day in sessions_ahead else ic_repo.writable_session(repo.BRANCH)
        if kind == TELEMETRY and day_tasks:
            group = group_of[day]
            if day == group[0]:
                plans = [(d, plan_slabs(store, day_files[d], slab_rows),
                          [Region(d, b) for b in batches(n_nodes, geo.node_chunk)],
                          (session if d == day else sessions_ahead.setdefault(d, ic_repo.writable_session(repo.BRANCH))).fork())
                         for d in group]
                group_futures[day] = client.submit(_telemetry_days, url, step, geo, node_idx, metric_idx, plans,
                                                   key=f"days-{pre}-{len(group)}", pure=False)
            writes = [group_futures[group[0]]]
            reports = group.index(day)
        elif kind == TELEMETRY:
            slabs = plan_slabs(store, files, slab_rows)
            scans = [
                client.submit(
                    _scan_split, url, s, day, spec.steps["time"], node_idx, metric_idx, geo.node_chunk, key=f"scan-{pre}-{i}"
                )
                for i, s in enumerate(slabs)
            ]
            writes = []
            for r in regions:
                parts = [
                    client.submit(_batch_of, s, r.node_batch, key=f"part-{pre}-{i}-{r.node_batch}") for i, s in enumerate(scans)
                ]
                writes.append(client.submit(_merge_write_telemetry, url, step, geo, r, session.fork(), *parts,
                                            key=f"write-{pre}-{r.key}"))
            reports = [client.submit(_report_of, s, key=f"report-{pre}-{i}") for i, s in enumerate(scans)]
        else:
            counts = client.submit(_count_syslog, url, files, day, node_idx, key=f"count-{pre}")
            writes = [client.submit(_write_syslog, url, geo, r, session.fork(), counts, key=f"write-{pre}-{r.key}")
                      for r in regions]
            reports = [client.submit(_syslog_report, counts, key=f"report-{pre}")]
        pending.append((day, t0, files, writes, reports, session))
        # start the next day only while the older days in flight keep fewer scans than there are workers:
        # every scan holds a full-day window state, so this bounds memory for any range length
        while len(pending) > 1 and (
            len({id(e[3][0]) for e in pending[:-1] if isinstance(e[4], int)})
            + sum(len(e[4]) for e in pending[:-1] if not isinstance(e[4], int)) >= workers
            or (max_days_in_flight and len(pending) > max_days_in_flight)
        ):
            wait(pending[0][3])
            finish(pending.pop(0))
        if restart:
            break
    for entry in pending:
        if restart:
            break
        finish(entry)
    if restart:  # a name off the axes: build every day again on the axes a scan of the names gives
        client.cancel([f for e in pending for f in e[3]])
        return build_days(store, kind, days, client, step, node_batch, epoch, slab_rows, max_days_in_flight, run_id,
                          max_nodes, _retries, day_tasks, _axes_known=exact[0])
    if conflicted:  # another build changed an axis under these days' sessions: redo them on the new axes
        if _retries <= 0:
            raise repo.CubeConflictError(f"{spec.key}: days {', '.join(d.isoformat() for d in conflicted)} kept "
                                         "conflicting with concurrent builds; nothing of them was published, re-run")
        results += build_days(store, kind, conflicted, client, step, node_batch, epoch, slab_rows, max_days_in_flight,
                              run_id, max_nodes, _retries - 1, day_tasks)
    if bad:
        for r in results:
            r.report.setdefault("invalid_node_names", bad[:20])
    return sorted(results, key=lambda r: r.day)


def day_complete(store: Store, day: date, kind: str = TELEMETRY) -> bool:
    """True if ``day`` of cube ``kind`` was built from exactly the staged files present now.

    A new staged part for the day (a late ingest) makes the day incomplete again, so the nightly
    flow rebuilds it.
    """
    m = read_marker(store, spec_for(kind), day)
    return m is not None and marker_matches(store, m, day, kind)


def marker_matches(store: Store, marker: dict[str, Any], day: date, kind: str) -> bool:
    """Whether a day's committed marker certifies exactly the staged files of that day present now."""
    files = store.staged_files(kind, [day.isoformat()])
    return marker.get("inputs") == input_fingerprint(store, files)
