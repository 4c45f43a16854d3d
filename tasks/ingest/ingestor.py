"""The :class:`Ingestor`: one source's files through the ingest pipeline within one run.

:meth:`Ingestor.add_file` lands, parses, validates and spools one file (``landing``, ``validation``,
``spool``); :meth:`Ingestor.finish` dedupes (``dedupe``) and writes the staged and quarantine
partitions (``staging``). Stages and row accounting: :mod:`nodewatch.tasks.ingest.pipeline`.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nodewatch.schemas.gx_suite import runtime_expectations
from nodewatch.schemas.manifest import InputRecord, RowCounts
from nodewatch.schemas.names import lower_aliases
from nodewatch.tasks.core.commit import CommitError, StagedCommit
from nodewatch.tasks.core.commit_gc import clean_dead_parts
from nodewatch.tasks.core.counters import CounterCarry, CounterState, merge_states, state_from_table, state_to_table
from nodewatch.tasks.core.datadocs import write_data_docs
from nodewatch.tasks.core.locks import store_lock
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.core.validate import BatchValidator
from nodewatch.tasks.ingest import spool
from nodewatch.tasks.ingest.base import ParseContext, ParseResult, SourceSpec
from nodewatch.tasks.ingest.dedupe import _sort_dedupe
from nodewatch.tasks.ingest.inputs import InputError, open_binary
from nodewatch.tasks.ingest.landing import detect_format
from nodewatch.tasks.ingest.spool import BUCKET, ORDER, _buckets, _date_codes, _Spool
from nodewatch.tasks.ingest.staging import (
    WRITE_ROWS,
    _arrival_order,
    _combine_dictionaries,
    _plain_read,
    _take_columns,
    _writer_options,
    part_bounds,
)
from nodewatch.tasks.ingest.validation import (
    QUARANTINE_SCHEMA,
    VALIDATE_BYTES,
    VALIDATE_ROWS,
    _conform_column,
    _encode_strings,
    _list_check,
    _low_cardinality_strings,
    canonical_node_columns,
    node_columns,
)


def transient_io(exc: BaseException) -> bool:
    """Whether an error may pass on a retry: a connection or timeout error, or an ``OSError`` the
    operating system raised (it carries an ``errno``: EIO, ENOSPC, ...). pyarrow raises ``OSError``
    without an errno for bytes it cannot decode (a corrupt parquet footer): deterministic, like
    ``ValueError``/``ArrowInvalid``/``InputError``."""
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return isinstance(exc, OSError) and exc.errno is not None and not isinstance(exc, pa.ArrowException)


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
    timings: dict[str, float] = field(default_factory=dict)
    """CPU seconds (this process) per pipeline stage: land, parse, validate, quarantine, spool, stage, write, docs."""


class Ingestor:
    """Runs the pipeline for one source within one run (see :mod:`nodewatch.tasks.ingest.pipeline`)."""

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
        row_transform: Callable[[pa.Table], pa.Table] | None = None,
    ) -> None:
        self.store, self.spec, self.recorder = store, spec, recorder
        self.row_transform = row_transform  # applied to every parsed batch before validation (e.g. user hashing)
        self.tz = tz
        self.aliases = aliases or {}
        self.schema = spec.table
        self._node_cols = node_columns(self.schema)  # normalised in _conform: one name per node, every source
        self._low_aliases = lower_aliases(self.aliases)
        self._node_cache: dict[str, str] = {}
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
        self.good = _Spool(tmp, "good", spool.SPOOL_BYTES)
        self.bad = _Spool(tmp, "bad", spool.SPOOL_BYTES)
        self.result = IngestResult(table=self.schema.name)
        self._file_order: dict[str, int] = {}
        self._next_order = 0
        self._dropped: set[int] = set()  # file orders whose spooled rows are not staged (failed attempts / files)
        self._unexpected: set[str] = set()  # sha256 of files quarantined by an unexpected error: never marked ingested
        self._per_file: dict[str, InputRecord] = {}
        self._names: dict[str, str] = {}
        self._requested: dict[str, str] = {}  # sha256 -> the --format choice the file was read with
        self.timings: dict[str, float] = defaultdict(float)
        self._encoded: set[str] | None = None
        self._counter_seed: CounterState | None = None  # counter series from earlier runs (read on first use)
        self._counter_out: list[CounterState] = []

    @contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        t0 = time.process_time()
        try:
            yield
        finally:
            self.timings[stage] += time.process_time() - t0

    # ------------------------------------------------------------------ per file
    def add_file(self, path: Path, fmt: str = "auto", on_rows: Callable[[int], None] | None = None) -> InputRecord:
        """Land, parse and validate one file (rows are spooled; call :meth:`finish` to stage)."""
        with self._timed("land"):
            raw = self.store.land_raw(self.spec.name, path)
        rec = InputRecord(path=str(path), sha256=raw.sha256, bytes=raw.size)
        self.result.inputs.append(rec)
        prev = self.store.was_ingested(self.spec.name, raw.sha256)
        if prev is not None and prev.get("failed_with_format", fmt) != fmt:
            prev = None  # failed before with another --format choice: try again with this one
        if raw.sha256 in self._per_file or prev is not None:
            rec.status = "skipped-duplicate-file"
            rec.message = f"same bytes already ingested by run {prev['run_id']}" if prev else "same bytes twice in this run"
            if prev is not None and "failed_with_format" in prev:
                rec.message += f" (the file failed with --format {fmt}; pass another --format to retry)"
            return rec
        self._requested[raw.sha256] = fmt
        self._per_file[raw.sha256] = rec
        self._names[raw.sha256] = path.name
        self._file_order[raw.sha256] = self._next_order
        self._next_order += 1
        try:
            self._parse_file(rec, path, fmt, on_rows)
        except InputError:
            raise  # a usage error outside parsing (one line, as before)
        except OSError as e:
            if transient_io(e):
                # transient I/O (the flow retries the file): forget this attempt, its rows are dropped
                self._forget(rec)
                raise
            self._fail_file(rec, path, e)
        except Exception as e:  # noqa: BLE001 - any other error: the whole file is quarantined, named, the run partial
            self._fail_file(rec, path, e)
        return rec

    def _fail_file(self, rec: InputRecord, path: Path, e: BaseException) -> None:
        """Quarantine the whole file after an unexpected error: none of its rows is staged, the error is
        one line naming the file, the run is ``partial`` and the file is not marked ingested (a re-run retries it)."""
        first = (str(e).splitlines() or [""])[0][:300]
        read = rec.counts.rows_in
        self._dropped.add(self._file_order[rec.sha256])
        rec.counts = RowCounts()
        self._unexpected.add(rec.sha256)
        self._quarantine_file(rec, f"{path}: {type(e).__name__}: {first}".rstrip(": "), rows_read=read)

    def _forget(self, rec: InputRecord) -> None:
        """Undo the registration of a file whose attempt failed with a transient error (its spooled rows are dropped)."""
        self._dropped.add(self._file_order.pop(rec.sha256))
        self._per_file.pop(rec.sha256, None)
        self._names.pop(rec.sha256, None)
        self._requested.pop(rec.sha256, None)
        if rec in self.result.inputs:
            self.result.inputs.remove(rec)

    def _parse_file(self, rec: InputRecord, path: Path, fmt: str, on_rows: Callable[[int], None] | None) -> None:
        """Detect the format, parse, validate and spool the rows of one registered file."""
        try:
            form = detect_format(self.spec, path, fmt)
        except InputError as e:
            self._quarantine_file(rec, str(e))
            return
        rec.format = form.name
        ctx = ParseContext(
            name=path.name,
            reference_time=datetime.fromtimestamp(path.stat().st_mtime, UTC),
            tz=self.tz,
            aliases=self.aliases,
            counters=self._counter_carry(),
        )
        # Parser batches are validated together in chunks of up to VALIDATE_ROWS rows / VALIDATE_BYTES
        pending: list[ParseResult] = []
        n_pending = b_pending = 0
        try:
            with open_binary(path) as stream:
                for res in self._timed_iter(form.parse(stream, ctx)):
                    pending.append(res)
                    n_pending += res.rows_in
                    b_pending += res.rows.nbytes
                    if on_rows:
                        on_rows(res.rows_in)
                    if n_pending >= VALIDATE_ROWS or b_pending >= VALIDATE_BYTES:
                        self._add_pending(rec, pending, path)
                        pending, n_pending, b_pending = [], 0, 0
        except InputError as e:
            msg = str(e) if str(path) in str(e) or path.name in str(e) else f"{path}: {e}"
            self._add_pending(rec, pending, path)  # rows read before the error are kept
            pending = []
            self._quarantine_file(rec, msg)
        self._add_pending(rec, pending, path)
        if ctx.counters is not None and ctx.counters.out is not None:
            self._counter_out.append(ctx.counters.out)

    def _counter_key(self) -> str:
        return f"state/counters/{self.spec.name}.parquet"

    def _counter_carry(self) -> CounterCarry | None:
        """Counter series of earlier runs for the next file (sources with ``carries_counters``)."""
        if not self.spec.carries_counters:
            return None
        if self._counter_seed is None:
            key = self._counter_key()
            self._counter_seed = state_from_table(self.store.read_parquet(key)) if self.store.exists(key) else CounterState()
        return CounterCarry(seed=self._counter_seed)

    def _save_counters(self) -> None:
        """Newest sample per counter series over earlier runs and this run's files (atomic write)."""
        if not self._counter_out:
            return
        merged = merge_states([self._counter_seed or CounterState(), *self._counter_out])
        path = self.store.write_parquet(state_to_table(merged), self._counter_key())
        self.recorder.add_output(f"counter_state_{self.spec.name}", path)

    def _timed_iter(self, it: Iterable[ParseResult]) -> Iterator[ParseResult]:
        """``it``, with the time spent producing its items counted as ``parse``."""
        it = iter(it)
        while True:
            with self._timed("parse"):
                try:
                    res = next(it)
                except StopIteration:
                    return
            yield res

    def _add_pending(self, rec: InputRecord, pending: list[ParseResult], path: Path) -> None:
        if not pending:
            return
        rows = pa.concat_tables([p.rows for p in pending], promote_options="permissive")
        rejects = pa.concat_tables([p.rejects for p in pending])
        self._add_batch(rec, rows, rejects, path)

    def _quarantine_file(self, rec: InputRecord, message: str, rows_read: int | None = None) -> None:
        rec.status = "quarantined-file"
        rec.message = message
        self.store.write_json(
            {
                "path": rec.path,
                "sha256": rec.sha256,
                "error": message,
                "run_id": self.recorder.run_id,
                "rows_read": rec.counts.rows_in if rows_read is None else rows_read,
            },
            "quarantine",
            "files",
            self.spec.name,
            f"{rec.sha256}.json",
        )
        self.recorder.error(message)

    def _add_batch(self, rec: InputRecord, rows: pa.Table, rejects: pa.Table, path: Path) -> None:
        rec.counts.rows_in += rows.num_rows + rejects.num_rows
        if self.row_transform is not None and rows.num_rows:
            with self._timed("parse"):
                rows = self.row_transform(rows)
        if rejects.num_rows:
            with self._timed("quarantine"):
                q = pa.table(
                    {
                        "source_sha256": pa.repeat(pa.scalar(rec.sha256, pa.string()), rejects.num_rows),
                        "source_file": pa.repeat(pa.scalar(path.name, pa.string()), rejects.num_rows),
                        "source_offset": rejects.column("source_offset"),
                        "time": pa.nulls(rejects.num_rows, pa.timestamp("ns", tz="UTC")),
                        "reason": rejects.column("reason"),
                        "raw": rejects.column("raw"),
                    },
                    schema=QUARANTINE_SCHEMA,
                )
                q = q.append_column(ORDER, pa.repeat(pa.scalar(self._file_order[rec.sha256], pa.int32()), q.num_rows))
                self.bad.add(q, ["unknown"], np.zeros(q.num_rows, np.int64), np.zeros(q.num_rows, np.int64))
            rec.counts.quarantined += rejects.num_rows
        if rows.num_rows == 0:
            return
        with self._timed("validate"):
            plain = self._conform(rows)
            if self._encoded is None:  # decided on the first batch: the spool needs one schema
                self._encoded = _low_cardinality_strings(plain)
            rows = _encode_strings(plain, self._encoded)
            ok, reasons = self.validator.validate(rows, plain=plain)
        if not ok.all():
            with self._timed("quarantine"):
                keep = pa.array(ok)
                badrows = rows.filter(pc.invert(keep))
                raw = [
                    json.dumps(r, default=str, ensure_ascii=False)[:4096]
                    for r in badrows.drop_columns(["source_offset"]).to_pylist()
                ]
                q = pa.table(
                    {
                        "source_sha256": pa.repeat(pa.scalar(rec.sha256, pa.string()), badrows.num_rows),
                        "source_file": pa.repeat(pa.scalar(path.name, pa.string()), badrows.num_rows),
                        "source_offset": badrows.column("source_offset"),
                        "time": badrows.column(self.schema.time_column).cast(pa.timestamp("ns", tz="UTC")),
                        "reason": reasons.filter(pc.invert(keep)).cast(pa.string()),
                        "raw": pa.array(raw, pa.string()),
                    },
                    schema=QUARANTINE_SCHEMA,
                )
                q = q.append_column(ORDER, pa.repeat(pa.scalar(self._file_order[rec.sha256], pa.int32()), q.num_rows))
                labels, codes = _date_codes(q.column("time"))
                self.bad.add(q, labels, codes, np.zeros(q.num_rows, np.int64))
                rec.counts.quarantined += badrows.num_rows
                rows = rows.filter(keep)
        if rows.num_rows == 0:
            return
        with self._timed("spool"):
            rows = rows.append_column(ORDER, pa.repeat(pa.scalar(self._file_order[rec.sha256], pa.int32()), rows.num_rows))
            labels, codes = _date_codes(rows.column(self.schema.time_column))
            node = self.spec.node_column
            self.good.add(rows, labels, codes, _buckets(rows.column(node) if node else None, rows.num_rows))

    def _conform(self, rows: pa.Table) -> pa.Table:
        """Select/cast the parser's rows to the staged schema (minus source_sha256); string columns
        a parser passed on dictionary-encoded stay encoded (:func:`_conform_column`)."""
        fields = [f for f in self.staged_schema if f.name != "source_sha256"]
        missing = [f.name for f in fields if f.name not in rows.column_names]
        if missing:
            raise RuntimeError(f"parser for {self.spec.name} did not produce columns {missing}")
        cols = [_conform_column(rows.column(f.name), f.type) for f in fields]
        t = pa.table(cols, schema=pa.schema([f.with_type(c.type) for f, c in zip(fields, cols, strict=True)]))
        return canonical_node_columns(t, *self._node_cols, self._low_aliases, self._node_cache)

    # ------------------------------------------------------------------ finish
    def finish(self, data_docs: bool = True) -> IngestResult:
        """Dedupe, write staged + quarantine parts, publish them in one commit, then mark inputs ingested.

        Under the table's ingest lock (``staged/.<table>.lock``, local stores) the rows are deduped
        against the *committed* parts, written as this run's parts (invisible to readers) and
        published by one commit object (:mod:`nodewatch.tasks.core.commit`); only then are the input
        files marked ingested and the counter state saved. Two runs over the same inputs thus give
        one run's rows (the second finds them committed: duplicates). Parts of dead runs that never
        committed are removed afterwards (:func:`~nodewatch.tasks.core.commit_gc.clean_dead_parts`).

        Each date is staged in one go when its rows fit the spool's memory bound, else one node
        bucket at a time; either way the file holds the buckets in order, each sorted by the unique
        key. With ``data_docs`` a GX Data Docs site of the run's merged validation result is
        written to ``validation/<run_id>/<table>/`` in the store (its URL is in the result and the
        manifest).
        """
        with store_lock(self.store, "staged", f".{self.schema.name}.lock", name=f"ingest {self.schema.name}"):
            self._stage_and_commit()
        try:
            clean_dead_parts(self.store, keep_run=self.recorder.run_id)
        except (OSError, CommitError) as e:  # housekeeping never fails the run
            self.recorder.error(f"could not remove parts of dead runs: {type(e).__name__}: {e}")
        self._save_counters()
        for rec in self.result.inputs:
            self.recorder.add_input(rec)
        self.recorder.add_counts(self.schema.name, self.result.counts)
        self.result.unexpected = {k: v for k, v in self.validator.unexpected.items() if v}
        if data_docs:
            with self._timed("docs"):
                self._write_docs()
        self.recorder.add_output(f"staged_{self.schema.name}", sorted(set(self.result.dates)))
        self._tmp.cleanup()
        self.result.timings = dict(self.timings)
        return self.result

    def _live(self, t: pa.Table) -> pa.Table:
        """``t`` without the rows of dropped files (failed attempts, files quarantined whole)."""
        if not self._dropped or t.num_rows == 0:
            return t
        gone = pc.is_in(t.column(ORDER), value_set=pa.array(sorted(self._dropped), pa.int32()))
        return t.filter(pc.invert(gone))

    def _stage_and_commit(self) -> None:
        key = list(self.schema.unique_key)
        n_orders = self._next_order
        by_order = {o: sha for sha, o in self._file_order.items()}
        shas = pa.array([by_order.get(o, "") for o in range(n_orders)], pa.string())
        dup_by_file = np.zeros(n_orders, np.int64)
        conflict_by_file = np.zeros(n_orders, np.int64)
        staged_by_file = np.zeros(n_orders, np.int64)
        run_id = self.recorder.run_id
        commit = StagedCommit(self.store, run_id, self.schema.name, fault="stage")
        max_bytes, max_rows = part_bounds()
        step = min(WRITE_ROWS, max_rows)
        plain_read = _plain_read(self.staged_schema)
        for date in self.good.dates():
            with self._timed("stage"):
                existing = self._existing(date, key)
                if existing is not None:
                    node = self.spec.node_column
                    existing = existing.append_column(
                        BUCKET, pa.array(_buckets(existing.column(node) if node else None, existing.num_rows).astype(np.int8))
                    )
                whole = self.good.bytes[date] <= self.good.max_bytes
                groups = [None] if whole else self.good.buckets(date)
            tmp_local = Path(self._tmp.name) / f"out-{date}.parquet"
            writer = None
            written = 0  # rows in the open part
            parts: list[str] = []  # bounded parts already uploaded for this date
            try:
                for b in groups:
                    with self._timed("stage"):
                        t = self.good.read(date, b)
                        assert t is not None
                        t = self._live(_arrival_order(t))
                        if t.num_rows == 0:
                            continue
                        ex = existing
                        if ex is not None and b is not None:
                            ex = ex.filter(pc.equal(ex.column(BUCKET), b))
                        keep, dup, conflict = self._dedupe(t, ex, key)
                        order = t.column(ORDER).to_numpy()
                        if conflict.any():
                            self._quarantine_conflicts(t.filter(pa.array(conflict)), date, key, shas)
                            conflict_by_file += np.bincount(order[conflict], minlength=n_orders)
                        dup_by_file += np.bincount(order[dup & ~conflict], minlength=n_orders)
                        staged_by_file += np.bincount(order[keep], minlength=n_orders)
                    # taken and written in slices: the output buffers are reused, not fresh memory
                    t = _combine_dictionaries(t)
                    for start in range(0, len(keep), step):
                        if writer is not None and (written >= max_rows or tmp_local.stat().st_size >= max_bytes):
                            self._upload_part(commit, writer, tmp_local, date, parts, written, final=False)
                            writer, written = None, 0
                        with self._timed("stage"):
                            out = _take_columns(t, keep[start : start + step], shas, self.staged_schema, plain_read)
                        with self._timed("write"):
                            if writer is None:
                                writer = pq.ParquetWriter(
                                    tmp_local, out.schema, **_writer_options(out, self.schema.time_column, plain_read)
                                )
                            writer.write_table(out.cast(writer.schema) if not out.schema.equals(writer.schema) else out)
                            written += out.num_rows
                        del out
                if writer is not None:
                    self._upload_part(commit, writer, tmp_local, date, parts, written, final=True)
                    writer = None
            finally:
                if writer is not None:
                    writer.close()
            if parts:
                self.result.staged_files.extend(parts)
                self.result.dates.append(date)
            tmp_local.unlink(missing_ok=True)
        with self._timed("quarantine"):
            for date in self.bad.dates():
                q = self.bad.read(date)
                assert q is not None
                q = self._live(q).drop_columns([BUCKET, ORDER])
                if q.num_rows == 0:
                    continue
                q = q.sort_by([("source_sha256", "ascending"), ("source_offset", "ascending")])
                self.result.quarantine_files.append(
                    commit.write_parquet(q, self.store.quarantine_key(self.schema.name, date, run_id))
                )
        for sha, o in self._file_order.items():
            rec = self._per_file[sha]
            rec.counts.duplicates = int(dup_by_file[o])
            rec.counts.quarantined += int(conflict_by_file[o])
            rec.counts.staged = int(staged_by_file[o])
        with self._timed("write"):
            commit.commit()  # the one atomic step: readers see all of this run's parts from here on
        for sha, rec in self._per_file.items():
            self.result.counts = self.result.counts.add(rec.counts)
            if sha in self._unexpected:
                continue  # not ingested: a re-run parses it again
            failed = self._requested.get(sha, "auto") if rec.status == "quarantined-file" else None
            self.store.mark_ingested(self.spec.name, sha, run_id, self.schema.name, failed_with_format=failed)

    def _upload_part(self, commit: StagedCommit, writer: pq.ParquetWriter, local: Path, date: str,
                     parts: list[str], rows: int, final: bool) -> None:
        """Close ``writer`` (of ``local``) and upload it as the next part of ``date`` (appended to ``parts``):
        ``part-<run>.parquet`` when it is the date's only part, else ``part-<run>-<k>.parquet``. Under its
        final name, ignored by readers until the commit."""
        if _plain_read(self.staged_schema) and self.staged_schema.metadata:  # (the Arrow schema is not stored)
            writer.add_key_value_metadata(self.staged_schema.metadata)
        writer.close()
        k = None if final and not parts else len(parts)
        key = self.store.staged_key(self.schema.name, date, commit.run_id, part=k)
        with self._timed("write"):
            parts.append(commit.put_file(local, key, rows))
        local.unlink(missing_ok=True)

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

    def _dedupe(self, t: pa.Table, ex: pa.Table | None, key: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(keep, dup, conflict)`` for the rows of ``t`` (in arrival order) after the rows ``ex``
        staged by earlier runs: the row indices to stage, sorted by (node bucket, unique key); the
        rows whose key was seen before (staged earlier, or earlier in this run); and among those the
        *conflicts*, whose other columns differ from the first occurrence's.

        A plain duplicate is dropped and counted; a conflict (same key, different values, e.g. two
        exports of one sample with different values) is quarantined, never silently dropped.
        """
        if not key:
            return np.arange(t.num_rows), np.zeros(t.num_rows, bool), np.zeros(t.num_rows, bool)
        return _sort_dedupe(t, ex, [BUCKET, *key], key, self._value_columns(key), bucket_column=self.spec.node_column)

    def _quarantine_conflicts(self, rows: pa.Table, date: str, key: list[str], shas: pa.Array) -> None:
        reason = f"conflicting_duplicate({','.join(key)}): same key as an earlier row with different values"
        sha = pc.take(shas, rows.column(ORDER))
        raw = [
            json.dumps(r, default=str, ensure_ascii=False)[:4096]
            for r in rows.drop_columns(["source_offset", ORDER, BUCKET]).append_column("source_sha256", sha).to_pylist()
        ]
        q = pa.table(
            {
                "source_sha256": sha,
                "source_file": pa.array([self._names.get(s, "") for s in sha.to_pylist()], pa.string()),
                "source_offset": rows.column("source_offset"),
                "time": rows.column(self.schema.time_column).cast(pa.timestamp("ns", tz="UTC")),
                "reason": pa.repeat(pa.scalar(reason), rows.num_rows),
                "raw": pa.array(raw, pa.string()),
            },
            schema=QUARANTINE_SCHEMA,
        )
        q = q.append_column(ORDER, rows.column(ORDER).cast(pa.int32()))
        self.bad.add(q, [date], np.zeros(q.num_rows, np.int64), np.zeros(q.num_rows, np.int64))
