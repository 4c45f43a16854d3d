"""Cubes: layout, window statistics, cube build (values, missing data, idempotence, axis growth)."""

from __future__ import annotations

import hashlib
import warnings
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nodewatch.schemas.cubes import check_step, metric_attrs, node_chunk, spec_for, telemetry_spec
from nodewatch.tasks.cubes import day_complete, open_syslog_cube, open_telemetry_cube, repo
from nodewatch.tasks.cubes.build import build_days, dask_client
from nodewatch.tasks.cubes.layout import Region, check_aligned, regions_of
from nodewatch.tasks.cubes.synth import syslog_table, telemetry_table, write_topology
from nodewatch.tasks.cubes.telemetry import WindowStats
from nodewatch.tasks.cubes.writer import ALLOC_DAYS, read_geometry

D1, D2 = date(2026, 3, 1), date(2026, 3, 2)


@pytest.fixture(scope="module")
def client():
    """One small threaded LocalCluster for this module."""
    with dask_client(n_workers=1, processes=False) as c:
        yield c


def _day_arrays(store) -> list[dict[str, np.ndarray]]:
    """Values of every telemetry statistic of days 1 and 2 (96 steps each)."""
    ds = open_telemetry_cube(store)
    return [{k: ds[k].isel(time=slice(96 * d, 96 * (d + 1))).values for k in ("count", "mean", "min", "max", "std")}
            for d in (0, 1)]


def _hash_tree(store, key: str) -> dict[str, str]:
    out = {}
    for p in store.iter_files("cubes", key):
        with store.fs.open(p, "rb") as f:
            out[p.split(key, 1)[1]] = hashlib.sha256(f.read()).hexdigest()
    return out


# ----------------------------------------------------------------------------- layout / schema
def test_region_key_and_slices():
    r = Region(D2, 3)
    assert r.key == "2026-03-02/b0003"
    assert r.node_slice(10, 35) == slice(30, 35)
    assert r.time_slice(D1, 96) == slice(96, 192)
    with pytest.raises(ValueError, match="before the cube epoch"):
        Region(D1, 0).time_slice(D2, 96)
    with pytest.raises(ValueError, match="node batch starts at 40"):
        Region(D1, 4).node_slice(10, 35)
    with pytest.raises(ValueError):
        Region(D1, -1)
    assert [x.key for x in regions_of([D2, D1], 15, 10)] == [
        "2026-03-01/b0000",
        "2026-03-01/b0001",
        "2026-03-02/b0000",
        "2026-03-02/b0001",
    ]


def test_check_aligned_names_region_and_chunks():
    check_aligned("d/b0", {"node": slice(10, 15), "time": slice(96, 192)}, {"node": 10, "time": 96}, {"node": 15, "time": 960})
    with pytest.raises(ValueError, match=r"region d/b1 time=50:146 is not aligned to chunks \{'node': 10, 'time': 96\}"):
        check_aligned("d/b1", {"node": slice(0, 10), "time": slice(50, 146)}, {"node": 10, "time": 96}, {"node": 15, "time": 960})
    with pytest.raises(ValueError, match="region d/b2 node=0:12 is not aligned"):
        check_aligned("d/b2", {"node": slice(0, 12)}, {"node": 10}, {"node": 15})
    with pytest.raises(ValueError, match="outside the axis"):
        check_aligned("d/b3", {"node": slice(10, 20)}, {"node": 10}, {"node": 15})


def test_node_chunk_and_step_rules():
    assert node_chunk(96 * 50 * 4, 50) == 55  # 1 MiB / 19.2 kB
    assert node_chunk(96 * 50 * 4, 100) == 100
    assert node_chunk(8 * 2**20, 50) == 2  # capped at 16 MiB per chunk
    per = telemetry_spec("15min").per_node_day_bytes(50)
    assert per == 96 * 50 * 4
    assert spec_for("syslog").per_node_day_bytes() == 1440 * 9 * 4
    assert check_step("1h") == pd.Timedelta("1h")
    for bad in ("7min", "0s", "-15min", "banana", "1500ms"):
        with pytest.raises(ValueError, match="invalid step"):
            check_step(bad)


def test_metric_attrs_catalogue_and_fallback():
    a = metric_attrs("power_node")
    assert a["units"] == "W" and a["long_name"] == "node input power"
    f = metric_attrs("no_such_metric")
    assert f == {"units": "1", "long_name": "no_such_metric", "kind": "unknown"}


