"""A lease lock on S3: the object-store counterpart of :class:`nodewatch.tasks.core.locks.FileLock`.

There is no hard link or ``O_EXCL`` on an object store, but S3 has conditional writes (AWS since 2024,
also MinIO, Ceph RGW, R2, moto >= 5.0.15): ``PutObject`` with ``If-None-Match: *`` creates a key only if
it does not exist, ``PutObject``/``DeleteObject`` with ``If-Match: <etag>`` succeed only if the object is
still the version the caller saw. The lease is one small JSON object (e.g. ``staged/.jobs.lock``):

* **take**: ``PutObject(If-None-Match: *)`` of ``{"lock", "owner", "token", "acquired", "renewed", "lease_s"}``
  (owner = host, pid and process start time; ``token`` a random id of this holding). No credential,
  endpoint or environment value is ever in it;
* **renew**: while held, every ``lease_s / 4`` seconds (at most 60 s) ``PutObject(If-Match: <our etag>)``
  with a new ``renewed`` time; a renewal that fails (412: the lease was taken over, 404: removed) is
  logged and the lease is marked lost (:attr:`S3Lease.lost`);
* **stale**: a waiter reads the object (``GetObject``: body, ETag, ``Last-Modified``, and the response's
  ``Date``; both times are the *server's* clock, so host clock skew does not matter). It is stale when
  its owner is on this host and that process is gone (at once), when it was not renewed for its
  ``lease_s`` (``Date - Last-Modified > lease_s``: the holder died on another host, or hangs), or when
  its content is not a lease we wrote and it has not changed for :data:`~nodewatch.tasks.core.owner.GARBAGE_GRACE_S`;
* **take-over**: ``PutObject(If-Match: <the stale etag>)`` with our content: of several waiters exactly
  one wins (the others get 412 and look again); logged (logger ``nodewatch.locks``) naming the dead owner;
* **release**: ``DeleteObject(If-Match: <our etag>)``: a lease taken over meanwhile is not deleted.

Waiting longer than ``timeout_s`` on a live lease raises ``busy_error`` (``store_lock`` passes
:class:`~nodewatch.tasks.core.locks.LockBusyError`: one line naming the lock and its holder; exit code 2
in the CLI). A run killed while holding never blocks the next one longer than its lease (default
``lock_lease_s`` = 2 h; on the same host not at all).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from nodewatch.tasks.core.owner import (
    DEFAULT_LEASE_S,
    DEFAULT_TIMEOUT_S,
    GARBAGE_GRACE_S,
    Owner,
    current_owner,
    hostname,
    owner_alive,
)

log = logging.getLogger("nodewatch.locks")

_MAX_READ = 65536


def precondition_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (as raised by s3fs/botocore) is a failed ``If-Match``/``If-None-Match`` (412, or 409 conflict)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        resp = getattr(e, "response", None)
        if isinstance(resp, dict):
            code = str(resp.get("Error", {}).get("Code", ""))
            status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409") or status in (409, 412):
                return True
        if isinstance(e, FileExistsError) or "pre-conditions you specified did not hold" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


@dataclass(frozen=True)
class LeaseInfo:
    """A lease object as read: its owner, ETag and age on the server's clock."""

    key: str
    owner: Owner | None
    acquired: str | None
    lease_s: float
    etag: str
    age_s: float
    raw: str

    def describe(self) -> str:
        """``host H pid P since T`` (or why the content is unreadable)."""
        if self.owner is None:
            return f"an unreadable lease object ({self.raw[:60]!r})"
        return f"host {self.owner.host} pid {self.owner.pid} since {self.acquired or '?'}"


def _server_age(resp: dict[str, Any]) -> float:
    """Seconds between the object's ``Last-Modified`` and the response's ``Date`` (both server clock)."""
    lm = resp.get("LastModified")
    hdr = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}) or {}
    try:
        now = parsedate_to_datetime(hdr["date"])
    except (KeyError, TypeError, ValueError):
        now = datetime.now(UTC)
    if not isinstance(lm, datetime):
        return 0.0
    return max((now - lm).total_seconds(), 0.0)


def parse_lease(raw: str) -> tuple[Owner | None, str | None, float | None]:
    """(owner, acquired, lease_s) of a lease object's text; owner ``None`` if it is not a lease we wrote."""
    try:
        d = json.loads(raw)
    except ValueError:
        return None, None, None
    if not isinstance(d, dict):
        return None, None, None
    try:
        owner = Owner.from_dict(d.get("owner"))
    except ValueError:
        return None, None, None
    lease = d.get("lease_s")
    return (owner, d["acquired"] if isinstance(d.get("acquired"), str) else None,
            float(lease) if isinstance(lease, int | float) and lease > 0 else None)


