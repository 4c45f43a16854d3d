"""``nodewatch alerts drain-plan``: scontrol lines, confidence cut, --apply refusal; a real drain on the
one-host Slurm of infra/local/cluster.sh (the session's ``local_cluster`` fixture starts it)."""

from __future__ import annotations

import subprocess

import pytest
from alerts_support import DAY, verdict_rows

from nodewatch.tasks.alerts.config import DrainPolicy
from nodewatch.tasks.alerts.drain import DrainRefused, apply_plan, check_policy, plan


def test_plan_lists_confident_node_verdicts_only():
    rows = verdict_rows() + [dict(verdict_rows()[1], subject="cn0049", score=12.0)]  # 1 - 6/12 = 0.5
    entries = plan(rows, DAY, "RUN1", 0.75)
    assert [e["node"] for e in entries] == ["cn0048"]  # 1 - 6/30 = 0.8; the rack alert and cn0005 (0.4) not listed
    (e,) = entries
    assert e["confidence"] == 0.8
    assert e["line"] == ('scontrol update NodeName=cn0048 State=DRAIN '
                         'Reason="nodewatch: high anomaly 2026-01-22 (ib_errors_rate) run RUN1"')
    assert e["argv"] == ["scontrol", "update", "NodeName=cn0048", "State=DRAIN",
                         "Reason=nodewatch: high anomaly 2026-01-22 (ib_errors_rate) run RUN1"]
    assert [x["node"] for x in plan(rows, DAY, None, 0.4)] == ["cn0048", "cn0049", "cn0005"]


def test_reason_cannot_break_out_of_its_quotes():
    r = dict(verdict_rows()[1], top_metrics=['a" State=RESUME Reason="x', "$(reboot)`id`;\n"])
    (e,) = plan([r], DAY, "R", 0.0)
    assert '"' not in e["reason"] and "$" not in e["reason"] and "`" not in e["reason"] and "\n" not in e["reason"]
    assert e["line"].count('"') == 2


@pytest.mark.parametrize("policy, match", [
    (None, "no drain policy"),
    (DrainPolicy(apply=False), "no drain policy"),
    (DrainPolicy(apply=True, max_nodes=1), "at most 1"),
    (DrainPolicy(apply=True, max_nodes=9, min_confidence=0.9), "below the policy"),
    (DrainPolicy(apply=True, max_nodes=9, min_confidence=0.1, scontrol="/nonexistent/scontrol"), "not found"),
])
def test_apply_is_refused_outside_the_policy(policy, match):
    rows = verdict_rows() + [dict(verdict_rows()[1], subject="cn0049")]
    entries = plan(rows, DAY, "R", 0.3)
    with pytest.raises(DrainRefused, match=match):
        apply_plan(entries, policy)


@pytest.mark.e2e
def test_apply_drains_a_node_of_the_local_slurm(local_cluster, monkeypatch):
    """The session's one-host Slurm (tests/localcluster.py starts it; skipped with the printed reason only where
    the machine cannot run it): --apply drains node n1 with the nodewatch reason, then the test resumes it."""
    local_cluster.need("slurm")
    monkeypatch.setenv("SLURM_CONF", local_cluster.env["SLURM_CONF"])

    def show() -> str:
        p = subprocess.run(["scontrol", "show", "node", "n1"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        return p.stdout

    assert "DRAIN" not in show()
    try:
        entries = plan([dict(verdict_rows()[1], subject="n1")], DAY, "RUNX", 0.75)
        check_policy(entries, DrainPolicy(apply=True, max_nodes=1))
        (res,) = apply_plan(entries, DrainPolicy(apply=True, max_nodes=1))
        assert res["ok"], res
        out = show()
        print(out)
        assert "State=IDLE+DRAIN" in out or "+DRAIN" in out, out
        assert "Reason=nodewatch: high anomaly 2026-01-22 (ib_errors_rate) run RUNX" in out, out
    finally:
        subprocess.run(["scontrol", "update", "NodeName=n1", "State=RESUME"], capture_output=True, timeout=30)
    out = show()
    print(out)
    assert "DRAIN" not in out and "nodewatch" not in out, out
