"""The warm worker (flows/warm.py) and the console script's hand-over to it (flows/launch.py).

Real processes: a worker is started in a private runtime directory; commands go through
``python -m nodewatch.flows.launch`` exactly as the ``nodewatch`` console script runs them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodewatch.flows import launch

LAUNCH = [sys.executable, "-m", "nodewatch.flows.launch"]
WARM = [sys.executable, "-m", "nodewatch.flows.warm"]
LINE = "<13>1 2026-01-05T00:00:{s:02d}Z cn{n:04d} sshd 100 - - Accepted publickey for u1 from 10.0.0.1 port 22 ssh2\n"


def _log(path: Path, lines: int = 40) -> Path:
    path.write_text("".join(LINE.format(s=i % 60, n=i % 5 + 1) for i in range(lines)))
    return path


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory):
    """A running warm worker in a private runtime dir; yields the env that reaches it."""
    base = tmp_path_factory.mktemp("warm")
    runtime = base / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "NODEWATCH_WARM": "1", "XDG_RUNTIME_DIR": str(runtime), "NODEWATCH_WARM_IDLE": "600"}
    env.pop("CI", None)
    proc = subprocess.Popen([*WARM, "serve"], env=env, cwd=base)
    t = time.monotonic()
    while subprocess.run([*WARM, "status"], env=env, capture_output=True).returncode != 0:
        if proc.poll() is not None or time.monotonic() - t > 180:
            proc.kill()
            pytest.fail("warm worker did not start")
        time.sleep(0.5)
    yield env, runtime / f"nodewatch-warm-{os.getuid()}"
    subprocess.run([*WARM, "stop"], env=env, capture_output=True)
    proc.wait(timeout=60)
    assert not list((runtime / f"nodewatch-warm-{os.getuid()}").glob("*.sock")), "socket left behind"


def _served(d: Path) -> int:
    return sum(line.count(" served pid ") for f in d.glob("*.log") for line in f.read_text().splitlines())


def test_ingest_through_the_worker_uses_the_clients_env_cwd_and_exit_code(worker, tmp_path: Path) -> None:
    env, d = worker
    before = _served(d)
    _log(tmp_path / "a.log")
    store = tmp_path / "store"
    p = subprocess.run([*LAUNCH, "ingest", "syslog", "a.log"], cwd=tmp_path,  # relative path: the client's cwd
                       env={**env, "NODEWATCH_STORE": str(store)}, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ingested" in p.stdout and "Traceback" not in p.stdout + p.stderr
    (manifest,) = (store / "runs").glob("*.json")  # the store came from the client's environment
    assert json.loads(manifest.read_text())["counts"]["syslog"]["staged"] == 40
    assert _served(d) == before + 1, "the command did not run in the warm worker"


def test_user_error_through_the_worker_is_one_line_exit_2(worker, tmp_path: Path) -> None:
    env, d = worker
    before = _served(d)
    p = subprocess.run([*LAUNCH, "--store", str(tmp_path / "s"), "ingest", "syslog", str(tmp_path / "missing.log")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "no such file" in p.stderr, p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert _served(d) == before + 1


def test_commands_outside_the_warm_set_and_warm_off_run_in_process(worker, tmp_path: Path) -> None:
    env, d = worker
    before = _served(d)
    assert subprocess.run([*LAUNCH, "--help"], env=env, capture_output=True, timeout=120).returncode == 0
    _log(tmp_path / "b.log")
    p = subprocess.run([*LAUNCH, "--store", str(tmp_path / "s"), "ingest", "syslog", str(tmp_path / "b.log")],
                       env={**env, "NODEWATCH_WARM": "0"}, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert _served(d) == before


def test_a_changed_preloaded_file_is_never_served_stale(tmp_path: Path) -> None:
    """Touching a module the worker preloaded: the command runs in-process and the worker stops."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "NODEWATCH_WARM": "1", "XDG_RUNTIME_DIR": str(runtime)}
    env.pop("CI", None)
    proc = subprocess.Popen([*WARM, "serve"], env=env, cwd=tmp_path)
    t = time.monotonic()
    while subprocess.run([*WARM, "status"], env=env, capture_output=True).returncode != 0:
        assert proc.poll() is None and time.monotonic() - t < 180, "warm worker did not start"
        time.sleep(0.5)
    import nodewatch.tasks.core.validate as validate

    src = Path(validate.__file__)
    st = src.stat()
    try:
        os.utime(src, (st.st_atime, st.st_mtime + 5))
        _log(tmp_path / "c.log")
        p = subprocess.run([*LAUNCH, "--store", str(tmp_path / "s"), "ingest", "syslog", str(tmp_path / "c.log")],
                           env=env, capture_output=True, text=True, timeout=300)
    finally:
        os.utime(src, (st.st_atime, st.st_mtime))
    assert p.returncode == 0, p.stderr
    assert proc.wait(timeout=60) == 0, "a stale worker must stop"
    assert _served(runtime / f"nodewatch-warm-{os.getuid()}") == 0


