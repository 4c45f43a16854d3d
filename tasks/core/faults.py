"""Fault injection for the crash tests: one hook that every writer of the store passes at its publish steps.

``NODEWATCH_FAULT_AT="<point>:<N>[,<point>:<N>…]"`` makes the process SIGKILL itself the N-th time it
passes ``<point>``; unset (always, outside tests), :func:`fault_point` does nothing. Points in use:
``stage:*``/``states:*`` (:mod:`nodewatch.tasks.core.commit`: ``after-part``, ``before-commit``,
``after-commit``, ``after-remove``) and ``cube:*``/``score:*`` (:mod:`nodewatch.tasks.cubes.repo`:
``after-region``, ``before-commit``, ``after-commit``, ``after-daily``).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

FAULT_ENV = "NODEWATCH_FAULT_AT"

_hits: Counter[str] = Counter()
_lock = threading.Lock()  # Dask threads pass the cube points concurrently


def fault_point(name: str) -> None:
    """SIGKILL this process the N-th time ``name`` is passed when ``NODEWATCH_FAULT_AT`` names ``<name>:<N>``."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    with _lock:
        _hits[name] += 1
        hit = _hits[name]
    for item in spec.split(","):
        point, _, n = item.strip().rpartition(":")
        if point == name and n.isdigit() and hit == int(n):
            os.kill(os.getpid(), signal.SIGKILL)
