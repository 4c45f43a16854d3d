"""``nodewatch server start`` never leaves its ``prefect server`` child behind: a real server is started, its parent
is killed by pid with SIGKILL (the kernel's parent-death signal stops the child), and the child's pid is watched
until it is gone. SIGTERM: the last test of tests/alerts/test_prefect_ui.py stops that module's server so."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import httpx
import psutil
import pytest
from alerts_support import free_port


def _start(tmp_path) -> tuple[subprocess.Popen, psutil.Process]:
    """``nodewatch server start`` (own session, no store view) and its ``prefect server`` child, once it answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "PREFECT_UI", "NODEWATCH_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nodewatch.flows.cli", "--store", str(tmp_path / "store"), "server",
                             "start", "--port", str(port), "--reports-port", "0"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, f"nodewatch server start exited with {proc.returncode}"
        assert time.monotonic() < deadline, "Prefect server not up after 120 s"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.3)
    (child,) = psutil.Process(proc.pid).children()
    assert "server" in child.cmdline() and "start" in child.cmdline(), child.cmdline()
    return proc, child


def _gone(p: psutil.Process, timeout: float = 60.0) -> bool:
    try:
        p.wait(timeout)
    except psutil.TimeoutExpired:
        return False
    return True


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGKILL], ids=["sigkill"])
def test_killing_the_command_by_pid_stops_the_prefect_server(tmp_path, sig):
    proc, child = _start(tmp_path)
    try:
        os.kill(proc.pid, sig)  # the parent only, as `kill PID` / `kill -9 PID` does (not the process group)
        code = proc.wait(60)
        assert _gone(child), f"prefect server child {child.pid} still running after the parent got {sig.name}"
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group this test started, if anything is left of it
