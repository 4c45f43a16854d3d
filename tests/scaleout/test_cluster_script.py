"""``infra/local/cluster.sh``: every service it started listens on 127.0.0.1 only; secrets stay owner-only; up is idempotent."""

from __future__ import annotations

import stat
import subprocess

import psutil
import pytest
from scaleout_helpers import SCRIPT

pytestmark = [pytest.mark.e2e]


def _pids(base) -> dict[str, int]:
    out = {}
    pg = base / "pg" / "data" / "postmaster.pid"
    if pg.is_file():
        out["postgres"] = int(pg.read_text().splitlines()[0])
    for name, f in (("s3", base / "s3.pid"), ("slurmctld", base / "slurm" / "slurmctld.pid")):
        if f.is_file():
            out[name] = int(f.read_text().split()[0])
    for f in sorted((base / "slurm").glob("slurmd-*.pid")):
        out[f.stem] = int(f.read_text().split()[0])
    return out


def test_services_listen_on_loopback_only(local_cluster):
    pids = _pids(local_cluster.base)
    assert pids, "no service was started"
    listening: dict[str, list[str]] = {}
    for c in psutil.net_connections(kind="inet"):
        if c.status != psutil.CONN_LISTEN or c.pid is None:
            continue
        for name, pid in pids.items():
            try:
                family = {pid} | {p.pid for p in psutil.Process(pid).children(recursive=True)}
            except psutil.NoSuchProcess:
                continue
            if c.pid in family:
                listening.setdefault(name, []).append(c.laddr.ip)
    for name in pids:
        assert listening.get(name), f"{name} listens nowhere"
    assert {ip for ips in listening.values() for ip in ips} == {"127.0.0.1"}, listening


def test_secrets_are_owner_only_and_up_is_idempotent(local_cluster):
    base = local_cluster.base
    assert stat.S_IMODE((base / "env").stat().st_mode) == 0o600
    assert stat.S_IMODE((base / "secrets").stat().st_mode) == 0o700
    before = _pids(base)
    env = {"NODEWATCH_LOCAL_DIR": str(base), "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}
    import os
    import sys

    port_base = local_cluster.env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]
    env.update(NODEWATCH_LOCAL_PORT_BASE=str(int(port_base) - 1), PYTHON=sys.executable, HOME=os.environ.get("HOME", "/root"))
    r = subprocess.run(["bash", str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 3), r.stderr[-2000:]
    assert _pids(base) == before  # nothing restarted, nothing doubled
    assert local_cluster.env["AWS_SECRET_ACCESS_KEY"] not in r.stdout + r.stderr