def test_runtime_dir_refuses_a_directory_others_can_read_or_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    d = tmp_path / f"nodewatch-warm-{os.getuid()}"
    d.mkdir(mode=0o700)
    assert launch.runtime_dir() == d
    d.chmod(0o755)
    assert launch.runtime_dir() is None
    d.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    d.symlink_to(tmp_path / "elsewhere")
    assert launch.runtime_dir() is None and launch.runtime_dir(create=True) is None


@pytest.mark.parametrize(("argv", "group"), [
    (["ingest", "syslog", "x"], "ingest"),
    (["--store", "ingest", "runs", "list"], "runs"),  # a store literally named "ingest"
    (["--config", "c.toml", "--store", "s", "checkpoint", "interval"], "checkpoint"),
    (["--store=s", "store", "verify"], "store"),
    (["--help"], None),
    ([], None),
])
def test_command_group(argv: list[str], group: str | None) -> None:
    assert launch.command_group(argv) == group


@pytest.mark.parametrize(("env", "on"), [({}, True), ({"CI": "true"}, False), ({"CI": "true", "NODEWATCH_WARM": "1"}, True),
                                         ({"NODEWATCH_WARM": "0"}, False), ({"NODEWATCH_WARM": " Off "}, False)])
def test_warm_enabled(env: dict[str, str], on: bool) -> None:
    assert launch.warm_enabled(env) is on


def _long_ingest(worker_env: dict[str, str], tmp_path: Path, d: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start a several-seconds ingest through the worker; its client and the command's pid."""
    big = tmp_path / "big.log"
    with big.open("w") as f:
        for i in range(1_000_000):
            f.write(LINE.format(s=i % 60, n=i % 50 + 1))
    before = _served(d)
    client = subprocess.Popen([*LAUNCH, "--store", str(tmp_path / "s"), "ingest", "syslog", str(big)], env=worker_env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t = time.monotonic()
    while _served(d) == before:
        assert time.monotonic() - t < 60, "command never reached the worker"
        time.sleep(0.1)
    line = [x for f in d.glob("*.log") for x in f.read_text().splitlines() if " served pid " in x][-1]
    return client, int(line.split(" served pid ")[1].split(":")[0])


def _gone(pid: int, within: float) -> bool:
    t = time.monotonic()
    while time.monotonic() - t < within:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_a_killed_client_takes_its_command_down(worker, tmp_path: Path) -> None:
    env, d = worker
    client, pid = _long_ingest(env, tmp_path, d)
    time.sleep(0.3)
    client.kill()  # SIGKILL: the client cannot forward anything; the session sees the socket close
    client.wait()
    assert _gone(pid, 15), f"command {pid} survived its client"
    _assert_not_completed(tmp_path / "s")


def test_ctrl_c_reaches_the_command(worker, tmp_path: Path) -> None:
    env, d = worker
    client, pid = _long_ingest(env, tmp_path, d)
    time.sleep(0.3)
    client.send_signal(2)  # SIGINT, as Ctrl-C in a terminal
    assert client.wait(timeout=60) != 0
    assert _gone(pid, 15)
    _assert_not_completed(tmp_path / "s")


def _assert_not_completed(store: Path) -> None:
    """The command was stopped mid-run (it did not just finish before the check)."""
    statuses = [json.loads(f.read_text()).get("status") for f in (store / "runs").glob("*.json")]
    assert "completed" not in statuses, statuses


def test_warm_cli_group(tmp_path: Path) -> None:
    """``nodewatch warm start|status|stop`` against a private runtime dir."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "NODEWATCH_WARM": "1", "XDG_RUNTIME_DIR": str(runtime)}
    nw = [sys.executable, "-m", "nodewatch.flows.cli", "warm"]
    assert subprocess.run([*nw, "status"], env=env, capture_output=True).returncode == 1
    p = subprocess.run([*nw, "start", "--wait", "180"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "runs" in p.stdout, p.stdout + p.stderr
    p = subprocess.run([*nw, "status", "--json"], env=env, capture_output=True, text=True, timeout=60)
    info = json.loads(p.stdout)
    assert p.returncode == 0 and info["running"] and info["modules"] > 100
    assert "stopping" in subprocess.run([*nw, "stop"], env=env, capture_output=True, text=True).stdout
    assert _gone(info["pid"], 30)
