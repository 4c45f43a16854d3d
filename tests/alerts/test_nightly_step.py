"""Nightly step ``alerts`` (order 90, off by default): fused verdicts win over the plain ones, a real
Alertmanager receives them, the textfile is written, and it runs through the flow's step runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from alerts_support import DAY, verdict_rows, write_verdicts

from nodewatch.tasks.alerts.alertmanager import get_alerts
from nodewatch.tasks.alerts.nightly_step import STEP
from nodewatch.tasks.core.nightly_steps import StepContext, discover
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.settings import Settings


def _ctx(store, alerts: dict, shared: dict | None = None) -> StepContext:
    rec = RunRecorder(store, "nightly", {"day": DAY.isoformat()})
    return StepContext(store=store, day=DAY, settings=Settings(store=store.url, alerts=alerts), rec=rec, run_id=rec.run_id,
                       shared=shared or {})


def test_discovered_at_order_90_and_off_by_default():
    (step,) = [s for s in discover() if s.name == "alerts"]
    assert step is STEP and step.order == 90
    assert not step.enabled(Settings())
    assert step.enabled(Settings(alerts={"nightly": True}))
    assert step.enabled(Settings(alerts={"nightly": True, "typo": 1}))  # broken section: runs and fails visibly


def test_skipped_without_verdicts_or_targets(store, tmp_path):
    out = STEP.run(_ctx(store, {"nightly": True, "textfile_dir": str(tmp_path)}))
    assert out["status"] == "skipped" and "no verdicts for 2026-01-22" in out["details"]
    write_verdicts(store, DAY, verdict_rows())
    out = STEP.run(_ctx(store, {"nightly": True}))
    assert out["status"] == "skipped" and "alertmanager_url" in out["details"]


@pytest.mark.e2e
def test_fused_rows_are_pushed_and_metrics_written(store, tmp_path, alertmanager):
    write_verdicts(store, DAY, verdict_rows())
    fused = [dict(verdict_rows()[1], evidence=["syslog: vicinity 'ib link flap' score 0.93"], confidence=0.97)]
    ctx = _ctx(store, {"nightly": True, "alertmanager_url": alertmanager, "textfile_dir": str(tmp_path)},
               {"fuse": {"verdicts": fused}})
    out = STEP.run(ctx)
    assert out["status"] == "done" and out["firing"] == 1 and out["source"] == "fuse (rows)"
    (a,) = get_alerts(alertmanager)
    assert a["labels"]["node"] == "cn0048" and a["labels"]["run_id"] == ctx.run_id
    assert a["annotations"]["evidence"].startswith("syslog: vicinity 'ib link flap' score 0.93")
    assert (tmp_path / "nodewatch.prom").exists() and ctx.shared["alerts"]["firing"] == 1
    # the next night without fuse falls back to the plain verdicts (3 rows): cn0048 re-confirmed, 2 new
    out2 = STEP.run(_ctx(store, {"nightly": True, "alertmanager_url": alertmanager}))
    assert (out2["firing"], out2["resolved"], out2["source"].endswith("verdicts.parquet")) == (3, 0, True)


def test_runs_through_the_flow_step_runner(store, tmp_path, monkeypatch):
    from nodewatch.flows.nightly import _extra_steps

    write_verdicts(store, DAY, verdict_rows())
    monkeypatch.setenv("NODEWATCH_ALERTS", json.dumps({"nightly": True, "textfile_dir": str(tmp_path)}))
    rec = RunRecorder(store, "nightly", {})
    steps: dict = {}
    _extra_steps(store, DAY, None, rec, steps)
    assert steps["alerts"]["status"] == "done" and rec.manifest.outputs["alerts"]["metrics"].endswith("nodewatch.prom")
    # kind="node" for 18 nodes + kind="rack" for the 16 members
    assert Path(tmp_path, "nodewatch.prom").read_text().count("nodewatch_node_verdict{") == 34
    monkeypatch.setenv("NODEWATCH_ALERTS", json.dumps({"nightly": True, "alertmanager_url": "http://127.0.0.1:9",
                                                       "timeout_s": 2}))
    steps = {}
    _extra_steps(store, DAY, None, rec, steps)
    assert steps["alerts"]["status"] == "FAILED" and "127.0.0.1:9" in steps["alerts"]["details"]
    assert any(e.startswith("alerts: AlertmanagerError") for e in rec.manifest.errors)
