"""Helpers of the scale-out tests (conftest.py and the test modules): the test bed of ``infra/local/cluster.sh``
(PostgreSQL, S3 via moto, Slurm) and a minimal Prefect REST client.
"""

from __future__ import annotations

import os
import random
import shlex
import signal
import socket
import subprocess
import sys
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


class Api:
    """Minimal client of the Prefect REST API (what the UI calls); retries what Prefect's own client retries."""

    RETRY_STATUS = (429, 502, 503)

    def __init__(self, url: str) -> None:
        import httpx

        self.url = url
        self.http = httpx.Client(base_url=url, timeout=60)

    def _send(self, method: str, path: str, body: dict | None = None, attempts: int = 6):
        for attempt in range(attempts):
            r = self.http.request(method, path, json=body)
            if r.status_code not in self.RETRY_STATUS or attempt == attempts - 1:
                r.raise_for_status()
                return r.json()
            time.sleep(min(2 ** attempt, 10))
        raise AssertionError("unreachable")

    def get(self, path: str):
        """GET ``path`` (JSON)."""
        return self._send("GET", path)

    def post(self, path: str, body: dict):
        """POST ``body`` to ``path`` (JSON)."""
        return self._send("POST", path, body)

    def deployments(self) -> dict[str, dict]:
        """Deployments by name."""
        return {d["name"]: d for d in self.post("/deployments/filter", {})}

    def run(self, deployment: dict, parameters: dict, timeout: float = 900) -> dict:
        """Create a flow run of ``deployment`` and wait for a final state."""
        fr = self.post(f"/deployments/{deployment['id']}/create_flow_run", {"parameters": parameters})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cur = self.get(f"/flow_runs/{fr['id']}")
            if cur["state"] and cur["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                return cur
            time.sleep(2)
        raise AssertionError(f"flow run {fr['id']} of {deployment['name']} did not finish in {timeout} s")

    def artifacts(self, flow_run_id: str) -> list[dict]:
        """Artifacts of one flow run."""
        return self.post("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}})