# ----------------------------------------------------------------------------- window statistics
def test_window_stats_hand_computed_and_batch_invariant():
    idx = np.array([0, 0, 0, 0, 2])
    x = np.array([1.0, 2.0, 3.0, 4.0, 7.0])
    one = WindowStats.empty(3)
    one.add(idx, x)
    two = WindowStats.empty(3)
    two.add(idx[:3], x[:3])
    two.add(idx[3:], x[3:])
    for s in (one, two):
        out = s.finalize((3,))
        assert out["mean"][0] == pytest.approx(2.5) and out["std"][0] == pytest.approx(np.sqrt(1.25))
        assert out["min"][0] == 1.0 and out["max"][0] == 4.0 and out["count"].tolist() == [4, 0, 1]
        assert np.isnan(out["mean"][1]) and np.isnan(out["std"][1]) and np.isnan(out["min"][1])
        assert out["std"][2] == 0.0 and out["mean"][2] == 7.0


def test_window_stats_stable_for_large_mean_small_variance():
    rng = np.random.default_rng(1)
    x = 1e9 + rng.normal(0, 1.0, 10_000)
    s = WindowStats.empty(1)
    for part in np.array_split(x, 7):
        s.add(np.zeros(len(part), dtype=np.int64), part)
    assert s.finalize((1,))["std"][0] == pytest.approx(x.std(), rel=1e-6)
    naive = np.sqrt(max((x * x).mean() - x.mean() ** 2, 0.0))
    assert abs(naive - x.std()) > 1e-3  # the plain sum of squares would be wrong here


def test_window_stats_merge_equals_single_pass():
    rng = np.random.default_rng(2)
    idx = rng.integers(0, 50, 5000)
    x = rng.normal(3, 2, 5000)
    a, b, ab = WindowStats.empty(50), WindowStats.empty(50), WindowStats.empty(50)
    a.add(idx[:2000], x[:2000])
    b.add(idx[2000:], x[2000:])
    ab.add(idx, x)
    m = a.merge(b).finalize((50,))
    r = ab.finalize((50,))
    for k in ("mean", "std", "min", "max"):
        np.testing.assert_allclose(m[k], r[k], rtol=1e-6)
    with pytest.raises(ValueError, match="cannot merge"):
        WindowStats.empty(2).merge(WindowStats.empty(3))


# ----------------------------------------------------------------------------- build telemetry
def _stage_basic(store):
    """Two staged parts for D1 (disjoint rows), one for D2; n3 only in topology; a gap on n2."""
    write_topology(store, ["n1", "n2", "n3"], per_rack=2)
    p1 = telemetry_table(
        ["2026-03-01T00:00Z", "2026-03-01T00:05Z", "2026-03-01T00:10Z", "2026-03-01T00:00Z", "2026-03-01T00:16Z"],
        ["n1", "n1", "n1", "n1", "n2"],
        ["power_node", "power_node", "power_node", "temp_inlet", "power_node"],
        [100.0, 110.0, 130.0, 20.5, 50.0],
    )
    p2 = telemetry_table(
        ["2026-03-01T00:14:59Z", "2026-03-01T23:59:59Z"], ["n1", "n2"], ["power_node", "temp_inlet"], [140.0, 21.0], offset=5
    )
    store.write_parquet(p1, store.staged_key("telemetry", "2026-03-01", "run-a"))
    store.write_parquet(p2, store.staged_key("telemetry", "2026-03-01", "run-b"))
    p3 = telemetry_table(["2026-03-02T12:00Z"], ["n2"], ["power_node"], [75.0])
    store.write_parquet(p3, store.staged_key("telemetry", "2026-03-02", "run-a"))


