"""The store: one fsspec root holding raw inputs, staged tables, quarantine, cubes, models, runs.

Layout (see ``docs/store.md``)::

    raw/<source>/<sha256>.<ext>                       immutable, content-addressed input bytes
    staged/<table>/date=YYYY-MM-DD/part-<run_id>.parquet   visible once committed (staged/_commits/)
    staged/<table>/date=YYYY-MM-DD/part-<run_id>-<k>.parquet   the same, a date written as bounded parts k=00000..
    quarantine/<table>/date=YYYY-MM-DD/<run_id>.parquet   rejected rows with reason + source offset
    quarantine/files/<source>/<sha256>.json           files that could not be parsed at all
    runs/<run_id>.json                                run manifests
    <area>/CURRENT                                    atomic pointer to the current run of an area

All writes of final objects are atomic, so readers never observe half-written files: on local disks
through a temporary name followed by a rename; on object stores (``s3://``, ``gs://``, ``az://``) by
writing the final key directly, since an object becomes visible only when its PUT (or multipart
upload) completes and a rename there is a copy plus a delete (two more requests, no more atomic). Staged
and quarantine parts are published per run by a commit object (:mod:`nodewatch.tasks.core.commit`):
the staged readers below return committed parts only.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from nodewatch.schemas.names import check_path_token
from nodewatch.tasks.core.commit import PART_DIGITS, commit_part, is_part_key, live_parts, run_of_file
from nodewatch.tasks.core.files import open_regular

_CHUNK = 1 << 20
OBJECT_STORES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")
"""Protocols whose single-object writes are atomic (visible only once complete): no temporary name + rename."""
PRIVATE_AREAS = ("raw", "quarantine")
"""Areas holding input bytes and rejected rows as received: owner-only (0700 dirs, 0600 files) on local disk."""


def sha256_stream(f: BinaryIO) -> tuple[str, int]:
    """Return (hex sha256, size in bytes) of what ``f`` yields from its current position, in 1 MiB chunks."""
    h = hashlib.sha256()
    size = 0
    while chunk := f.read(_CHUNK):
        h.update(chunk)
        size += len(chunk)
    return h.hexdigest(), size


class StagedPartError(RuntimeError):
    """A committed staged part cannot be read (one-line message naming the file)."""


@dataclass(frozen=True)
class RawObject:
    """A landed input: its hash, where it lives in the store and whether it was new."""

    sha256: str
    key: str
    size: int
    new: bool


class Store:
    """Access to the store root (any fsspec URL; default local ``./nodewatch-data``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fs, root = fsspec.core.url_to_fs(url)
        self.root = root.rstrip("/")
        self.fs.makedirs(self.root, exist_ok=True)

    # ----------------------------------------------------------------- paths
    def path(self, *parts: str) -> str:
        """Absolute path (in the store's filesystem) of a key built from validated parts."""
        for p in parts:
            for token in p.split("/"):
                if token in ("", ".", "..") or "\x00" in token:
                    raise ValueError(f"unsafe store key component {p!r}")
        return "/".join([self.root, *parts])

    def url_of(self, *parts: str) -> str:
        """fsspec URL of a key (for zarr/xarray/pyarrow consumers)."""
        p = self.path(*parts)
        proto = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return p if proto in ("file", "local") else f"{proto}://{p}"

    @property
    def is_local(self) -> bool:
        """Whether the store is on the local filesystem."""
        proto = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return proto in ("file", "local")

    @property
    def is_object_store(self) -> bool:
        """Whether the store is on an object store (atomic object writes, no atomic rename)."""
        proto = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return proto in OBJECT_STORES

    def report_dir(self, *parts: str) -> Path:
        """A local directory for human-facing reports (PNGs, markdown) under ``reports/``.

        For remote stores the reports go to ``./nodewatch-reports/`` in the working directory.
        """
        base = Path(self.path("reports", *parts)) if self.is_local else Path("nodewatch-reports", *parts)
        base.mkdir(parents=True, exist_ok=True)
        return base

    def exists(self, *parts: str) -> bool:
        """Whether a key exists."""
        return self.fs.exists(self.path(*parts))

    # ----------------------------------------------------------------- atomic writes
    def _tmp(self, final: str) -> str:
        """Where to write before publishing ``final``: a temporary sibling, or ``final`` itself on an object store."""
        if self.is_object_store:
            return final
        d, _, name = final.rpartition("/")
        return f"{d}/.tmp-{uuid.uuid4().hex}-{name}"

    def _publish(self, tmp: str, final: str) -> None:
        """Make ``tmp`` visible as ``final`` (a rename; nothing on an object store, where ``tmp`` is ``final``)."""
        if tmp != final:
            self.fs.mv(tmp, final)

    def _makedirs_for(self, final: str) -> None:
        """Create the parent directories of ``final``; owner-only in the private areas of a local store."""
        parent = final.rpartition("/")[0]
        self.fs.makedirs(parent, exist_ok=True)
        if not self.is_local:
            return
        rel = parent[len(self.root):].lstrip("/").split("/")
        if rel and rel[0] in PRIVATE_AREAS:
            for i in range(1, len(rel) + 1):
                os.chmod("/".join([self.root, *rel[:i]]), 0o700)

    def _seal(self, final: str) -> None:
        """Owner-only mode for a file in a private area of a local store."""
        if self.is_local and final[len(self.root):].lstrip("/").split("/", 1)[0] in PRIVATE_AREAS:
            os.chmod(final, 0o600)

    def write_bytes(self, data: bytes, *parts: str) -> str:
        """Write bytes atomically to a key; returns the path."""
        final = self.path(*parts)
        self._makedirs_for(final)
        tmp = self._tmp(final)
        with self.fs.open(tmp, "wb") as f:
            f.write(data)
        self._publish(tmp, final)
        self._seal(final)
        return final

    def write_json(self, obj: Any, *parts: str) -> str:
        """Write JSON atomically (sorted keys, so equal content gives equal bytes)."""
        return self.write_bytes(json.dumps(obj, indent=2, sort_keys=True, default=str).encode(), *parts)

    def read_json(self, *parts: str) -> Any:
        """Read a JSON key."""
        with self.fs.open(self.path(*parts), "rb") as f:
            return json.load(f)

    def write_parquet(self, table: pa.Table, *parts: str) -> str:
        """Write a parquet file atomically (zstd, deterministic settings).

        A staged or quarantine part key (``staged/<table>/date=D/part-<run>.parquet``) is published
        at once by its own commit object (:func:`~nodewatch.tasks.core.commit.commit_part`); runs that
        write several parts use :class:`~nodewatch.tasks.core.commit.StagedCommit` instead.
        """
        final = self.path(*parts)
        self._makedirs_for(final)
        tmp = self._tmp(final)
        with self.fs.open(tmp, "wb") as f:
            pq.write_table(table, f, compression="zstd", write_statistics=True)
        self._publish(tmp, final)
        self._seal(final)
        key = "/".join(parts)
        if is_part_key(key):  # a staged/quarantine part written alone is published on its own
            commit_part(self, key)
        return final

    # ----------------------------------------------------------------- raw landing
    def land_raw(self, source: str, local_path: str | os.PathLike[str]) -> RawObject:
        """Copy an input file into ``raw/<source>/<sha256><ext>``; same bytes twice is a no-op.

        The file is opened once with :func:`~nodewatch.tasks.core.files.open_regular` (no symlink is
        followed, only a regular file is read) and hashed and copied from that one descriptor, so
        what lands is exactly what was hashed. The copy is owner-only on a local store.
        """
        check_path_token(source, "source")
        fd = open_regular(local_path)
        with os.fdopen(fd, "rb") as src:
            sha, size = sha256_stream(src)
            ext = "".join(Path(local_path).suffixes[-2:])[:16]
            ext = "".join(ch for ch in ext if ch.isalnum() or ch == ".")
            key = f"raw/{source}/{sha}{ext}"
            if self.fs.exists(self.path(key)):
                return RawObject(sha, key, size, new=False)
            final = self.path(key)
            self._makedirs_for(final)
            tmp = self._tmp(final)
            src.seek(0)
            with self.fs.open(tmp, "wb") as dst:
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
            self._publish(tmp, final)
            self._seal(final)
        return RawObject(sha, key, size, new=True)

    def ingested_marker(self, source: str, sha: str) -> str:
        """Key of the marker saying a raw object was fully ingested (and by which run)."""
        return f"raw/{check_path_token(source, 'source')}/{sha}.ingested.json"

    def was_ingested(self, source: str, sha: str) -> dict[str, Any] | None:
        """The marker of a previous successful ingestion of these bytes, if any."""
        key = self.ingested_marker(source, sha)
        return self.read_json(key) if self.exists(key) else None

    def mark_ingested(self, source: str, sha: str, run_id: str, table: str, failed_with_format: str | None = None) -> None:
        """Record that a raw object was ingested by ``run_id`` into ``table``.

        ``failed_with_format``: the file could not be (fully) parsed with this ``--format`` choice
        (``"auto"`` or a format name); the same bytes are skipped again only with that same choice,
        so a retry with another ``--format`` (as the error message suggests) is not a no-op.
        """
        marker: dict[str, Any] = {"run_id": run_id, "table": table, "sha256": sha}
        if failed_with_format is not None:
            marker["failed_with_format"] = failed_with_format
        self.write_json(marker, self.ingested_marker(source, sha))

    # ----------------------------------------------------------------- staged / quarantine
    def staged_key(self, table: str, date: str, run_id: str, part: int | None = None) -> str:
        """Key of one staged partition file: ``part-<run_id>.parquet``, or ``part-<run_id>-<k>.parquet``
        (``k`` zero-padded to 5 digits, :data:`~nodewatch.tasks.core.commit.PART_DIGITS`) for the
        ``part``-th of several bounded parts of one run's date (all published by one commit)."""
        name = f"part-{check_path_token(run_id, 'run id')}"
        if part is not None:
            name += f"-{int(part):0{PART_DIGITS}d}"
        return f"staged/{check_path_token(table, 'table')}/date={date}/{name}.parquet"

    def quarantine_key(self, table: str, date: str, run_id: str) -> str:
        """Key of one quarantine file."""
        return f"quarantine/{check_path_token(table, 'table')}/date={date}/{check_path_token(run_id, 'run id')}.parquet"

    def live_keys(self, area: str, table: str) -> list[str]:
        """Committed part keys of ``<area>/<table>`` (``area``: ``staged`` or ``quarantine``), sorted.

        Only parts published by a commit object (:mod:`nodewatch.tasks.core.commit`) count: parts of a
        run that has not committed (still writing, or killed) and ``.tmp-*`` files are never returned.
        """
        return sorted(live_parts(self).get(f"{area}/{check_path_token(table, 'table')}", set()))

    def staged_dates(self, table: str) -> list[str]:
        """Dates (YYYY-MM-DD) that have committed staged partitions for ``table``."""
        return sorted({k.split("/")[2].split("=", 1)[1] for k in self.live_keys("staged", table)})

    def staged_files(self, table: str, dates: list[str] | None = None, run_id: str | None = None) -> list[str]:
        """Paths of committed staged parquet files of ``table`` (optionally only for ``dates`` / written by ``run_id``)."""
        want = None if dates is None else {f"date={d}" for d in dates}
        run = check_path_token(run_id, "run id") if run_id else None
        out = []
        for k in self.live_keys("staged", table):  # sorted: the parts of one run's date in order
            _, _, part, file = k.split("/")
            if (want is None or part in want) and (run is None or run_of_file(file) == run):
                out.append(self.path(k))
        return out

    def read_staged(
        self, table: str, dates: list[str] | None = None, columns: list[str] | None = None, run_id: str | None = None
    ) -> pa.Table | None:
        """Read committed staged partitions of ``table`` into one Arrow table (``None`` if nothing is staged).

        A part that cannot be read raises :class:`StagedPartError` naming the file (``nodewatch store verify``).
        """
        files = self.staged_files(table, dates, run_id)
        if not files:
            return None
        parts = []
        for p in files:
            try:
                with self.fs.open(p, "rb") as f:
                    parts.append(pq.read_table(f, columns=columns))
            except (pa.ArrowException, OSError) as e:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise StagedPartError(
                    f"staged part {p} is unreadable ({type(e).__name__}: {msg}); "
                    "`nodewatch store verify` lists such parts, `nodewatch store repair` re-stages them from raw/"
                ) from None
        return pa.concat_tables(parts, promote_options="permissive")

    def read_parquet(self, *parts: str) -> pa.Table:
        """Read one parquet key."""
        with self.fs.open(self.path(*parts), "rb") as f:
            return pq.read_table(f)

    # ----------------------------------------------------------------- pointers and runs
    def set_current(self, area: str, run_id: str) -> None:
        """Atomically point ``<area>/CURRENT`` at ``run_id`` (call only after the run finished)."""
        check_path_token(run_id, "run id")
        self.write_bytes((run_id + "\n").encode(), area, "CURRENT")

    def current(self, area: str) -> str | None:
        """Run id that ``<area>/CURRENT`` points to, or ``None``."""
        if not self.exists(area, "CURRENT"):
            return None
        with self.fs.open(self.path(area, "CURRENT"), "rb") as f:
            return f.read().decode().strip() or None

    def list_runs(self) -> list[str]:
        """All run ids with a manifest, oldest first."""
        base = self.path("runs")
        if not self.fs.exists(base):
            return []
        names = [p.rsplit("/", 1)[1] for p in self.fs.ls(base, detail=False)]
        return sorted(n[:-5] for n in names if n.endswith(".json") and not n.startswith(".tmp"))

    def iter_files(self, *parts: str) -> Iterator[str]:
        """All files below a key, recursively."""
        base = self.path(*parts)
        if self.fs.exists(base):
            yield from sorted(self.fs.find(base))
