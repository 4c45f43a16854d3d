"""Truncated archives: every complete line before the break is staged, the partial tail quarantined.

Before :class:`nodewatch.tasks.ingest.inputs.DecompressedStream`, the reader lost what the last
decompression step held (gzip/bz2: hundreds of lines of a 200k-line log, xz: tens) and a file cut
inside its first 64 KiB reported "0 bytes after decompression"; the partial last line was not
accounted for. The reference for "recoverable" is an independent one-shot decoder
(``tests/bad_inputs/make_archives.py``: ``recoverable``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import InputError, open_binary, read_head
from nodewatch.tasks.ingest.registry import sources

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
_spec = importlib.util.spec_from_file_location("make_archives", TESTS / "bad_inputs" / "make_archives.py")
archives = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(archives)


def _log(n: int) -> bytes:
    return b"".join(
        b"2026-01-01T%02d:%02d:%02d+00:00 cn%03d kernel: event %07d with some padding text\n"
        % (i // 3600 % 24, i // 60 % 60, i % 60, i % 7 + 1, i)
        for i in range(n)
    )


def _parse(path: Path):
    fmt = {f.name: f for f in sources()["syslog"].formats}["rsyslog"]
    ctx = ParseContext(name=path.name, reference_time=datetime(2026, 1, 2, tzinfo=UTC))
    results, error = [], None
    try:
        with open_binary(path) as stream:
            results.extend(fmt.parse(stream, ctx))
    except InputError as e:
        error = str(e)
    return pa.concat_tables([r.rows for r in results]), pa.concat_tables([r.rejects for r in results]), error


@pytest.mark.parametrize("comp", archives.COMPRESSIONS)
def test_every_complete_line_before_the_break_is_parsed(tmp_path, comp):
    data = _log(150_000)
    cut = archives.truncated(data, comp, 0.6)
    ref = archives.recoverable(cut, comp)
    if ref is None:
        pytest.skip("no independent zstd decoder (zstd command) for the reference")
    n_complete = ref.count(b"\n")
    assert 1000 < n_complete < 150_000
    p = tmp_path / f"cut.log{archives.SUFFIX[comp]}"
    p.write_bytes(cut)
    rows, rej, error = _parse(p)
    assert error is not None and "truncated archive" in error and error.startswith(p.name)
    assert f"after line {n_complete}:" in error
    assert rows.column("source_offset").to_pylist() == list(range(1, n_complete + 1))
    tail = ref[ref.rfind(b"\n") + 1 :]
    assert tail  # the cut is inside a line
    assert rej.column("source_offset").to_pylist() == [n_complete + 1]
    assert rej.column("reason").to_pylist() == ["truncated archive"]
    assert rej.column("raw").to_pylist()[0].encode() == tail


@pytest.mark.parametrize("comp", archives.COMPRESSIONS)
def test_cut_inside_the_first_64_kib_is_still_detected(tmp_path, comp):
    """Format detection sees what was decompressed before the break (was: 0 bytes after decompression)."""
    data = _log(3000)
    cut = archives.truncated(data, comp, 0.5)
    p = tmp_path / f"small.log{archives.SUFFIX[comp]}"
    p.write_bytes(cut)
    head = read_head(p)
    ref = archives.recoverable(cut, comp)
    if ref is not None:
        assert head == ref[:65536]
        if ref:  # (a bz2 block is 900 kB: half of this file holds no complete block)
            assert head.startswith(data[:100])


def test_cli_stages_lines_and_names_the_truncated_archive(tmp_path):
    """``nodewatch ingest syslog cut.log.gz``: the complete lines staged, the tail quarantined with the
    reason, the summary says ``truncated archive``, exit 1 (file quarantined), no traceback."""
    data = _log(20_000)
    cut = archives.truncated(data, "gzip", 0.6)
    n_complete = archives.recoverable(cut, "gzip").count(b"\n")
    p = tmp_path / "cut.log.gz"
    p.write_bytes(cut)
    store = tmp_path / "store"
    env = dict(os.environ, COLUMNS="250")
    out = subprocess.run(
        [PY, "-m", "nodewatch.flows.cli", "--store", str(store), "ingest", "syslog", str(p), "--no-data-docs"],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert "truncated archive" in out.stdout
    (manifest,) = (store / "runs").glob("*.json")
    m = json.loads(manifest.read_text())
    (rec,) = m["inputs"]
    assert rec["status"] == "quarantined-file" and "truncated archive" in rec["message"]
    c = rec["counts"]
    assert c["rows_in"] == n_complete + 1
    assert c["staged"] + c["duplicates"] == n_complete and c["quarantined"] == 1
    q = pa.concat_tables(
        [__import__("pyarrow.parquet").parquet.read_table(f) for f in (store / "quarantine" / "syslog").rglob("*.parquet")]
    )
    assert q.column("reason").to_pylist() == ["truncated archive"]
