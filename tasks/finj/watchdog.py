"""Cleanup that survives the engine: ``python -m nodewatch.tasks.finj.watchdog STATE_FILE``.

The engine starts this process in its own session with a pipe on its stdin and never writes to it. When the
engine ends in any way (normal exit, exception, Ctrl-C, SIGKILL) the pipe closes, :func:`main` sees EOF and
kills every process of the run: the process groups listed in ``STATE_FILE`` (one JSON object per line,
``{"pgid": N}`` or ``{"cgroups": {...}}``) and every pid left in the run's cgroups; then it removes the
cgroups (and with them every CPU/memory limit a fault set) and the ``ioerr`` switch file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path


def cleanup(state: Path) -> dict:
    """Kill and remove everything ``state`` lists; returns what was done."""
    from nodewatch.tasks.finj.cgroup import RunCgroups, kill_all, remove

    pgids: set[int] = set()
    cg = None
    ctl = None
    try:
        lines = state.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "pgid" in d:
            pgids.add(int(d["pgid"]))
        if "cgroups" in d:
            cg = RunCgroups.from_json(d["cgroups"])
        if "ctl" in d:
            ctl = Path(d["ctl"])
    own = os.getpgrp()
    for _ in range(3):
        for g in pgids - {own}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(g, signal.SIGKILL)
        time.sleep(0.05)
    left = 0
    if cg is not None:
        left = kill_all(cg)
        remove(cg)
    if ctl is not None:
        (ctl / "ioerr").unlink(missing_ok=True)
    return {"pgids": len(pgids), "left": left}


def main(argv: list[str] | None = None) -> int:
    """Wait for EOF on stdin, then clean up."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    state = Path(args[0])
    while True:
        try:
            if not os.read(0, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    out = cleanup(state)
    try:
        with open(state.with_suffix(".done"), "w") as fh:
            json.dump(out, fh)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
