"""Nightly scoring (tasks/anomaly/score.py): scores cube, summary, alerts, heat map, idempotence, failed batches."""

from __future__ import annotations

import hashlib
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.synth import TELEMETRY_SCHEMA, write_topology

D0 = date(2026, 3, 1)
HIST = 4  # training days; the day after is scored
SCORE_DAY = D0 + timedelta(days=HIST)
ANOMALOUS = "cn0002"


def stage_day(store: Store, day: date, nodes: list[str], metrics: list[str], step: str, seed: int,
              anomalous: dict[str, tuple[int, int]] | None = None) -> None:
    """Stage one day of smooth per-node telemetry; ``anomalous[node] = (first, last)`` sample index gets a spike."""
    rng = np.random.default_rng([seed, day.toordinal()])
    prng = np.random.default_rng(seed)  # node/metric personalities do not change from day to day
    base = prng.uniform(50, 100, (len(nodes), len(metrics)))
    amp = prng.uniform(5, 20, (len(nodes), len(metrics)))
    n_t = int(pd.Timedelta("1D") / pd.Timedelta(step))
    ti = np.arange(n_t)
    vals = base[:, None, :] + amp[:, None, :] * np.sin(2 * np.pi * ti / n_t)[None, :, None]
    vals = vals + rng.normal(0, 0.5, vals.shape)
    for node, (a, b) in (anomalous or {}).items():
        vals[nodes.index(node), a:b] += 10 * amp[nodes.index(node)]
    t0 = pd.Timestamp(day, tz="UTC").value
    N, T, M = vals.shape
    tbl = pa.table({
        "time": pa.array(np.repeat(t0 + ti * pd.Timedelta(step).value, N * M), pa.timestamp("ns", tz="UTC")),
        "node": np.tile(np.repeat(np.array(nodes, dtype=object), M), T),
        "metric": np.tile(np.array(metrics, dtype=object), N * T),
        "value": vals.transpose(1, 0, 2).ravel().astype(np.float64),
        "source_offset": np.arange(N * T * M, dtype=np.int64),
    }, schema=TELEMETRY_SCHEMA)
    store.write_parquet(tbl, store.staged_key("telemetry", day.isoformat(), "test"))


def build(store: Store, days: list[date], step: str, node_batch: int = 50) -> None:
    from nodewatch.tasks.cubes.build import build_days, dask_client

    with dask_client(n_workers=1, processes=False) as c:
        build_days(store, "telemetry", days, c, step=step, node_batch=node_batch)


def train(store: Store, nodes: list[str] | None, model: str = "ruad", window: int = 4) -> str:
    from nodewatch.tasks.anomaly.train import TrainConfig, run_training

    cfg = TrainConfig(model=model, window=window, epochs=3, node_batch=50, workers=1, threads=1, seed=0)
    out = run_training(store, D0, D0 + timedelta(days=HIST - 1), cfg, nodes=nodes)
    return out["run_id"]


@pytest.fixture(scope="module")
def scored_store(tmp_path_factory):
    """6 nodes x 3 metrics at 15 min; RUAD trained on 5 of them; day 5 has a spike on cn0002."""
    from nodewatch.tasks.anomaly.score import score_day

    st = Store(str(tmp_path_factory.mktemp("score") / "store"))
    nodes = [f"cn{i:04d}" for i in range(6)]
    metrics = ["load1", "power_node", "temp_inlet"]
    write_topology(st, nodes)
    for i in range(HIST + 1):
        d = D0 + timedelta(days=i)
        stage_day(st, d, nodes, metrics, "5min", seed=7, anomalous={ANOMALOUS: (120, 150)} if d == SCORE_DAY else None)
    build(st, [D0 + timedelta(days=i) for i in range(HIST + 1)], "15min")
    run = train(st, nodes[:5])
    out = score_day(st, SCORE_DAY, "ruad", run_id="test-run")
    return st, out, run, nodes, metrics


def chunk_hashes(store: Store) -> dict[str, str]:
    """sha256 of the committed values of every variable of the scores cube."""
    from nodewatch.tasks.cubes import repo

    ds = repo.open_dataset(store, "scores.zarr")
    return {k: hashlib.sha256(np.ascontiguousarray(ds[k].values).tobytes()).hexdigest() for k in ds.data_vars}


