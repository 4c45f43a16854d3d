"""Bad inputs of the scale-out settings: ``--database``, ``NODEWATCH_DASK`` / ``--dask-address``, cluster.sh arguments.

Each is a one-line error (exit 2 for the CLI, no traceback) that never echoes a password.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodewatch.tasks.cubes.cluster import resolve

REPO = Path(__file__).resolve().parents[2]
NW = str(Path(sys.executable).with_name("nodewatch"))
SECRET = "hunter2-not-a-real-password"


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    e = {**os.environ, "NODEWATCH_WARM": "0", **env}
    return subprocess.run([NW, *args], capture_output=True, text=True, timeout=120, env=e, cwd=REPO)


@pytest.mark.parametrize("url", [
    f"postgres://u:{SECRET}@127.0.0.1/db",  # the libpq scheme, not the asyncpg driver Prefect needs
    "postgresql+asyncpg",  # truncated
    "\x1b[31mpostgresql+asyncpg://x",  # escape sequence before the scheme
])
def test_database_option_rejects_bad_urls(url):
    p = _run(["server", "start", "--port", "1", "--database", url])
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    out = p.stdout + p.stderr
    assert "Traceback" not in out and SECRET not in out and len(out.strip().splitlines()) == 1, out


def test_database_env_rejects_bad_url():
    p = _run(["server", "start", "--port", "1"], NODEWATCH_PREFECT_DATABASE=f"postgres://u:{SECRET}@h/db")
    assert p.returncode == 2 and SECRET not in p.stdout + p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("value", ["slrum", "tcp://host", "/etc/passwd", "a b:1", "tcp://h:1;rm -rf /", "x" * 10_000,
                                   "tcp://h:99999999"])
def test_dask_choice_rejects_garbage(value):
    with pytest.raises(ValueError) as err:
        resolve(value)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


@pytest.mark.parametrize("value,want", [("local", "local"), (" SLURM ", "slurm"), ("tcp://10.1.2.3:8786", "tcp://10.1.2.3:8786"),
                                        ("127.0.0.1:8786", "127.0.0.1:8786"), ("tls://[::1]:8786", "tls://[::1]:8786")])
def test_dask_choice_accepts(value, want):
    assert resolve(value) == want


def test_cubes_build_with_bad_dask_address_is_one_line(tmp_path):
    p = _run(["--store", str(tmp_path / "s"), "cubes", "build", "--start", "2026-01-01", "--end", "2026-01-01",
              "--dask-address", "slrum", "--no-prefect"])
    assert p.returncode == 2 and "Traceback" not in p.stderr and "slrum" in p.stderr, p.stderr


def test_env_dask_garbage_is_one_line(tmp_path):
    p = _run(["--store", str(tmp_path / "s"), "cubes", "build", "--start", "2026-01-01", "--end", "2026-01-01",
              "--no-prefect"], NODEWATCH_DASK="tcp://nowhere")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "NODEWATCH_DASK" in p.stderr, p.stderr


@pytest.mark.parametrize("args", [["bogus"], ["up", "s3;rm"]])
def test_cluster_script_rejects_unknown_arguments(args, tmp_path):
    e = {**os.environ, "NODEWATCH_LOCAL_DIR": str(tmp_path / "c"), "NODEWATCH_LOCAL_INSTALL": "0"}
    p = subprocess.run(["bash", str(REPO / "infra" / "local" / "cluster.sh"), *args], capture_output=True, text=True,
                       timeout=60, env=e)
    assert p.returncode == 2 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
