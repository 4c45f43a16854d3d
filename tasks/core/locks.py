"""The one lock of nodewatch: an exclusive lock file that records its owner and survives crashes.

A lock is a file (e.g. ``cubes/.telemetry.zarr.lock``) holding JSON: the lock name, the owner
(:class:`~nodewatch.tasks.core.owner.Owner`: host, pid, process start time), the acquisition time
and the lease in seconds. It is created atomically *with* its content (written to a unique temporary
file, then hard-linked to the lock name, which fails if the lock exists), so a reader never sees a
half-written lock.

A waiter that finds the lock held decides whether it is stale:

* owner on this host and that process is gone (or the pid now belongs to another process, checked by
  its start time): stale at once;
* owner on another host: a lease. The holder touches the lock file every ``lease_s / 4`` seconds
  while it holds it; a lock not touched for ``lease_s`` seconds (setting ``lock_lease_s``, default
  2 h) is stale;
* unreadable content (not a lock we wrote, or a legacy ``"<pid> <time>"`` line of a dead pid):
  stale once the file has not changed for :data:`~nodewatch.tasks.core.owner.GARBAGE_GRACE_S` seconds.

A stale lock is taken over race-free: the waiter takes the short-lived break lock ``<lock>.break``
(``O_EXCL``), re-checks that the lock file is still the very file it judged (same inode, same
mtime), renames it to a unique name and deletes it, then competes for the lock like any waiter.
Every take-over is logged (logger ``nodewatch.locks``) naming the dead owner.

Waiting longer than ``timeout_s`` on a live lock raises :class:`LockBusyError`, a one-line message
naming the lock and its owner (the CLI prints it without a traceback, exit code 2).

Lock files need a local (POSIX) filesystem; on S3 :func:`store_lock` holds a lease object written with
conditional puts instead (:mod:`nodewatch.tasks.core.s3lease`); on other object stores it locks nothing and
axis changes must be serialised by the caller.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from nodewatch.tasks.core.owner import (
    DEFAULT_LEASE_S,
    DEFAULT_TIMEOUT_S,
    GARBAGE_GRACE_S,
    Owner,
    current_owner,
    hostname,
    owner_alive,
)

if TYPE_CHECKING:
    from nodewatch.tasks.core.store import Store

log = logging.getLogger("nodewatch.locks")

BREAK_STALE_S = 10.0
"""A break lock (held for microseconds) older than this was left by a killed waiter."""
_MAX_READ = 65536


class LockBusyError(TimeoutError):
    """A live lock was not released in time (one-line message naming the lock and its owner)."""


@dataclass(frozen=True)
class LockInfo:
    """What a lock file says, and the file's identity when it was read."""

    path: str
    owner: Owner | None
    acquired: str | None
    lease_s: float
    inode: int
    mtime_ns: int
    raw: str
    readable: bool

    def describe(self) -> str:
        """``host H pid P since T`` (or why the content is unreadable)."""
        if self.owner is None:
            return f"an unreadable lock file ({self.raw[:60]!r})"
        since = self.acquired or datetime.fromtimestamp(self.mtime_ns / 1e9, UTC).isoformat(timespec="seconds")
        return f"host {self.owner.host} pid {self.owner.pid} since {since}"


def _parse(raw: str) -> tuple[Owner | None, str | None, float | None]:
    """(owner, acquired, lease_s) of a lock file's text; owner ``None`` if unreadable."""
    try:
        d = json.loads(raw)
        owner = Owner.from_dict(d.get("owner") if isinstance(d, dict) else None)
        lease = d.get("lease_s")
        return owner, d.get("acquired") if isinstance(d.get("acquired"), str) else None, (
            float(lease) if isinstance(lease, int | float) and lease > 0 else None
        )
    except ValueError:
        pass
    parts = raw.split()
    if len(parts) == 2 and parts[0].isdigit():  # legacy "<pid> <iso time>" of the old cube lock (local only)
        return Owner(host=hostname(), pid=int(parts[0])), parts[1], None
    return None, None, None