@pytest.mark.filterwarnings("error")
def test_build_values_missing_data_and_coords(store, client):
    _stage_basic(store)
    res = build_days(store, "telemetry", [D1, D2, date(2026, 3, 3)], client, node_batch=2)
    assert [(r.day, r.status) for r in res] == [(D1, "built"), (D2, "built"), (date(2026, 3, 3), "no-data")]
    assert res[0].report["rows_read"] == 7 and res[0].report["rows_used"] == 7 and res[0].report["dropped"] == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = open_telemetry_cube(store)
    assert dict(ds.sizes) == {"node": 3, "time": ALLOC_DAYS * 96, "metric": 2}
    assert [str(n) for n in ds.node.values] == ["n1", "n2", "n3"]
    assert [str(r) for r in ds.rack.values] == ["r000", "r000", "r001"]
    assert [str(m) for m in ds.metric.values] == ["power_node", "temp_inlet"]
    assert str(ds.metric_units.values[0]) == "W"
    assert ds.attrs["epoch"] == "2026-03-01" and ds.attrs["step"] == "15min"
    assert ds.time.values[0] == np.datetime64("2026-03-01T00:00") and ds.time.values[1] == np.datetime64("2026-03-01T00:15")
    n1 = ds.sel(node="n1", metric="power_node").isel(time=0).load()
    assert n1["count"] == 4 and n1["mean"] == pytest.approx(120.0) and n1["min"] == 100 and n1["max"] == 140
    assert float(n1["std"]) == pytest.approx(np.std([100, 110, 130, 140]), rel=1e-6)
    n2 = ds.sel(node="n2", metric="power_node").isel(time=[0, 1]).load()
    assert n2["count"].values.tolist() == [0, 1]  # 00:16 falls in the second window
    assert np.isnan(n2["mean"].values[0]) and n2["mean"].values[1] == 50.0
    assert ds.sel(node="n2", metric="temp_inlet").isel(time=95)["mean"].values.item() == 21.0
    n3 = ds.sel(node="n3").isel(time=slice(0, 192)).load()  # topology only: missing everywhere
    assert (n3["count"] == 0).all() and n3["mean"].isnull().all() and n3["std"].isnull().all()
    d2 = ds.sel(node="n2", metric="power_node", time="2026-03-02T12:00").load()
    assert d2["count"] == 1 and d2["mean"] == 75.0
    assert ds["count"].dtype == np.int32 and ds["mean"].dtype == np.float32
    assert day_complete(store, D1) and day_complete(store, D2) and not day_complete(store, date(2026, 3, 3))


def test_rebuild_is_byte_identical_and_late_part_marks_day_stale(store, client):
    _stage_basic(store)
    build_days(store, "telemetry", [D1, D2], client, node_batch=2)
    before = _day_arrays(store)
    assert np.isfinite(before[0]["mean"]).any()
    build_days(store, "telemetry", [D1, D2], client, node_batch=2)
    after0 = _day_arrays(store)
    for d in (0, 1):
        for k, v in before[d].items():
            np.testing.assert_array_equal(after0[d][k], v)
    late = telemetry_table(["2026-03-01T00:01Z"], ["n3"], ["power_node"], [9.0])
    store.write_parquet(late, store.staged_key("telemetry", "2026-03-01", "run-c"))
    assert not day_complete(store, D1) and day_complete(store, D2)
    build_days(store, "telemetry", [D1], client, node_batch=2)
    assert day_complete(store, D1)
    ds = open_telemetry_cube(store)
    assert ds.sel(node="n3", metric="power_node").isel(time=0)["mean"].values.item() == 9.0
    after = _day_arrays(store)
    assert not np.array_equal(after[0]["count"], before[0]["count"])  # day 1 changed ...
    for k, v in before[1].items():  # ... day 2 did not
        np.testing.assert_array_equal(after[1][k], v)


