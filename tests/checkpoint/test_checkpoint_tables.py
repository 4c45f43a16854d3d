"""Checkpoint tables (tasks/checkpoint/tables.py, compute.py, render.py, savings.py), the flow and the CLI."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.models.checkpoint.intervals import aware_interval, daly_interval, expected_cost, young_interval
from nodewatch.tasks.checkpoint.compute import METHODS, CkptCost, compute_table, default_shape_grid
from nodewatch.tasks.checkpoint.render import table_frame
from nodewatch.tasks.checkpoint.shapes import SHAPE_COLUMNS
from nodewatch.tasks.checkpoint.tables import AREA, load_table, run_checkpoint_tables

MODELS = [FailureModel("w08", mtbf_node_h=5 * 8766.0, shape=0.8), FailureModel("poisson", mtbf_node_h=5 * 8766.0)]


def _job_shapes() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "nodes_lo": [1, 65, 513],
            "nodes_hi": [1, 128, 1024],
            "runtime_lo_h": [0.0, 8.0, 24.0],
            "runtime_hi_h": [0.25, 16.0, 48.0],
            "nodes_rep": [1, 128, 1024],
            "runtime_rep_h": [0.05, 11.3, 33.9],
            "jobs": [5000, 300, 20],
            "node_hours": [250.0, 434_000.0, 694_000.0],
            "share_node_hours": [0.0, 0.38, 0.62],
        }
    )[list(SHAPE_COLUMNS)]


def test_default_grid() -> None:
    g = default_shape_grid()
    assert len(g) == 14 * 8 and g.nodes_rep.min() == 1 and g.nodes_rep.max() == 8192
    assert g.runtime_rep_h.min() == 1 and g.runtime_rep_h.max() == 72 and list(g.columns) == list(SHAPE_COLUMNS)


def test_compute_table_values() -> None:
    shapes = _job_shapes()
    ds = compute_table(shapes, [CkptCost.fixed(0.1), CkptCost.fixed(0.25)], MODELS, ["jobs"] * 3)
    assert dict(ds.sizes) == {"shape": 3, "ckpt_cost": 2, "failure_model": 2, "method": 4}
    assert list(ds.method.values) == list(METHODS)
    # 1 node x 3 minutes with a 6-minute checkpoint: not checkpointable -> NaN
    assert not ds.checkpointable.isel(shape=0).any() and np.isnan(ds.interval_h.isel(shape=0)).all()
    one = ds.isel(shape=1).sel(ckpt_cost="0.25h", failure_model="w08")
    m_job = 5 * 8766.0 / 128  # eq. 3.14
    assert float(one.job_mtbf_h) == pytest.approx(m_job)
    assert float(one.interval_h.sel({"method": "young"})) == pytest.approx(float(young_interval(m_job, 0.25)))
    assert float(one.interval_h.sel({"method": "daly"})) == pytest.approx(float(daly_interval(m_job, 0.25)))
    ref = aware_interval(
        11.3,
        0.25,
        m_job,
        0.8,
        extra_tau_h=[
            [
                float(young_interval(m_job, 0.25)),
                float(m_job) ** 0 * (np.sqrt(2 * m_job * 0.25) + 0.25),
                float(daly_interval(m_job, 0.25)),
            ]
        ],
    )
    assert float(one.expected_cost_h.sel({"method": "aware"})) == pytest.approx(float(ref.cost_h[0]))
    c_daly = float(expected_cost(11.3, float(daly_interval(m_job, 0.25)), 0.25, m_job, 0.8))
    assert float(one.expected_cost_h.sel({"method": "daly"})) == pytest.approx(c_daly)
    assert float(one.saving_vs_daly_pct) == pytest.approx(100 * (c_daly - float(ref.cost_h[0])) / c_daly)
    assert float(one.saving_vs_daly_node_hours_weighted) == pytest.approx(300 * 128 * (c_daly - float(ref.cost_h[0])))
    from nodewatch.models.checkpoint.intervals import expected_makespan

    span = float(expected_makespan(11.3, float(ref.tau_h[0]), 0.25, m_job, 0.8)[()])
    assert float(one.expected_makespan_h.sel({"method": "aware"})) == pytest.approx(span)
    assert 11.3 < span <= 11.3 + float(ref.cost_h[0]) + 1e-12  # t contains any checkpoints: only lost work added
    ok = ds.checkpointable.values
    assert (ds.saving_vs_daly_pct.values[ok] >= -1e-9).all() and (ds.saving_vs_young_pct.values[ok] >= -1e-9).all()


def test_ckpt_cost_from_io_scales_with_nodes() -> None:
    k = CkptCost.from_io(size_gib=4.0, bandwidth_gib_s=100.0)
    np.testing.assert_allclose(k.hours_for(np.array([1, 1024])), [4 / 100 / 3600, 1024 * 4 / 100 / 3600])
    ds = compute_table(_job_shapes(), [k], MODELS[:1])
    assert float(ds.ckpt_cost_h.isel(shape=2, ckpt_cost=0)) == pytest.approx(1024 * 4 / 100 / 3600)
    with pytest.raises(ValueError, match="checkpoint cost"):
        CkptCost("x", hours=0.0)
    with pytest.raises(ValueError, match="size per node"):
        CkptCost("x", size_gib=1.0)


def test_compute_table_bad_input() -> None:
    with pytest.raises(ValueError, match="lack columns"):
        compute_table(_job_shapes().drop(columns="jobs"), [CkptCost.fixed(0.1)], MODELS)
    with pytest.raises(ValueError, match="unique"):
        compute_table(_job_shapes(), [CkptCost.fixed(0.1)], [MODELS[0], MODELS[0]])


@pytest.mark.slow
def test_run_writes_outputs_and_current(store) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no zarr v3 spec / consolidated warnings
        m = run_checkpoint_tables(store, failure_models=MODELS, ckpt_costs=[CkptCost.fixed(0.25)])
    rid = m["run_id"]
    assert m["status"] == "completed" and store.current(AREA) == rid
    for name in ("table.csv", "table.md", "plots/cost_vs_interval.png", "plots/saving_heatmap_w08_0.25h.png"):
        assert store.exists(AREA, rid, name), name
    ds = load_table(store)
    assert ds.interval_h.dims == ("shape", "ckpt_cost", "failure_model", "method")
    assert ds.interval_h.encoding["compressors"][0].to_dict()["name"] == "zstd"
    direct = compute_table(default_shape_grid(), [CkptCost.fixed(0.25)], MODELS, ["grid"] * 112)
    xr.testing.assert_allclose(ds.interval_h.load().reset_coords(drop=True), direct.interval_h.reset_coords(drop=True))
    csv = pd.read_csv(store.path(AREA, rid, "table.csv"))
    assert len(csv) == 112 * 2 and {"interval_aware_h", "cost_daly_h", "saving_vs_young_pct"} <= set(csv.columns)
    assert table_frame(direct).shape[0] == 224
    md = store.fs.open(store.path(AREA, rid, "table.md")).read().decode()
    assert rid in md and "| 8192 |" in md


@pytest.mark.slow
def test_run_with_staged_jobs_and_failures(store) -> None:
    import pyarrow as pa

    from nodewatch.schemas.failures import FAILURES

    # staged jobs: 40 jobs of 100 nodes x 10 h
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    jobs = pd.DataFrame({"system": "sim", "step": None, "start_time": [t0] * 40, "nodes": [100] * 40, "elapsed_s": [36_000] * 40})
    store.write_parquet(pa.Table.from_pandas(jobs, preserve_index=False), "staged", "jobs", "date=2024-01-01", "part-r1.parquet")
    # staged failures: 300 failures of a 1000-node machine, Weibull inter-arrivals
    rng = np.random.default_rng(0)
    hours = np.cumsum(20.0 * rng.weibull(0.7, 300))
    fail = pd.DataFrame({c.name: None for c in FAILURES.columns}, index=range(300))
    fail["system"] = "simsys"
    fail["node"] = [f"n{i % 10}" for i in range(300)]
    fail["purpose"] = "compute"
    fail["start"] = t0 + pd.to_timedelta(hours, unit="h")
    fail["system_nodes"] = 1000
    fail["source_format"] = "lanl"
    tab = pa.Table.from_pandas(fail, schema=FAILURES.arrow_schema(), preserve_index=False)
    store.write_parquet(tab, "staged", "failures", "date=2024-01-01", "part-r2.parquet")
    m = run_checkpoint_tables(store, jobs="staged", failure_systems=["simsys"], grid=False, ckpt_costs=[CkptCost.fixed(0.25)])
    ds = load_table(store)
    assert list(ds.failure_model.values) == ["simsys-exponential", "simsys-weibull"]
    assert ds.sizes["shape"] == 1 and int(ds.jobs[0]) == 40 and int(ds.nodes_hi[0]) == 128
    fits = m["notes"]["failure_fits"]
    assert fits[1]["dist"] == "weibull" and 0.55 < fits[1]["shape"] < 0.85 and fits[1]["machine_nodes"] == 1000
    assert store.exists(AREA, m["run_id"], "plots", "qq_simsys.png")
    # default observation window: first..last record (+1 min): one censored gap per group, counted
    assert all(f["n_censored"] == 1 for f in fits)
    counts = m["notes"]["failure_prep_counts"]
    assert counts["simsys.n_censored"] == 1 and counts["simsys.outside_window"] == 0
    assert counts["simsys.window_source"] == "first..last record + 1 min"
    fcsv = pd.read_csv(store.path(AREA, m["run_id"], "fits.csv"))
    assert {"shape_lo", "mtbf_hi_h", "ks_stat", "aic", "n_failures", "n_censored"} <= set(fcsv.columns)
    md = store.fs.open(store.path(AREA, m["run_id"], "table.md")).read().decode()
    assert "## Failure fits" in md and "| simsys | simsys | weibull" in md
    # explicit window, grouped by node: every node group gets its censored gap; early/late records counted outside
    lo, hi = fail["start"].iloc[9], fail["start"].iloc[-10]
    m2 = run_checkpoint_tables(
        store,
        failure_systems=["simsys"],
        grid=False,
        jobs="staged",
        group_by="node",
        window=(lo, hi),
        ckpt_costs=[CkptCost.fixed(0.25)],
    )
    f2 = pd.DataFrame(m2["notes"]["failure_fits"])
    assert f2["n_censored"].eq(1).all() and f2["group"].nunique() == 10
    c2 = m2["notes"]["failure_prep_counts"]
    assert c2["simsys.outside_window"] == 9 + 10 and c2["simsys.n_censored"] == 10
    assert f2["machine_nodes"].eq(1).all()  # a node group is one node: per-node MTBF = group MTBF
    assert set(load_table(store).failure_model.values) >= {"simsys-n0-weibull", "simsys-n9-exponential"}
    # jobs of one run id staged as two bounded parts (part-<run>-<k>.parquet): the run's jobs are both parts
    for k, half in enumerate((jobs.iloc[:25], jobs.iloc[25:].assign(nodes=1000))):
        key = store.staged_key("jobs", "2024-01-02", "r3", part=k).split("/")
        store.write_parquet(pa.Table.from_pandas(half, preserve_index=False), *key)
    m3 = run_checkpoint_tables(store, jobs="r3", failure_systems=["simsys"], grid=False, ckpt_costs=[CkptCost.fixed(0.25)])
    assert sorted(load_table(store).jobs.values.tolist()) == [15, 25] and m3["run_id"] != m2["run_id"]
    # a run id that staged no jobs, an unknown system, missing model: clear errors, CURRENT unchanged
    with pytest.raises(FileNotFoundError, match="staged no jobs"):
        run_checkpoint_tables(store, jobs="r9", failure_models=MODELS)
    with pytest.raises(ValueError, match="no failures records of system 'nope'"):
        run_checkpoint_tables(store, failure_systems=["nope"])
    with pytest.raises(ValueError, match="no failure model"):
        run_checkpoint_tables(store)
    assert store.current(AREA) == m3["run_id"]


def test_trace_savings_table_3_1_method() -> None:
    from nodewatch.tasks.checkpoint.savings import trace_runtimes, trace_savings

    rng = np.random.default_rng(5)
    n = 400
    raw = pd.DataFrame(
        {
            "step": [None] * n + ["batch"],
            "nodes": list(rng.integers(1, 129, n)) + [4],
            "elapsed_s": list(rng.integers(60, 20 * 3600, n)) + [100],
            "timelimit_s": [None] * 10 + list(rng.integers(3600, 48 * 3600, n - 10)) + [100],
        }
    )
    jobs = trace_runtimes(raw)
    assert len(jobs) == n  # the step row is not a job
    assert jobs.runtime_h.iloc[0] == pytest.approx(raw.elapsed_s.iloc[0] / 3600)  # no request: elapsed
    assert jobs.runtime_h.iloc[20] == pytest.approx(raw.timelimit_s.iloc[20] / 3600)  # requested time
    res = trace_savings(jobs, 128, mtbf_machine_h=(24.0,), ckpt_costs_h=(0.25,), shape=0.8, mc_shapes=5, mc_failures=10_000)
    r = res.iloc[0]
    m_job = 24.0 * 128 / jobs.nodes.to_numpy(float)
    ok = 0.25 + daly_interval(m_job, 0.25) < jobs.runtime_h.to_numpy()
    assert r.jobs == int(ok.sum())
    c_daly = expected_cost(jobs.runtime_h.to_numpy()[ok], daly_interval(m_job[ok], 0.25), 0.25, m_job[ok], 0.8).sum()
    assert r.total_cost_daly_h == pytest.approx(c_daly)
    assert r.saving_vs_daly_pct == pytest.approx(100 * (c_daly - r.total_cost_aware_h) / c_daly)
    assert r.saving_vs_daly_pct > 0 and r.saving_vs_young_pct > 0
    with pytest.raises(ValueError, match="more than --machine-nodes"):
        trace_savings(jobs, 64)


def test_fit_from_failure_events(store) -> None:
    """failure_events from node states (node, start, end, cause; no system column) feed the same fits."""
    import pyarrow as pa

    from nodewatch.tasks.checkpoint.tables import models_from_failures

    rng = np.random.default_rng(2)
    t0 = pd.Timestamp("2024-03-01", tz="UTC")
    start = t0 + pd.to_timedelta(np.cumsum(5.0 * rng.weibull(0.9, 120)), unit="h")
    ev = pd.DataFrame(
        {
            "node": [f"c{i % 30}" for i in range(120)],
            "start": start,
            "end": start + pd.Timedelta(minutes=20),
            "cause": "loss+boot",
            "evidence": "x",
            "rack": None,
        }
    )
    store.write_parquet(
        pa.Table.from_pandas(ev, preserve_index=False), "staged", "failure_events", "date=2024-03-01", "part-r1.parquet"
    )
    models, fits, counts = models_from_failures(store, ["cluster"], 64, table="failure_events")
    assert [m.name for m in models] == ["cluster-exponential", "cluster-weibull"]
    assert fits.n_failures.eq(119).all() and counts["cluster.kept"] == 120
    assert models[0].mtbf_node_h == pytest.approx(fits.mtbf_h.iloc[0] * 64)
    with pytest.raises(ValueError, match="exactly one"):
        models_from_failures(store, ["a", "b"], 64, table="failure_events")
    with pytest.raises(ValueError, match="--machine-nodes"):
        models_from_failures(store, ["cluster"], None, table="failure_events")


def _shadowed_failure_events(store) -> tuple[int, int, int]:
    """Stage failure_events with shadowed_by (new partitions) and one partition staged before the column existed.

    Returns (unshadowed incl. the old partition, UNSCHEDULED_RESV-shadowed, ADMIN_RESV-shadowed) row counts.
    """
    import pyarrow as pa

    rng = np.random.default_rng(3)
    t0 = pd.Timestamp("2024-03-01", tz="UTC")
    start = t0 + pd.to_timedelta(np.cumsum(5.0 * rng.weibull(0.9, 100)), unit="h")
    shadow = np.where(np.arange(100) % 4 == 0, "UNSCHEDULED_RESV", None)
    # a maintenance window: 40 reboots within an hour, shadowed by ADMIN_RESV (no job runs, not a failure to fit)
    maint = start[50] + pd.Timedelta(minutes=30) + pd.to_timedelta(np.arange(40), unit="min")

    def frame(s, sb):  # noqa: ANN001, ANN202
        n = len(s)
        return pd.DataFrame(
            {
                "node": [f"c{i % 30}" for i in range(n)],
                "start": s,
                "end": s + pd.Timedelta(minutes=20),
                "cause": "loss+boot",
                "evidence": "x",
                "rack": None,
                "shadowed_by": pd.Series(sb, dtype=object),
            }
        )

    new = pd.concat([frame(start, shadow), frame(maint, ["ADMIN_RESV"] * 40)], ignore_index=True)
    store.write_parquet(
        pa.Table.from_pandas(new, preserve_index=False), "staged", "failure_events", "date=2024-03-01", "part-r2.parquet"
    )
    old_start = start[-1] + pd.to_timedelta(np.cumsum(5.0 * rng.weibull(0.9, 20)), unit="h")
    old = frame(old_start, [None] * 20).drop(columns=["shadowed_by"])
    store.write_parquet(
        pa.Table.from_pandas(old, preserve_index=False), "staged", "failure_events", "date=2024-03-28", "part-r1.parquet"
    )
    n_unsched = int((shadow == "UNSCHEDULED_RESV").sum())
    return 100 - n_unsched + 20, n_unsched, 40


def test_fits_from_failure_events_leave_admin_shadowed_out(store) -> None:
    """models_from_failures(failure_events): unshadowed + UNSCHEDULED_RESV-shadowed fitted, ADMIN_RESV left out;
    a partition staged before shadowed_by counts as unshadowed."""
    from nodewatch.tasks.checkpoint.tables import failure_events_for_fits, models_from_failures

    n_plain, n_unsched, n_admin = _shadowed_failure_events(store)
    models, fits, counts = models_from_failures(store, ["cluster"], 64, table="failure_events")
    assert counts["cluster.kept"] == n_plain + n_unsched
    assert counts["cluster.shadowed_unscheduled_resv_kept"] == n_unsched
    assert counts["cluster.shadowed_admin_resv_excluded"] == n_admin
    assert fits.n_failures.eq(n_plain + n_unsched - 1).all()
    # asking for every overlay keeps the maintenance burst too (and shortens the fitted MTBF)
    _, fits_all, c_all = models_from_failures(
        store, ["cluster"], 64, table="failure_events", shadowed=("ADMIN_RESV", "UNSCHEDULED_RESV")
    )
    assert c_all["cluster.kept"] == n_plain + n_unsched + n_admin
    assert fits_all.mtbf_h.iloc[0] < fits.mtbf_h.iloc[0]
    # only unshadowed
    df = store.read_staged("failure_events").to_pandas()
    only, c = failure_events_for_fits(df, shadowed=())
    assert len(only) == n_plain and c["shadowed_unscheduled_resv_excluded"] == n_unsched
    # a frame without the column passes unchanged
    assert len(failure_events_for_fits(df.drop(columns=["shadowed_by"]))[0]) == len(df)


def test_nightly_failure_model_leaves_admin_shadowed_out(tmp_path) -> None:
    """report.nightly.failure_model_for_tables fits the same rows as models_from_failures (ADMIN_RESV left out)."""
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.report.nightly import failure_model_for_tables

    st = Store(str(tmp_path / "s"))
    n_plain, n_unsched, n_admin = _shadowed_failure_events(st)
    fm, info = failure_model_for_tables(st, 64)
    assert info["reason"] == "fitted" and info["failure_events"] == n_plain + n_unsched
    assert info["shadowed_admin_resv_excluded"] == n_admin and info["shadowed_unscheduled_resv_kept"] == n_unsched
    assert info["fit"]["n_failures"] == n_plain + n_unsched - 1