def read_lock(path: str | os.PathLike[str]) -> LockInfo | None:
    """The lock file at ``path`` as it is now; ``None`` if there is none."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        raw = os.read(fd, _MAX_READ).decode("utf-8", "replace")
    finally:
        os.close(fd)
    owner, acquired, lease = _parse(raw)
    return LockInfo(str(path), owner, acquired, lease or DEFAULT_LEASE_S, st.st_ino, st.st_mtime_ns, raw,
                    owner is not None)


def stale_reason(info: LockInfo, now: float | None = None) -> str | None:
    """Why the lock ``info`` may be taken over, or ``None`` if its owner may still hold it."""
    now = time.time() if now is None else now
    age = now - info.mtime_ns / 1e9
    if info.owner is None:
        return f"unreadable lock file (content {info.raw[:60]!r})" if age >= GARBAGE_GRACE_S else None
    alive = owner_alive(info.owner)
    if alive is False:
        return f"its owner {info.describe()} is gone"
    if alive is None and age > info.lease_s:
        return f"the lease of {info.describe()} expired ({age:.0f} s since last refresh > {info.lease_s:.0f} s)"
    return None


class FileLock:
    """Exclusive lock file with owner, dead-owner take-over and a lease (see module doc).

    Use as a context manager: ``with FileLock(path, name="cube telemetry"): ...``.
    """

    def __init__(self, path: str | os.PathLike[str], *, name: str | None = None, timeout_s: float | None = None,
                 lease_s: float | None = None, poll_s: float = 0.05) -> None:
        self.path = str(path)
        self.name = name or self.path
        self.timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        self.lease_s = DEFAULT_LEASE_S if lease_s is None else lease_s
        self.poll_s = poll_s
        self._fd: int | None = None
        self._inode: int | None = None
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None

    # ------------------------------------------------------------------ acquire / release
    def acquire(self) -> None:
        """Take the lock, taking over a stale one; :class:`LockBusyError` after ``timeout_s`` on a live one."""
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.timeout_s
        delay = self.poll_s
        while True:
            if self._try_create():
                self._start_refresh()
                return
            info = read_lock(self.path)
            if info is None:
                continue  # released between our attempt and the read
            reason = stale_reason(info)
            if reason is not None:
                self._break(info, reason)
                continue
            if time.monotonic() > deadline:
                raise LockBusyError(
                    f"lock {self.name} ({self.path}) is held by {info.describe()}; waited {self.timeout_s:.0f} s "
                    f"(it is taken over as soon as that process is gone"
                    + ("" if info.owner is None or info.owner.host == hostname()
                       else f", or {info.lease_s:.0f} s after its host last refreshed it") + ")"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _content(self) -> bytes:
        return json.dumps({
            "lock": self.name,
            "owner": current_owner().to_dict(),
            "acquired": datetime.now(UTC).isoformat(timespec="seconds"),
            "lease_s": self.lease_s,
        }).encode()

    def _try_create(self) -> bool:
        """Atomically create the lock file with its content; ``False`` if it exists."""
        tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        try:
            os.write(fd, self._content())
            os.fsync(fd)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                os.close(fd)
                return False
            except OSError:  # filesystem without hard links: O_EXCL create (content follows at once)
                os.close(fd)
                return self._try_create_excl()
            self._fd, self._inode = fd, os.fstat(fd).st_ino
            return True
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _try_create_excl(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            return False
        os.write(fd, self._content())
        self._fd, self._inode = fd, os.fstat(fd).st_ino
        return True

    def _break(self, info: LockInfo, reason: str) -> None:
        """Remove the stale lock ``info`` if it is still the same file (one breaker at a time)."""
        brk = f"{self.path}.break"
        try:
            bfd = os.open(brk, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            with contextlib.suppress(OSError):
                if time.time() - os.stat(brk).st_mtime > BREAK_STALE_S:
                    os.unlink(brk)  # left by a waiter killed while breaking
            time.sleep(self.poll_s)
            return
        try:
            os.close(bfd)
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                return
            if st.st_ino != info.inode or st.st_mtime_ns != info.mtime_ns:
                return  # re-created or refreshed since we judged it: look again
            grave = f"{self.path}.stale-{uuid.uuid4().hex}"
            os.rename(self.path, grave)
            with contextlib.suppress(OSError):
                os.unlink(grave)
            log.warning("took over lock %s (%s): %s", self.name, self.path, reason)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(brk)

    def release(self) -> None:
        """Release the lock (only if the lock file is still ours)."""
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join()
            self._refresher = None
        try:
            if self._inode is not None and os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
            elif self._inode is not None:
                log.warning("lock %s (%s) was taken over while this process held it", self.name, self.path)
        except FileNotFoundError:
            log.warning("lock %s (%s) was removed while this process held it", self.name, self.path)
        finally:
            if self._fd is not None:
                os.close(self._fd)
            self._fd = self._inode = None

    # ------------------------------------------------------------------ lease
    def refresh(self) -> None:
        """Touch the lock file (renews the lease seen by other hosts)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if os.utime in os.supports_fd:
                os.utime(self._fd)
            elif os.stat(self.path).st_ino == self._inode:
                os.utime(self.path)

    def _start_refresh(self) -> None:
        self._stop.clear()
        every = max(min(self.lease_s / 4, 60.0), 0.05)

        def run() -> None:
            while not self._stop.wait(every):
                self.refresh()

        self._refresher = threading.Thread(target=run, name=f"lock-refresh {self.name}", daemon=True)
        self._refresher.start()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_defaults() -> tuple[float, float]:
    """(timeout_s, lease_s): settings ``lock_timeout_s`` / ``lock_lease_s`` when the settings define them,
    else env ``NODEWATCH_LOCK_TIMEOUT_S`` / ``NODEWATCH_LOCK_LEASE_S``, else the defaults."""
    vals = []
    for key, default in (("lock_timeout_s", DEFAULT_TIMEOUT_S), ("lock_lease_s", DEFAULT_LEASE_S)):
        try:
            vals.append(float(os.environ.get(f"NODEWATCH_{key.upper()}", default)))
        except ValueError:
            vals.append(default)
    try:
        from nodewatch.tasks.core.settings import load_settings

        s = load_settings()
        return float(getattr(s, "lock_timeout_s", vals[0])), float(getattr(s, "lock_lease_s", vals[1]))
    except Exception:  # noqa: BLE001 - a broken config file is reported by the command itself
        return vals[0], vals[1]


@contextlib.contextmanager
def store_lock(store: Store, *parts: str, name: str | None = None, timeout_s: float | None = None,
               lease_s: float | None = None) -> Iterator[None]:
    """Hold the lock ``<store>/<parts>``: a lock file on local stores, a lease object on S3
    (:class:`nodewatch.tasks.core.s3lease.S3Lease`); a no-op on other object stores (see module doc)."""
    proto = store.fs.protocol if isinstance(store.fs.protocol, str) else store.fs.protocol[0]
    d_timeout, d_lease = lock_defaults()
    if proto in ("s3", "s3a"):
        from nodewatch.tasks.core.s3lease import S3Lease

        with S3Lease(store.fs, store.path(*parts), name=name, timeout_s=d_timeout if timeout_s is None else timeout_s,
                     lease_s=d_lease if lease_s is None else lease_s, busy_error=LockBusyError):
            yield
        return
    if proto not in ("file", "local"):
        yield
        return
    with FileLock(store.path(*parts), name=name, timeout_s=d_timeout if timeout_s is None else timeout_s,
                  lease_s=d_lease if lease_s is None else lease_s):
        yield
