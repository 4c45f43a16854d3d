"""Nightly flow pieces: inbox layout, validation accounting, ground-truth evaluation, failure model, partial runs."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.tasks.core.store import Store

DAY = date(2026, 1, 4)


def test_day_files_follow_the_inbox_layout(tmp_path):
    from nodewatch.tasks.ingest.inbox import day_files

    for rel in ("topology/topology.csv", f"telemetry/long/date={DAY}/batch-000.parquet", f"telemetry/ldms/date={DAY}/r00.csv",
                f"telemetry/long/date={DAY}/.batch-001.parquet.tmp1", f"syslog/date={DAY}/r00.log",
                f"syslog/date={DAY + timedelta(days=1)}/r00.log", f"alerts/tickets/date={DAY}/tickets.csv"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    got = {k: [Path(f).relative_to(tmp_path).as_posix() for f in v] for k, v in day_files(tmp_path, DAY).items()}
    assert got == {
        "topology": ["topology/topology.csv"],
        "telemetry": [f"telemetry/ldms/date={DAY}/r00.csv", f"telemetry/long/date={DAY}/batch-000.parquet"],
        "syslog": [f"syslog/date={DAY}/r00.log"],
        "tickets": [f"alerts/tickets/date={DAY}/tickets.csv"],
    }


def test_header_only_csv_is_empty(tmp_path):
    from nodewatch.tasks.ingest.inbox import header_only

    (tmp_path / "a.csv").write_text("ReservationName,StartTime,EndTime\n")
    (tmp_path / "b.csv").write_text("ReservationName,StartTime,EndTime\nmaint,2026-01-01T08:00:00,2026-01-01T16:00:00\n")
    (tmp_path / "c.log").write_text("one line\n")
    assert header_only(tmp_path / "a.csv") and not header_only(tmp_path / "b.csv") and not header_only(tmp_path / "c.log")


def test_simulate_day_needs_a_cluster(tmp_path):
    from nodewatch.tasks.ingest.inbox import simulate_day

    with pytest.raises(FileNotFoundError, match="demo mode needs a simulated cluster"):
        simulate_day(tmp_path)


def test_validation_accounting():
    from nodewatch.flows.nightly import _validation

    ing = {"telemetry": {"counts": {"telemetry": {"rows_in": 10, "staged": 7, "quarantined": 2, "duplicates": 1}}},
           "syslog": {"counts": {"syslog": {"rows_in": 5, "staged": 3, "quarantined": 1, "duplicates": 0}}},
           "jobs": {"status": "failed", "error": "boom"}}
    v = _validation(ing)
    assert v["tables"]["telemetry"]["staged"] == 7 and v["quarantined"] == 3
    assert not v["balanced"] and v["unbalanced"] == ["syslog"]


def test_evaluate_day_hand_computed():
    """3 scored nodes, 4 windows of 15 min. Truth: cn1 anomalous 00:20-00:40 (windows 1, 2), cn2 00:00-00:10 (window 0)."""
    from nodewatch.tasks.report.nightly import evaluate_day

    t0 = pd.Timestamp("2026-01-04", tz="UTC")
    times = [t0 + pd.Timedelta(minutes=15 * i) for i in range(4)]
    flags = pd.DataFrame({
        "node": np.repeat(["cn0", "cn1", "cn2", "cn3"], 4),
        "time": pd.DatetimeIndex(times * 4).tz_convert(None),
        "is_anomalous": [0, 1, 0, 0,   0, 1, 0, 0,   0, 0, 0, 0,   -1, -1, -1, -1],  # noqa: E241
    })
    summary = pd.DataFrame({"node": ["cn0", "cn1", "cn2", "cn3"], "status": ["scored"] * 3 + ["no-model"]})
    alerts = pd.DataFrame({"node": ["cn0", "cn1"]})
    truth = pd.DataFrame({"node": ["cn1", "cn2", "cn3"],
                          "start": [t0 + pd.Timedelta(minutes=20), t0, t0],
                          "end": [t0 + pd.Timedelta(minutes=40), t0 + pd.Timedelta(minutes=10), t0 + pd.Timedelta(hours=1)],
                          "kind": ["anomaly:cpu_hog", "precursor:mce", "anomaly:leak"]})
    ev = evaluate_day(summary, alerts, flags, truth, pd.Timedelta("15min"))
    # nodes: positives {cn1, cn2} (cn3 not scored), flagged {cn0, cn1}: TP 1
    assert (ev.nodes_scored, ev.nodes_positive, ev.nodes_flagged, ev.nodes_true_positive) == (3, 2, 2, 1)
    assert ev.node_precision == 0.5 and ev.node_recall == 0.5
    assert ev.missed_nodes == ["cn2"] and ev.false_alarm_nodes == ["cn0"]
    # windows: 12 scored; positives cn1 w1, w2 and cn2 w0 = 3; flagged cn0 w1, cn1 w1 = 2; TP = cn1 w1
    assert (ev.windows_scored, ev.windows_positive, ev.windows_flagged, ev.windows_true_positive) == (12, 3, 2, 1)
    assert ev.window_precision == 0.5 and ev.window_recall == pytest.approx(1 / 3)
    assert ev.recall_by_kind == {"anomaly:cpu_hog": 1.0, "precursor:mce": 0.0}  # cn3 was not scored


def test_failure_model_default_and_fit(tmp_path):
    from nodewatch.tasks.report.nightly import DEFAULT_FAILURE_MODEL, failure_model_for_tables

    st = Store(str(tmp_path / "s"))
    fm, info = failure_model_for_tables(st, 64)
    assert fm == DEFAULT_FAILURE_MODEL and info["failure_events"] == 0
    rng = np.random.default_rng(0)
    starts = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.cumsum(rng.exponential(10.0, 40)), unit="h")
    tbl = pa.table({"node": [f"cn{i % 64:04d}" for i in range(40)],
                    "start": pa.array(starts.as_unit("ns"), pa.timestamp("ns", tz="UTC"))})
    st.write_parquet(tbl, st.staged_key("failure_events", "2026-01-01", "t"))
    fm, info = failure_model_for_tables(st, 64)
    assert info["reason"] == "fitted" and info["failure_events"] == 40
    # system MTBF ~ 10 h (exponential draws), node MTBF = 64 x system MTBF (Frank eq. 3.14)
    assert 64 * 6 < fm.mtbf_node_h < 64 * 16


@pytest.mark.slow
def test_nightly_partial_run_then_resume(tmp_path, prefect_harness):
    """A corrupt model fails its node loudly and alone (node and file named, manifest partial, report written, the
    other nodes scored); fixing it and re-running the same day completes."""
    from nodewatch.flows.demo import bootstrap
    from nodewatch.flows.nightly import PartialRunError, nightly
    from nodewatch.tasks.anomaly.registry import run_prefix
    from nodewatch.tasks.core.runs import load_manifest

    inbox, store = tmp_path / "inbox", tmp_path / "store"
    boot = bootstrap(str(inbox), str(store), 2, 1, 10, {"n_nodes": 6, "nodes_per_rack": 3, "misconfig_rack": -1})
    st = Store(str(store))
    key = (run_prefix("ruad", boot["train"]["run_id"]), "nodes", "cn0002.safetensors")
    good = Path(st.path(*key)).read_bytes()
    st.write_bytes(b"garbage", *key)
    with pytest.raises(PartialRunError, match="cn0002"):
        nightly(demo=True, inbox=str(inbox), store=str(store), checkpoint_tables=False, states=False)
    runs = [load_manifest(st, r) for r in st.list_runs()]
    m = [r for r in runs if r.flow == "nightly"][-1]
    assert m.status == "partial" and any("cn0002.safetensors" in e for e in m.errors)
    assert m.outputs["score"]["failed_nodes"] == ["cn0002"] and m.outputs["score"]["scored"] == 5
    day = m.parameters["day"]
    report = Path(m.outputs["report"]["report"]).read_text()
    assert "cn0002" in report
    st.write_bytes(good, *key)
    m2 = nightly(day=date.fromisoformat(day), demo=True, inbox=str(inbox), store=str(store), checkpoint_tables=False,
                 states=False)
    assert m2["status"] == "completed" and m2["outputs"]["score"]["failed_nodes"] == []
    assert m2["outputs"]["score"]["scored"] == 6
    # ingest of the same files is a no-op the second time
    assert all(r["counts"].get(s, {}).get("staged", 0) == 0 for s, r in m2["outputs"]["ingest"].items()
               if s in ("telemetry", "syslog"))


def test_cli_rejects_bad_dates(tmp_path):
    from typer.testing import CliRunner

    from nodewatch.flows.cli import UserError, app

    r = CliRunner().invoke(app, ["--store", str(tmp_path), "backfill", "--start", "2026-01-05", "--end", "2026-01-01"])
    assert isinstance(r.exception, UserError) and "--end 2026-01-01 is before --start 2026-01-05" in str(r.exception)
    r = CliRunner().invoke(app, ["--store", str(tmp_path), "nightly", "--date", "2026-13-01"])
    assert isinstance(r.exception, UserError) and "is not a date" in str(r.exception)


def test_report_and_its_artifact_carry_the_syslog_section(tmp_path):
    """with_sections appends the syslog step's section once; write_report stores the same text."""
    from nodewatch.tasks.report.nightly import with_sections, write_report
    from nodewatch.tasks.syslog.report import write_section

    st = Store(tmp_path / "store")
    day = date(2026, 1, 22)
    assert with_sections(st, day, "# night\n") == "# night\n"  # no section written: unchanged
    write_section(st, day, "## Syslog\n\ncn0001 abnormal\n")
    md = with_sections(st, day, "# night\n")
    assert md == "# night\n\n## Syslog\n\ncn0001 abnormal\n"
    assert with_sections(st, day, md) == md  # appended once, not twice
    paths = write_report(st, day, md, None)
    assert Path(paths["report"]).read_text() == md
