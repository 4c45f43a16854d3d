"""The commit protocol of staged tables: parts are written where readers ignore them, one small object publishes them.

A run writes its parts under their final names (``staged/<table>/date=D/part-<run_id>.parquet``, or
``part-<run_id>-<k>.parquet`` for a date written as several bounded parts;
``quarantine/<table>/date=D/<run_id>.parquet``), which readers ignore until a *commit object*
``staged/_commits/<run_id>--<label>.json`` written last lists them (``add``) and the parts they
replace (``remove``). Writing one object is atomic on a local disk (temporary name + rename) and on
an object store (a single PUT), so readers see all of a run's parts or none, as Delta Lake's
transaction log does. The live parts of a table are the parts added by a commit and not removed by a
later one (commits applied in the order of their ``seq``, the commit time in ns).

* :class:`StagedCommit` -- a writer's side: :meth:`~StagedCommit.write_parquet` /
  :meth:`~StagedCommit.put_file` a part, :meth:`~StagedCommit.remove` a live part, then
  :meth:`~StagedCommit.commit` (one object) and :meth:`~StagedCommit.drop_removed` (deletes the
  replaced files once nothing refers to them).
* :func:`live_parts` -- the reader's side (``Store.staged_files`` / ``read_staged`` / ``staged_dates``).
* :func:`ensure_protocol` -- stores written before this protocol: every part present when a store is
  first opened by this code (``.tmp-*`` files excluded) is committed once by the ``legacy`` commit.
* :func:`garbage` -- files of ``staged/`` and ``quarantine/`` no commit refers to (parts of runs that
  died before their commit, replaced parts, temporary files); :mod:`nodewatch.tasks.core.commit_gc`
  removes those whose run is not running.
* :func:`~nodewatch.tasks.core.faults.fault_point` -- fault injection for tests: ``NODEWATCH_FAULT_AT="stage:after-part:3"`` kills
  this process (SIGKILL) the 3rd time the writer passes the point ``stage:after-part``.

This module imports nothing of the store (it takes any object with ``fs``, ``path`` and ``root``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from nodewatch.tasks.core.faults import fault_point

if TYPE_CHECKING:
    from nodewatch.tasks.core.store import Store

COMMITS = "staged/_commits"
"""Where commit objects live (relative to the store root)."""
PROTOCOL_MARKER = f"{COMMITS}/_protocol.json"
"""Written once the store uses this protocol (after the legacy commit, if any)."""
LEGACY_COMMIT = "00000000T000000Z-legacy--legacy"
"""Name (without ``.json``) of the commit of the parts that predate the protocol."""
AREAS = ("staged", "quarantine")
PART_DIGITS = 5
"""A run's date written as several bounded parts names them ``part-<run_id>-<k>.parquet``, ``k`` with this many
digits (run ids end in 6 hex characters after a ``-``, so the suffix cannot be mistaken for a run id's end)."""


class CommitError(RuntimeError):
    """A commit cannot be made (one-line message)."""


def _rel(store: Store, path: str) -> str:
    return path[len(store.root):].lstrip("/") if path.startswith(store.root) else path.lstrip("/")


def _table_of(key: str) -> str:
    """``staged/<table>`` or ``quarantine/<table>`` of a part key."""
    parts = key.split("/")
    return "/".join(parts[:2])


def run_of_file(name: str) -> str | None:
    """The run id a part or temporary file of ``staged/``/``quarantine/`` belongs to (from its file name)."""
    stem = name[:-8] if name.endswith(".parquet") else None
    if stem is None:
        return None
    part = False
    if stem.startswith(".tmp-"):  # .tmp-<run>.parquet (old ingest) or .tmp-<uuid hex>-part-<run>.parquet (store)
        stem = stem[5:]
        if "-part-" in stem:
            stem, part = stem.split("-part-", 1)[1], True
        elif len(stem) > 33 and stem[32] == "-" and all(c in "0123456789abcdef" for c in stem[:32]):
            stem = stem[33:]
    if stem.startswith("part-"):
        stem, part = stem[5:], True
    tail = stem[-PART_DIGITS - 1:]
    if part and len(stem) > PART_DIGITS + 1 and tail[0] == "-" and tail[1:].isdigit():  # part-<run>-<k>: bounded parts
        stem = stem[: -PART_DIGITS - 1]
    return stem or None


# ----------------------------------------------------------------------------- reading the log
@dataclass
class _LogCache:
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)


_CACHES: dict[tuple[int, str], _LogCache] = {}


def _read_commit(store: Store, name: str) -> dict[str, Any]:
    with store.fs.open(f"{store.root}/{COMMITS}/{name}", "rb") as f:
        return json.load(f)