def test_scores_cube_layout_and_values(scored_store):
    import xarray as xr

    st, out, run, nodes, metrics = scored_store
    from nodewatch.tasks.cubes import repo

    ds = xr.open_zarr(repo.readonly_store(st, "scores.zarr"), consolidated=False)
    assert set(ds.data_vars) == {"score", "threshold", "is_anomalous", "contribution"}
    assert ds["score"].dims == ("node", "time") and ds["contribution"].dims == ("node", "time", "metric")
    assert [str(n) for n in ds["node"].values] == nodes and [str(m) for m in ds["metric"].values] == metrics
    day = ds.sel(time=slice(str(SCORE_DAY), f"{SCORE_DAY}T23:59"))
    assert day.sizes["time"] == 96
    # the time chunk is one day, aligned with the telemetry cube
    assert ds["score"].encoding["chunks"][1] == 96
    s = day["score"].values
    # node cn0005 has no model: never scored, is_anomalous = -1
    assert np.isnan(s[5]).all() and (day["is_anomalous"].values[5] == -1).all()
    # the first W-1 = 3 windows of the day are scored thanks to the previous day's history
    assert np.isfinite(s[:5, :3]).all()
    assert np.nanmax(s[:5]) <= 1.0 and np.nanmin(s[:5]) >= 0.0
    # Eq. 4 with the stored threshold
    flag = day["is_anomalous"].values[:5]
    thr = day["threshold"].values[:5]
    np.testing.assert_array_equal(flag == 1, s[:5] >= thr)
    # the spike on cn0002 (samples 120..150 at 5 min = windows 40..49) is flagged, a quiet node much less
    k = nodes.index(ANOMALOUS)
    assert (flag[k, 40:50] == 1).sum() >= 8
    assert s[k, 41:50].min() == 1.0  # capped at 1 (Eq. 3)
    assert np.nanmean(np.delete(s[:5], k, axis=0)[:, 40:50]) < 0.85
    # contributions: per metric, summing to the uncapped normalised error (>= P where P < 1)
    c = day["contribution"].values[:5]
    tot = np.nansum(c, axis=2)
    fin = np.isfinite(s[:5]) & (s[:5] < 1)
    np.testing.assert_allclose(tot[fin], s[:5][fin], rtol=1e-4, atol=1e-5)
    assert out["model_run"] == run


def test_summary_alerts_and_heatmap(scored_store):
    from nodewatch.tasks.anomaly.score import read_alerts, read_summary

    st, out, run, nodes, metrics = scored_store
    summ = read_summary(st, SCORE_DAY).set_index("node")
    assert list(summ.index) == nodes
    assert summ.loc["cn0005", "status"] == "no-model" and "no model" in summ.loc["cn0005", "reason"]
    assert (summ.loc[nodes[:5], "status"] == "scored").all()
    assert summ.loc[ANOMALOUS, "anomalous_windows"] >= 8
    assert summ.loc[ANOMALOUS, "scored_windows"] == 96
    assert pd.Timestamp(summ.loc[ANOMALOUS, "first_anomalous"]) <= pd.Timestamp(f"{SCORE_DAY}T10:15Z")
    al = read_alerts(st, SCORE_DAY)
    assert ANOMALOUS in set(al["node"])
    row = al.set_index("node").loc[ANOMALOUS]
    assert row["peak_score"] == pytest.approx(summ.loc[ANOMALOUS, "peak_score"])
    assert 1 <= len(row["top_metrics"]) <= 3 and set(row["top_metrics"]) <= set(metrics)
    assert out["no_model"] == ["cn0005"] and out["scored"] == 5 and out["failed_batches"] == []
    md = Path(out["alerts_md"]).read_text()
    assert f"| {ANOMALOUS} |" in md
    png = Path(out["heatmap"]).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000


def test_rescore_is_byte_identical_and_day_scored(scored_store):
    from nodewatch.tasks.anomaly.score import day_scored, score_day

    st, out, run, nodes, metrics = scored_store
    assert day_scored(st, SCORE_DAY, "ruad")
    before = chunk_hashes(st)
    assert before
    out2 = score_day(st, SCORE_DAY, "ruad", run_id="test-run-2")
    assert chunk_hashes(st) == before
    paths = ("summary", "alerts", "alerts_md", "heatmap")  # each scoring publishes its own version directory
    assert {k: v for k, v in out2.items() if k not in paths} == {k: v for k, v in out.items() if k not in paths}
    # a day never scored is not complete
    assert not day_scored(st, D0 + timedelta(days=1), "ruad")


