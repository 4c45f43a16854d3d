"""Child processes that never outlive their parent: Linux ``prctl(PR_SET_PDEATHSIG)`` as a ``preexec_fn`` step.

Used by ``nodewatch server start`` (its ``prefect server`` child) and the FINJ engine (its tasks and sampler).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal the calling process gets when its parent thread exits (linux/prctl.h)."""


def parent_death_signal(sig: int, parent_pid: int | None = None) -> Callable[[], None] | None:
    """A ``preexec_fn`` step that makes the child get ``sig`` when its parent dies (``None`` where Linux's
    ``prctl`` is not available).

    It runs in the forked child before ``exec``. With ``parent_pid`` it also closes the race of a parent that
    died between ``fork`` and ``prctl``: the child then exits at once (status ``128 + sig``).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if parent_pid is not None and os.getppid() != parent_pid:
            os._exit(128 + int(sig))

    return preexec
