"""``--format``: validated before anything lands; a forced format no first line matches is a usage error;
``--reprocess`` re-reads bytes already ingested (the remedy after a misdetected format).

Before: ``--format bgl`` on an rsyslog file exited 0 with every row quarantined; an unknown ``--format``
landed the raw bytes and exited 1, and on a file already ingested was silently ignored; the same bytes
could never be read again with a corrected format (skipped as already ingested).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
LOG = b"".join(b"2026-01-01T00:00:%02d+00:00 cn001 kernel: event %d\n" % (i, i) for i in range(20))


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, "-m", "nodewatch.flows.cli", "--store", str(store), "ingest", *args, "--no-data-docs", "--no-prefect"],
        capture_output=True, text=True, env=dict(os.environ, COLUMNS="250"), timeout=300, check=False,
    )


def _one_line_error(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    text = (out.stdout + out.stderr).strip()
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    return text


def _manifests(store: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((store / "runs").glob("*.json"))]


def test_forced_format_that_does_not_match_is_a_usage_error(tmp_path):
    f = tmp_path / "a.log"
    f.write_bytes(LOG)
    store = tmp_path / "store"
    msg = _one_line_error(_cli(store, "syslog", str(f), "--format", "bgl"))
    assert "--format bgl does not match" in msg and "looks like rsyslog" in msg
    assert not (store / "raw").exists() and not (store / "runs").exists()  # nothing landed, no run


def test_unknown_format_is_refused_before_anything_lands(tmp_path):
    f = tmp_path / "a.log"
    f.write_bytes(LOG)
    store = tmp_path / "store"
    msg = _one_line_error(_cli(store, "syslog", str(f), "--format", "nope"))
    assert "unknown --format 'nope'" in msg and "rsyslog" in msg
    assert not (store / "raw").exists()
    # on a file already ingested it is refused too (was: silently ignored)
    assert _cli(store, "syslog", str(f)).returncode == 0
    _one_line_error(_cli(store, "syslog", str(f), "--format", "nope"))
    assert len(_manifests(store)) == 1


def test_reprocess_reads_already_ingested_bytes_again(tmp_path):
    f = tmp_path / "a.log"
    f.write_bytes(LOG)
    store = tmp_path / "store"
    assert _cli(store, "syslog", str(f)).returncode == 0
    again = _cli(store, "syslog", str(f), "--format", "rsyslog")  # same bytes: skipped, as documented
    assert again.returncode == 0
    assert _manifests(store)[-1]["inputs"][0]["status"] == "skipped-duplicate-file"
    out = _cli(store, "syslog", str(f), "--format", "rsyslog", "--reprocess")
    assert out.returncode == 0, out.stdout + out.stderr
    rec = _manifests(store)[-1]["inputs"][0]
    assert rec["status"] == "ingested" and rec["format"] == "rsyslog"
    assert rec["counts"]["rows_in"] == 20 and rec["counts"]["duplicates"] == 20  # never staged twice
    # the run wrote a fresh marker: without --reprocess the bytes are skipped again
    assert _cli(store, "syslog", str(f)).returncode == 0
    assert _manifests(store)[-1]["inputs"][0]["status"] == "skipped-duplicate-file"
