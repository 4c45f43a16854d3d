"""Cube days as one task each (the layout used when Dask workers run in other processes: Slurm jobs).

The whole-day task runs the same scans, slab-order merges and region writes as the fine-grained graph,
so the chunks must be the same bytes; checked here on an in-process cluster (no Slurm needed) with
a slab size that gives several slabs per day, so the merge order matters.
"""

from __future__ import annotations

import shutil
from datetime import date, timedelta

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.build import build_days, dask_client
from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology

START = date(2026, 3, 1)
DAYS = [START + timedelta(days=i) for i in range(2)]
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
    with dask_client("local", n_workers=2) as c:
        g = build_days(graph, "telemetry", DAYS, c, node_batch=8, slab_rows=20000, day_tasks=False)
        d = build_days(days, "telemetry", DAYS, c, node_batch=8, slab_rows=20000, day_tasks=True)
    assert [r.status for r in g] == [r.status for r in d] == ["built", "built"]
    assert [r.report["windows_with_data"] for r in g] == [r.report["windows_with_data"] for r in d]
    assert [r.report["regions"] for r in g] == [r.report["regions"] for r in d] == [2, 2]
    assert g[0].report["rows_read"] == d[0].report["rows_read"] == 50 * 60 * 96
    a, b = repo.chunk_bytes(graph, "telemetry.zarr"), repo.chunk_bytes(days, "telemetry.zarr")
    assert len(a) > 10 and a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
