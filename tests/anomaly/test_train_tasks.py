"""Fan-out training tasks: registry, carry-over of failed nodes, evaluation, labels, scoring (no Prefect)."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xarray as xr

from nodewatch.models.anomaly.synthetic_telemetry import make_synthetic_telemetry
from nodewatch.schemas.names import UnsafeNameError
from nodewatch.tasks.anomaly.labels import LabelError, LabelReport, label_grid, read_intervals
from nodewatch.tasks.anomaly.node_scoring import history_start, score_nodes
from nodewatch.tasks.anomaly.registry import load_models, node_keys
from nodewatch.tasks.anomaly.train import TrainConfig, run_training

START, END = date(2026, 1, 1), date(2026, 1, 10)


def synthetic_cube(n_nodes: int = 6, seed: int = 4) -> tuple[xr.Dataset, pd.DataFrame]:
    d = make_synthetic_telemetry(n_nodes=n_nodes, n_days=10, n_metrics=4, anomaly_rate=0.4, seed=seed)
    ds = xr.Dataset(
        {v: (("node", "time", "metric"), getattr(d, v)) for v in ("mean", "min", "max", "std")}
        | {"count": (("node", "time", "metric"), d.count.astype(np.int32))},
        coords={"node": d.nodes, "time": d.times, "metric": d.metrics},
    )
    iv = pd.DataFrame(d.intervals, columns=["node", "start", "end", "type"])
    return ds, iv


def write_cube(store, ds: xr.Dataset) -> None:
    """Publish ``ds`` as ``cubes/telemetry.zarr`` (an Icechunk repository, one commit)."""
    from nodewatch.tasks.cubes import repo

    with repo.transaction(store, "telemetry.zarr", "test cube", create=True) as session:
        ds.to_zarr(session.store, mode="w", zarr_format=3, consolidated=False)


def write_labels(path, iv: pd.DataFrame) -> str:
    t = pa.table({"node": iv["node"].astype(str), "start": pd.to_datetime(iv["start"], utc=True),
                  "end": pd.to_datetime(iv["end"], utc=True), "type": iv["type"].astype(str)})
    pq.write_table(t, path)
    return str(path)


CFG = dict(window=5, epochs=2, node_batch=4, workers=1, batch_size=64)


def test_run_writes_registry_metrics_and_moves_current(store, tmp_path):
    ds, iv = synthetic_cube()
    write_cube(store, ds)
    labels = write_labels(tmp_path / "labels.parquet", iv)
    out = run_training(store, START, END, TrainConfig(**CFG), labels=labels)
    rid = out["run_id"]
    assert out["trained"] == 6 and not out["failed"] and out["current_moved"]
    assert store.current("models/ruad") == rid
    assert node_keys(store, "ruad", rid) == list(ds["node"].values)
    meta = store.read_json(f"models/ruad/{rid}", "nodes", "node0001.json")
    assert len(meta["curve"]["train_loss"]) == 2 and len(meta["scaler"]["min"]) == 16
    # per-node alert threshold: max(T=0.5, q0.99 of held-out scores), see models/anomaly/thresholds.py
    assert 0.5 <= meta["threshold"] <= 1.0 and meta["threshold_rule"].startswith("max(T=0.5, q0.99")
    m = store.read_json(f"models/ruad/{rid}", "metrics.json")["RUAD W=5"]
    assert 0 <= m["pooled_auc"] <= 1 and set(m["per_node_auc"]) <= set(ds["node"].values)
    assert "0.5" in {str(k) for k in m["f1"]["anomaly"]}
    assert store.exists(f"models/ruad/{rid}", "roc.png") and store.exists(f"models/ruad/{rid}", "table.md")
    manifest = store.read_json("runs", f"{rid}.json")
    assert manifest["status"] == "completed" and manifest["outputs"]["nodes_trained"] == 6
    files = [p.rsplit("/", 1)[1] for p in store.iter_files(f"models/ruad/{rid}")]
    assert not any(f.endswith((".pt", ".pkl", ".pickle")) for f in files)

    models = load_models(store, "ruad")
    assert models.run_id == rid and models.window == 5
    t0 = np.datetime64("2026-01-09T00:00", "ns")
    sl = ds.sel(time=slice(history_start(models, t0), None))
    score, contrib = score_nodes(models, sl)
    assert score.dims == ("node", "time") and contrib.dims == ("node", "time", "metric")
    assert np.isnan(score.values[:, :4]).all() and np.isfinite(score.values[:, 4:]).any()
    s = score.values
    below = np.isfinite(s) & (s < 1)
    np.testing.assert_allclose(contrib.values.sum(axis=2)[below], s[below], rtol=1e-3)
    # the same scores as the estimator scoring the whole test slice directly
    one, _ = score_nodes(load_models(store, "ruad", nodes=["node0002"]), sl)
    np.testing.assert_allclose(one.values[0], s[2], rtol=1e-5, equal_nan=True)


def test_failed_node_keeps_previous_model(store):
    ds, _ = synthetic_cube()
    write_cube(store, ds)
    first = run_training(store, START, END, TrainConfig(model="dense", **CFG))
    bad = ds.copy(deep=True)
    for v in ("mean", "min", "max", "std"):
        bad[v].loc[{"node": "node0003"}] = np.nan
    bad["count"].loc[{"node": "node0003"}] = 0
    write_cube(store, bad)
    second = run_training(store, START, END, TrainConfig(model="dense", **CFG))
    f = second["failed"]["node0003"]
    assert "no training window" in f["reason"] and f["kept_model_from"] == first["run_id"]
    assert store.current("models/dense") == second["run_id"]
    assert store.read_json("runs", f"{second['run_id']}.json")["status"] == "partial"
    kept = store.read_json(f"models/dense/{second['run_id']}", "nodes", "node0003.json")
    assert kept["trained_in"] == first["run_id"] and kept["carried_over_from"] == first["run_id"]
    assert "node0003" in load_models(store, "dense").nodes


def test_nothing_trained_does_not_move_current(store):
    ds, _ = synthetic_cube(n_nodes=2)
    for v in ("mean", "min", "max", "std"):
        ds[v][:] = np.nan
    ds["count"][:] = 0
    write_cube(store, ds)
    out = run_training(store, START, END, TrainConfig(**CFG))
    assert not out["current_moved"] and store.current("models/ruad") is None
    assert set(out["failed"]) == {"node0000", "node0001"}


def test_bad_requests_are_one_line_errors(store, tmp_path):
    ds, _ = synthetic_cube(n_nodes=2)
    write_cube(store, ds)
    with pytest.raises(ValueError, match="not in the telemetry cube: nodeX"):
        run_training(store, START, END, TrainConfig(**CFG), nodes=["nodeX"])
    with pytest.raises(UnsafeNameError):
        run_training(store, START, END, TrainConfig(**CFG), nodes=["../../etc"])
    with pytest.raises(ValueError, match="needs --labels"):
        run_training(store, START, END, TrainConfig(model="clu", **CFG))
    with pytest.raises(ValueError, match="before"):
        run_training(store, END, START, TrainConfig(**CFG))
    with pytest.raises(ValueError, match="nothing to train"):
        run_training(store, date(2030, 1, 1), date(2030, 1, 2), TrainConfig(**CFG))
    with pytest.raises(FileNotFoundError, match="no trained"):
        load_models(store, "exp")


def test_labels_bad_input(tmp_path):
    with pytest.raises(LabelError, match="not found"):
        read_intervals(tmp_path / "nope.parquet")
    (tmp_path / "garbage.parquet").write_bytes(b"\x00not parquet at all")
    with pytest.raises(LabelError, match="garbage.parquet: not a readable parquet"):
        read_intervals(tmp_path / "garbage.parquet")
    pq.write_table(pa.table({"host": ["a"]}), tmp_path / "cols.parquet")
    with pytest.raises(LabelError, match="missing column"):
        read_intervals(tmp_path / "cols.parquet")
    t = pa.table({
        "node": ["node0000", "../../etc", "node0001", "node0001", "ghost", "node0000"],
        "start": ["2026-01-01T01:00Z", "2026-01-01T01:00Z", "2026-01-01T03:00Z", "2026-01-01T03:00Z", "2026-01-01T01:00Z",
                  "garbage"],
        "end": ["2026-01-01T01:30Z", "2026-01-01T02:00Z", "2026-01-01T02:00Z", "2026-01-01T02:00Z", "2026-01-01T02:00Z",
                "2026-01-01T02:00Z"],
    })
    pq.write_table(t, tmp_path / "l.parquet")
    rep = LabelReport()
    iv = read_intervals(tmp_path / "l.parquet", rep)
    reasons = {(r["row"], r["reason"]) for r in rep.rejected}
    assert reasons == {(1, "invalid node name"), (2, "end before start"), (5, "unparseable start/end")}
    assert rep.duplicates == 1 and rep.rows == 6
    times = np.datetime64("2026-01-01T00:00", "ns") + np.arange(8) * np.timedelta64(15, "m")
    y = label_grid(iv, ["node0000", "node0001"], times, np.timedelta64(15, "m"), rep)
    assert rep.unknown_node == 1 and rep.used == 1
    assert np.flatnonzero(y[0]).tolist() == [4, 5] and not y[1].any()
    # every input row is accounted for
    assert rep.rows == len(rep.rejected) + rep.duplicates + rep.used + rep.unknown_node + rep.outside_period
