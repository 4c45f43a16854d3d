"""Build SaNSA node states from staged syslog, jobs, reservations and topology (Agarwal et al., "SaNSA", Sec. II-B/II-C).

Steps (each a plain function, testable without Prefect):

1. :func:`nodewatch.tasks.states.classify.classify_syslog` turns staged syslog rows into evidence events (vectorised with
   pyarrow.compute; slurmctld hostlists expanded once per distinct expression);
2. :func:`~nodewatch.tasks.states.classify.job_layers` / :func:`~nodewatch.tasks.states.classify.reservation_layers`
   turn jobs and reservations into interval layers;
3. :func:`nodewatch.tasks.states.derive.derive_from_tables` resolves the timeline with
   :func:`nodewatch.models.states.machine.derive_states`;
4. :func:`~nodewatch.tasks.states.events.timeline_table` / :func:`~nodewatch.tasks.states.events.failure_events_table`
   / :func:`nodewatch.tasks.states.cube.write_cube` publish the staged tables ``node_states`` and
   ``failure_events`` and ``cubes/state.zarr``; :func:`~nodewatch.tasks.states.events.carry_table` the
   losses still in effect at each built day's end (``state_carry``).

:func:`build_states` (this module, the orchestrator) runs them against a
:class:`~nodewatch.tasks.core.store.Store` for a window of UTC days and counts every input row that
is ignored (unknown node, invalid name, missing times, ...). Windows are independent of how a range
is cut into builds: losses in effect at the previous day's end are seeded from ``state_carry`` at
their real start, and failure events carry their episode's own start and end (an episode still open
at a window's end is updated in place by the next build).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import date, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.states.timeline import to_grid
from nodewatch.schemas.names import is_valid_node_name
from nodewatch.schemas.states import STATE_CARRY
from nodewatch.tasks.core.commit import StagedCommit
from nodewatch.tasks.core.commit_gc import clean_dead_parts
from nodewatch.tasks.states.common import StatesError, _day_ns, _node_idx, _ns, day_range
from nodewatch.tasks.states.cube import write_cube
from nodewatch.tasks.states.derive import Carry, derive_from_tables
from nodewatch.tasks.states.events import (
    carry_table,
    failure_events_table,
    timeline_table,
    write_failure_events,
    write_staged_by_day,
)


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


def _with_syslog_outages(store, fe: pa.Table, syslog: pa.Table | None, resv: pa.Table | None,  # noqa: ANN001
                         job_days: list[str], node_set: list[str], racks: dict[str, str], t0: int, t1: int,
                         counts: dict) -> pa.Table:
    """``fe`` reconciled with the syslog outage rule (:mod:`nodewatch.tasks.states.reconcile`): one events table."""
    if syslog is None or syslog.num_rows == 0:
        return fe
    from nodewatch.tasks.states.reconcile import reconcile
    from nodewatch.tasks.syslog.outages import mark_external, syslog_outages

    jobs = store.read_staged("jobs", job_days, columns=["state", "end_time", "node_list"])
    end_ns = int(pc.max(syslog["time"]).cast(pa.int64()).as_py())
    out = syslog_outages(syslog, end_ns, jobs=jobs, reservations=resv, nodes=set(node_set), racks=racks)
    fe, c = reconcile(fe, out, t0, t1, racks)
    fe, c["failure_events_external"] = mark_external(fe, out)  # rack-wide: external cause (issue 17)
    counts.update({k: v for k, v in c.items() if v})
    return fe


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
    commit = StagedCommit(store, run_id, "states", fault="states")
    rows_states = write_staged_by_day(commit, "node_states", table, days)
    fe = failure_events_table(b, racks)
    fe = _with_syslog_outages(store, fe, syslog, resv, job_days, node_set, racks, t0, t1, b.counts)
    rows_fail, rows_updated = write_failure_events(commit, fe, days, t0)
    if rows_updated:
        b.counts["failure_events_updated_before_window"] = rows_updated
    for day, t in carry_table(b, days).items():
        commit.replace_partition(STATE_CARRY.name, day, t)
    grid = to_grid(b.timeline, len(node_set), t0, t1)
    cube = write_cube(store, grid, node_set, t0, rebuild=rebuild_cube)
    # node_states, failure_events and state_carry of the build appear together, after the cube is written
    commit.commit()
    commit.drop_removed()
    with contextlib.suppress(OSError):  # housekeeping never fails the build (`nodewatch store clean` retries)
        clean_dead_parts(store, keep_run=run_id)  # parts of builds that died before their commit
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
