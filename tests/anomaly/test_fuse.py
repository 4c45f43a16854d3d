"""Fused verdicts (models/anomaly/fuse.py, tasks/anomaly/fuse.py, the ``fuse`` nightly step) with synthetic
shared inputs: every source may be absent, agreement raises the severity, group members stay in the group,
hostile names and malformed entries are dropped and counted, the table is written beside the verdicts."""

from __future__ import annotations

from datetime import date
from types import SimpleNamespace

import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.models.anomaly.fuse import Signals, fuse, raise_severity
from nodewatch.tasks.anomaly.fuse import FUSED, SCHEMA, run_fuse, signals_from_shared
from nodewatch.tasks.anomaly.verdicts import AREA, verdicts_frame
from nodewatch.tasks.core.store import Store

DAY = date(2026, 1, 23)
T0 = pd.Timestamp("2026-01-23 04:15")


def _verdict_rows() -> list[dict]:
    rack = {"kind": "rack", "subject": "r02", "severity": "medium", "score": 14.0, "threshold": 6.0,
            "first_time": T0, "last_time": T0 + pd.Timedelta(hours=3), "windows": 12, "top_metrics": ["temp_inlet"],
            "suspected_group": "rack r02", "rack": "r02", "architecture": "icelake",
            "members": [f"cn{i:04d}" for i in range(32, 36)], "model_peak": float("nan"), "vicinity_outlier": None}
    node = {"kind": "node", "subject": "cn0005", "severity": "low", "score": 7.0, "threshold": 4.5, "first_time": T0,
            "last_time": T0, "windows": 3, "top_metrics": ["mem_used", "swap"], "suspected_group": "",
            "rack": "r00", "architecture": "icelake", "members": ["cn0005"], "model_peak": 0.9, "vicinity_outlier": True}
    node2 = {**node, "subject": "cn0006", "severity": "high", "score": 30.0, "vicinity_outlier": False, "members": ["cn0006"]}
    return [rack, node, node2]


def _shared() -> dict:
    return {
        "syslog": {"abnormal": {"cn0005": {"score": 0.93, "vicinity": "rack r00", "window_end": "2026-01-23T05:00:00Z"},
                                "cn0033": {"score": 0.7, "vicinity": "rack r02", "window_end": "2026-01-23T06:00:00Z"},
                                "../etc/passwd": {"score": 1.0}, "cn0099": "not a mapping"},
                   "outages": []},
        "predict": {"warnings": {"cn0005": {"lead_min": 45.0, "confidence": 0.8, "at": "2026-01-23T05:10:00Z"}}},
        "finj": {"faults": {"cn0077": {"fault": "memeater", "confidence": 0.66}}},
    }


def test_raise_severity() -> None:
    assert raise_severity("low", 0) == "low" and raise_severity("low", 1) == "medium"
    assert raise_severity("medium", 5) == "high" and raise_severity("bogus", 1) == "medium"


def test_fuse_agreement_groups_and_absent_sources() -> None:
    sig, dropped = signals_from_shared(_shared())
    assert dropped == {"syslog": 2} and sig.available == ("telemetry", "syslog", "predict", "finj")
    rows = fuse(_verdict_rows(), sig)
    by = {(r["kind"], r["subject"]): r for r in rows}
    assert rows[0]["kind"] == "rack"  # groups first
    # cn0005: telemetry (low) + syslog + predict agree -> low raised twice = high; every source quoted
    r = by[("node", "cn0005")]
    assert r["signals"] == ["telemetry", "syslog", "predict"] and r["n_signals"] == 3 and r["severity"] == "high"
    text = "\n".join(r["evidence"])
    assert "score 7.0 / threshold 4.5" in text and "lead 45 min" in text and "score 0.93" in text
    assert "minority cluster of rack r00" in text and "silent: finj" in text
    assert rows[1]["subject"] == "cn0005"  # most agreeing sources first
    # cn0006: telemetry alone keeps its severity
    assert by[("node", "cn0006")]["severity"] == "high" and by[("node", "cn0006")]["signals"] == ["telemetry"]
    # a rack member named by syslog: one node row (telemetry agreement through the rack), the others stay in the group
    r = by[("node", "cn0033")]
    assert r["signals"] == ["telemetry", "syslog"] and any("member of the rack alert r02" in x for x in r["evidence"])
    assert ("node", "cn0032") not in by and len(by[("rack", "r02")]["members"]) == 4
    assert any("syslog: 1 of 4 members" in x for x in by[("rack", "r02")]["evidence"])
    # a fault class alone is a low row
    assert by[("node", "cn0077")]["severity"] == "low" and by[("node", "cn0077")]["fault"] == "memeater"
    # no other source: the verdicts pass through, nothing invented
    only = fuse(_verdict_rows(), Signals())
    assert {(r["kind"], r["subject"]) for r in only} == {("rack", "r02"), ("node", "cn0005"), ("node", "cn0006")}
    assert all(r["signals"] == ["telemetry"] for r in only)
    assert fuse([], Signals()) == []