def test_node_metric_and_time_axes_grow_without_moving_data(store, client):
    _stage_basic(store)
    build_days(store, "telemetry", [D1], client, node_batch=2)
    g0 = read_geometry(store, telemetry_spec())
    late_day = date(2026, 4, 15)  # beyond the first 32-day block
    t = telemetry_table(["2026-04-15T06:00Z", "2026-04-15T06:00Z"], ["n9", "n1"], ["power_node", "load1"], [1.0, 2.0])
    store.write_parquet(t, store.staged_key("telemetry", late_day.isoformat(), "run-z"))
    build_days(store, "telemetry", [late_day], client, node_batch=2)
    g1 = read_geometry(store, telemetry_spec())
    assert g1.nodes == (*g0.nodes, "n9") and g1.metrics == (*g0.metrics, "load1")
    assert g1.n_days == 2 * ALLOC_DAYS and g1.node_chunk == g0.node_chunk
    ds = open_telemetry_cube(store)
    assert ds.sizes["time"] == 2 * ALLOC_DAYS * 96 and ds.time.values[-1] == np.datetime64("2026-05-03T23:45")
    assert ds.sel(node="n1", metric="power_node").isel(time=0)["mean"].values.item() == 120.0  # old day untouched
    assert ds.sel(node="n9", metric="power_node", time="2026-04-15T06:00")["mean"].values.item() == 1.0
    assert ds.sel(node="n1", metric="load1", time="2026-04-15T06:00")["mean"].values.item() == 2.0
    old = ds.sel(node="n9").isel(time=slice(0, 96)).load()  # new node on an old day: missing, not 0
    assert (old["count"] == 0).all() and old["mean"].isnull().all()
    assert str(ds.rack.sel(node="n9").values.item()) == ""  # not in topology
    with pytest.raises(ValueError, match="before the epoch 2026-03-01"):
        t0 = telemetry_table(["2026-02-01T00:00Z"], ["n1"], ["power_node"], [1.0])
        store.write_parquet(t0, store.staged_key("telemetry", "2026-02-01", "run-z"))
        build_days(store, "telemetry", [date(2026, 2, 1)], client)
    with pytest.raises(ValueError, match="900 s step, not 300 s"):
        build_days(store, "telemetry", [D1], client, step="5min")


def test_bad_rows_are_dropped_and_counted_not_fatal(store, client):
    t = telemetry_table(
        ["2026-03-01T01:00Z", "2026-03-01T01:00Z", "2026-03-02T00:00Z", "2026-03-01T01:00Z", "2026-03-01T01:01Z"],
        ["n1", "n1", "n1", "../../etc", "n1"],
        ["power_node"] * 5,
        [1.0, float("nan"), 3.0, 4.0, float("inf")],
    )
    store.write_parquet(t, store.staged_key("telemetry", "2026-03-01", "run-a"))
    (res,) = build_days(store, "telemetry", [D1], client)
    rep = res.report
    assert rep["rows_read"] == 5 and rep["rows_used"] == 1
    assert rep["dropped"] == {"time outside the day": 1, "value null or not finite": 2, "node not on the cube axis": 1}
    assert rep["invalid_node_names"] == ["../../etc"]
    ds = open_telemetry_cube(store)
    assert [str(n) for n in ds.node.values] == ["n1"]
    assert ds.sel(node="n1", metric="power_node", time="2026-03-01T01:00")["count"].values.item() == 1


# ----------------------------------------------------------------------------- build syslog
@pytest.mark.filterwarnings("error")
def test_syslog_counts_by_severity_30min_and_1min(store, client):
    write_topology(store, ["n1", "n2"])
    t = syslog_table(
        [
            "2026-03-01T00:00:10Z",
            "2026-03-01T00:00:50Z",
            "2026-03-01T00:29:59Z",
            "2026-03-01T00:30:00Z",
            "2026-03-01T00:00:20Z",
            "2026-03-01T23:59:59Z",
        ],
        ["n1", "n1", "n1", "n1", "n2", "n2"],
        [3, 3, 6, None, 0, 7],
    )
    store.write_parquet(t, store.staged_key("syslog", "2026-03-01", "run-a"))
    (res,) = build_days(store, "syslog", [D1], client)
    assert res.report["rows_used"] == 6
    ds = open_syslog_cube(store)
    assert dict(ds.sizes) == {"node": 2, "time": ALLOC_DAYS * 48, "time_1min": ALLOC_DAYS * 1440, "severity": 9}
    assert [str(s) for s in ds.severity_name.values][:4] == ["emerg", "alert", "crit", "err"]
    n1 = ds["lines"].sel(node="n1").isel(time=[0, 1]).values
    assert n1[0].tolist() == [0, 0, 0, 2, 0, 0, 1, 0, 0] and n1[1].tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1]
    assert ds["lines_1min"].sel(node="n1").isel(time_1min=0).values[3] == 2
    assert ds["lines_1min"].sel(node="n1").isel(time_1min=29).values[6] == 1
    assert ds["lines"].sel(node="n2").isel(time=47).values[7] == 1
    assert int(ds["lines"].isel(time=slice(0, 48)).sum()) == 6 == int(ds["lines_1min"].isel(time_1min=slice(0, 1440)).sum())
    assert ds["lines"].isel(time=slice(48, 96)).isnull().all()  # day not aggregated yet: NaN, not 0 nor -1
    assert day_complete(store, D1, "syslog") and not day_complete(store, D1, "telemetry")


