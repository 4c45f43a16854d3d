"""Nightly step ``finj`` end to end on a store: synthetic 1-s LDMS telemetry through the product's ingest,
a classifier trained on the staged data (``--source staged``), a verdicts table flagging one node."""

from __future__ import annotations

import csv
import json
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nodewatch.tasks.core.nightly_steps import StepContext
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.settings import load_settings
from nodewatch.tasks.core.store import Store

DAY = date(2026, 3, 4)
T0 = int(datetime(2026, 3, 4, 1, 0, tzinfo=UTC).timestamp())
PERIOD = 300


def _campaign(tmp: Path, node: str, n: int, seed: int) -> Path:
    """An LDMS catalogue CSV (1-s samples) where 'leak' periods (every other 300 s) eat memory, and its events."""
    rng = np.random.default_rng(seed)
    c = tmp / f"campaign-{node}"
    (c / "ldms").mkdir(parents=True)
    leak = (np.arange(n) // PERIOD) % 2 == 1
    used = np.cumsum(np.where(leak, 16 * 2**20, 0)) % (8 * 2**30) + 2 * 2**30 + rng.normal(0, 2**20, n)
    user = 50 + rng.normal(0, 5, n)
    ctx = np.cumsum(rng.integers(900, 1100, n))
    with open(c / "ldms" / f"{node}.csv", "w") as fh:
        fh.write("#Time,Time_usec,ProducerName,component_id,job_id,cpu0_user,mem_used,mem_free,ctx_switches\n")
        for i in range(n):
            fh.write(f"{T0 + i},0,{node},0,0,{user[i]:.3f},{used[i]:.0f},{16 * 2**30 - used[i]:.0f},{ctx[i]}\n")
    with open(c / "events.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time", "event", "seq", "is_fault", "program", "low", "cores", "pid", "status", "detail"])
        for k, s in enumerate(range(PERIOD, n, 2 * PERIOD)):
            w.writerow([T0 + s, "start", k, True, "leak", False, "0", 1, "", ""])
            w.writerow([T0 + min(n, s + PERIOD), "end", k, True, "leak", False, "0", 1, "ok", ""])
    (c / "summary.json").write_text(json.dumps({"node": node, "started": T0, "ended": T0 + n}))
    return c


def _ingest(store: Store, path: Path) -> None:
    from nodewatch.tasks.ingest.pipeline import ingest_files
    from nodewatch.tasks.ingest.registry import sources

    rec = RunRecorder(store, "ingest", {})
    ingest_files(store, sources()["telemetry"], [path], rec, data_docs=False)
    rec.finish()


@pytest.mark.slow
def test_nightly_step_names_the_fault_of_a_flagged_node(tmp_path: Path) -> None:
    from nodewatch.models.finj.classify import folds as cv_folds
    from nodewatch.tasks.finj.nightly_step import STEP
    from nodewatch.tasks.finj.train import load_model, train

    store = Store(str(tmp_path / "store"))
    camp = _campaign(tmp_path, "cn01", 2400, 1)
    _ingest(store, camp / "ldms" / "cn01.csv")
    res = train([camp], store, models=("rf",), source="staged", rf_variants=False)  # mode/time CV only
    assert res["source"] == "staged" and load_model(store).meta["source"] == "staged"
    assert [(e["model"], e["labels"], e["order"]) for e in res["experiments"]] == [("rf", "mode", "time")]
    rf = res["experiments"][0]
    # per time-ordered fold: 5 contiguous folds covering every window; the majority baseline is the healthy share
    assert [f["windows"] for f in rf["folds"]] == [len(te) for _, te in cv_folds(res["windows"], 5)]
    healthy = sum(f["majority_accuracy"] * f["windows"] for f in rf["folds"]) / res["windows"]
    assert healthy == pytest.approx(res["class_counts"]["healthy"] / res["windows"])
    assert all(0 <= f["accuracy"] <= 1 and 0 <= f["healthy_f1"] <= 1 for f in rf["folds"])
    assert "## Per time-ordered fold: rf, mode labels" in res["report"]
    assert rf["weighted"] > 0.8  # memory eaten at 16 MiB/s is easy to see
    # the flagged node's stretch is a leak period: [T0+900, T0+1200)
    verdicts = pd.DataFrame(
        {
            "day": [DAY.isoformat()] * 2,
            "kind": ["node", "node"],
            "subject": ["cn01", "cn09"],
            "severity": ["high"] * 2,
            "score": [9.0, 8.0],
            "first_time": pd.to_datetime([T0 + 960, T0 + 960], unit="s", utc=True),
            "last_time": pd.to_datetime([T0 + 1190, T0 + 1190], unit="s", utc=True),
        }
    )
    import pyarrow as pa

    store.write_parquet(pa.Table.from_pandas(verdicts), "reports", DAY.isoformat(), "verdicts.parquet")
    settings = load_settings(None, store=str(tmp_path / "store"))
    rec = RunRecorder(store, "nightly", {})
    ctx = StepContext(store=store, day=DAY, settings=settings, rec=rec, run_id=rec.run_id)
    assert STEP.enabled(settings) and STEP.order == 30
    out = STEP.run(ctx)
    assert out["status"] == "ok", out
    faults = ctx.shared["finj"]["faults"]
    assert faults["cn01"]["fault"] == "leak" and faults["cn01"]["confidence"] >= 0.5
    assert "cn09" not in faults  # no telemetry: listed with the reason, no fault class
    rows = {r["node"]: r for r in store.read_json("reports", DAY.isoformat(), "finj_faults.json")["nodes"]}
    assert rows["cn09"]["fault"] is None and "no staged telemetry" in rows["cn09"]["reason"]


def test_nightly_step_skips_without_inputs(tmp_path: Path) -> None:
    from nodewatch.tasks.finj.nightly_step import STEP

    store = Store(str(tmp_path / "store"))
    settings = load_settings(None, store=str(tmp_path / "store"))
    rec = RunRecorder(store, "nightly", {})
    ctx = StepContext(store=store, day=DAY, settings=settings, rec=rec, run_id=rec.run_id)
    assert STEP.run(ctx)["status"] == "skipped"  # no verdicts table
    import pyarrow as pa

    df = pd.DataFrame(
        {
            "kind": ["node"],
            "subject": ["cn01"],
            "first_time": [pd.Timestamp(T0, unit="s", tz="UTC")],
            "last_time": [pd.Timestamp(T0 + 600, unit="s", tz="UTC")],
        }
    )
    store.write_parquet(pa.Table.from_pandas(df), "reports", DAY.isoformat(), "verdicts.parquet")
    out = STEP.run(ctx)
    assert out["status"] == "skipped" and "no fault classifier" in out["details"]


def test_settings_section_rejects_unknown_keys() -> None:
    from nodewatch.tasks.core.settings import SettingsError
    from nodewatch.tasks.finj.config import finj_settings

    s = load_settings(None)
    s.finj = {"min_confidence": 2}
    with pytest.raises(SettingsError, match="finj.min_confidence"):
        finj_settings(s)
    s.finj = {"bogus": 1}
    with pytest.raises(SettingsError, match="finj.bogus"):
        finj_settings(s)
