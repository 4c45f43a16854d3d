"""Commands without a Prefect server run the flow's steps without Prefect (issue 16, speed of small commands).

* the same ingest through the Prefect flow (session harness: a configured API) and without Prefect
  (``--no-prefect``) stages the same rows with the same manifest counts, and prints no traceback;
* a CLI process with no server configured runs without importing ``prefect`` at all and says so in one line;
  its user errors stay one line (exit 2);
* ``nodewatch --help`` and commands that run no flow import neither prefect, GX, torch nor dask.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

CLI = [sys.executable, "-X", "importtime", "-m", "nodewatch.flows.cli"]
HEAVY = ("prefect", "great_expectations", "torch", "dask")


def _log(path: Path, lines: int = 300) -> Path:
    t0 = datetime(2026, 1, 5, tzinfo=UTC)
    rows = []
    for i in range(lines):
        ts = (t0 + timedelta(seconds=29 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        rows.append(f"<13>1 {ts} cn{i % 20 + 1:04d} sshd {100 + i % 5} - - Accepted publickey for u{i % 3} port {i}\n")
    rows.append("this line is not syslog\n")  # one quarantined row
    rows.append(rows[0])  # one duplicate
    path.write_text("".join(rows))
    return path


def _staged(store: str) -> list[tuple]:
    from nodewatch.tasks.core.store import Store

    t = Store(store).read_staged("syslog").to_pandas()
    cols = sorted(c for c in t.columns if "run" not in c and "ingest" not in c)
    return sorted(map(tuple, t[cols].astype(str).itertuples(index=False)))


def _manifest(store: str) -> dict:
    from nodewatch.tasks.core.store import Store

    st = Store(store)
    (run_id,) = st.list_runs()
    return st.read_json("runs", f"{run_id}.json")


@pytest.mark.slow
def test_without_prefect_same_rows_and_counts_as_the_flow(prefect_harness, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from nodewatch.flows.cli import app

    log = _log(tmp_path / "s.log")
    runner = CliRunner()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ra = runner.invoke(app, ["--store", a, "ingest", "syslog", str(log), "--no-data-docs"])  # harness: Prefect
    rb = runner.invoke(app, ["--store", b, "ingest", "syslog", str(log), "--no-data-docs", "--no-prefect"])
    assert ra.exit_code == 0 and rb.exit_code == 0, (ra.output, rb.output)
    for r in (ra, rb):
        assert "Traceback" not in r.output and r.exception is None
    assert "ran without Prefect" not in ra.output  # a configured API (the harness): the Prefect flow ran
    note = [ln for ln in rb.output.splitlines() if "ran without Prefect (--no-prefect)" in ln]
    assert len(note) == 1, rb.output
    ma, mb = _manifest(a), _manifest(b)
    assert ma["flow"] == mb["flow"] == "ingest_syslog" and ma["status"] == mb["status"] == "completed"  # one scheme
    assert ma["counts"] == mb["counts"]
    c = mb["counts"]["syslog"]
    assert c["quarantined"] >= 1 and c["duplicates"] >= 1 and c["rows_in"] == c["staged"] + c["quarantined"] + c["duplicates"]
    assert [(i["status"], i["counts"]) for i in ma["inputs"]] == [(i["status"], i["counts"]) for i in mb["inputs"]]
    assert set(ma["timings"]) == set(mb["timings"])
    assert _staged(a) == _staged(b) and len(_staged(a)) == c["staged"]
    art = Path(b) / "runs" / "artifacts" / mb["run_id"] / "ingest-syslog-summary.md"
    assert art.is_file() and "| syslog |" in art.read_text()


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), COLUMNS="200")
    return env


def _imported(stderr: str) -> set[str]:
    """Top-level packages in ``-X importtime`` output."""
    return {ln.split("|")[-1].strip().split(".")[0] for ln in stderr.splitlines() if ln.startswith("import time:")}


@pytest.mark.slow
def test_no_server_configured_runs_without_prefect(tmp_path: Path) -> None:
    log = _log(tmp_path / "s.log")
    env = _env(tmp_path)
    p = subprocess.run([*CLI, "--store", "st", "ingest", "syslog", str(log)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "Traceback" not in out
    assert "prefect" not in _imported(p.stderr)  # no temporary server, not even the import
    notes = [ln for ln in p.stderr.splitlines() if ln.startswith("ran without Prefect (no server configured)")]
    assert len(notes) == 1, p.stderr
    m = _manifest(str(tmp_path / "st"))
    c = m["counts"]["syslog"]
    assert m["status"] == "completed" and c["rows_in"] == c["staged"] + c["quarantined"] + c["duplicates"] == 302
    # a user error in this mode: one line, exit 2, no traceback
    p = subprocess.run([*CLI, "--store", "st", "ingest", "syslog", "typo.log"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if not ln.startswith("import time:")]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and "typo.log" in lines[0], lines


@pytest.mark.parametrize("args", [["--help"], ["ingest", "syslog", "--help"], ["runs", "list"],
                                  ["checkpoint", "interval", "--nodes", "64", "--hours", "24", "--ckpt-cost", "10m",
                                   "--mtbf-node", "5y"]])
def test_commands_without_a_flow_import_no_heavy_package(tmp_path: Path, args: list[str]) -> None:
    p = subprocess.run([*CLI, "--store", str(tmp_path / "st"), *args], cwd=tmp_path, env=_env(tmp_path),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not set(HEAVY) & _imported(p.stderr), sorted(set(HEAVY) & _imported(p.stderr))
