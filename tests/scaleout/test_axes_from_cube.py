"""A telemetry cube that exists is built on its own axes, without a pass over the staged names.

Each scan records the names of its files' dictionaries that are off the axes; a day that met one is not
committed: the names are read and, if the axes must grow, every day is built again on the grown axes.
Checked against a build of the same staged data into a new cube (names read first): same axes, same
chunk bytes. A name of no usable row (a node whose only value is NaN) still grows the axis, as the pass
over the names did; an invalid name is dropped and reported, and the day is committed without a restart.
"""

from __future__ import annotations

import shutil
from datetime import date

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import open_telemetry_cube, repo
from nodewatch.tasks.cubes.build import build_days, dask_client
from nodewatch.tasks.cubes.synth import telemetry_table

D1, D2 = date(2026, 3, 1), date(2026, 3, 2)


def _stage(root) -> Store:
    st = Store(str(root))
    t1 = telemetry_table(["2026-03-01T00:00Z", "2026-03-01T00:20Z", "2026-03-01T00:00Z"], ["n1", "n2", "n1"],
                         ["power", "power", "load"], [1.0, 2.0, 3.0])
    st.write_parquet(t1, st.staged_key("telemetry", D1.isoformat(), "run-a"))
    return st


def _stage_day2(st: Store) -> None:
    t2 = telemetry_table(["2026-03-02T00:00Z", "2026-03-02T01:00Z", "2026-03-02T01:00Z"], ["n1", "n3", "bad name!"],
                         ["power", "power", "power"], [4.0, float("nan"), 5.0])
    st.write_parquet(t2, st.staged_key("telemetry", D2.isoformat(), "run-b"))


def test_cube_axes_without_a_name_pass_and_restart_when_a_name_is_new(tmp_path):
    a = _stage(tmp_path / "a")
    with dask_client("local", n_workers=1) as c:
        (r1,) = build_days(a, "telemetry", [D1], c, node_batch=2)  # a new cube: the names are read first
        assert r1.report["build_setup"]["axes"] == "scan"
        (again,) = build_days(a, "telemetry", [D1], c, node_batch=2)  # the cube's axes suffice: no name pass
        assert again.report["build_setup"]["axes"] == "cube" and "invalid_node_names" not in again.report
        _stage_day2(a)
        shutil.copytree(tmp_path / "a", tmp_path / "b")  # b: the same staged data, a new cube, names read first
        shutil.rmtree(tmp_path / "b" / "cubes")
        b = Store(str(tmp_path / "b"))
        res = build_days(a, "telemetry", [D1, D2], c, node_batch=2)  # n3 (NaN only) is off the axes: restart
        ref = build_days(b, "telemetry", [D1, D2], c, node_batch=2)
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
        (d2,) = build_days(a, "telemetry", [D2], c, node_batch=2)
        assert d2.report["build_setup"]["axes"] == "cube" and d2.report["invalid_node_names"] == ["bad name!"]
        assert d2.report["dropped"] == {"node not on the cube axis": 1, "value null or not finite": 1}
        assert repo.chunk_bytes(a, "telemetry.zarr") == cb
