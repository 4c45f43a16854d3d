"""Who owns a lock, a run or a scratch directory, and whether that owner is still alive.

An :class:`Owner` is a process identity: host name, pid, and the process start time read from
``/proc/<pid>/stat`` (clock ticks since boot, plus the kernel's boot id), so a pid recycled by a
later process, or the same pid after a reboot, is not mistaken for the owner. On a system without
``/proc`` only the pid is checked.

Liveness can only be decided for owners on *this* host (:func:`owner_alive` returns ``None`` for
another host: callers use a lease instead, see :mod:`nodewatch.tasks.core.locks`).

Scratch directories (``/tmp/nodewatch-ingest-*``, the ingest spool) carry an owner file
(:data:`OWNER_FILE`, written by :func:`mark_owner`); :func:`clean_dead_tempdirs` removes those
whose owner is gone. Directories without an owner file are left alone (their owner is unknown).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import socket
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger("nodewatch.owner")

# Lock timing shared by both lock kinds (:class:`nodewatch.tasks.core.locks.FileLock` and
# :class:`nodewatch.tasks.core.s3lease.S3Lease`); here because ``locks`` imports ``s3lease``.
DEFAULT_TIMEOUT_S = 300.0
"""How long to wait for a live lock before :class:`~nodewatch.tasks.core.locks.LockBusyError`."""
DEFAULT_LEASE_S = 7200.0
"""Lease of a lock held by another host (setting ``lock_lease_s``)."""
GARBAGE_GRACE_S = 1.0
"""An unreadable lock file or lease object is stale once it has not changed for this long."""

OWNER_FILE = ".nodewatch-owner.json"
"""Name of the owner file inside a scratch directory."""

SPOOL_PREFIXES = ("nodewatch-ingest-",)
"""Prefixes of the scratch directories (under the system temp dir) cleaned at the start of a run."""


@dataclass(frozen=True)
class Owner:
    """A process identity: host, pid and process start (``start_ticks`` since boot ``boot_id``)."""

    host: str
    pid: int
    start_ticks: int | None = None
    boot_id: str | None = None
    started: str | None = None
    """Process start time, ISO 8601 UTC (for people; the check uses ``start_ticks``)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> Owner:
        """Parse a dict written by :meth:`to_dict`; raises ``ValueError`` if it is not one."""
        if not isinstance(d, dict) or not isinstance(d.get("host"), str) or not isinstance(d.get("pid"), int):
            raise ValueError(f"not an owner record: {str(d)[:80]!r}")
        ticks = d.get("start_ticks")
        return cls(
            host=d["host"],
            pid=d["pid"],
            start_ticks=ticks if isinstance(ticks, int) else None,
            boot_id=d.get("boot_id") if isinstance(d.get("boot_id"), str) else None,
            started=d.get("started") if isinstance(d.get("started"), str) else None,
        )

    def describe(self) -> str:
        """``host pid N (started T)`` for messages."""
        return f"host {self.host} pid {self.pid}" + (f" (process started {self.started})" if self.started else "")


def hostname() -> str:
    """This host's name."""
    return socket.gethostname()


@functools.cache
def boot_id() -> str | None:
    """The kernel's boot id (Linux), ``None`` elsewhere."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


@functools.cache
def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def process_start_ticks(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot (field 22 of ``/proc/<pid>/stat``);
    ``None`` if the process does not exist or there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        # the command name (field 2) is in parentheses and may itself contain spaces or ')'
        rest = stat[stat.rindex(")") + 2 :].split()
        return int(rest[19])  # fields 3.. -> field 22 is index 19
    except (ValueError, IndexError):
        return None


def _iso_start(ticks: int | None) -> str | None:
    bt = _boot_time()
    if ticks is None or bt is None:
        return None
    return datetime.fromtimestamp(bt + ticks / os.sysconf("SC_CLK_TCK"), UTC).isoformat(timespec="seconds")


def current_owner() -> Owner:
    """The identity of this process."""
    pid = os.getpid()
    ticks = process_start_ticks(pid)
    return Owner(host=hostname(), pid=pid, start_ticks=ticks, boot_id=boot_id(), started=_iso_start(ticks))


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def owner_alive(owner: Owner) -> bool | None:
    """Whether ``owner`` is a running process: ``None`` if it is on another host (cannot tell here).

    On this host the owner is dead when the boot id differs (rebooted), the pid does not exist, or
    the process with that pid started at another time (a recycled pid).
    """
    if owner.host != hostname():
        return None
    if owner.pid <= 0:
        return False
    if owner.boot_id and boot_id() and owner.boot_id != boot_id():
        return False
    if owner.start_ticks is not None and Path("/proc").is_dir():
        return process_start_ticks(owner.pid) == owner.start_ticks
    return _pid_exists(owner.pid)


# ----------------------------------------------------------------------------- scratch directories
def mark_owner(directory: str | os.PathLike[str], owner: Owner | None = None) -> None:
    """Write the owner file into a scratch directory (this process unless ``owner`` is given)."""
    p = Path(directory) / OWNER_FILE
    tmp = p.with_name(f"{OWNER_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps((owner or current_owner()).to_dict()))
    os.replace(tmp, p)


def read_owner(directory: str | os.PathLike[str]) -> Owner | None:
    """The owner recorded in a scratch directory; ``None`` if there is no readable owner file."""
    try:
        return Owner.from_dict(json.loads((Path(directory) / OWNER_FILE).read_text()))
    except (OSError, ValueError):
        return None


def owned_tempdir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A ``TemporaryDirectory`` carrying this process's owner file (cleaned by a later run if we die)."""
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    mark_owner(tmp.name)
    return tmp


def clean_dead_tempdirs(prefixes: tuple[str, ...] = SPOOL_PREFIXES, root: str | os.PathLike[str] | None = None) -> list[str]:
    """Remove scratch directories ``<root>/<prefix>*`` whose recorded owner (this host) is gone.

    ``root`` defaults to the system temp dir. Directories without an owner file, of another host or
    of a live owner are kept. Returns the removed paths (each is logged with its dead owner).
    """
    base = Path(root or tempfile.gettempdir())
    removed: list[str] = []
    for prefix in prefixes:
        for d in sorted(base.glob(f"{prefix}*")):
            if not d.is_dir() or d.is_symlink():
                continue
            owner = read_owner(d)
            if owner is None or owner_alive(owner) is not False:
                continue
            shutil.rmtree(d, ignore_errors=True)
            log.warning("removed scratch directory %s left by dead %s", d, owner.describe())
            removed.append(str(d))
    return removed
