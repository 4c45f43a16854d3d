"""Killed runs read as ``abandoned``; unreadable manifests are one-line problems (tasks/core/runs.py, flows/cli/runs.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nodewatch.tasks.core.owner import OWNER_FILE, clean_dead_tempdirs
from nodewatch.tasks.core.runs import RunRecorder, effective_status, load_manifest
from nodewatch.tasks.core.store import Store

CHILD = """
import sys, time
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.run import new_ingestor
st = Store(sys.argv[1])
rec = RunRecorder(st, "ingest_jobs", {"paths": ["x"]})
rec.write()
ing = new_ingestor(st, "jobs", rec, check_known_nodes=False)  # creates the /tmp/nodewatch-ingest-* spool
print(rec.run_id, ing._tmp.name, flush=True)
time.sleep(120)
"""


def _cli(store: Store, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "nodewatch.flows.cli", "--store", store.url, *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def spool_root(tmp_path, monkeypatch):
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))  # this process's spool cleanup looks here
    monkeypatch.setenv("TMPDIR", str(root))  # the child's spool goes here
    return root


def _killed_run(store: Store) -> tuple[str, Path]:
    p = subprocess.Popen([sys.executable, "-c", CHILD, store.url], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    run_id, spool = p.stdout.readline().split()
    p.send_signal(signal.SIGKILL)
    p.wait()
    return run_id, Path(spool)


def test_killed_run_shows_abandoned_and_next_run_cleans_up(tmp_path, spool_root):
    store = Store(str(tmp_path / "store"))
    run_id, spool = _killed_run(store)
    assert spool.parent == spool_root and (spool / OWNER_FILE).exists()
    m = load_manifest(store, run_id)
    assert m.status == "running" and m.owner and m.owner["pid"] > 0 and m.owner["start_ticks"] is not None
    assert effective_status(m) == "abandoned"

    out = _cli(store, "runs", "list")
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if run_id in line)
    assert "abandoned" in row and "running" not in row
    show = _cli(store, "runs", "show", run_id)
    assert show.returncode == 0 and "status=abandoned" in show.stdout and "abandoned: the run's process" in show.stdout

    live_dir = Path(tempfile.mkdtemp(prefix="nodewatch-ingest-live-"))
    RunRecorder(store, "ingest_jobs", {}).write()  # the next run of the flow (this process is alive)
    (live_dir / OWNER_FILE).write_text("{}")  # unreadable owner: kept
    assert clean_dead_tempdirs() == []
    m = load_manifest(store, run_id)
    assert m.status == "abandoned" and "abandoned" in m.notes and any("is gone" in e for e in m.errors)
    assert not spool.exists()  # the dead run's spool is gone
    assert live_dir.exists()


def test_live_run_stays_running(tmp_path, spool_root):
    store = Store(str(tmp_path / "store"))
    rec = RunRecorder(store, "ingest_jobs", {})
    rec.write()
    RunRecorder(store, "ingest_jobs", {}).write()
    m = load_manifest(store, rec.run_id)
    assert m.status == "running" and effective_status(m) == "running"
    legacy = m.model_copy(update={"owner": None, "run_id": "20200101T000000.000000Z-abcdef"})
    assert effective_status(legacy) == "running"  # no owner recorded: cannot tell


def test_unreadable_manifest_is_skipped_and_named(tmp_path):
    store = Store(str(tmp_path / "store"))
    good = RunRecorder(store, "build_cubes", {})
    good.write()
    good.finish()
    bad = "20990101T000000.000000Z-bad000"
    Path(store.path("runs", f"{bad}.json")).write_text('{"run_id": "' + bad + '", "flow": "ingest_jo')  # truncated
    out = _cli(store, "runs", "list")
    assert out.returncode == 0, out.stderr
    assert good.run_id in out.stdout
    assert f"skipped unreadable manifest runs/{bad}.json:" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    show = _cli(store, "runs", "show", bad)
    assert show.returncode == 2 and "Traceback" not in show.stderr
    assert len(show.stderr.strip().splitlines()) == 1 and f"unreadable manifest runs/{bad}.json" in show.stderr
    latest = _cli(store, "runs", "show", "latest")  # the newest run is the unreadable one
    assert latest.returncode == 2 and len(latest.stderr.strip().splitlines()) == 1