def _sg_checks(ds, built: slice, unbuilt: slice) -> None:
    """The documented SG one-liner: built windows >= 0 (not NaN), unbuilt windows NaN (never negative)."""
    sg = ds["lines"].sum("severity", min_count=1).load()
    assert sg.isel(time=built).notnull().all() and (sg.isel(time=built) >= 0).all()
    assert sg.isel(time=unbuilt).isnull().all()
    assert not (sg < 0).any()
    fine = ds["lines_1min"].sum("severity", min_count=1).load()
    assert (fine.isel(time_1min=slice(built.start * 30, built.stop * 30)) >= 0).all()
    assert fine.isel(time_1min=slice(unbuilt.start * 30, unbuilt.stop * 30)).isnull().all()


def test_syslog_unbuilt_days_read_as_nan_for_plain_xarray(store, client):
    import xarray as xr
    import zarr

    write_topology(store, ["n1", "n2"])
    t = syslog_table(["2026-03-01T00:00:10Z", "2026-03-03T05:00:00Z"], ["n1", "n2"], [3, 6])
    store.write_parquet(t, store.staged_key("syslog", "2026-03-01", "run-a"))
    store.write_parquet(t.slice(1), store.staged_key("syslog", "2026-03-03", "run-a"))
    build_days(store, "syslog", [D1, date(2026, 3, 3)], client)  # 2026-03-02 and days after 03-03 never built
    zs = repo.readonly_store(store, "syslog.zarr")
    raw = zarr.open_group(zs, mode="r")
    assert raw["lines"].dtype == np.int32 and raw["lines"][0, 48, 0] == -1  # stored as -1 ...
    assert raw["lines"].attrs["_FillValue"] == -1  # ... declared as fill
    plain = xr.open_zarr(zs, consolidated=False)  # what a downstream reader does (docs/cubes.md)
    assert plain["lines"].dtype == np.float64
    for ds in (plain, open_syslog_cube(store)):
        _sg_checks(ds, slice(0, 48), slice(48, 96))  # day 1 built, day 2 not
        _sg_checks(ds, slice(96, 144), slice(144, 32 * 48))  # day 3 built, the rest of the allocation not
        sg = ds["lines"].sum("severity", min_count=1)
        assert float(sg.sel(node="n1").isel(time=0)) == 1.0 and float(sg.sel(node="n2", time="2026-03-03T05:00")) == 1.0
        assert float(sg.isel(time=slice(0, 48)).sum()) == 1.0  # node-days with no line read 0, not NaN


def test_syslog_cube_without_declared_fill_is_masked_and_upgraded(store, client):
    import xarray as xr
    import zarr

    write_topology(store, ["n1"])
    store.write_parquet(syslog_table(["2026-03-01T00:00:10Z"], ["n1"], [3]), store.staged_key("syslog", "2026-03-01", "a"))
    build_days(store, "syslog", [D1], client)
    with repo.transaction(store, "syslog.zarr", "as before the fill was declared") as session:
        g = zarr.open_group(session.store, mode="r+")
        for name in ("lines", "lines_1min"):  # as created before the fill was declared
            del g[name].attrs["_FillValue"]
    assert int(xr.open_zarr(repo.readonly_store(store, "syslog.zarr"), consolidated=False)["lines"].isel(time=48).min()) == -1
    _sg_checks(open_syslog_cube(store), slice(0, 48), slice(48, 96))  # our reader masks old cubes too
    store.write_parquet(syslog_table(["2026-03-02T00:00:10Z"], ["n1"], [3]), store.staged_key("syslog", "2026-03-02", "a"))
    build_days(store, "syslog", [D2], client)  # the next build declares the fill
    _sg_checks(xr.open_zarr(repo.readonly_store(store, "syslog.zarr"), consolidated=False), slice(0, 96), slice(96, 144))


