"""parent_death_signal: the preexec_fn step of children that must not outlive their parent (Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from nodewatch.tasks.core.procs import parent_death_signal

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux-only")


def test_a_child_whose_parent_is_already_gone_exits_before_exec():
    """parent_pid that is not the child's parent (as if the parent died between fork and prctl): exit 128 + sig."""
    pre = parent_death_signal(signal.SIGTERM, parent_pid=os.getpid() + 1_000_000)
    assert pre is not None
    p = subprocess.run([sys.executable, "-c", "print('ran')"], preexec_fn=pre, capture_output=True, text=True)  # noqa: PLW1509
    assert p.returncode == 128 + signal.SIGTERM and "ran" not in p.stdout


def test_the_child_gets_the_signal_when_its_parent_dies():
    """A middle process starts a child with the step, then is SIGKILLed: the child is killed by the kernel."""
    code = ("import os, signal, subprocess, sys, time\n"
            "from nodewatch.tasks.core.procs import parent_death_signal\n"
            "c = subprocess.Popen(['sleep', '60'], preexec_fn=parent_death_signal(signal.SIGKILL, os.getpid()))\n"
            "print(c.pid, flush=True)\n"
            "time.sleep(60)\n")
    mid = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(mid.stdout.readline())
    mid.kill()
    mid.wait(10)
    for _ in range(100):  # reaped by init once the kernel has delivered the signal
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as f:
            if f.read().split(") ")[1].startswith("Z"):
                break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its parent")
