"""Cube days as one task each (the layout used when Dask workers run in other processes: Slurm jobs).

The whole-day task runs the same scans, slab-order merges and region writes as the fine-grained graph,
so the chunks must be the same bytes; checked here on an in-process cluster (no Slurm needed) with
a slab size that gives several slabs per day, so the merge order matters. With one worker the three days
go to two tasks of 2 and 1 days (``day_groups``: two groups per worker, one fork per day for all its regions); across
processes (pickled forks) the same is checked by the e2e backfill on Slurm workers (test_e2e_stack.py).
"""

from __future__ import annotations

import shutil
from datetime import date, timedelta

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.build import build_days, dask_client, day_groups
from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology

START = date(2026, 3, 1)
DAYS = [START + timedelta(days=i) for i in range(3)]
NODES = node_names(50)
METRICS = [f"m{i:02d}" for i in range(60)]  # 60 metrics: node chunks of 46, so 2 regions a day


def test_day_tasks_write_the_same_chunks(tmp_path):
    st = Store(str(tmp_path / "staged"))
    write_topology(st, NODES, per_rack=8)
    for i, d in enumerate(DAYS):
        write_telemetry_day(st, d, NODES, METRICS, freq="15min", seed=i)
    for name in ("graph", "days"):
        shutil.copytree(tmp_path / "staged", tmp_path / name)
    graph, days = Store(str(tmp_path / "graph")), Store(str(tmp_path / "days"))
    assert [len(g) for g in day_groups(DAYS, 1)] == [2, 1] and [len(g) for g in day_groups(DAYS, 2)] == [1, 1, 1]
    week = [START + timedelta(days=i) for i in range(7)]
    assert [len(g) for g in day_groups(week, 2)] == [2, 2, 2, 1] and [len(g) for g in day_groups(week, 4)] == [1] * 7
    assert sum(day_groups(week, 2), []) == week
    with dask_client("local", n_workers=1) as c:
        g = build_days(graph, "telemetry", DAYS, c, node_batch=8, slab_rows=20000, day_tasks=False)
        d = build_days(days, "telemetry", DAYS, c, node_batch=8, slab_rows=20000, day_tasks=True)
    assert [r.status for r in g] == [r.status for r in d] == ["built"] * 3
    assert [r.report["windows_with_data"] for r in g] == [r.report["windows_with_data"] for r in d]
    assert [r.report["regions"] for r in g] == [r.report["regions"] for r in d] == [2, 2, 2]
    n_commits = [len(list(repo.open_repo(x, "telemetry.zarr").ancestry(branch="main"))) for x in (graph, days)]
    assert [r.day for r in d] == DAYS and n_commits[0] == n_commits[1]  # still one commit per day
    assert g[0].report["rows_read"] == d[0].report["rows_read"] == 50 * 60 * 96
    a, b = repo.chunk_bytes(graph, "telemetry.zarr"), repo.chunk_bytes(days, "telemetry.zarr")
    assert len(a) > 10 and a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
