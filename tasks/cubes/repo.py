"""Transactional cubes: every ``cubes/<name>.zarr`` is an Icechunk repository (one snapshot per commit).

Why Icechunk (measured by ``benchmarks/cube_commit.py``, figures in ``docs/cubes.md``): a day of a cube
is several arrays (``count``, ``mean``, ``min``, ``max``, ``std``; ``score``, ``threshold``, …) in
separate chunk files, and no filesystem or object store renames several files at once. Icechunk
writes the chunks of a session where readers do not look and publishes them with one small object
(the branch ref) written last, on local disk and on S3 alike; a reader opens the latest snapshot
and sees the previous commit or the new one, never a mix. Writers of different days commit
concurrently: each commit is rebased (:class:`icechunk.ConflictDetector`) onto the branch tip under
a commit lock (``cubes/.<name>.commit.lock``, :mod:`nodewatch.tasks.core.locks`; Icechunk's local
filesystem storage needs one, object stores use conditional writes).

Per-day coverage markers live *inside* the repository as attributes of the group ``days/<YYYY-MM-DD>``
and are committed with the day's chunks, so "the marker says built" and "the chunks are there" are
one fact. Readers use :func:`open_dataset` (what :func:`nodewatch.open_cube` calls).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from nodewatch.tasks.core.faults import fault_point
from nodewatch.tasks.core.locks import store_lock
from nodewatch.tasks.core.store import Store

if TYPE_CHECKING:
    import icechunk
    import xarray as xr
    import zarr

BRANCH = "main"
DAYS_GROUP = "days"
"""Group holding one subgroup per day whose attributes are the day's committed marker."""


_MEMORY: dict[str, Any] = {}
_MEMORY_LOCK = threading.Lock()


class CubeError(ValueError):
    """A cube cannot be read or written as asked (one-line message naming the cube)."""


class CubeConflictError(CubeError):
    """Another run changed the same chunks of a cube between this run's start and its commit."""


_LOGS = threading.Lock()
_logs_set = False


def _ic() -> Any:
    """``icechunk``, with its log filter at ``error`` (unless ``ICECHUNK_LOG`` asks otherwise).

    Its only warning, that local-filesystem storage is not safe for concurrent commits, is answered by
    the commit lock of :func:`commit`.
    """
    global _logs_set
    import icechunk

    with _LOGS:
        if not _logs_set:
            import os

            if not os.environ.get("ICECHUNK_LOG"):
                icechunk.set_logs_filter("error")
            _logs_set = True
    return icechunk


def _proto(store: Store) -> str:
    return store.fs.protocol if isinstance(store.fs.protocol, str) else store.fs.protocol[0]


def io_errors() -> tuple[type[BaseException], ...]:
    """Exception types of a failed write/read of the storage (a full disk, a permission problem)."""
    return (OSError, _ic().IcechunkError)


def first_line(e: BaseException) -> str:
    """The first meaningful line of an exception message (Icechunk's are multi-line reports)."""
    for line in str(e).splitlines():
        line = line.strip().lstrip("x").strip()
        if line:
            return line[:300]
    return type(e).__name__


def storage_for(store: Store, key: str) -> icechunk.Storage:
    """Icechunk storage of cube ``key`` (``telemetry.zarr`` …) in ``store``: local path, S3 prefix or memory."""
    icechunk = _ic()

    proto, path = _proto(store), store.path("cubes", key)
    if proto in ("file", "local"):
        return icechunk.local_filesystem_storage(path)
    if proto in ("s3", "s3a"):
        import os

        bucket, _, prefix = path.partition("/")
        return icechunk.s3_storage(bucket=bucket, prefix=prefix, from_env=True,
                                   endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
                                   allow_http=os.environ.get("AWS_ENDPOINT_URL", "").startswith("http://"),
                                   force_path_style=bool(os.environ.get("AWS_ENDPOINT_URL")))
    if proto == "memory":
        with _MEMORY_LOCK:
            return _MEMORY.setdefault(path, icechunk.in_memory_storage())
    raise CubeError(f"cubes on {proto}:// stores are not supported (local paths, s3:// and memory:// are)")


def is_legacy(store: Store, key: str) -> bool:
    """Whether ``cubes/<key>`` is a plain Zarr group written before cubes became Icechunk repositories."""
    return store.exists("cubes", key, "zarr.json")


def exists(store: Store, key: str) -> bool:
    """Whether cube ``key`` exists (as an Icechunk repository)."""
    icechunk = _ic()

    if _proto(store) in ("file", "local") and not store.exists("cubes", key):
        return False
    return bool(icechunk.Repository.exists(storage_for(store, key)))


def open_repo(store: Store, key: str, create: bool = False) -> icechunk.Repository:
    """The repository of cube ``key`` (created empty if ``create``); ``FileNotFoundError`` if absent."""
    icechunk = _ic()

    if is_legacy(store, key):
        raise CubeError(
            f"{store.url_of('cubes', key)} is a plain Zarr cube from before transactional cubes: move it aside "
            "and rebuild it (`nodewatch cubes build --start ... --end ...`)")
    st = storage_for(store, key)
    if icechunk.Repository.exists(st):
        return icechunk.Repository.open(st)
    if not create:
        raise FileNotFoundError(f"no cube {store.url_of('cubes', key)}")
    config = icechunk.RepositoryConfig.default()
    config.inline_chunk_threshold_bytes = 0  # every chunk its own object: damage stays local and nameable
    try:
        return icechunk.Repository.create(st, config=config)
    except icechunk.IcechunkError:  # created by a concurrent writer in between
        return icechunk.Repository.open(st)


