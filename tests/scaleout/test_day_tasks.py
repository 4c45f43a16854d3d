"""Cube days as one task each (the layout used when Dask workers run in other processes: Slurm jobs).

The whole-day task runs the same scans, slab-order merges and region writes as the fine-grained graph,
so the chunks must be the same bytes; checked here on an in-process cluster (no Slurm needed) with
a slab size that gives several slabs per day, so the merge order matters. With one worker the three days
go to two tasks of 2 and 1 days (``day_groups``: two groups per worker, one fork per day for all its regions); across
processes (pickled forks) the same is checked by the e2e backfill on Slurm workers (test_e2e_stack.py).

Axes: a telemetry cube that exists is built on its own axes, without a pass over the staged names. Each scan
records the names of its files' dictionaries that are off the axes; a day that met one is not committed: the
names are read and, if the axes must grow, every day is built again on the grown axes. Checked against a build
of the same staged data into a new cube (names read first): same axes, same chunk bytes. A name of no usable
row (a node whose only value is NaN) still grows the axis, as the pass over the names did; an invalid name is
dropped and reported, and the day is committed without a restart.
"""

from __future__ import annotations

import shutil
from datetime import date, timedelta

import pytest

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import open_telemetry_cube, repo
from nodewatch.tasks.cubes.build import build_days, dask_client, day_groups
from nodewatch.tasks.cubes.synth import node_names, telemetry_table, write_telemetry_day, write_topology

START = date(2026, 3, 1)
DAYS = [START + timedelta(days=i) for i in range(3)]
NODES = node_names(50)
METRICS = [f"m{i:02d}" for i in range(60)]  # 60 metrics: node chunks of 46, so 2 regions a day


@pytest.fixture(scope="module")
def client():
    """One in-process cluster with one worker for this module."""
    with dask_client("local", n_workers=1) as c:
        yield c


def test_day_tasks_write_the_same_chunks(tmp_path, client):
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
    g = build_days(graph, "telemetry", DAYS, client, node_batch=8, slab_rows=20000, day_tasks=False)
    d = build_days(days, "telemetry", DAYS, client, node_batch=8, slab_rows=20000, day_tasks=True)
    assert [r.status for r in g] == [r.status for r in d] == ["built"] * 3
    assert [r.report["windows_with_data"] for r in g] == [r.report["windows_with_data"] for r in d]
    assert [r.report["regions"] for r in g] == [r.report["regions"] for r in d] == [2, 2, 2]
    n_commits = [len(list(repo.open_repo(x, "telemetry.zarr").ancestry(branch="main"))) for x in (graph, days)]
    assert [r.day for r in d] == DAYS and n_commits[0] == n_commits[1]  # still one commit per day
    assert g[0].report["rows_read"] == d[0].report["rows_read"] == 50 * 60 * 96
    a, b = repo.chunk_bytes(graph, "telemetry.zarr"), repo.chunk_bytes(days, "telemetry.zarr")
    assert len(a) > 10 and a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


D1, D2 = date(2026, 3, 1), date(2026, 3, 2)


def _stage_day1(root) -> Store:
    st = Store(str(root))
    t1 = telemetry_table(["2026-03-01T00:00Z", "2026-03-01T00:20Z", "2026-03-01T00:00Z"], ["n1", "n2", "n1"],
                         ["power", "power", "load"], [1.0, 2.0, 3.0])
    st.write_parquet(t1, st.staged_key("telemetry", D1.isoformat(), "run-a"))
    return st


def _stage_day2(st: Store) -> None:
    t2 = telemetry_table(["2026-03-02T00:00Z", "2026-03-02T01:00Z", "2026-03-02T01:00Z"], ["n1", "n3", "bad name!"],
                         ["power", "power", "power"], [4.0, float("nan"), 5.0])
    st.write_parquet(t2, st.staged_key("telemetry", D2.isoformat(), "run-b"))


def test_cube_axes_without_a_name_pass_and_restart_when_a_name_is_new(tmp_path, client):
    a = _stage_day1(tmp_path / "a")
    (r1,) = build_days(a, "telemetry", [D1], client, node_batch=2)  # a new cube: the names are read first
    assert r1.report["build_setup"]["axes"] == "scan"
    _stage_day2(a)
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # b: the same staged data, a new cube, names read first
    shutil.rmtree(tmp_path / "b" / "cubes")
    b = Store(str(tmp_path / "b"))
    res = build_days(a, "telemetry", [D1, D2], client, node_batch=2)  # n3 (NaN only) is off the axes: restart
    ref = build_days(b, "telemetry", [D1, D2], client, node_batch=2)
    assert [r.report["dropped"] for r in res] == [r.report["dropped"] for r in ref]
    assert [r.report["build_setup"]["axes"] for r in res] == ["scan", "scan"]
    assert [r.report["invalid_node_names"] for r in res] == [["bad name!"]] * 2
    ds = open_telemetry_cube(a)
    assert [str(n) for n in ds.node.values] == ["n1", "n2", "n3"]
    assert int(ds["count"].sel(node="n3").sum()) == 0
    assert float(ds["mean"].sel(node="n1", metric="power", time="2026-03-02T00:00")) == 4.0
    ca, cb = repo.chunk_bytes(a, "telemetry.zarr"), repo.chunk_bytes(b, "telemetry.zarr")
    assert len(ca) > 4 and ca == cb
    # on the grown axes only the invalid name is off them: dropped and reported, committed without a restart
    (d2,) = build_days(a, "telemetry", [D2], client, node_batch=2)
    assert d2.report["build_setup"]["axes"] == "cube" and d2.report["invalid_node_names"] == ["bad name!"]
    assert d2.report["dropped"] == {"node not on the cube axis": 1, "value null or not finite": 1}
    assert repo.chunk_bytes(a, "telemetry.zarr") == cb
