"""``nodewatch checkpoint tables --predictor``: the "with predictor" column and its bad-input corpus."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import UserError, app
from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.models.predict.ensemble import LeadTimeEnsemble
from nodewatch.tasks.checkpoint.compute import CkptCost, compute_table, default_shape_grid
from nodewatch.tasks.checkpoint.predictor import parse_predictor, predictor_frame, predictor_summary
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.predict import registry

runner = CliRunner()


def _tables(st: str, *extra: str):  # noqa: ANN202
    # --no-grid with no jobs has no shapes: use the grid but only one cost to keep it quick
    args = ["--store", st, "checkpoint", "tables", "--mtbf-node", "5y", "--ckpt-cost", "6m", "--no-prefect", *extra]
    return runner.invoke(app, args)


def test_with_predictor_column_json(tmp_path) -> None:
    r = _tables(str(tmp_path / "s"), "--predictor", "r=0.7,p=0.9,cp=2m", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    pred = doc["predictor"]
    assert pred["label"] == "r=0.7,p=0.9"
    (s,) = pred["summary"]
    assert s["cells"] == 112 and s["pays_in"] == 112 and s["mean_saving_vs_daly_pct"] > 10
    row = pred["rows"][0]
    assert row["proactive_cost_h"] == pytest.approx(2 / 60)
    assert row["predictor_cost_h"] < row["daly_cost_h"]


def test_with_predictor_text_says_where_it_does_not_pay(tmp_path) -> None:
    r = _tables(str(tmp_path / "s"), "--predictor", "r=0.7,p=0.01,cp=1m")
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "with predictor r=0.7,p=0.01" in out
    assert "where it does not pay: precision 0.01: false warnings outnumber true ones" in out


def test_column_is_stored_and_a_2min_warning_is_too_short_for_a_6min_checkpoint(tmp_path) -> None:
    import pandas as pd
    import xarray as xr

    st = str(tmp_path / "s")
    r = _tables(st, "--predictor", "r=0.7,p=0.9", "--json")  # proactive checkpoint = the table's 6 min
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (s,) = doc["predictor"]["summary"]
    assert s["pays_in"] == 0 and s["does_not_pay_because"].startswith("proactive checkpoint 6 min > 2-min warning")
    root = tmp_path / "s" / "tables" / "checkpoint" / doc["run_id"]
    ds = xr.open_zarr(root / "table.zarr", zarr_format=3, consolidated=False)
    assert ds["with_predictor_cost_h"].attrs["predictor"] == "r=0.7,p=0.9"
    ok = ds.checkpointable.values.astype(bool)
    daly = ds.expected_cost_h.values[..., [str(m) for m in ds.method.values].index("daly")]
    # a warning that comes too late changes nothing: the cost with predictor is Daly's, the saving 0
    np.testing.assert_allclose(ds.with_predictor_cost_h.values[ok], daly[ok])
    assert np.isnan(ds.with_predictor_cost_h.values[~ok]).all()
    assert (ds.with_predictor_pays.values[ok] == 0).all()
    rows = pd.read_parquet(root / "with_predictor.parquet")
    assert len(rows) == int(ok.sum()) == s["cells"] and (rows["lead_h"] == 2 / 60).all()
    # the same predictor with a 2-min proactive checkpoint (or a 10-min warning) pays
    r = _tables(st, "--predictor", "r=0.7,p=0.9,lead=10m", "--json")
    (s,) = json.loads(r.stdout)["predictor"]["summary"]
    assert s["pays_in"] == s["cells"]


def test_latest_uses_the_registry_and_uc(tmp_path) -> None:
    st = str(tmp_path / "s")
    r = _tables(st, "--predictor", "latest")
    assert isinstance(r.exception, UserError) and "no trained failure predictor" in str(r.exception)
    store = Store(st)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 6, 70)).astype(np.float32)
    y = np.r_[np.ones(10), np.zeros(50)].astype(np.int64)
    ens = LeadTimeEnsemble(epochs=2).fit(x, y)
    fps = [{"scheme": "lstm@6NN", "source": "nodewatch (simulator)", "tpr": 0.7448, "fpr": 4.17e-5}]
    registry.save(store, "p1", ens, None, {"step_s": 15, "fps": fps})
    r = _tables(st, "--predictor", "latest", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)["predictor"]
    assert doc["label"].startswith("latest (lstm@6NN of p1)")
    rows = doc["rows"]
    # one node: true warnings tpr / M vs false ones UC(1) / dt = fpr P(K) / 15 s (hand value 0.001695)
    (one,) = [x for x in rows if x["nodes"] == 1 and x["runtime_h"] == 24]
    true_rate = 0.7448 / (5 * 8766)
    false_rate = 4.17e-5 * (1 - 0.0000099653) / (15 / 3600)
    assert one["precision"] == pytest.approx(true_rate / (true_rate + false_rate), rel=1e-9)
    assert one["precision"] == pytest.approx(0.001695, abs=1e-6)
    assert not one["pays"]


@pytest.mark.parametrize(
    ("spec", "msg"),
    [
        ("r=0.7", "needs both r= and p="),
        ("r=1,p=0.5", "recall r must be in [0, 1)"),
        ("r=0.5,p=0", "precision p must be in (0, 1]"),
        ("r=nan,p=0.5", "recall r must be in [0, 1)"),
        ("r=x,p=0.5", "must be numbers"),
        ("r=0.5,p=0.5,cp=-1m", "duration"),
        ("r=0.5,p=0.5,cp=0m", "must be > 0"),
        ("r=0.5,r=0.6,p=0.5", "must be 'latest' or"),
        ("q=1", "must be 'latest' or"),
        ("", "must be 'latest' or"),
        ("latest,foo=1", "takes only cp="),
        ("r=0.5,p=0.5\x1b[31m", "must be numbers"),
    ],
)
def test_bad_predictor_is_one_line(tmp_path, spec: str, msg: str) -> None:
    r = _tables(str(tmp_path / "s"), "--predictor", spec)
    assert isinstance(r.exception, UserError), r.output
    assert msg in str(r.exception) and "\n" not in str(r.exception)
    assert "\x1b[31m" not in str(r.exception)


def test_frame_matches_table_daly_cost() -> None:
    ds = compute_table(default_shape_grid(nodes=(1, 64), runtimes_h=(24,)), [CkptCost.fixed(0.1)], [FailureModel("m", 5 * 8766)])
    df = predictor_frame(ds, parse_predictor("r=0.5,p=0.9"))
    daly = ds.expected_cost_h.sel({"method": "daly"}).values[:, 0, 0]
    assert np.allclose(df["daly_cost_h"].to_numpy(), daly)
    assert len(predictor_summary(df)) == 1
    # a useless predictor (recall 0) never pays; Daly's interval is a candidate, so it is never worse than Daly
    # (the 0.27 % of the 64-node row is Young's interval beating Daly's, not the predictor)
    df0 = predictor_frame(ds, parse_predictor("r=0,p=0.9"))
    assert not df0["pays"].any() and (df0["saving_vs_daly_pct"] >= 0).all()
