"""``nodewatch alerts push`` against a real Alertmanager (Debian's prometheus-alertmanager) on 127.0.0.1.

Alerts are read back from its v2 API; notifications are counted by a webhook receiver, so "idempotent"
means no second notification, and "resolved" means Alertmanager itself says so.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime

import pytest
from alerts_support import DAY, verdict_rows, write_verdicts

from nodewatch.tasks.alerts.alertmanager import AlertmanagerError, get_alerts, load_state, post, push
from nodewatch.tasks.alerts.config import AlertSettings
from nodewatch.tasks.alerts.source import read_rows


def _by_subject(alerts):
    return {a["labels"].get("node") or a["labels"]["group"]: a for a in alerts}


def _wait(cond, timeout=15.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.e2e
def test_push_reads_back_reconfirms_without_renotifying_and_resolves(store, alertmanager, webhook):
    cfg = AlertSettings(alertmanager_url=alertmanager, report_base_url="http://127.0.0.1:4200/nodewatch")
    write_verdicts(store, DAY, verdict_rows(), run_id="20260123T000500.000000Z-aaaaaa")
    rows, _ = read_rows(store, DAY)
    out = push(store, DAY, rows, "20260123T000500.000000Z-aaaaaa", cfg)
    assert (out["firing"], out["resolved"], out["sent"]) == (3, 0, True)

    got = _by_subject(get_alerts(alertmanager))
    assert set(got) == {"r01", "cn0048", "cn0005"}
    node = got["cn0048"]
    assert node["labels"] == {"alertname": "NodewatchNodeAnomaly", "node": "cn0048", "rack": "r02", "severity": "high",
                              "kind": "node", "run_id": "20260123T000500.000000Z-aaaaaa", "source": "nodewatch",
                              "architecture": "icelake"}
    assert node["startsAt"].startswith("2026-01-22T01:15:00")
    assert node["status"]["state"] == "active"
    ann = node["annotations"]
    assert ann["report"] == "http://127.0.0.1:4200/nodewatch/reports/2026-01-22/verdicts.md"
    assert "cn0048: high node anomaly on 2026-01-22" in ann["summary"]
    assert "score 30.0 vs calibrated threshold 6.0" in ann["evidence"] and "ib_errors_rate" in ann["evidence"]
    assert "minority cluster" in ann["evidence"] and "0.92" in ann["evidence"]
    rack = got["r01"]
    assert rack["labels"]["alertname"] == "NodewatchRackAnomaly" and rack["labels"]["rack"] == "r01"
    assert "node" not in rack["labels"] and "16 member node(s): cn0017" in rack["annotations"]["evidence"]
    assert got["cn0005"]["labels"]["severity"] == "low" and "job 4711" in got["cn0005"]["annotations"]["evidence"]

    assert _wait(lambda: sum(len(n["alerts"]) for n in webhook.received) >= 3)
    time.sleep(3)  # > group_wait + 2 x group_interval: a re-push would be notified by now
    sent_before = len(webhook.received)
    fps = {a["fingerprint"] for a in get_alerts(alertmanager)}

    again = push(store, DAY, rows, "20260123T000500.000000Z-aaaaaa", cfg)  # re-run: same labels, same startsAt
    assert (again["firing"], again["resolved"]) == (3, 0)
    time.sleep(3)
    after = get_alerts(alertmanager)
    assert {a["fingerprint"] for a in after} == fps and len(after) == 3
    assert len(webhook.received) == sent_before, "a re-push must not notify again"

    # next night: cn0005's verdict is gone, cn0048 persists (new run), cn0100 is new
    nxt = date(2026, 1, 23)
    rows2 = [dict(r, first_time=r["first_time"] + (datetime(2026, 1, 23) - datetime(2026, 1, 22))) for r in verdict_rows()[:2]]
    rows2.append(dict(rows2[1], subject="cn0100", members=["cn0100"], rack="r06"))
    write_verdicts(store, nxt, rows2, run_id="20260124T000500.000000Z-bbbbbb")
    out2 = push(store, nxt, read_rows(store, nxt)[0], "20260124T000500.000000Z-bbbbbb", cfg)
    assert (out2["firing"], out2["resolved"]) == (3, 1)
    now = _by_subject(get_alerts(alertmanager))
    assert set(now) == {"r01", "cn0048", "cn0100"}, "the vanished verdict's alert is resolved"
    assert now["cn0048"]["labels"]["run_id"] == "20260123T000500.000000Z-aaaaaa", "a persisting alert keeps its identity"
    assert now["cn0048"]["startsAt"].startswith("2026-01-22T01:15:00")
    assert now["cn0048"]["annotations"]["confirmed_by"] == "20260124T000500.000000Z-bbbbbb"
    assert now["cn0100"]["labels"]["run_id"] == "20260124T000500.000000Z-bbbbbb"
    assert _wait(lambda: any(a["status"] == "resolved" and a["labels"].get("node") == "cn0005"
                             for n in webhook.received for a in n["alerts"])), "Alertmanager notifies the resolve"
    state = load_state(store)
    assert state["day"] == "2026-01-23" and len(state["active"]) == 3


@pytest.mark.e2e
def test_alertmanager_down_or_refusing_changes_nothing(store, alertmanager):
    write_verdicts(store, DAY, verdict_rows())
    rows, _ = read_rows(store, DAY)
    dead = AlertSettings(alertmanager_url="http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(AlertmanagerError, match="127.0.0.1:9"):
        push(store, DAY, rows, "r1", dead)
    assert load_state(store) == {"active": {}}
    # a verdict dated ahead of the clock (skew) still fires: startsAt is clamped to now
    cfg = AlertSettings(alertmanager_url=alertmanager)
    out = push(store, DAY, rows[1:2], "r1", cfg, now=datetime(2026, 1, 1, tzinfo=UTC))
    assert out["sent"] and out["payload"][0]["startsAt"] <= out["payload"][0]["endsAt"]
    # what Alertmanager refuses is one line naming it, and the state is not touched
    before = load_state(store)
    with pytest.raises(AlertmanagerError, match="refused the alerts: HTTP 400"):
        post(alertmanager, [{"labels": {"alertname": "x"}, "startsAt": "2026-01-02T00:00:00Z",
                             "endsAt": "2026-01-01T00:00:00Z"}], 5)
    assert load_state(store) == before


def test_older_day_is_refused_unless_asked(store, alertmanager):
    from nodewatch.tasks.alerts.alertmanager import OlderDayError

    cfg = AlertSettings(alertmanager_url=alertmanager)
    write_verdicts(store, date(2026, 1, 23), verdict_rows())
    push(store, date(2026, 1, 23), read_rows(store, date(2026, 1, 23))[0], "r2", cfg)
    write_verdicts(store, DAY, verdict_rows())
    with pytest.raises(OlderDayError, match="--allow-older"):
        push(store, DAY, read_rows(store, DAY)[0], "r1", cfg)
    push(store, DAY, read_rows(store, DAY)[0], "r1", cfg, allow_older=True)
