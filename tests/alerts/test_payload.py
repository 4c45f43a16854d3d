"""Verdict rows -> Alertmanager alerts, plans and drain lines, without any server (hand-checked values)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from alerts_support import DAY, verdict_rows

from nodewatch.tasks.alerts.alertmanager import identity, plan, to_alert
from nodewatch.tasks.alerts.config import AlertSettings
from nodewatch.tasks.alerts.source import confidence

NOW = datetime(2026, 1, 23, 0, 10, tzinfo=UTC)


def test_alert_labels_annotations_and_times():
    cfg = AlertSettings(severity_names={"high": "critical"}, extra_labels={"cluster": "m100"})
    a = to_alert(verdict_rows()[1], DAY, "RUN1", "http://h/r.md", cfg)
    assert a["labels"] == {"alertname": "NodewatchNodeAnomaly", "kind": "node", "severity": "critical", "run_id": "RUN1",
                           "source": "nodewatch", "node": "cn0048", "rack": "r02", "architecture": "icelake", "cluster": "m100"}
    assert a["startsAt"] == "2026-01-22T01:15:00.000Z" and a["generatorURL"] == "http://h/r.md"
    assert a["annotations"]["evidence"].splitlines()[0] == ("score 30.0 vs calibrated threshold 6.0 (robust z), "
                                                            "5 flagged window(s) 01:15-02:15 UTC")


def test_plan_hold_time_resolve_and_identity():
    cfg = AlertSettings(hold_hours=36)
    p = plan(verdict_rows(), DAY, "RUN1", "r", cfg, {"active": {}}, NOW)
    assert len(p["firing"]) == 3 and not p["resolved"]
    assert {a["endsAt"] for a in p["firing"].values()} == {"2026-01-24T12:10:00.000Z"}  # now + 36 h
    # next push without cn0005: resolved now, same labels and startsAt as sent
    p2 = plan(verdict_rows()[:2], DAY, "RUN2", "r", cfg, {"active": p["firing"]}, NOW)
    (gone,) = p2["resolved"].values()
    assert gone["labels"]["node"] == "cn0005" and gone["labels"]["run_id"] == "RUN1"
    assert gone["endsAt"] == "2026-01-23T00:10:00.000Z" and gone["startsAt"] == "2026-01-22T04:15:00.000Z"
    assert all(a["labels"]["run_id"] == "RUN1" for a in p2["firing"].values())  # persisting alerts keep their identity
    # a severity change is another alert: the old one resolves
    up = [dict(verdict_rows()[2], severity="high")]
    p3 = plan(up, DAY, "RUN3", "r", cfg, {"active": p["firing"]}, NOW)
    assert len(p3["firing"]) == 1 and len(p3["resolved"]) == 3
    lab = {"alertname": "a", "run_id": "x"}
    assert identity(lab) == identity({**lab, "run_id": "y"}) != identity({**lab, "node": "n"})


@pytest.mark.parametrize("subject", ["../etc", "cn 01", "", "a" * 200, "cn\x1b[31m1", None])
def test_hostile_or_missing_node_names_are_rejected_not_sent(subject):
    rows = [dict(verdict_rows()[1], subject=subject)]
    p = plan(rows, DAY, "R", "r", AlertSettings(), {"active": {}}, NOW)
    assert not p["firing"] and len(p["rejected"]) == 1


def test_hostile_text_is_stripped_of_control_characters_and_bounded():
    r = dict(verdict_rows()[0], subject="r\x1b[2J01\n", top_metrics=["m\x07" * 3000], evidence=["line\x1b]8;;x\x07"])
    a = to_alert(r, DAY, "R", "r", AlertSettings())
    assert a["labels"]["group"] == "r[2J01" and "\x1b" not in a["annotations"]["evidence"]
    assert len(a["annotations"]["evidence"]) <= 4000 and len(a["annotations"]["summary"]) <= 256


def test_duplicate_rows_give_one_alert_with_the_earliest_start():
    r = verdict_rows()[1]
    later = dict(r, first_time=r["first_time"].replace(hour=9))
    p = plan([later, r], DAY, "R", "r", AlertSettings(), {"active": {}}, NOW)
    (a,) = p["firing"].values()
    assert a["startsAt"] == "2026-01-22T01:15:00.000Z"


def test_confidence_from_score_and_threshold():
    assert confidence({"score": 10.0, "threshold": 6.0}) == pytest.approx(0.4)  # low severity (< 2 x)
    assert confidence({"score": 24.0, "threshold": 6.0}) == pytest.approx(0.75)  # high starts at 4 x
    assert confidence({"confidence": 1.7}) == 1.0 and confidence({"confidence": 0.3, "score": 99, "threshold": 1}) == 0.3
    assert confidence({"score": float("nan"), "threshold": 6.0, "severity": "medium"}) == 0.5
    assert confidence({"score": 0.0, "threshold": 6.0}) == 0.0


@pytest.mark.parametrize("bad", [{"alertmanager_url": "ftp://x"}, {"timeout_s": 0}, {"hold_hours": -1},
                                 {"extra_labels": {"node": "x"}}, {"extra_labels": {"bad-name": "x"}},
                                 {"extra_labels": {"__x": "y"}}, {"unknown": 1}, {"drain_policy": {"apply": "maybe"}},
                                 {"drain_policy": {"max_nodes": 0}}, {"severity_names": {"urgent": "x"}}])
def test_invalid_settings_are_one_line_errors(bad):
    from nodewatch.tasks.alerts.config import alert_settings
    from nodewatch.tasks.core.settings import Settings, SettingsError

    with pytest.raises(SettingsError) as e:
        alert_settings(Settings(alerts=bad))
    assert "\n" not in str(e.value) and str(e.value).startswith("invalid settings: alerts.")


def test_fused_table_rows():
    """A row of issue 15's fused table (telemetry_score, evidence lines, fault; no window times)."""
    row = {"day": "2026-01-22", "kind": "node", "subject": "cn0007", "severity": "high", "signals": ["telemetry", "syslog"],
           "n_signals": 2, "evidence": ["telemetry: score 30.0 / 6.0 (cpu_temp)", "syslog: vicinity score 0.91"],
           "telemetry_score": 30.0, "threshold": 6.0, "top_metrics": ["cpu_temp"], "suspected_group": "", "syslog_score": 0.91,
           "lead_min": None, "fault": "thermal", "fault_confidence": 0.8, "members": ["cn0007"], "rack": "r00",
           "architecture": "icelake"}
    a = to_alert(row, DAY, "R", "r", AlertSettings())
    ev = a["annotations"]["evidence"].splitlines()
    assert ev[:2] == row["evidence"] and ev[2] == "score 30.0 vs calibrated threshold 6.0 (robust z)"
    assert not any(x.startswith("fault:") for x in ev)  # named by the fused lines already
    assert a["startsAt"] == "2026-01-22T00:00:00.000Z" and "score 30.0" in a["annotations"]["summary"]
    assert confidence(row) == pytest.approx(0.8)
    syslog_only = dict(row, telemetry_score=float("nan"), threshold=float("nan"), evidence=["syslog: vicinity score 0.91"])
    ev2 = to_alert(syslog_only, DAY, "R", "r", AlertSettings())["annotations"]["evidence"]
    assert ev2 == "syslog: vicinity score 0.91\ntop metrics: cpu_temp"