def list_commits(store: Store) -> dict[str, dict[str, Any]]:
    """Every commit object (name without ``.json`` -> content); commit objects are immutable, so read once per store."""
    ensure_protocol(store)
    cache = _CACHES.setdefault((id(store.fs), store.root), _LogCache())
    base = f"{store.root}/{COMMITS}"
    names = sorted(
        p.rsplit("/", 1)[1] for p in store.fs.ls(base, detail=False)
        if p.endswith(".json") and not p.rsplit("/", 1)[1].startswith((".", "_"))
    )
    for n in names:
        if n[:-5] not in cache.commits:
            try:
                cache.commits[n[:-5]] = _read_commit(store, n)
            except (ValueError, UnicodeDecodeError) as e:
                raise CommitError(f"unreadable commit object {COMMITS}/{n}: {type(e).__name__}: {e}") from None
    present = {n[:-5] for n in names}
    return {k: v for k, v in cache.commits.items() if k in present}


def live_parts(store: Store) -> dict[str, set[str]]:
    """Live part keys per ``staged/<table>`` / ``quarantine/<table>`` (added by a commit, not removed by a later one)."""
    live: dict[str, set[str]] = {}
    commits = list_commits(store)
    for _name, c in sorted(commits.items(), key=lambda kv: (int(kv[1].get("seq", 0)), kv[0])):
        for key in c.get("remove", []):
            live.get(_table_of(key), set()).discard(key)
        for key in c.get("add", []):
            live.setdefault(_table_of(key), set()).add(key)
    return live


def committed_runs(store: Store) -> set[str]:
    """Run ids with at least one commit."""
    return {str(c.get("run_id")) for c in list_commits(store).values()}


# ----------------------------------------------------------------------------- migration
def _all_part_files(store: Store) -> list[str]:
    """Every ``*.parquet`` under ``staged/<table>/date=*/`` and ``quarantine/<table>/date=*/`` (keys)."""
    out: list[str] = []
    for area in AREAS:
        base = f"{store.root}/{area}"
        if not store.fs.exists(base):
            continue
        for p in store.fs.find(base):
            key = _rel(store, p)
            parts = key.split("/")
            if len(parts) == 4 and parts[2].startswith("date=") and parts[3].endswith(".parquet"):
                out.append(key)
    return sorted(out)


def ensure_protocol(store: Store) -> None:
    """Switch a store to the commit protocol once: parts already present (not ``.tmp-*``) are committed as ``legacy``."""
    marker = f"{store.root}/{PROTOCOL_MARKER}"
    if store.fs.exists(marker):
        return
    store.fs.makedirs(f"{store.root}/{COMMITS}", exist_ok=True)
    legacy = [k for k in _all_part_files(store) if not k.rsplit("/", 1)[1].startswith(".")]
    if store.fs.exists(marker):  # another process migrated meanwhile (its parts may already be new ones)
        return
    if legacy:
        _write_json(store, f"{COMMITS}/{LEGACY_COMMIT}.json", {
            "run_id": "legacy", "label": "legacy", "seq": 0, "add": legacy, "remove": [],
            "committed_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "note": "parts present when the store switched to the commit protocol",
        })
    _write_json(store, PROTOCOL_MARKER, {"protocol": 1, "since": datetime.now(UTC).isoformat(timespec="seconds"),
                                         "legacy_parts": len(legacy)})


def _write_json(store: Store, key: str, obj: Any) -> None:
    """One object written atomically: temporary name + rename locally, a single PUT on object stores."""
    final = f"{store.root}/{key}"
    data = json.dumps(obj, indent=1, sort_keys=True).encode()
    proto = store.fs.protocol if isinstance(store.fs.protocol, str) else store.fs.protocol[0]
    if proto in ("file", "local"):
        d, _, name = final.rpartition("/")
        tmp = f"{d}/.{name}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    else:
        store.fs.pipe_file(final, data)


# ----------------------------------------------------------------------------- writing
def is_part_key(key: str) -> bool:
    """Whether ``key`` names a part of ``staged/<table>/date=D/`` or ``quarantine/<table>/date=D/``."""
    parts = key.split("/")
    return len(parts) == 4 and parts[0] in AREAS and parts[2].startswith("date=") and parts[3].endswith(".parquet")


def commit_part(store: Store, key: str) -> str:
    """Publish one already written part on its own (a one-part commit); returns the commit key.

    For writers of a single file (``Store.write_parquet`` of a part key: simulators, fixtures); a run
    writing several parts uses :class:`StagedCommit` so that they appear together.
    """
    ensure_protocol(store)
    run = run_of_file(key.rsplit("/", 1)[1]) or "unknown"
    label = "part-" + key.replace("/", "_").replace("=", "-")
    name = f"{run}--{label}"[:200]
    ckey = f"{COMMITS}/{name}.json"
    _write_json(store, ckey, {"run_id": run, "label": label, "seq": time.time_ns(), "add": [key], "remove": [],
                              "committed_at": datetime.now(UTC).isoformat(timespec="milliseconds")})
    return ckey


