"""Scale-out test bed: the real services of ``infra/local/cluster.sh`` (PostgreSQL, S3 via moto, Slurm) for this session.

The services are started once per session under a temporary directory with free ports, by the very script
operators use (``make cluster-up``), and stopped at the end. A service the machine cannot have (not root,
no apt, no PostgreSQL binaries) makes the tests that need it skip with the script's one-line reason,
printed in the test summary (``-ra``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from scaleout_helpers import SCRIPT, LocalCluster, _port_base, read_env


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