def _two_batches_one_corrupt(tmp_path, bad: tuple[str, ...] = ("cn0010", "cn0011", "cn0012", "cn0013")) -> Store:
    """1-min cube with 20 metrics -> node chunk of 10 nodes: 2 batches; the model files of ``bad`` are corrupt
    (by default every node of batch 1, so that batch cannot be scored at all)."""
    from nodewatch.tasks.anomaly.registry import run_prefix

    st = Store(str(tmp_path / "store"))
    nodes = [f"cn{i:04d}" for i in range(14)]
    metrics = [f"m{j:02d}" for j in range(20)]
    for i in range(3):
        stage_day(st, D0 + timedelta(days=i), nodes, metrics, "1min", seed=3)
    build(st, [D0 + timedelta(days=i) for i in range(3)], "1min", node_batch=2)
    from nodewatch.tasks.anomaly.train import TrainConfig, run_training

    out = run_training(st, D0, D0 + timedelta(days=1), TrainConfig(model="exp", workers=1), nodes=None)
    run = out["run_id"]
    for node in bad:
        st.write_bytes(b"not a safetensors file", run_prefix("exp", run), "nodes", f"{node}.safetensors")
    return st


def test_failed_batch_names_nodes_rest_completes(tmp_path):
    """A corrupt model file fails its batch (nodes named); the other batch is scored."""
    from nodewatch.tasks.anomaly.score import day_scored, read_summary, score_day

    st = _two_batches_one_corrupt(tmp_path)
    res = score_day(st, D0 + timedelta(days=2), "exp")
    assert res["failed_batches"] == [1]
    assert res["failed_nodes"] == ["cn0010", "cn0011", "cn0012", "cn0013"]
    assert res["scored"] == 10
    summ = read_summary(st, D0 + timedelta(days=2)).set_index("node")
    assert (summ.loc["cn0010":, "status"] == "failed").all()
    assert "cn0010, cn0011, cn0012, cn0013" in summ.loc["cn0013", "reason"]
    assert not day_scored(st, D0 + timedelta(days=2), "exp")


def test_no_models_is_a_clear_error(tmp_path):
    from nodewatch.tasks.anomaly.score import current_model_run

    st = Store(str(tmp_path / "s"))
    with pytest.raises(FileNotFoundError, match="no trained ruad models"):
        current_model_run(st, "ruad")


def test_group_jobs_contiguous_and_balanced():
    from nodewatch.tasks.anomaly.score import ScoreJob, group_jobs

    jobs = [ScoreJob("s", "2026-01-01", b, "ruad", "r") for b in range(19)]
    groups = group_jobs(jobs, 4)
    assert [len(g) for g in groups] == [5, 5, 5, 4]
    assert [j.batch for g in groups for j in g] == list(range(19))
    assert group_jobs(jobs[:2], 4) == [(jobs[0],), (jobs[1],)]
    assert group_jobs(jobs[:3], 1) == [tuple(jobs[:3])]
    assert group_jobs([], 4) == []


def test_partial_scoring_error_survives_pickling():
    """Prefect may persist a failed task's exception: the scored results must come back with it."""
    import pickle

    from nodewatch.tasks.anomaly.score import PartialScoringError

    e = pickle.loads(pickle.dumps(PartialScoringError("batch 1 failed for nodes a, b", [{"batch": 0}],
                                                      [{"batch": 1, "nodes": ["a", "b"], "error": "x"}])))
    assert str(e) == "batch 1 failed for nodes a, b"
    assert e.results == [{"batch": 0}] and e.failures[0]["nodes"] == ["a", "b"]