def readonly_store(store: Store, key: str) -> zarr.abc.store.Store:
    """Zarr store of the latest committed snapshot of cube ``key`` (``FileNotFoundError`` if absent)."""
    return open_repo(store, key).readonly_session(branch=BRANCH).store


def open_group(store: Store, key: str) -> zarr.Group:
    """Root group of the latest committed snapshot (read-only)."""
    import zarr

    return zarr.open_group(readonly_store(store, key), mode="r")


def open_dataset(store: Store, key: str) -> xr.Dataset:
    """Cube ``key`` as a lazy ``xarray.Dataset`` of its latest committed snapshot (legacy plain Zarr cubes too)."""
    import xarray as xr

    if is_legacy(store, key):
        import warnings

        with warnings.catch_warnings():  # zarr notes that consolidated metadata is not in the v3 spec
            warnings.filterwarnings("ignore", message="Consolidated metadata")
            return xr.open_zarr(store.url_of("cubes", key), consolidated=None, zarr_format=3)
    try:
        zs = readonly_store(store, key)
    except FileNotFoundError:
        raise FileNotFoundError(f"no cube {store.url_of('cubes', key)}") from None
    return xr.open_zarr(zs, consolidated=False, zarr_format=3)


def commit(store: Store, key: str, session: icechunk.Session, message: str,
           metadata: dict[str, Any] | None = None) -> str | None:
    """Publish ``session`` (rebased onto the branch tip under the commit lock); returns the snapshot id.

    A session without changes commits nothing (``None``). A chunk also written by a commit made since the
    session started is taken from this session (two builds of one day: the later commit wins, whole); a
    metadata conflict (an axis changed under the session) is a :class:`CubeConflictError`, an I/O failure
    (full disk) a :class:`CubeError`, both one line; nothing of this session is published then.
    """
    icechunk = _ic()

    if not session.has_uncommitted_changes:
        return None
    with store_lock(store, "cubes", f".{key}.commit.lock", name=f"cube {key} commit"):
        fault_point("cube:before-commit")
        try:
            snap = session.commit(message, metadata=metadata, rebase_with=icechunk.BasicConflictSolver(
                on_chunk_conflict=icechunk.VersionSelection.UseOurs))
            fault_point("cube:after-commit")
            return snap
        except (icechunk.ConflictError, icechunk.RebaseFailedError) as e:
            raise CubeConflictError(
                f"{store.url_of('cubes', key)}: another run changed the same part of the cube while this run wrote "
                f"({first_line(e)[:200]}); nothing was published, re-run") from None
        except io_errors() as e:
            raise CubeError(f"{store.url_of('cubes', key)}: commit failed ({first_line(e)}); nothing was published "
                            "(readers keep the previous commit): fix the cause and re-run") from None


@contextmanager
def transaction(store: Store, key: str, message: str, create: bool = False,
                metadata: dict[str, Any] | None = None) -> Iterator[icechunk.Session]:
    """A writable session of cube ``key``, committed on normal exit (discarded on an exception)."""
    repo = open_repo(store, key, create=create)
    session = repo.writable_session(BRANCH)
    yield session
    commit(store, key, session, message, metadata)


def day_group_name(day: str) -> str:
    """Path of the marker group of ``day`` (``YYYY-MM-DD``) inside a cube repository."""
    return f"{DAYS_GROUP}/{day}"


def set_day_marker(zstore: Any, day: str, payload: dict[str, Any]) -> None:
    """Write the marker of ``day`` into a writable session's store (committed with the day's chunks)."""
    import json

    import zarr

    root = zarr.open_group(zstore, mode="a")
    g = root.require_group(DAYS_GROUP).require_group(day)
    g.attrs.put(json.loads(json.dumps(payload, default=str)))


def day_markers(store: Store, key: str) -> dict[str, dict[str, Any]]:
    """Committed markers of every day of cube ``key`` (``{}`` if the cube does not exist)."""
    try:
        g = open_group(store, key)
    except (FileNotFoundError, CubeError):
        return {}
    if DAYS_GROUP not in g:
        return {}
    days = g[DAYS_GROUP]
    return {name: dict(sub.attrs) for name, sub in days.groups()}


def day_marker(store: Store, key: str, day: str) -> dict[str, Any] | None:
    """Committed marker of ``day`` of cube ``key`` or ``None``."""
    import zarr

    try:
        zs = readonly_store(store, key)
    except (FileNotFoundError, CubeError):
        return None
    try:
        return dict(zarr.open_group(zs, path=day_group_name(day), mode="r").attrs)
    except (FileNotFoundError, KeyError, zarr.errors.GroupNotFoundError):
        return None


def chunk_bytes(store: Store, key: str) -> dict[str, bytes]:
    """Encoded bytes of every chunk (``<array>/c/...`` keys, not metadata) of the latest snapshot of cube ``key``.

    Two builds are byte-identical when these maps are equal (Icechunk names its chunk objects by id, so
    the files differ even when the chunks do not).
    """
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    zs = readonly_store(store, key)

    async def keys() -> list[str]:
        return [k async for k in zs.list()]

    out: dict[str, bytes] = {}
    for k in sync(keys()):
        if "/c/" in k or k.startswith("c/"):
            buf = sync(zs.get(k, prototype=default_buffer_prototype()))
            if buf is not None:
                out[k] = buf.to_bytes()
    return out
