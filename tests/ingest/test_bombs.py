"""Decompression bombs of every compression through every parser: bounded memory, a clear reason.

Before :class:`nodewatch.tasks.ingest.inputs.DecompressedStream` and the parquet spool, a compressed
parquet was read into memory whole (``io.BytesIO(stream.read())``: 1 GB of zeros took > 1 GB RSS, 10 GB
raised ``MemoryError``), an SWF file without newlines grew one buffer without bound, and a CSV alerts
header of binary data raised ``_csv.Error`` (a traceback). The bombs are generated while compressed
(``tests/bad_inputs/make_archives.py``): 1 GiB of zeros each, a 100 MB cap set for the test; peak RSS
is measured with ``resource.getrusage`` in a subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
_spec = importlib.util.spec_from_file_location("make_archives", TESTS / "bad_inputs" / "make_archives.py")
archives = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(archives)

GIB = 1 << 30
CAP = 100_000_000
MAX_EXTRA_RSS = 250 << 20  # measured: 90-160 MiB above the process after imports
READ_THROUGH = ("alerts:nagios", "telemetry:long-parquet", "telemetry:turin-parquet")  # formats that read to the cap


def _env(**kw: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"NODEWATCH_MAX_DECOMPRESSED_BYTES": str(CAP), "NODEWATCH_MAX_COMPRESSION_RATIO": "1e9"}, **kw)
    return env


def _probe(bomb: Path, *keys: str, **env: str) -> dict:
    out = subprocess.run(
        [PY, str(Path(__file__).with_name("bomb_probe.py")), str(bomb), *keys],
        capture_output=True, text=True, env=_env(**env), timeout=300, check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]  # a traceback (MemoryError, csv.Error …) fails here
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bombs")
    return {c: archives.write_bomb(d / f"zeros.log{archives.SUFFIX[c]}", c, GIB) for c in archives.COMPRESSIONS}


@pytest.mark.parametrize("comp", archives.COMPRESSIONS)
def test_every_format_holds_under_a_zero_bomb(bombs, comp):
    """1 GiB of zeros, every source and format: one-line file errors, memory bounded, caps named."""
    res = _probe(bombs[comp])
    extra = res["peak_rss"] - res["base_rss"]
    assert extra < MAX_EXTRA_RSS, f"{comp}: peak RSS {extra >> 20} MiB above baseline"
    outcomes = res["outcomes"]
    assert len(outcomes) >= 17
    for key, msg in outcomes.items():
        assert not msg.startswith("ok"), (key, msg)  # zeros are never rows
        assert "\n" not in msg and msg.startswith(bombs[comp].name), (key, msg)
    for key in READ_THROUGH:
        assert f"decompressed size exceeds {CAP} bytes" in outcomes[key], (key, outcomes[key])


@pytest.mark.parametrize("comp", ["gzip", "zstd"])
@pytest.mark.parametrize(
    ("key", "head"),
    [
        ("syslog:rsyslog", b"2026-01-01T00:00:01+00:00 cn001 kernel: hello\n"),
        ("telemetry:long-csv", b"timestamp,node,metric,value\n2026-01-01T00:00:00Z,cn001,power,1.0\n"),
        ("jobs:sacct", b"JobID|User|Group|Partition|State|Submit|Start|End|NNodes|NodeList\n"),
    ],
)
def test_streaming_parsers_hold_after_a_valid_head(tmp_path, comp, key, head):
    """A valid first line followed by 1 GiB of zeros: streamed in bounded memory, a one-line file error."""
    bomb = archives.write_bomb(tmp_path / f"head{archives.SUFFIX[comp]}", comp, GIB, head)
    res = _probe(bomb, key)
    assert res["peak_rss"] - res["base_rss"] < MAX_EXTRA_RSS
    msg = res["outcomes"][key]
    assert msg.startswith(bomb.name) and "\n" not in msg, msg
    if key == "syslog:rsyslog":
        assert f"decompressed size exceeds {CAP} bytes" in msg


@pytest.mark.parametrize("comp", archives.COMPRESSIONS)
def test_parquet_bomb_is_spooled_and_capped(tmp_path, comp):
    """A real parquet file of 300 MiB of zeros, compressed: spooled to disk (not memory) up to the cap."""
    bomb = archives.write_parquet_bomb(tmp_path / f"t.parquet{archives.SUFFIX[comp]}", comp, 300 << 20)
    res = _probe(bomb, "telemetry:long-parquet")
    assert res["peak_rss"] - res["base_rss"] < MAX_EXTRA_RSS
    assert f"decompressed size exceeds {CAP} bytes" in res["outcomes"]["telemetry:long-parquet"]


def test_compression_ratio_limit(bombs):
    """The ratio limit (a setting) stops a bomb before the size cap does."""
    res = _probe(bombs["gzip"], "alerts:nagios", NODEWATCH_MAX_DECOMPRESSED_BYTES=str(64 << 30),
                 NODEWATCH_MAX_COMPRESSION_RATIO="100")
    msg = res["outcomes"]["alerts:nagios"]
    assert "compression ratio" in msg and "exceeds 100:1 (setting max_compression_ratio)" in msg, msg


def test_cli_quarantines_a_parquet_bomb_in_bounded_memory(tmp_path):
    """End to end (``nodewatch ingest telemetry x.parquet.zst``): the file is quarantined with the reason,
    nothing is staged, the run exits 1 without a traceback, and the whole CLI process stays bounded."""
    bomb = archives.write_parquet_bomb(tmp_path / "cn001.parquet.zst", "zstd", GIB)
    store = tmp_path / "store"
    wrapper = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(p.stdout + '\\n@@' + p.stderr + '\\n@@' + str(p.returncode) + '\\n@@' + "
        "str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))\n"
    )
    out = subprocess.run(
        [PY, "-c", wrapper, PY, "-m", "nodewatch.flows.cli", "--store", str(store), "ingest", "telemetry", str(bomb),
         "--no-data-docs"],
        capture_output=True, text=True, env=_env(COLUMNS="200"), timeout=600, check=False,
    )
    stdout, stderr, rc, rss = out.stdout.split("\n@@")
    assert int(rc) == 1, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert "decompressed size exceeds" in stdout
    assert int(rss) < 1 << 30, f"CLI peak RSS {int(rss) >> 20} MiB"
    (q,) = (store / "quarantine" / "files" / "telemetry").glob("*.json")
    assert "decompressed size exceeds" in json.loads(q.read_text())["error"]
    assert not (store / "staged" / "telemetry").exists()