@pytest.mark.slow
def test_flow_group_with_a_failed_batch_keeps_the_other(tmp_path, prefect_harness, monkeypatch):
    """Both batches in ONE Prefect score task: the corrupt one fails the task (nodes named, not cached as
    done) and the other batch's rows still reach the day's summary."""
    from prefect import flow

    import nodewatch.flows.nightly as nightly_mod
    from nodewatch.tasks.anomaly.score import current_model_run, day_scored, read_summary
    from nodewatch.tasks.core.runs import RunRecorder

    st = _two_batches_one_corrupt(tmp_path)
    day = D0 + timedelta(days=2)
    monkeypatch.setattr(nightly_mod, "SCORE_TASKS_PER_WORKER", 1)
    rec = RunRecorder(st, "test_score_group", {})

    @flow(name="test-score-group")
    def one_group() -> dict:
        return nightly_mod._score_days(st, [day], "exp", current_model_run(st, "exp"), True, rec, 1)[day]

    res = one_group()
    assert res["failed_batches"] == [1] and res["scored"] == 10
    assert res["failed_nodes"] == ["cn0010", "cn0011", "cn0012", "cn0013"]
    summ = read_summary(st, day).set_index("node")
    assert (summ.loc[:"cn0009", "status"] == "scored").all()
    assert any("cn0010, cn0011, cn0012, cn0013" in e for e in rec.manifest.errors)
    assert not day_scored(st, day, "exp")


def test_heatmap_by_position_equals_by_label(scored_store, tmp_path):
    """The day read by position from the geometry (what finish_day does) draws the same PNG, byte for byte, as the
    day selected by time label through xarray; another day of the cube (never scored) is all grey, not this day."""
    from nodewatch.tasks.anomaly.heatmap import _day_scores, heatmap_png
    from nodewatch.tasks.anomaly.score import scores_spec_for, telemetry_geometry
    from nodewatch.tasks.cubes import repo
    from nodewatch.tasks.cubes.writer import read_geometry

    st = scored_store[0]
    spec = scores_spec_for(telemetry_geometry(st)[1])
    zs = repo.readonly_store(st, spec.key)
    geo = read_geometry(st, spec, zs)
    by_pos, nodes_pos = _day_scores(st, SCORE_DAY, zs, geo)
    by_label, nodes_label = _day_scores(st, SCORE_DAY, zs, None)
    assert nodes_pos == nodes_label and by_pos.shape == by_label.shape == (len(nodes_pos), 96)
    np.testing.assert_array_equal(by_pos, by_label)
    assert np.isfinite(by_pos).any()
    a = heatmap_png(st, SCORE_DAY, ("bench", "a.png"), zs, geo)
    b = heatmap_png(st, SCORE_DAY, ("bench", "b.png"), zs)
    assert Path(a).read_bytes() == Path(b).read_bytes()
    other = geo.epoch if geo.epoch != SCORE_DAY else geo.epoch + timedelta(days=1)
    assert not np.isfinite(_day_scores(st, other, zs, geo)[0]).any()


def test_group_reads_axes_cube_and_node_list_once(scored_store, monkeypatch):
    """score_regions shares the axes, the opened cube and the run's node list between its regions: each is read
    once per group (not once per batch), and the regions' arrays equal those of batches scored one by one."""
    import nodewatch.tasks.anomaly.score as score_mod
    import nodewatch.tasks.cubes as cubes_mod
    from nodewatch.tasks.anomaly.score import load_region_arrays, region_jobs, score_region, score_regions

    st, out, run, nodes, metrics = scored_store
    jobs = region_jobs(st, SCORE_DAY, "ruad", run)
    alone = [load_region_arrays(st, score_region(j)["arrays"]) for j in jobs]
    calls = {"geometry": 0, "cube": 0, "nodes": 0}

    def counted(name, fn):
        def wrapper(*a, **k):
            calls[name] += 1
            return fn(*a, **k)
        return wrapper

    monkeypatch.setattr(score_mod, "telemetry_geometry", counted("geometry", score_mod.telemetry_geometry))
    monkeypatch.setattr(cubes_mod, "open_telemetry_cube", counted("cube", cubes_mod.open_telemetry_cube))
    monkeypatch.setattr(score_mod, "node_keys", counted("nodes", score_mod.node_keys))
    jobs2 = jobs * 3  # the same batches three times: one group of several regions
    grouped = [load_region_arrays(st, r["arrays"]) for r in score_regions(jobs2)]
    assert calls == {"geometry": 1, "cube": 1, "nodes": 1}
    for a, b in zip(alone * 3, grouped, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