def test_telemetry_statistics_have_cf_long_name_and_units_coordinate(store, client):
    _stage_basic(store)
    build_days(store, "telemetry", [D1], client, node_batch=2)
    ds = open_telemetry_cube(store)
    for k in ("mean", "min", "max", "std", "count"):
        assert ds[k].attrs["long_name"], k
        assert "cell_methods" in ds[k].attrs or k == "count"
    for k in ("mean", "min", "max", "std"):
        assert "units" not in ds[k].attrs and "metric_units" in ds[k].attrs["comment"]
        assert "metric_units" in ds[k].coords  # auxiliary coordinate along the metric axis
    assert ds["mean"].attrs["long_name"] == "mean of the metric's samples in the window"
    assert ds["count"].attrs["units"] == "1"
    assert [str(u) for u in ds.metric_units.values] == ["W", metric_attrs("temp_inlet")["units"]]


def test_info_reads_the_step_of_a_5min_cube(store, client):
    from nodewatch.tasks.cubes.info import cube_info

    _stage_basic(store)
    build_days(store, "telemetry", [D1], client, step="5min", node_batch=2)
    inf = cube_info(store, "telemetry")
    assert inf["step"] == "5min" and inf["allocated_days"] == ALLOC_DAYS
    assert inf["allocated_until"] == "2026-04-01"
    assert inf["variables"]["mean"]["shape"] == [3, ALLOC_DAYS * 288, 2]
    assert inf["variables"]["mean"]["chunks"][1] == 288
    geo = read_geometry(store, telemetry_spec())  # even with the default spec, the cube's own step counts
    assert geo.n_days == ALLOC_DAYS and geo.step_seconds == 300


def test_time_ordered_and_node_ordered_input_give_the_same_cube(tmp_path, client):
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day

    a, b = Store(str(tmp_path / "a")), Store(str(tmp_path / "b"))
    write_telemetry_day(a, D1, node_names(4), ["power_node", "load1", "temp_inlet"], freq="1min", seed=5, drop_frac=0.2)
    tbl = a.read_staged("telemetry")
    b.write_parquet(
        tbl.sort_by([("node", "ascending"), ("metric", "ascending"), ("time", "ascending")]),
        b.staged_key("telemetry", D1.isoformat(), "sorted"),
    )
    for s in (a, b):
        build_days(s, "telemetry", [D1], client, node_batch=2)
    da_, db_ = open_telemetry_cube(a).load(), open_telemetry_cube(b).load()
    np.testing.assert_array_equal(da_["count"].values, db_["count"].values)
    assert int(da_["count"].sum()) == tbl.num_rows
    for k in ("mean", "min", "max", "std"):
        np.testing.assert_allclose(da_[k].values, db_[k].values, rtol=1e-6, equal_nan=True)
    # hand check one window against pandas
    df = tbl.to_pandas()
    w = df[(df.node == "cn0002") & (df.metric == "load1") & (df.time < pd.Timestamp("2026-03-01T00:15Z"))]["value"]
    cell = da_.sel(node="cn0002", metric="load1").isel(time=0)
    assert cell["count"].item() == len(w) and cell["std"].item() == pytest.approx(w.std(ddof=0), rel=1e-5)


@pytest.mark.parametrize("kind", ["garbage", "truncated", "missing-column"])
def test_unreadable_staged_file_is_a_one_line_error_naming_it(store, client, kind):
    from nodewatch.tasks.cubes.telemetry import StagedFileError

    good = telemetry_table(["2026-03-01T00:00Z"], ["n1"], ["power_node"], [1.0])
    key = store.staged_key("telemetry", "2026-03-01", "bad")
    if kind == "missing-column":
        store.write_parquet(good.drop_columns(["value"]), key)
    else:
        store.write_parquet(good, key)
        data = Path(store.path(key)).read_bytes()
        store.write_bytes(b"\x00garbage\xff" * 50 if kind == "garbage" else data[: len(data) // 2], key)
    with pytest.raises(StagedFileError) as e:
        build_days(store, "telemetry", [D1], client)
    msg = str(e.value)
    assert "\n" not in msg and "part-bad.parquet" in msg
    assert ("missing column(s) value" in msg) if kind == "missing-column" else ("unreadable parquet" in msg)
    assert not day_complete(store, D1)


def test_build_on_a_given_scheduler_address(store):
    from distributed import LocalCluster

    _stage_basic(store)
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cl,
        dask_client(cl.scheduler_address) as c,
    ):
        assert c.scheduler.address == cl.scheduler_address
        res = build_days(store, "telemetry", [D1], c, node_batch=2)
    assert res[0].status == "built" and res[0].report["rows_used"] == 7
