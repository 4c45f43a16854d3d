"""The generic ingest pipeline used by every source.

``ingest_files`` takes files of one source through::

    land raw (sha256; same bytes twice = skipped) -> detect format -> parse (streaming batches)
      -> validate (GX suite from the table schema + run-time expectations + row checks)
      -> spool good rows by (date, node bucket) -> dedupe (within the run and against staged rows)
      -> write staged/<table>/date=D/part-<run_id>.parquet and quarantine/<table>/date=D/<run_id>.parquet

and accounts for every input row: ``rows_in = staged + quarantined + duplicates`` per file and
per table. Files that cannot be parsed at all go to ``quarantine/files/<source>/<sha>.json`` with
the error; rows read before a mid-file error (e.g. a truncated gzip) are kept.

Memory is bounded by one parse batch plus one (date, bucket) spool partition.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas.gx_suite import runtime_expectations
from schemas.manifest import InputRecord, RowCounts
from schemas.names import node_name_mask
from tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec
from tasks.ingest.inputs import InputError, open_binary, read_head
from tasks.runs import RunRecorder
from tasks.store import Store
from tasks.validate import BatchValidator, write_data_docs

N_BUCKETS = 16
VALIDATE_ROWS = 1_000_000
"""Rows validated per GX call (parser batches are concatenated up to this size)."""
QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("source_sha256", pa.string()),
        pa.field("source_file", pa.string()),
        pa.field("source_offset", pa.int64()),
        pa.field("time", pa.timestamp("ns", tz="UTC")),
        pa.field("reason", pa.string()),
        pa.field("raw", pa.string()),
    ]
)


@dataclass
class IngestResult:
    """What one ``ingest_files`` call did."""

    table: str
    counts: RowCounts = field(default_factory=RowCounts)
    inputs: list[InputRecord] = field(default_factory=list)
    staged_files: list[str] = field(default_factory=list)
    quarantine_files: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)
    data_docs: str | None = None
    unexpected: dict[str, int] = field(default_factory=dict)


def detect_format(spec: SourceSpec, path: Path, fmt: str = "auto") -> Format:
    """Pick the format of ``path``: the named one, or the best sniffer score (≥ 0.5, no tie)."""
    by_name = {f.name: f for f in spec.formats}
    if fmt != "auto":
        if fmt not in by_name:
            raise InputError(f"{path}: unknown format {fmt!r} for {spec.name}; choose one of {', '.join(by_name)}")
        return by_name[fmt]
    head = read_head(path)
    if not head:
        raise InputError(f"{path}: empty or unreadable file (0 bytes after decompression)")
    scores = sorted(((f.sniff(head), f.name) for f in spec.formats), reverse=True)
    best, name = scores[0]
    if best < 0.5:
        raise InputError(
            f"{path}: cannot tell the format of this {spec.name} file "
            f"(best guess {name} at {best:.2f}); pass --format {'|'.join(by_name)}"
        )
    if len(scores) > 1 and scores[1][0] == best:
        raise InputError(f"{path}: ambiguous format ({name} or {scores[1][1]}); pass --format")
    return by_name[name]


def _list_check(column: str, known: set[str] | None) -> Callable[[pa.Table], list[tuple[str, object]]]:
    """Row check: every name in a list<string> column matches the node pattern (and is known)."""

    def check(batch: pa.Table) -> list[tuple[str, object]]:
        col = batch.column(column)
        flat = pc.list_flatten(col)
        parents = pc.list_parent_indices(col).to_numpy()
        out: list[tuple[str, object]] = []
        bad = ~node_name_mask(flat)
        mask = np.zeros(batch.num_rows, bool)
        mask[parents[bad]] = True
        out.append((f"expect_list_values_to_match_regex({column})", mask))
        if known is not None:
            unknown = ~pc.is_in(flat, value_set=pa.array(sorted(known))).to_numpy(zero_copy_only=False)
            m2 = np.zeros(batch.num_rows, bool)
            m2[parents[unknown & ~bad]] = True
            out.append((f"expect_list_values_to_be_in_set({column} in known set of {len(known)})", m2))
        return out

    return check


_NS_PER_DAY = 86_400 * 10**9


def _dates(times: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """YYYY-MM-DD strings (UTC) of a timestamp column; nulls give 'unknown'.

    Computed on integer days and formatted once per distinct day (strftime per row is slow).
    """
    if len(times) == 0:
        return np.array([], dtype=object)
    ns = pc.cast(times.cast(pa.timestamp("ns", tz="UTC")), pa.int64())
    null = np.asarray(pc.is_null(ns).to_numpy(zero_copy_only=False), dtype=bool)
    days = np.floor_divide(np.asarray(pc.fill_null(ns, 0).to_numpy(zero_copy_only=False), dtype=np.int64), _NS_PER_DAY)
    uniq, inv = np.unique(days, return_inverse=True)
    labels = np.array([str(np.datetime64(int(d), "D")) for d in uniq], dtype=object)
    out = labels[inv]
    out[null] = "unknown"
    return out


def _buckets(col: pa.ChunkedArray | pa.Array | None, n: int) -> np.ndarray:
    """Stable bucket of each row from a key column (all 0 when there is none)."""
    if col is None:
        return np.zeros(n, np.int64)
    enc = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    uniq = np.asarray(enc.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    per_value = (pd.util.hash_array(uniq, categorize=False) % N_BUCKETS).astype(np.int64)
    codes = np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.where(codes >= 0, per_value[np.maximum(codes, 0)] if len(per_value) else 0, 0)


class _Spool:
    """Temporary parquet files partitioned by (date, bucket), buffered in memory up to ``max_rows``."""

    def __init__(self, root: Path, name: str, max_rows: int = 2_000_000) -> None:
        self.root = root / name
        self.parts: dict[tuple[str, int], list[Path]] = defaultdict(list)
        self.buffer: dict[tuple[str, int], list[pa.Table]] = defaultdict(list)
        self.buffered = 0
        self.max_rows = max_rows
        self._seq = 0

    def add(self, table: pa.Table, dates: np.ndarray, buckets: np.ndarray) -> None:
        if table.num_rows == 0:
            return
        keys = pd.DataFrame({"d": dates, "b": buckets})
        for (d, b), idx in keys.groupby(["d", "b"], sort=True).indices.items():
            self.buffer[(d, int(b))].append(table.take(pa.array(idx)))
        self.buffered += table.num_rows
        if self.buffered >= self.max_rows:
            self.flush()

    def flush(self) -> None:
        for key, tables in sorted(self.buffer.items()):
            d, b = key
            p = self.root / f"date={d}" / f"b={b}" / f"{self._seq:08d}.parquet"
            p.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.concat_tables(tables), p, compression="lz4")
            self._seq += 1
            self.parts[key].append(p)
        self.buffer.clear()
        self.buffered = 0

    def dates(self) -> list[str]:
        return sorted({d for d, _ in self.parts} | {d for d, _ in self.buffer})

    def read(self, date: str, bucket: int) -> pa.Table | None:
        tables = [pq.read_table(f) for f in self.parts.get((date, bucket), [])] + self.buffer.get((date, bucket), [])
        return pa.concat_tables(tables) if tables else None

    def buckets(self, date: str) -> list[int]:
        return sorted({b for d, b in self.parts if d == date} | {b for d, b in self.buffer if d == date})


def _key_codes(tables: Sequence[pa.Table], key: Sequence[str]) -> pd.DataFrame:
    """Integer key frame (one row per row of the concatenated tables) for fast duplicate detection."""
    cols = {}
    for k in key:
        arr = pa.chunked_array([c for t in tables for c in t.column(k).chunks], type=tables[0].schema.field(k).type)
        typ = arr.type
        if pa.types.is_timestamp(typ) or pa.types.is_integer(typ):
            # nulls become a sentinel so they group together (a null key is a value like any other)
            cols[k] = pc.fill_null(arr.cast(pa.int64()), np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)
        elif pa.types.is_floating(typ):
            cols[k] = arr.to_numpy(zero_copy_only=False)
        else:
            enc = pc.dictionary_encode(arr.combine_chunks())
            cols[k] = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)
    return pd.DataFrame(cols)


class Ingestor:
    """Runs the pipeline for one source within one run (see module docstring)."""

    def __init__(
        self,
        store: Store,
        spec: SourceSpec,
        recorder: RunRecorder,
        *,
        window: tuple[datetime | None, datetime | None] | None = None,
        tz: str = "UTC",
        known_nodes: set[str] | None = None,
        aliases: dict[str, str] | None = None,
        future_tolerance_s: int = 300,
        now: datetime | None = None,
    ) -> None:
        self.store, self.spec, self.recorder = store, spec, recorder
        self.tz = tz
        self.aliases = aliases or {}
        self.schema = spec.table
        self.staged_schema = self.schema.arrow_schema()
        if "source_offset" not in self.staged_schema.names:
            self.staged_schema = self.staged_schema.append(pa.field("source_offset", pa.int64()))
        self.staged_schema = self.staged_schema.append(pa.field("source_sha256", pa.string()))
        now = now or datetime.now(UTC)
        exp = self.schema.expectations() + runtime_expectations(
            self.schema,
            not_after=now + timedelta(seconds=future_tolerance_s),
            window=window,
            node_column=spec.node_column,
            known_nodes=known_nodes,
        )
        checks = list(spec.row_checks)
        if spec.node_list_column:
            checks.insert(0, _list_check(spec.node_list_column, known_nodes))
        self.validator = BatchValidator(self.schema, exp, checks, suite_name=f"{self.schema.name}-{recorder.run_id}")
        self._tmp = tempfile.TemporaryDirectory(prefix=f"nodewatch-ingest-{spec.name}-")
        tmp = Path(self._tmp.name)
        self.good = _Spool(tmp, "good")
        self.bad = _Spool(tmp, "bad")
        self.result = IngestResult(table=self.schema.name)
        self._file_order: dict[str, int] = {}
        self._per_file: dict[str, InputRecord] = {}
        self._names: dict[str, str] = {}

    # ------------------------------------------------------------------ per file
    def add_file(self, path: Path, fmt: str = "auto", on_rows: Callable[[int], None] | None = None) -> InputRecord:
        """Land, parse and validate one file (rows are spooled; call :meth:`finish` to stage)."""
        raw = self.store.land_raw(self.spec.name, path)
        rec = InputRecord(path=str(path), sha256=raw.sha256, bytes=raw.size)
        self.result.inputs.append(rec)
        if raw.sha256 in self._per_file or self.store.was_ingested(self.spec.name, raw.sha256):
            rec.status = "skipped-duplicate-file"
            prev = self.store.was_ingested(self.spec.name, raw.sha256)
            rec.message = f"same bytes already ingested by run {prev['run_id']}" if prev else "same bytes twice in this run"
            return rec
        self._per_file[raw.sha256] = rec
        self._names[raw.sha256] = path.name
        self._file_order[raw.sha256] = len(self._file_order)
        try:
            form = detect_format(self.spec, path, fmt)
        except InputError as e:
            self._quarantine_file(rec, str(e))
            return rec
        rec.format = form.name
        ctx = ParseContext(
            name=path.name,
            reference_time=datetime.fromtimestamp(path.stat().st_mtime, UTC),
            tz=self.tz,
            aliases=self.aliases,
        )
        # Parser batches are validated together in chunks of >= VALIDATE_ROWS rows: GX has a fixed
        # cost of ~1 s per validation call, independent of the number of rows.
        pending: list[ParseResult] = []
        n_pending = 0
        try:
            with open_binary(path) as stream:
                for res in form.parse(stream, ctx):
                    pending.append(res)
                    n_pending += res.rows_in
                    if on_rows:
                        on_rows(res.rows_in)
                    if n_pending >= VALIDATE_ROWS:
                        self._add_pending(rec, pending, path)
                        pending, n_pending = [], 0
        except InputError as e:
            msg = str(e) if str(path) in str(e) or path.name in str(e) else f"{path}: {e}"
            self._add_pending(rec, pending, path)  # rows read before the error are kept
            pending = []
            self._quarantine_file(rec, msg)
        self._add_pending(rec, pending, path)
        return rec

    def _add_pending(self, rec: InputRecord, pending: list[ParseResult], path: Path) -> None:
        if not pending:
            return
        rows = pa.concat_tables([p.rows for p in pending], promote_options="permissive")
        rejects = pa.concat_tables([p.rejects for p in pending])
        self._add_batch(rec, rows, rejects, path)

    def _quarantine_file(self, rec: InputRecord, message: str) -> None:
        rec.status = "quarantined-file"
        rec.message = message
        self.store.write_json(
            {
                "path": rec.path,
                "sha256": rec.sha256,
                "error": message,
                "run_id": self.recorder.run_id,
                "rows_read": rec.counts.rows_in,
            },
            "quarantine",
            "files",
            self.spec.name,
            f"{rec.sha256}.json",
        )
        self.recorder.error(message)

    def _add_batch(self, rec: InputRecord, rows: pa.Table, rejects: pa.Table, path: Path) -> None:
        rec.counts.rows_in += rows.num_rows + rejects.num_rows
        if rejects.num_rows:
            q = pa.table(
                {
                    "source_sha256": pa.array([rec.sha256] * rejects.num_rows, pa.string()),
                    "source_file": pa.array([path.name] * rejects.num_rows, pa.string()),
                    "source_offset": rejects.column("source_offset"),
                    "time": pa.nulls(rejects.num_rows, pa.timestamp("ns", tz="UTC")),
                    "reason": rejects.column("reason"),
                    "raw": rejects.column("raw"),
                },
                schema=QUARANTINE_SCHEMA,
            )
            self.bad.add(q, np.full(q.num_rows, "unknown", object), np.zeros(q.num_rows, np.int64))
            rec.counts.quarantined += rejects.num_rows
        if rows.num_rows == 0:
            return
        rows = self._conform(rows)
        ok, reasons = self.validator.validate(rows)
        if not ok.all():
            badrows = rows.filter(pa.array(~ok))
            raw = [
                json.dumps(r, default=str, ensure_ascii=False)[:4096] for r in badrows.drop_columns(["source_offset"]).to_pylist()
            ]
            q = pa.table(
                {
                    "source_sha256": pa.array([rec.sha256] * badrows.num_rows, pa.string()),
                    "source_file": pa.array([path.name] * badrows.num_rows, pa.string()),
                    "source_offset": badrows.column("source_offset"),
                    "time": badrows.column(self.schema.time_column).cast(pa.timestamp("ns", tz="UTC")),
                    "reason": reasons.filter(pa.array(~ok)).cast(pa.string()),
                    "raw": pa.array(raw, pa.string()),
                },
                schema=QUARANTINE_SCHEMA,
            )
            self.bad.add(q, _dates(q.column("time")), np.zeros(q.num_rows, np.int64))
            rec.counts.quarantined += badrows.num_rows
            rows = rows.filter(pa.array(ok))
        if rows.num_rows == 0:
            return
        rows = rows.append_column("source_sha256", pa.repeat(pa.scalar(rec.sha256, pa.string()), rows.num_rows))
        rows = rows.append_column("__order", pa.array(np.full(rows.num_rows, self._file_order[rec.sha256], np.int64)))
        key_col = self.spec.node_column or (self.schema.unique_key[0] if self.schema.unique_key else None)
        self.good.add(
            rows,
            _dates(rows.column(self.schema.time_column)),
            _buckets(rows.column(key_col) if key_col else None, rows.num_rows)
            if self.spec.node_column
            else np.zeros(rows.num_rows, np.int64),
        )

    def _conform(self, rows: pa.Table) -> pa.Table:
        """Select/cast the parser's rows to the staged schema (minus source_sha256)."""
        fields = [f for f in self.staged_schema if f.name != "source_sha256"]
        missing = [f.name for f in fields if f.name not in rows.column_names]
        if missing:
            raise RuntimeError(f"parser for {self.spec.name} did not produce columns {missing}")
        return pa.table([rows.column(f.name).cast(f.type) for f in fields], schema=pa.schema(fields))

    # ------------------------------------------------------------------ finish
    def finish(self, data_docs: bool = True) -> IngestResult:
        """Dedupe and write staged + quarantine partitions, mark inputs ingested, record counts.

        With ``data_docs`` a GX Data Docs site of the run's merged validation result is written to
        ``validation/<run_id>/<table>/`` in the store (its URL is in the result and the manifest).
        """
        key = list(self.schema.unique_key)
        dup_by_file: dict[str, int] = defaultdict(int)
        conflict_by_file: dict[str, int] = defaultdict(int)
        staged_by_file: dict[str, int] = defaultdict(int)
        run_id = self.recorder.run_id
        for date in self.good.dates():
            existing = self._existing(date, key)
            path = self.store.path(self.store.staged_key(self.schema.name, date, run_id))
            tmp_local = Path(self._tmp.name) / f"out-{date}.parquet"
            writer = pq.ParquetWriter(tmp_local, self.staged_schema, compression="zstd")
            written = 0
            try:
                for b in self.good.buckets(date):
                    t = self.good.read(date, b)
                    assert t is not None
                    t = t.sort_by([("__order", "ascending"), ("source_offset", "ascending")])
                    ex = (
                        existing.filter(pa.array(_buckets(existing.column(self.spec.node_column), existing.num_rows) == b))
                        if (existing is not None and self.spec.node_column)
                        else existing
                    )
                    dup, conflict = self._duplicates(t, ex, key)
                    if conflict.any():
                        self._quarantine_conflicts(t.filter(pa.array(conflict)), date, key)
                        for sha in t.column("source_sha256").filter(pa.array(conflict)).to_pylist():
                            conflict_by_file[sha] += 1
                    plain = dup & ~conflict
                    for sha in t.column("source_sha256").filter(pa.array(plain)).to_pylist():
                        dup_by_file[sha] += 1
                    keep = t.filter(pa.array(~dup)).drop_columns(["__order"])
                    keep = keep.sort_by([(k, "ascending") for k in key])
                    for s, c in pd.Series(keep.column("source_sha256").to_numpy(zero_copy_only=False)).value_counts().items():
                        staged_by_file[s] += int(c)
                    if keep.num_rows:
                        writer.write_table(keep.cast(self.staged_schema))
                        written += keep.num_rows
            finally:
                writer.close()
            if written:
                self.store.fs.makedirs(path.rpartition("/")[0], exist_ok=True)
                tmp_remote = path.rpartition("/")[0] + f"/.tmp-{run_id}.parquet"
                self.store.fs.put_file(str(tmp_local), tmp_remote)
                self.store.fs.mv(tmp_remote, path)
                self.result.staged_files.append(path)
                self.result.dates.append(date)
            tmp_local.unlink(missing_ok=True)
        for date in self.bad.dates():
            parts = [self.bad.read(date, b) for b in self.bad.buckets(date)]
            q = pa.concat_tables([p for p in parts if p is not None]).sort_by(
                [("source_sha256", "ascending"), ("source_offset", "ascending")]
            )
            self.result.quarantine_files.append(
                self.store.write_parquet(q, self.store.quarantine_key(self.schema.name, date, run_id))
            )
        for sha, rec in self._per_file.items():
            rec.counts.duplicates = dup_by_file.get(sha, 0)
            rec.counts.quarantined += conflict_by_file.get(sha, 0)
            rec.counts.staged = staged_by_file.get(sha, 0)
            self.result.counts = self.result.counts.add(rec.counts)
            self.store.mark_ingested(self.spec.name, sha, run_id, self.schema.name)
        for rec in self.result.inputs:
            self.recorder.add_input(rec)
        self.recorder.add_counts(self.schema.name, self.result.counts)
        self.result.unexpected = {k: v for k, v in self.validator.unexpected.items() if v}
        if data_docs:
            self._write_docs()
        self.recorder.add_output(f"staged_{self.schema.name}", sorted(set(self.result.dates)))
        self._tmp.cleanup()
        return self.result

    def _write_docs(self) -> None:
        run_id, table = self.recorder.run_id, self.schema.name
        local = Path(self._tmp.name) / "docs"
        if write_data_docs([self.validator], run_id, local) is None:
            return
        target = self.store.path("validation", run_id, table)
        self.store.fs.makedirs(target, exist_ok=True)
        self.store.fs.put(str(local) + "/", target, recursive=True)
        self.result.data_docs = self.store.url_of("validation", run_id, table, "index.html")
        self.recorder.add_output(f"data_docs_{table}", self.result.data_docs)

    def _value_columns(self, key: list[str]) -> list[str]:
        return [f.name for f in self.staged_schema if f.name not in key and f.name not in ("source_offset", "source_sha256")]

    def _existing(self, date: str, key: list[str]) -> pa.Table | None:
        """Key and value columns of rows already staged for ``date`` (by earlier runs)."""
        if date == "unknown":
            return None
        return self.store.read_staged(self.schema.name, [date], columns=key + self._value_columns(key))

    def _duplicates(self, t: pa.Table, ex: pa.Table | None, key: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Masks over ``t``: rows whose key was seen before (staged earlier, or earlier in this run), and
        among those the *conflicts*, whose other columns differ from the first occurrence's.

        A plain duplicate is dropped and counted; a conflict (same key, different values, e.g. two
        exports of one sample with different values) is quarantined, never silently dropped.
        """
        vcols = self._value_columns(key)
        parts = [ex, t] if ex is not None and ex.num_rows else [t]
        codes = _key_codes([p.select(key) for p in parts], key)
        n_prev = len(codes) - t.num_rows
        dup = codes.duplicated(keep="first").to_numpy()[n_prev:]
        conflict = np.zeros(t.num_rows, bool)
        if dup.any() and vcols:
            group = codes.groupby(list(codes.columns), sort=False, dropna=False).ngroup().to_numpy()
            first = pd.Series(np.arange(len(group))).groupby(group).transform("min").to_numpy()
            rows = np.flatnonzero(dup)
            values = pa.concat_tables([p.select(vcols) for p in parts], promote_options="permissive")
            later = values.take(pa.array(n_prev + rows)).to_pylist()
            earlier = values.take(pa.array(first[n_prev + rows])).to_pylist()
            conflict[rows] = [a != b for a, b in zip(later, earlier, strict=True)]
        return dup, conflict

    def _quarantine_conflicts(self, rows: pa.Table, date: str, key: list[str]) -> None:
        reason = f"conflicting_duplicate({','.join(key)}): same key as an earlier row with different values"
        raw = [
            json.dumps(r, default=str, ensure_ascii=False)[:4096]
            for r in rows.drop_columns(["source_offset", "__order"]).to_pylist()
        ]
        q = pa.table(
            {
                "source_sha256": rows.column("source_sha256"),
                "source_file": pa.array([self._names.get(s, "") for s in rows.column("source_sha256").to_pylist()], pa.string()),
                "source_offset": rows.column("source_offset"),
                "time": rows.column(self.schema.time_column).cast(pa.timestamp("ns", tz="UTC")),
                "reason": pa.repeat(pa.scalar(reason), rows.num_rows),
                "raw": pa.array(raw, pa.string()),
            },
            schema=QUARANTINE_SCHEMA,
        )
        self.bad.add(q, np.full(q.num_rows, date, object), np.zeros(q.num_rows, np.int64))


def ingest_files(
    store: Store,
    spec: SourceSpec,
    paths: Iterable[Path],
    recorder: RunRecorder,
    *,
    fmt: str = "auto",
    window: tuple[datetime | None, datetime | None] | None = None,
    tz: str = "UTC",
    known_nodes: set[str] | None = None,
    aliases: dict[str, str] | None = None,
    future_tolerance_s: int = 300,
    data_docs: bool = True,
) -> IngestResult:
    """Ingest ``paths`` of source ``spec`` into the store within the run of ``recorder``."""
    ing = Ingestor(
        store,
        spec,
        recorder,
        window=window,
        tz=tz,
        known_nodes=known_nodes,
        aliases=aliases,
        future_tolerance_s=future_tolerance_s,
    )
    for p in paths:
        ing.add_file(Path(p), fmt)
    return ing.finish(data_docs=data_docs)


def known_nodes_and_aliases(store: Store) -> tuple[set[str] | None, dict[str, str]]:
    """Known nodes and aliases from the staged topology (``(None, {})`` when there is none)."""
    try:
        from tasks.ingest.topology import load_topology  # provided by the topology source
    except ImportError:
        load_topology = None
    if load_topology is not None:
        known, aliases, _ = load_topology(store)
        return (set(known) if known else None), dict(aliases)
    t = store.read_staged("topology", columns=["node"])
    if t is None:
        return None, {}
    return set(t.column("node").to_pylist()), {}
