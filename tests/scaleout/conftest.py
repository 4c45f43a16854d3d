"""Scale-out test bed: the real services of ``infra/local/cluster.sh`` (PostgreSQL, S3 via moto, Slurm) for this session.

The services are started once per session under a temporary directory with free ports, by the very script
operators use (``make cluster-up``), and stopped at the end. A service the machine cannot have (not root,
no apt, no PostgreSQL binaries) makes the tests that need it skip with the script's one-line reason,
printed in the test summary (``-ra``).
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "local" / "cluster.sh"
BIN = Path(sys.executable).parent


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_base() -> int:
    """A base port with 12 free ports above it (postgres, s3, slurmctld, slurmd n1..)."""
    for _ in range(50):
        base = random.randrange(20000, 30000)
        ok = True
        for p in range(base, base + 12):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no 12 consecutive free ports")


def stop(proc: subprocess.Popen) -> None:
    """Stop a process group started with ``start_new_session=True`` (TERM, then KILL)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def read_env(path: Path) -> dict[str, str]:
    """The ``export K=V`` lines of the env file written by cluster.sh."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            k, _, v = line[7:].partition("=")
            out[k] = shlex.split(v)[0] if v else ""
    return out


class LocalCluster:
    """The running test bed: its directory, environment (with the test secrets) and what was skipped."""

    def __init__(self, base: Path, env: dict[str, str], skipped: dict[str, str]) -> None:
        self.base, self.env, self.skipped = base, env, skipped

    def need(self, service: str) -> None:
        """Skip the calling test (with the printed reason) if ``service`` could not be started."""
        if service in self.skipped:
            pytest.skip(f"{service} unavailable on this machine: {self.skipped[service]}")

    def full_env(self, **extra: str) -> dict[str, str]:
        """``os.environ`` plus the test bed's variables plus ``extra``."""
        return {**os.environ, **self.env, **extra}

    def secrets(self) -> list[str]:
        """The generated secrets (S3 secret key, PostgreSQL password, munge key is binary and never leaves 0600)."""
        return [p.read_text().strip() for p in sorted((self.base / "secrets").iterdir()) if p.is_file()]


@pytest.fixture(scope="session")
def local_cluster() -> LocalCluster:
    """``infra/local/cluster.sh up`` in a temp dir (free ports); ``down`` at the end of the session."""
    # not under pytest's 0700 tmp root: the PostgreSQL server runs as the 'postgres' user and must reach its data dir
    base = Path(tempfile.mkdtemp(prefix="nodewatch-cluster-"))
    env = {**os.environ, "NODEWATCH_LOCAL_DIR": str(base), "NODEWATCH_LOCAL_PORT_BASE": str(_port_base()),
           "PYTHON": sys.executable}
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=900)
    skipped = {}
    for line in r.stderr.splitlines():
        if line.startswith("SKIP "):
            svc, _, reason = line[5:].partition(": ")
            skipped[svc] = reason
            print(f"\n[scaleout] {line}", file=sys.stderr)
    if r.returncode not in (0, 3) or not (base / "env").is_file():
        pytest.fail(f"infra/local/cluster.sh up failed ({r.returncode}): {r.stderr[-2000:]}")
    print(f"\n[scaleout] cluster up in {time.monotonic() - t0:.1f} s: {r.stderr.strip().splitlines()[-3:]}", file=sys.stderr)
    try:
        yield LocalCluster(base, read_env(base / "env"), skipped)
    finally:
        subprocess.run(["bash", str(SCRIPT), "down"], env=env, capture_output=True, text=True, timeout=300)
        shutil.rmtree(base, ignore_errors=True)
