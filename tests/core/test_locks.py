"""Locks record their owner; a lock left by a killed process is taken over at once (tasks/core/locks.py)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodewatch.schemas.cubes import TELEMETRY, spec_for
from nodewatch.tasks.core.locks import FileLock, LockBusyError, read_lock
from nodewatch.tasks.core.owner import current_owner, hostname
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.writer import axis_lock

HOLD = """
import sys, time
from nodewatch.tasks.core.store import Store
from nodewatch.schemas.cubes import spec_for
from nodewatch.tasks.cubes.writer import axis_lock
with axis_lock(Store(sys.argv[1]), spec_for("telemetry")):
    print("held", flush=True)
    time.sleep(120)
"""


def _holder(store: Store) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, store.url], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _lock_path(store: Store) -> Path:
    return Path(store.path("cubes", f".{spec_for(TELEMETRY).key}.lock"))


def test_lock_of_killed_process_is_taken_over_at_once(tmp_path, caplog):
    store = Store(str(tmp_path / "store"))
    p = _holder(store)
    info = read_lock(_lock_path(store))
    assert info is not None and info.owner is not None
    assert (info.owner.host, info.owner.pid) == (hostname(), p.pid) and info.owner.start_ticks is not None
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert _lock_path(store).exists()  # the killed build left its lock behind
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="nodewatch.locks"), axis_lock(store, spec_for(TELEMETRY), timeout_s=5):
        assert time.monotonic() - t0 < 2.0
    assert f"pid {p.pid}" in caplog.text and "is gone" in caplog.text
    assert not _lock_path(store).exists()


def test_live_owner_blocks_with_one_line_error(tmp_path):
    store = Store(str(tmp_path / "store"))
    p = _holder(store)
    try:
        with pytest.raises(LockBusyError) as ei, axis_lock(store, spec_for(TELEMETRY), timeout_s=0.5):
            pass
        msg = str(ei.value)
        assert "\n" not in msg and f"pid {p.pid}" in msg and hostname() in msg and "since" in msg
        assert isinstance(ei.value, TimeoutError)  # callers catching TimeoutError still do
    finally:
        p.kill()
        p.wait()


def test_recycled_pid_is_not_the_owner(tmp_path):
    path = tmp_path / "x.lock"
    me = current_owner()
    other = {**me.to_dict(), "start_ticks": (me.start_ticks or 0) + 12345}  # our pid, another process start
    path.write_text(json.dumps({"lock": "x", "owner": other, "acquired": "2024-01-01T00:00:00+00:00", "lease_s": 60}))
    with FileLock(path, timeout_s=2):
        assert read_lock(path).owner.start_ticks == me.start_ticks


@pytest.mark.parametrize("content", [b"", b"\x00\xffgarbage{", b'{"owner": 3}', b"not a lock at all\n"])
def test_garbage_lock_is_stale_after_checking(tmp_path, content, caplog):
    path = tmp_path / "g.lock"
    path.write_bytes(content)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="nodewatch.locks"), FileLock(path, timeout_s=5):
        took = time.monotonic() - t0
    assert 0.5 < took < 4.0  # waited until the file had not changed for the grace period
    assert "unreadable lock file" in caplog.text
    assert not path.exists()


def test_other_host_lock_is_a_lease(tmp_path):
    path = tmp_path / "h.lock"
    owner = {"host": "some-other-host", "pid": 1, "start_ticks": 1, "boot_id": "x", "started": None}
    path.write_text(json.dumps({"lock": "h", "owner": owner, "acquired": "2024-01-01T00:00:00+00:00", "lease_s": 60}))
    with pytest.raises(LockBusyError, match="some-other-host"), FileLock(path, timeout_s=0.3):
        pass
    old = time.time() - 120  # not refreshed for longer than its lease
    os.utime(path, (old, old))
    with FileLock(path, timeout_s=2):
        assert read_lock(path).owner.host == hostname()


def test_holder_refreshes_its_lease(tmp_path):
    path = tmp_path / "r.lock"
    with FileLock(path, lease_s=0.4):
        m0 = path.stat().st_mtime_ns
        deadline = time.monotonic() + 10.0  # the refresher runs every lease/4; a loaded CI host can delay it
        while path.stat().st_mtime_ns == m0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert path.stat().st_mtime_ns > m0


RACER = """
import sys, time, os
from pathlib import Path
from nodewatch.tasks.core.locks import FileLock
lock, log, go = sys.argv[1:4]
while not Path(go).exists():
    time.sleep(0.01)
with FileLock(lock, timeout_s=30):
    with open(log, "a") as f:
        f.write(f"in {os.getpid()} {time.time()}\\n")
    time.sleep(0.15)
    with open(log, "a") as f:
        f.write(f"out {os.getpid()} {time.time()}\\n")
"""


def test_waiters_do_not_both_take_over(tmp_path):
    lock, log, go = tmp_path / "c.lock", tmp_path / "log", tmp_path / "go"
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead.kill()
    dead.wait()
    me = current_owner().to_dict()
    lock.write_text(json.dumps({"lock": "c", "owner": {**me, "pid": dead.pid, "start_ticks": None}, "lease_s": 60}))
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(lock), str(log), str(go)]) for _ in range(4)]
    time.sleep(1.5)  # all started and polling
    go.touch()
    for p in procs:
        assert p.wait(timeout=60) == 0
    lines = log.read_text().split()
    events = [(lines[i], lines[i + 1]) for i in range(0, len(lines), 3)]
    assert len(events) == 8
    for i in range(0, 8, 2):  # strictly in/out pairs of the same process: never two holders
        assert events[i][0] == "in" and events[i + 1] == ("out", events[i][1])


def test_cli_prints_busy_lock_as_one_line(monkeypatch, capsys):
    import nodewatch.flows.cli as cli

    def busy() -> None:
        raise LockBusyError("lock cube scores.zarr (x) is held by host h pid 1 since t; waited 300 s")

    monkeypatch.setattr(cli, "app", busy)
    with pytest.raises(SystemExit) as ei:
        cli.main()
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert "held by host h pid 1" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