@pytest.mark.parametrize("shared", [
    {}, {"syslog": None}, {"syslog": "garbage"}, {"syslog": {"abnormal": ["cn0001"]}},
    {"predict": {"warnings": {"cn0001": {"lead_min": "soon", "confidence": float("nan")}}}},
    {"finj": {"faults": {"cn\x1b[31m": {"fault": "x"}, "": {}, "cn0009": {"fault": "\x1b]8;;http://evil\x07click"}}}},
])
def test_bad_shared_inputs_never_raise(shared: dict) -> None:
    sig, _ = signals_from_shared(shared)
    rows = fuse(_verdict_rows(), sig)
    assert {r["subject"] for r in rows if r["kind"] == "node"} >= {"cn0005", "cn0006"}
    for r in rows:
        assert all("\x1b" not in x for x in r["evidence"])


def test_run_fuse_writes_beside_the_verdicts(tmp_path) -> None:
    st = Store(str(tmp_path / "store"))
    # nothing at all: skipped, nothing written
    assert run_fuse(st, DAY, {})["status"] == "skipped"
    assert not st.exists(AREA, DAY.isoformat(), FUSED)
    # only syslog, no verdicts table: the syslog rows, the page says telemetry did not run
    out = run_fuse(st, DAY, {"syslog": {"abnormal": {"cn0001": {"score": 0.5}}}})
    assert out["status"] == "done" and out["node_rows"] == 1 and out["verdicts"] is not None
    assert "no verdicts table" in (tmp_path / "store" / AREA / DAY.isoformat() / "fused_verdicts.md").read_text()
    df = verdicts_frame(DAY, _verdict_rows())
    st.write_parquet(pa.Table.from_pandas(df, preserve_index=False), AREA, DAY.isoformat(), "verdicts.parquet")
    out = run_fuse(st, DAY, _shared())
    t = pd.read_parquet(out["verdicts"])
    assert pa.Table.from_pandas(t, preserve_index=False).schema.names == SCHEMA.names
    assert out["group_rows"] == 1 and out["node_rows"] == 4 and out["multi_source"] == 2
    assert out["dropped"] == {"syslog": 2}
    md = (tmp_path / "store" / AREA / DAY.isoformat() / "fused_verdicts.md").read_text()
    assert md.startswith(f"# Fused verdicts — {DAY.isoformat()}") and "../etc/passwd" not in md
    # the rows for a later step are JSON-friendly (no NaN, lists of str)
    import json

    json.dumps(out["rows"], allow_nan=False)
    # re-running the day rewrites the same table
    again = run_fuse(st, DAY, _shared())
    assert pd.read_parquet(again["verdicts"]).equals(t)


def test_nightly_step_leaves_shared_fuse(tmp_path) -> None:
    from nodewatch.tasks.anomaly.nightly_step import STEP
    from nodewatch.tasks.core.nightly_steps import StepContext, discover

    assert STEP.name == "fuse" and STEP.order == 60 and STEP in discover()
    st = Store(str(tmp_path / "store"))
    df = verdicts_frame(DAY, _verdict_rows())
    st.write_parquet(pa.Table.from_pandas(df, preserve_index=False), AREA, DAY.isoformat(), "verdicts.parquet")
    ctx = StepContext(store=st, day=DAY, settings=SimpleNamespace(), rec=SimpleNamespace(), run_id="r1",
                      shared={"predict": {"warnings": {"cn0006": {"lead_min": 10, "confidence": 0.9, "at": "x"}}}})
    out = STEP.run(ctx)
    assert out["status"] == "done" and "sources: telemetry, predict" in out["details"]
    fz = ctx.shared["fuse"]
    assert fz["verdicts"].endswith(FUSED) and fz["sources"] == ["telemetry", "predict"]
    assert [r["subject"] for r in fz["rows"]][:2] == ["r02", "cn0006"] and fz["rows"][1]["n_signals"] == 2
    assert "rows" not in out  # the manifest gets paths and counts, not the rows
    empty = StepContext(store=Store(str(tmp_path / "empty")), day=DAY, settings=SimpleNamespace(),
                        rec=SimpleNamespace(), run_id="r2")
    assert STEP.run(empty)["status"] == "skipped" and "fuse" not in empty.shared