class StagedCommit:
    """The parts one run adds (and replaces) in ``staged/`` and ``quarantine/``, published by one commit object.

    ``label`` tells commits of one run apart (ingest: the table; states: ``states``); ``fault`` is the
    prefix of the fault points (``<fault>:after-part``, ``:before-commit``, ``:after-commit``,
    ``:after-remove``).
    """

    def __init__(self, store: Store, run_id: str, label: str, fault: str = "stage") -> None:
        ensure_protocol(store)
        self.store, self.run_id, self.label, self.fault = store, run_id, label, fault
        self.name = f"{run_id}--{label}"
        self.adds: list[str] = []
        self.removes: list[str] = []
        self.rows: dict[str, int] = {}
        self.committed = False
        if store.fs.exists(f"{store.root}/{COMMITS}/{self.name}.json"):
            raise CommitError(f"run {run_id} already committed {label} ({COMMITS}/{self.name}.json); start a new run")

    def _target(self, key: str) -> str:
        if self.committed:
            raise CommitError(f"commit {self.name} is already published")
        final = self.store.path(key)
        self.store.fs.makedirs(final.rpartition("/")[0], exist_ok=True)
        return final

    def _added(self, key: str, rows: int) -> str:
        self.adds.append(key)
        t = _table_of(key)
        self.rows[t] = self.rows.get(t, 0) + rows
        fault_point(f"{self.fault}:after-part")
        return self.store.path(key)

    def write_parquet(self, table: pa.Table, key: str) -> str:
        """Write ``table`` as the part ``key`` (invisible to readers until :meth:`commit`); returns its path."""
        final = self._target(key)
        with self.store.fs.open(final, "wb") as f:
            pq.write_table(table, f, compression="zstd", write_statistics=True)
        return self._added(key, table.num_rows)

    def replace_partition(self, table_name: str, day: str, table: pa.Table) -> str:
        """Write ``table`` as this run's part of the staged date partition ``day`` and replace the committed
        parts of that date (re-runs replace, never duplicate): readers see the old parts until the commit,
        the new one after it. Returns the part's path."""
        key = self.store.staged_key(table_name, day, self.run_id)
        for k in self.store.live_keys("staged", table_name):
            if k.split("/")[2] == f"date={day}" and k != key:
                self.remove(k)
        return self.write_parquet(table, key)

    def put_file(self, local: str | os.PathLike[str], key: str, rows: int) -> str:
        """Upload a finished local parquet file as the part ``key``; returns its path."""
        final = self._target(key)
        self.store.fs.put_file(str(local), final)
        return self._added(key, rows)

    def remove(self, key: str) -> None:
        """Replace the live part ``key``: readers stop seeing it at :meth:`commit`."""
        if key not in self.removes:
            self.removes.append(key)

    def commit(self) -> str:
        """Publish: write the commit object (the one atomic step); returns its key."""
        fault_point(f"{self.fault}:before-commit")
        key = f"{COMMITS}/{self.name}.json"
        if self.store.fs.exists(self.store.path(key)):
            raise CommitError(f"run {self.run_id} already committed {self.label} ({key}); start a new run")
        _write_json(self.store, key, {
            "run_id": self.run_id, "label": self.label, "seq": time.time_ns(), "add": sorted(self.adds),
            "remove": sorted(self.removes), "rows": self.rows,
            "committed_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        })
        self.committed = True
        fault_point(f"{self.fault}:after-commit")
        return key

    def drop_removed(self) -> None:
        """Delete the files this commit replaced (after :meth:`commit`; a kill here leaves garbage, never a torn table)."""
        if not self.committed:
            raise CommitError("drop_removed before commit")
        for key in self.removes:
            p = self.store.path(key)
            if self.store.fs.exists(p):
                self.store.fs.rm(p)
            fault_point(f"{self.fault}:after-remove")


# ----------------------------------------------------------------------------- garbage
@dataclass(frozen=True)
class Garbage:
    """A file in ``staged/`` or ``quarantine/`` that no live commit refers to."""

    key: str
    run_id: str | None
    mtime: float | None
    replaced: bool
    """A part a later commit removed (always safe to delete)."""


def garbage(store: Store) -> list[Garbage]:
    """Files under ``staged/<table>/date=*/`` and ``quarantine/<table>/date=*/`` that are not live."""
    live = set().union(*live_parts(store).values()) if live_parts(store) else set()
    removed = {k for c in list_commits(store).values() for k in c.get("remove", [])}
    out: list[Garbage] = []
    for key in _all_part_files(store):
        if key in live:
            continue
        try:
            info = store.fs.info(store.path(key))
            mtime = float(info.get("mtime") or info.get("LastModified", 0) or 0) or None
        except (OSError, TypeError, ValueError):
            mtime = None
        out.append(Garbage(key, run_of_file(PurePosixPath(key).name), mtime, key in removed))
    return out