class S3Lease:
    """Exclusive lease object on S3 with owner, renewal and take-over after expiry (see module doc).

    ``fs`` is an ``s3fs.S3FileSystem``; ``path`` is ``bucket/key``. Use as a context manager.
    """

    def __init__(self, fs: Any, path: str, *, name: str | None = None, timeout_s: float | None = None,
                 lease_s: float | None = None, poll_s: float = 0.2,
                 busy_error: type[Exception] = TimeoutError) -> None:
        self.fs = fs
        self.path = path.split("://", 1)[-1]
        self.bucket, _, self.key = self.path.partition("/")
        if not self.bucket or not self.key:
            raise ValueError(f"lease path {path!r}: expected bucket/key")
        self.name = name or self.path
        self.timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        self.lease_s = DEFAULT_LEASE_S if lease_s is None else lease_s
        self.poll_s = poll_s
        self.busy_error = busy_error
        self.etag: str | None = None
        self.lost = False
        self._token = uuid.uuid4().hex
        self._acquired = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # ------------------------------------------------------------------ S3 calls
    def _content(self) -> bytes:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        return json.dumps({"lock": self.name, "owner": current_owner().to_dict(), "token": self._token,
                           "acquired": self._acquired or now, "renewed": now, "lease_s": self.lease_s}).encode()

    def _put(self, **cond: str) -> str:
        r = self.fs.call_s3("put_object", Bucket=self.bucket, Key=self.key, Body=self._content(), **cond)
        return str(r["ETag"])

    def read(self) -> LeaseInfo | None:
        """The lease object as it is now; ``None`` if there is none."""
        from fsspec.asyn import sync

        async def get() -> tuple[dict[str, Any], bytes]:
            r = await self.fs._call_s3("get_object", Bucket=self.bucket, Key=self.key)
            body = r["Body"]
            try:
                data = await body.read(_MAX_READ)
            finally:
                body.close()
            return r, data

        try:
            resp, data = sync(self.fs.loop, get)
        except FileNotFoundError:
            return None
        raw = data.decode("utf-8", "replace")
        owner, acquired, lease = parse_lease(raw)
        return LeaseInfo(self.path, owner, acquired, lease or DEFAULT_LEASE_S, str(resp["ETag"]), _server_age(resp), raw)

    # ------------------------------------------------------------------ acquire / release
    def stale_reason(self, info: LeaseInfo) -> str | None:
        """Why the lease ``info`` may be taken over, or ``None`` if its owner may still hold it."""
        if info.owner is None:
            return f"unreadable lease object (content {info.raw[:60]!r})" if info.age_s >= GARBAGE_GRACE_S else None
        if owner_alive(info.owner) is False:
            return f"its owner {info.describe()} is gone"
        if info.age_s > info.lease_s:
            return (f"the lease of {info.describe()} expired ({info.age_s:.0f} s since last renewal > "
                    f"{info.lease_s:.0f} s)")
        return None

    def acquire(self) -> None:
        """Take the lease, taking over a stale one; ``busy_error`` after ``timeout_s`` on a live one."""
        deadline = time.monotonic() + self.timeout_s
        delay = self.poll_s
        while True:
            self._acquired = datetime.now(UTC).isoformat(timespec="seconds")
            try:
                self.etag = self._put(IfNoneMatch="*")
                self._start_renewal()
                return
            except Exception as e:  # noqa: BLE001 - only a failed precondition means "held"
                if not precondition_failed(e):
                    raise
            info = self.read()
            if info is None:
                continue  # released between our attempt and the read
            reason = self.stale_reason(info)
            if reason is not None:
                try:
                    self.etag = self._put(IfMatch=info.etag)
                except Exception as e:  # noqa: BLE001
                    if not precondition_failed(e) and not isinstance(e, FileNotFoundError):
                        raise
                    continue  # another waiter took it over, or it was released: look again
                log.warning("took over lock %s (s3://%s): %s", self.name, self.path, reason)
                self._start_renewal()
                return
            if time.monotonic() > deadline:
                raise self.busy_error(
                    f"lock {self.name} (s3://{self.path}) is held by {info.describe()}; waited {self.timeout_s:.0f} s "
                    f"(it is taken over as soon as that process is gone"
                    + ("" if info.owner is not None and info.owner.host == hostname()
                       else f", or {info.lease_s:.0f} s after its holder last renewed it") + ")")
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def renew(self) -> bool:
        """Renew the lease now (conditional on our ETag); ``False`` (and :attr:`lost`) if it is no longer ours."""
        with self._lock:
            if self.etag is None or self.lost:
                return False
            try:
                self.etag = self._put(IfMatch=self.etag)
                return True
            except Exception as e:  # noqa: BLE001 - transient errors: try again at the next renewal
                if precondition_failed(e) or isinstance(e, FileNotFoundError):
                    self.lost = True
                    log.warning("lock %s (s3://%s) was taken over or removed while this process held it",
                                self.name, self.path)
                    return False
                log.warning("lock %s (s3://%s): renewal failed (%s); retrying", self.name, self.path,
                            str(e).splitlines()[0][:200] if str(e) else type(e).__name__)
                return True

    def _start_renewal(self) -> None:
        self.lost = False
        self._stop.clear()
        every = max(min(self.lease_s / 4, 60.0), 0.05)

        def run() -> None:
            while not self._stop.wait(every):
                if not self.renew():
                    return

        self._renewer = threading.Thread(target=run, name=f"lease-renew {self.name}", daemon=True)
        self._renewer.start()

    def release(self) -> None:
        """Stop renewing and delete the lease object if it is still ours."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        with self._lock:
            etag, self.etag = self.etag, None
            if etag is None or self.lost:
                return
            try:
                self.fs.call_s3("delete_object", Bucket=self.bucket, Key=self.key, IfMatch=etag)
            except FileNotFoundError:
                log.warning("lock %s (s3://%s) was removed while this process held it", self.name, self.path)
            except Exception as e:  # noqa: BLE001
                if precondition_failed(e):
                    log.warning("lock %s (s3://%s) was taken over while this process held it", self.name, self.path)
                else:  # an endpoint without conditional deletes: delete only if the object is still ours
                    info = self.read()
                    if info is not None and info.etag == etag:
                        self.fs.call_s3("delete_object", Bucket=self.bucket, Key=self.key)
            finally:
                self.fs.invalidate_cache(self.path)

    def __enter__(self) -> S3Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
