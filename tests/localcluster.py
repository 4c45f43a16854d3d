"""The local real cluster of ``infra/local/cluster.sh`` (PostgreSQL, S3 via moto, Slurm) for any test folder.

The root ``tests/conftest.py`` exposes :func:`local_cluster_session` as the session-scoped ``local_cluster``
fixture (pytest's prepend import mode puts ``tests/`` on ``sys.path`` for the root conftest, so this module
imports as ``localcluster``). Also: a free-port helper, a process-group ``stop()`` and a minimal Prefect REST
client shared by the e2e tests.
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
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "infra" / "local" / "cluster.sh"
BIN = Path(sys.executable).parent


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_base() -> int:
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
        """The generated secrets (S3 secret key, PostgreSQL password; the munge key is binary and never leaves 0600)."""
        return [p.read_text().strip() for p in sorted((self.base / "secrets").iterdir()) if p.is_file()]


def local_cluster_session() -> Iterator[LocalCluster]:
    """``infra/local/cluster.sh up`` in a temp dir (free ports); ``down`` at the end (body of the fixture).

    With ``NODEWATCH_TEST_LOCAL_DIR`` naming the directory of a test bed already up (``NODEWATCH_LOCAL_DIR``
    of a ``cluster.sh up``), that one is used and left running (local iteration on one test).
    """
    reuse = os.environ.get("NODEWATCH_TEST_LOCAL_DIR")
    if reuse and (Path(reuse) / "env").is_file():
        yield LocalCluster(Path(reuse), read_env(Path(reuse) / "env"), {})
        return
    # not under pytest's 0700 tmp root: the PostgreSQL server runs as the 'postgres' user and must reach its data dir
    base = Path(tempfile.mkdtemp(prefix="nodewatch-cluster-"))
    env = {**os.environ, "NODEWATCH_LOCAL_DIR": str(base), "NODEWATCH_LOCAL_PORT_BASE": str(port_base()),
           "PYTHON": sys.executable}
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=900)
    skipped = {}
    for line in r.stderr.splitlines():
        if line.startswith("SKIP "):
            svc, _, reason = line[5:].partition(": ")
            skipped[svc] = reason
            print(f"\n[local_cluster] {line}", file=sys.stderr)
    if r.returncode not in (0, 3) or not (base / "env").is_file():
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"infra/local/cluster.sh up failed ({r.returncode}): {r.stderr[-2000:]}")
    print(f"\n[local_cluster] up in {time.monotonic() - t0:.1f} s: {r.stderr.strip().splitlines()[-3:]}", file=sys.stderr)
    try:
        yield LocalCluster(base, read_env(base / "env"), skipped)
    finally:
        subprocess.run(["bash", str(SCRIPT), "down"], env=env, capture_output=True, text=True, timeout=300)
        shutil.rmtree(base, ignore_errors=True)


class Api:
    """Minimal client of the Prefect REST API (what the UI calls); retries what Prefect's own client retries."""

    #: the server answers 503 when SQLite is briefly locked (the serve process and the server's services
    #: write to it too) and rolls the request back
    RETRY_STATUS = (429, 502, 503)

    def __init__(self, url: str) -> None:
        import httpx

        self.url = url
        self.http = httpx.Client(base_url=url, timeout=60)

    def _send(self, method: str, path: str, body: dict | None = None, attempts: int = 6):
        import httpx

        for attempt in range(attempts):
            try:
                r = self.http.request(method, path, json=body)
            except httpx.TransportError:  # a read timeout on a loaded machine: retry what is safe to repeat
                if attempt == attempts - 1 or not (method == "GET" or path.endswith("/filter")):
                    raise
                time.sleep(min(2 ** attempt, 10))
                continue
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
        return self.wait(fr["id"], deployment["name"], timeout)

    def wait(self, flow_run_id: str, name: str = "", timeout: float = 900) -> dict:
        """Poll one flow run until a final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cur = self.get(f"/flow_runs/{flow_run_id}")
            if cur["state"] and cur["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                return cur
            time.sleep(1)
        raise AssertionError(f"flow run {flow_run_id} of {name} did not finish in {timeout} s")

    def artifacts(self, flow_run_id: str) -> list[dict]:
        """Artifacts of one flow run."""
        return self.post("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run_id]}}})
