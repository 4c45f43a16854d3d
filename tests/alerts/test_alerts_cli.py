"""``nodewatch alerts …`` from the command line: results, and the bad-input corpus (every argument: garbage,
out of range, hostile, missing, truncated or damaged tables) as one-line errors, exit code 2, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from alerts_support import DAY, verdict_rows, write_verdicts

from nodewatch.tasks.alerts.alertmanager import get_alerts


def _run(capsys, monkeypatch, store, *args: str, env: dict | None = None) -> tuple[int, str, str]:
    """Run the real entry point (``nodewatch.flows.cli.main``) in-process."""
    from nodewatch.flows.cli import main

    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sys, "argv", ["nodewatch", "--store", str(store), *args])
    monkeypatch.setenv("COLUMNS", "250")
    code = 0
    try:
        main()
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line(code: int, out: str, err: str) -> str:
    text = (out + err).strip()
    assert code == 2, text
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    return text


@pytest.fixture
def vstore(store):
    write_verdicts(store, DAY, verdict_rows(), run_id="20260123T000500.000000Z-aaaaaa")
    return Path(store.root)


@pytest.mark.e2e
def test_push_json_and_dry_run(capsys, monkeypatch, vstore, alertmanager):
    code, out, _ = _run(capsys, monkeypatch, vstore, "alerts", "push", "--dry-run")
    payload = json.loads(out)
    assert code == 0 and len(payload) == 3 and get_alerts(alertmanager) == []  # dry run sends nothing
    assert {a["labels"]["run_id"] for a in payload} == {"20260123T000500.000000Z-aaaaaa"}  # from the nightly manifest
    code, out, _ = _run(capsys, monkeypatch, vstore, "alerts", "push", "--url", alertmanager, "--json")
    res = json.loads(out)
    assert code == 0 and (res["firing"], res["resolved"], res["sent"]) == (3, 0, True)
    assert len(get_alerts(alertmanager)) == 3
    m = json.loads((vstore / "runs" / f"{res['push_run']}.json").read_text())  # the push has its manifest
    assert m["flow"] == "alerts_push" and m["outputs"]["alerts"]["firing"] == 3


def test_drain_plan_and_metrics_commands(capsys, monkeypatch, vstore, tmp_path):
    code, out, _ = _run(capsys, monkeypatch, vstore, "alerts", "drain-plan")
    assert code == 0 and out.splitlines() == [
        'scontrol update NodeName=cn0048 State=DRAIN Reason="nodewatch: high anomaly 2026-01-22 (ib_errors_rate) '
        'run 20260123T000500.000000Z-aaaaaa"']
    code, out, _ = _run(capsys, monkeypatch, vstore, "alerts", "drain-plan", "--json", "--min-confidence", "0.3")
    assert code == 0 and [n["node"] for n in json.loads(out)["nodes"]] == ["cn0048", "cn0005"]
    code, out, _ = _run(capsys, monkeypatch, vstore, "alerts", "metrics", "--dir", str(tmp_path), "--json")
    assert code == 0 and json.loads(out)["path"] == str(tmp_path / "nodewatch.prom")


BAD = [
    (["push", "--day", "2026-13-01", "--dry-run"], "invalid --day"),
    (["push", "--day", "yesterday\x1b[2J", "--dry-run"], "invalid --day"),
    (["push", "--day", "2026-01-21", "--dry-run"], "no verdicts for 2026-01-21"),
    (["push"], "no Alertmanager URL"),
    (["push", "--url", "ftp://127.0.0.1:9093"], "must start with http"),
    (["push", "--url", "http://127.0.0.1:9"], "alertmanager http://127.0.0.1:9"),
    (["push", "--dry-run", "--run-id", "../../etc/passwd"], "run id"),
    (["push", "--dry-run", "--run-id", ""], "run id"),
    (["metrics"], "no textfile directory"),
    (["metrics", "--dir", "/nonexistent/dir"], "No such file"),
    (["metrics", "--dir", "/etc/passwd"], "not a directory"),
    (["drain-plan", "--min-confidence", "1.5"], "between 0 and 1"),
    (["drain-plan", "--min-confidence", "nan"], "between 0 and 1"),
    (["drain-plan", "--apply"], "--apply refused: no drain policy"),
]


@pytest.mark.parametrize("args, match", BAD, ids=[" ".join(a)[:40] for a, _ in BAD])
def test_bad_arguments_are_one_line_errors(capsys, monkeypatch, vstore, args, match):
    text = _one_line(*_run(capsys, monkeypatch, vstore, "alerts", *args, env={"NODEWATCH_ALERTS": '{"timeout_s": 2}'}))
    assert match in text and "\x1b" not in text


def test_apply_refused_by_policy_limits(capsys, monkeypatch, vstore):
    env = {"NODEWATCH_ALERTS": json.dumps({"drain_policy": {"apply": True, "max_nodes": 1}})}
    text = _one_line(*_run(capsys, monkeypatch, vstore, "alerts", "drain-plan", "--apply", "--min-confidence", "0.3", env=env))
    assert "drains 2 nodes, the policy allows at most 1; nothing was run" in text
    env = {"NODEWATCH_ALERTS": '{"drain_policy": {"apply": "yes please"}}'}
    assert "alerts.drain_policy.apply" in _one_line(*_run(capsys, monkeypatch, vstore, "alerts", "drain-plan", env=env))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not_verdicts", "empty_store", "hostile_names", "duplicates"])
def test_damaged_or_hostile_verdicts(capsys, monkeypatch, store, damage):
    import pandas as pd

    write_verdicts(store, DAY, verdict_rows())
    p = Path(store.root) / "reports" / DAY.isoformat() / "verdicts.parquet"
    if damage == "truncated":
        p.write_bytes(p.read_bytes()[:300])
    elif damage == "garbage":
        p.write_bytes(b"\xff\xfe not parquet \x00" * 10)
    elif damage == "not_verdicts":
        pd.DataFrame({"x": [1]}).to_parquet(p)
    elif damage == "empty_store":
        p.unlink()
        text = _one_line(*_run(capsys, monkeypatch, store.root, "alerts", "push", "--dry-run"))
        assert "no verdicts in" in text
        return
    elif damage == "hostile_names":
        rows = [dict(r, subject=s) for r, s in zip(verdict_rows()[1:], ["../../x\x1b[31m", "cn0001"], strict=True)]
        write_verdicts(store, DAY, rows)
        code, out, _ = _run(capsys, monkeypatch, store.root, "alerts", "push", "--dry-run", "--json")
        res = json.loads(out)
        assert code == 0 and res["firing"] == 1 and len(res["rejected"]) == 1 and "\x1b" not in out
        code, out, _ = _run(capsys, monkeypatch, store.root, "alerts", "drain-plan", "--min-confidence", "0")
        assert code == 0 and "../" not in out and out.count("scontrol") == 1
        return
    elif damage == "duplicates":
        write_verdicts(store, DAY, verdict_rows() + verdict_rows())
        code, out, _ = _run(capsys, monkeypatch, store.root, "alerts", "push", "--dry-run", "--json")
        assert code == 0 and json.loads(out)["firing"] == 3
        return
    text = _one_line(*_run(capsys, monkeypatch, store.root, "alerts", "push", "--dry-run"))
    assert "verdicts" in text


def test_real_entry_point_one_line_error(tmp_path):
    """The installed console script, once: a usage error is one line on stderr, exit 2."""
    p = subprocess.run([sys.executable, "-m", "nodewatch.flows.cli", "--store", str(tmp_path), "alerts", "drain-plan",
                        "--day", "bogus"], capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="250"))
    assert p.returncode == 2 and p.stderr.strip() == "error: invalid --day 'bogus': use YYYY-MM-DD" and p.stdout == ""
