"""The generic ingest pipeline used by every source.

``ingest_files`` takes files of one source through::

    land raw (sha256; same bytes twice = skipped) -> detect format -> parse (streaming batches)
      -> validate (GX suite from the table schema + run-time expectations + row checks)
      -> spool good rows by (date, node bucket) -> dedupe (within the run and against staged rows)
      -> write staged/<table>/date=D/part-<run_id>.parquet and quarantine/<table>/date=D/<run_id>.parquet

and accounts for every input row: ``rows_in = staged + quarantined + duplicates`` per file and
per table. Files that cannot be parsed at all go to ``quarantine/files/<source>/<sha>.json`` with
the error; rows read before a mid-file error (e.g. a truncated gzip) are kept.

Memory is bounded by one validation chunk (``VALIDATE_ROWS`` / ``VALIDATE_BYTES``) plus the spool
(``SPOOL_BYTES`` in memory, then one (date, bucket) partition at a time).
"""

from __future__ import annotations

import functools
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nodewatch.schemas.gx_suite import runtime_expectations
from nodewatch.schemas.manifest import InputRecord, RowCounts
from nodewatch.schemas.names import node_name_mask
from nodewatch.tasks.core.counters import CounterCarry, CounterState, merge_states, state_from_table, state_to_table
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.core.validate import BatchValidator, write_data_docs
from nodewatch.tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec
from nodewatch.tasks.ingest.inputs import InputError, open_binary, read_head

N_BUCKETS = 16
SPOOL_BYTES = 512 * 2**20
"""Bytes of rows the spool holds in memory (then it spills to disk by (date, node bucket)); a date
with more is staged one node bucket at a time."""
WRITE_ROWS = 256 * 1024
"""Staged rows are gathered (sorted) and written in slices of this many rows (one row group each)."""
VALIDATE_ROWS = 4_000_000
VALIDATE_BYTES = 192 * 2**20
"""Parser batches are concatenated and validated together up to this many rows or bytes (one GX
call per frame costs ~0.1 s of expectation-graph building whatever the size, and GX sees distinct
values, so bigger chunks are cheaper per row; the byte bound keeps memory bounded)."""
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
    timings: dict[str, float] = field(default_factory=dict)
    """CPU seconds (this process) per pipeline stage: land, parse, validate, quarantine, spool, stage, write, docs."""


def detect_format(spec: SourceSpec, path: Path, fmt: str = "auto") -> Format:
    """Pick the format of ``path``: the named one, or the best sniffer score (≥ 0.5, no tie)."""
    by_name = {f.name: f for f in spec.formats}
    if fmt != "auto":
        if fmt not in by_name:
            raise InputError(f"{path}: unknown format {fmt!r} for {spec.name}; choose one of {', '.join(by_name)}")
        return by_name[fmt]
    head = read_head(path)
    if not head:
        raise InputError(f"{path}:1: empty or unreadable file (0 bytes after decompression)")
    scores = sorted(((f.sniff(head), f.name) for f in spec.formats), reverse=True)
    best, name = scores[0]
    if best < 0.5:
        raise InputError(
            f"{path}:1: cannot tell the format of this {spec.name} file from its first lines "
            f"(best guess {name} at {best:.2f}); pass --format {'|'.join(by_name)}"
        )
    if len(scores) > 1 and scores[1][0] == best:
        raise InputError(f"{path}:1: ambiguous format ({name} or {scores[1][1]}) from its first lines; pass --format")
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
_NO_DAY = np.iinfo(np.int64).min
ORDER, BUCKET = "__order", "__bucket"
"""Spool-only columns: the file's position in the run (its sha256 is added when staging) and the node bucket."""


def _date_codes(times: pa.ChunkedArray | pa.Array) -> tuple[list[str], np.ndarray]:
    """``(labels, codes)``: the YYYY-MM-DD (UTC) of each row as an index into ``labels``; null times
    give 'unknown'. Computed on integer days, formatted once per distinct day."""
    if len(times) == 0:
        return [], np.zeros(0, np.int64)
    ns = pc.cast(times.cast(pa.timestamp("ns", tz="UTC")), pa.int64())
    day = np.floor_divide(np.asarray(pc.fill_null(ns, 0).to_numpy(zero_copy_only=False), dtype=np.int64), _NS_PER_DAY)
    if ns.null_count:
        day[np.asarray(pc.is_null(ns).to_numpy(zero_copy_only=False), dtype=bool)] = _NO_DAY
    lo, hi = int(day.min()), int(day.max())
    if lo == hi:  # the common case
        uniq, codes = np.array([lo]), np.zeros(len(day), np.int64)
    else:
        uniq, codes = np.unique(day, return_inverse=True)
    labels = ["unknown" if d == _NO_DAY else str(np.datetime64(int(d), "D")) for d in uniq]
    return labels, np.asarray(codes, dtype=np.int64).ravel()


def _dates(times: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """YYYY-MM-DD strings (UTC) of a timestamp column; nulls give 'unknown'."""
    labels, codes = _date_codes(times)
    return np.array(labels, dtype=object)[codes] if len(codes) else np.array([], dtype=object)


def _buckets(col: pa.ChunkedArray | pa.Array | None, n: int) -> np.ndarray:
    """Stable bucket of each row from a key column (all 0 when there is none)."""
    if col is None:
        return np.zeros(n, np.int64)
    enc = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    per_value = _bucket_of_values(enc.dictionary)
    codes = np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.where(codes >= 0, per_value[np.maximum(codes, 0)] if len(per_value) else 0, 0)


def _bucket_of_values(values: pa.Array) -> np.ndarray:
    """Bucket of each (distinct) value."""
    uniq = np.asarray(values.to_numpy(zero_copy_only=False), dtype=object)
    return (pd.util.hash_array(uniq, categorize=False) % N_BUCKETS).astype(np.int64)


def _split(table: pa.Table, codes: np.ndarray) -> list[tuple[int, pa.Table]]:
    """``(code, rows)`` per distinct code in ascending order, rows in their original order (one take)."""
    if len(codes) == 0:
        return []
    lo, hi = int(codes.min()), int(codes.max())
    if lo == hi:
        return [(lo, table)]
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.concatenate([[0], np.flatnonzero(np.diff(ordered)) + 1])
    ends = np.concatenate([starts[1:], [len(ordered)]])
    t = table.take(pa.array(order))
    return [(int(ordered[s]), t.slice(s, e - s)) for s, e in zip(starts, ends, strict=True)]


class _Spool:
    """Rows spooled per date in arrival order, each with its node bucket (column ``__bucket``).

    Held in memory up to ``max_bytes``; beyond, the buffer is written to temporary parquet files
    partitioned by (date, bucket), so that a large date can be read back one bucket at a time.
    """

    def __init__(self, root: Path, name: str, max_bytes: int = SPOOL_BYTES) -> None:
        self.root = root / name
        self.parts: dict[tuple[str, int], list[Path]] = defaultdict(list)
        self.buffer: dict[str, list[pa.Table]] = defaultdict(list)
        self.bytes: dict[str, int] = defaultdict(int)
        """Bytes per date (buffered and written)."""
        self.buffered = 0
        self.max_bytes = max_bytes
        self._seq = 0

    def add(self, table: pa.Table, labels: list[str], codes: np.ndarray, buckets: np.ndarray) -> None:
        """Spool ``table`` whose rows have dates ``labels[codes]`` and node buckets ``buckets``."""
        if table.num_rows == 0:
            return
        table = table.append_column(BUCKET, pa.array(np.asarray(buckets, dtype=np.int8)))
        for code, piece in _split(table, codes):
            self.buffer[labels[code]].append(piece)
            self.bytes[labels[code]] += piece.nbytes
        self.buffered += table.nbytes
        if self.buffered >= self.max_bytes:
            self.flush()

    def flush(self) -> None:
        for d, tables in sorted(self.buffer.items()):
            t = pa.concat_tables(tables)
            for b, piece in _split(t, t.column(BUCKET).to_numpy()):
                p = self.root / f"date={d}" / f"b={b}" / f"{self._seq:08d}.parquet"
                p.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(piece, p, compression="lz4")
                self._seq += 1
                self.parts[(d, b)].append(p)
        self.buffer.clear()
        self.buffered = 0

    def dates(self) -> list[str]:
        return sorted(self.bytes)

    def buckets(self, date: str) -> list[int]:
        mem = {int(b) for t in self.buffer.get(date, []) for b in pc.unique(t.column(BUCKET)).to_pylist()}
        return sorted({b for d, b in self.parts if d == date} | mem)

    def read(self, date: str, bucket: int | None = None) -> pa.Table | None:
        """Rows of ``date`` (of one node bucket, or all) in arrival order."""
        keys = sorted(k for k in self.parts if k[0] == date and (bucket is None or k[1] == bucket))
        files = sorted((p for k in keys for p in self.parts[k]), key=lambda p: p.name)  # arrival order
        tables = [pq.read_table(f) for f in files]
        for t in self.buffer.get(date, []):
            tables.append(t if bucket is None else t.filter(pc.equal(t.column(BUCKET), bucket)))
        return pa.concat_tables(tables) if tables else None


def _rank_codes(arr: pa.ChunkedArray | pa.Array, by_bucket: bool = False) -> pa.Array | None:
    """int32 codes of a string column ordered like the strings (nulls stay null), for sorting and
    equality on integers; ``None`` when the column looks mostly distinct (not worth encoding).

    ``by_bucket``: ordered by (node bucket of the value, value) instead, so that sorting by the
    codes alone sorts by (bucket, value).
    """
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr  # (unifies dictionaries)
    probe = arr.slice(0, 4096)
    probe = probe.indices if pa.types.is_dictionary(arr.type) else probe
    if len(arr) > len(probe) and pc.count_distinct(probe).as_py() > len(probe) // 2:
        return None
    enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    if pc.count_distinct(enc.dictionary, mode="all").as_py() != len(enc.dictionary):
        enc = pc.dictionary_encode(arr.cast(arr.type.value_type))
    k = len(enc.dictionary)
    by_value = np.empty(k, np.int64)
    by_value[np.asarray(pc.sort_indices(enc.dictionary).to_numpy(), dtype=np.int64)] = np.arange(k)
    order = np.lexsort((by_value, _bucket_of_values(enc.dictionary))) if by_bucket else np.argsort(by_value)
    ranks = np.empty(k, np.int32)
    ranks[order] = np.arange(k, dtype=np.int32)
    return pc.take(pa.array(ranks), enc.indices)


def _equal_adjacent(col: pa.ChunkedArray | pa.Array, idx: np.ndarray) -> np.ndarray:
    """``out[j]``: rows ``idx[j + 1]`` and ``idx[j]`` of ``col`` hold the same value (null == null, NaN == NaN)."""
    typ = col.type
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ) or pa.types.is_boolean(typ):
        col = pc.cast(col, pa.int64())
    v = np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False) if col.null_count else col.to_numpy(zero_copy_only=False))
    vs = v[idx]
    eq = vs[1:] == vs[:-1]
    if pa.types.is_floating(typ):
        nan = np.isnan(vs)
        eq |= nan[1:] & nan[:-1]
    if col.null_count:
        m = np.asarray(pc.is_null(col).to_numpy(zero_copy_only=False), dtype=bool)[idx]
        eq = (eq & ~m[1:] & ~m[:-1]) | (m[1:] & m[:-1])
    return eq


def _equal_rows(col: pa.ChunkedArray | pa.Array, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``col[a] == col[b]`` element-wise with null == null (NaN != NaN, like Python's ``==``)."""
    x, y = col.take(pa.array(a)), col.take(pa.array(b))
    if pa.types.is_dictionary(x.type):
        x, y = x.cast(x.type.value_type), y.cast(y.type.value_type)
    try:
        eq = pc.fill_null(pc.equal(x, y), False)
    except pa.ArrowNotImplementedError:  # e.g. list columns: compare as Python values
        return np.array([u == v for u, v in zip(x.to_pylist(), y.to_pylist(), strict=True)], dtype=bool)
    both_null = pc.and_(pc.is_null(x), pc.is_null(y))
    return np.asarray(pc.or_(eq, both_null).to_numpy(zero_copy_only=False), dtype=bool)


def _int_key(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray | None] | None:
    """``(values, null mask)`` of an integer-like column as numpy, narrowed to uint16 when its range
    allows (numpy's stable sort is then a radix sort); ``None`` for other types."""
    typ = col.type
    if pa.types.is_timestamp(typ) or pa.types.is_date(typ) or pa.types.is_boolean(typ):
        col = pc.cast(col, pa.int64())
    elif not pa.types.is_integer(typ):
        return None
    null = np.asarray(pc.is_null(col).to_numpy(zero_copy_only=False), dtype=bool) if col.null_count else None
    v = np.asarray((pc.fill_null(col, 0) if col.null_count else col).to_numpy(zero_copy_only=False)).astype(np.int64, copy=False)
    if len(v):
        lo, hi = int(v.min()), int(v.max())
        if hi - lo < 65_536:
            v = (v - lo).astype(np.uint16)
    return v, null


def _far_from_sorted(v: np.ndarray) -> bool:
    """A wide key whose every 64th value is often out of order (random pids; not times with
    sub-second jitter, which numpy's stable sort handles in about a fifth of a random sort)."""
    if v.dtype == np.uint16:
        return False
    s = v[::64]
    return np.count_nonzero(s[1:] < s[:-1]) > max(16, len(s) // 8)


def _lsd_order(sortable: dict[str, Any], sort_cols: list[str], exact: list[str], n: int) -> np.ndarray | None:
    """The stable ascending (nulls last) order of ``sort_cols``, without comparing rows in Python.

    The leading integer-like keys (the *prefix*: node and metric rank codes, near-sorted times) are
    sorted by least-significant-first stable passes of numpy's argsort: radix passes for
    small-range codes, run-aware merges for near-sorted times. The remaining keys (strings, or a
    wide key far from sorted such as pids) only break ties: the runs of rows equal on the prefix are
    ordered by them with Arrow. Same order as Arrow's ``sort_indices`` on all keys; ``None`` when
    there is no usable prefix (or a pass finds a wide key far from sorted: Arrow is cheaper then).
    """
    keys = []
    for c in sort_cols:
        k = None if c in exact else _int_key(sortable[c])
        if k is None or _far_from_sorted(k[0]):
            break
        keys.append(k)
    tail = sort_cols[len(keys) :]
    if not keys:
        return None
    p = np.arange(n, dtype=np.int64)
    for v, null in reversed(keys):
        vp = v[p]
        if _far_from_sorted(vp):
            return None
        p = p[np.argsort(vp, kind="stable")]
        if null is not None:
            p = p[np.argsort(null[p], kind="stable")]
    if tail and n > 1:
        same = np.ones(n - 1, bool)
        for v, null in keys:
            vs = v[p]
            eq = vs[1:] == vs[:-1]
            if null is not None:
                ms = null[p]
                eq = (eq & ~ms[1:] & ~ms[:-1]) | (ms[1:] & ms[:-1])
            same &= eq
        pos = np.flatnonzero(np.concatenate([same, [False]]) | np.concatenate([[False], same]))
        if pos.size:
            run = np.cumsum(np.concatenate([[True], ~same]))[pos]
            sub = {"__run": pa.array(run)} | {c: sortable[c].take(pa.array(p[pos])) for c in tail}
            keys_ = [("__run", "ascending", "at_end")] + [(c, "ascending", "at_end") for c in tail]
            o = np.asarray(pc.sort_indices(pa.table(sub), sort_keys=keys_).to_numpy(), dtype=np.int64)
            p[pos] = p[pos][o]
    return p


def _sort_dedupe(
    t: pa.Table,
    ex: pa.Table | None,
    sort_cols: list[str],
    key: list[str],
    vcols: list[str],
    bucket_column: str | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort the rows of ``t`` by ``sort_cols`` and find duplicates of the unique ``key``.

    ``bucket_column``: the column the node bucket (``__bucket``) is computed from; when sorting by
    (``__bucket``, that column, ...) its codes are ranked by (bucket, value) and ``__bucket`` is
    dropped from the sort (one integer key instead of two: a faster sort, the same order).

    ``ex`` holds rows staged before (``sort_cols`` + ``vcols`` columns); they come before ``t`` and
    ``t`` is in arrival order, so with one *stable* sort the first row of each run of equal keys is
    the first occurrence. Returns ``(keep, dup, conflict)``: row indices of ``t`` to stage in sorted
    order, rows whose key occurred earlier, and among those the ones whose value columns differ
    from the first occurrence's. No Python loop over rows: string key columns are sorted and
    compared as integer ranks, and the (rare) ties on mostly-distinct strings are checked last.
    """
    n_ex = ex.num_rows if ex is not None else 0

    def column(name: str) -> pa.ChunkedArray:
        tc = t.column(name)
        if not n_ex:
            return tc
        ec = ex.column(name).cast(tc.type) if name in ex.column_names else pa.nulls(n_ex, tc.type)
        return pa.chunked_array(list(pa.chunked_array(ec).chunks) + list(tc.chunks), type=tc.type)

    sortable: dict[str, Any] = {}
    exact: list[str] = []  # mostly-distinct strings: compared only where the other key columns tie
    merge_bucket = bucket_column is not None and len(sort_cols) > 1 and sort_cols[0] == BUCKET and sort_cols[1] == bucket_column
    for c in sort_cols:
        arr = column(c)
        if pa.types.is_dictionary(arr.type) or pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            by_bucket = merge_bucket and c == bucket_column and arr.null_count == 0
            codes = _rank_codes(arr, by_bucket=by_bucket)
            if codes is None:
                exact.append(c)
                if pa.types.is_dictionary(arr.type):
                    arr = arr.cast(arr.type.value_type)
            else:
                arr = codes
                if by_bucket:
                    sort_cols = sort_cols[1:]
        sortable[c] = arr
    n = n_ex + t.num_rows
    idx = _lsd_order(sortable, sort_cols, exact, n)
    if idx is None:
        idx = np.asarray(
            pc.sort_indices(pa.table(sortable), sort_keys=[(c, "ascending", "at_end") for c in sort_cols]).to_numpy(),
            dtype=np.int64,
        )
    same = np.ones(max(n - 1, 0), bool)
    for c in sort_cols:
        if c in key and c not in exact:
            same &= _equal_adjacent(sortable[c], idx)
    for c in exact:
        if c in key:
            cand = np.flatnonzero(same)
            if cand.size:
                same[cand] = _equal_rows(sortable[c], idx[cand + 1], idx[cand])
    dup_sorted = np.concatenate([[False], same]) if n else np.zeros(0, bool)
    in_t = idx >= n_ex
    rows_t = idx[in_t] - n_ex
    dup = np.zeros(t.num_rows, bool)
    dup[rows_t] = dup_sorted[in_t]
    conflict = np.zeros(t.num_rows, bool)
    j = np.flatnonzero(dup_sorted & in_t)
    if j.size and vcols:
        pos = np.arange(n)
        first = np.maximum.accumulate(np.where(dup_sorted, 0, pos))
        differ = np.zeros(j.size, bool)
        for c in vcols:
            differ |= ~_equal_rows(column(c), idx[j], idx[first[j]])
        conflict[idx[j] - n_ex] = differ
    return rows_t[~dup[rows_t]], dup, conflict


def _low_cardinality_strings(t: pa.Table) -> set[str]:
    """String columns with few distinct values in their first rows (node, metric, app, ...)."""
    out = set()
    for name in t.column_names:
        c = t.column(name)
        if (pa.types.is_string(c.type) or pa.types.is_large_string(c.type) or c.type == _DICT) and len(c):
            probe = c.slice(0, 4096)
            if c.type == _DICT:
                probe = probe.cast(pa.string())
            if pc.count_distinct(probe, mode="all").as_py() <= max(1, len(probe) // 2):
                out.add(name)
    return out


def _encode_strings(t: pa.Table, columns: set[str]) -> pa.Table:
    """``columns`` dictionary-encoded: hashed once here, they are then validated, bucketed, sorted
    and taken as integer codes, and decoded only when the staged file is written."""
    if not columns and not any(f.type == _DICT for f in t.schema):
        return t
    cols = []
    for name, c in zip(t.column_names, t.columns, strict=True):
        if c.type == _DICT:  # encoded by the parser: kept (a column the spool has as strings: decoded)
            c = c.combine_chunks() if name in columns else c.cast(c.type.value_type)
        elif name in columns:
            c = pc.dictionary_encode(c.combine_chunks())
        cols.append(c)
    return pa.table(cols, names=t.column_names)


_DICT = pa.dictionary(pa.int32(), pa.string())


def _conform_column(col: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    """``col`` cast to ``typ``; a ``dictionary<int32, string>`` column of a string field stays
    encoded (a parser passes on an encoded input column instead of decoding it)."""
    if col.type == _DICT and typ == pa.string():
        return col
    return col.cast(typ)


def _dictionary_columns(t: pa.Table) -> list[str]:
    """Columns worth parquet dictionary encoding: dictionary-typed ones (written from their codes)
    and those with few distinct values in the first rows: trying it on a mostly-distinct column
    (messages, offsets) and falling back costs a third of the write."""
    probe = t.slice(0, 8192)
    out = []
    for name in probe.column_names:
        c = probe.column(name)
        if pa.types.is_nested(c.type):
            continue
        if pa.types.is_dictionary(c.type) or len(c) == 0 or pc.count_distinct(c, mode="all").as_py() <= max(1, len(c) // 4):
            out.append(name)
    return out


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
        row_transform: Callable[[pa.Table], pa.Table] | None = None,
    ) -> None:
        self.store, self.spec, self.recorder = store, spec, recorder
        self.row_transform = row_transform  # applied to every parsed batch before validation (e.g. user hashing)
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
        self.good = _Spool(tmp, "good", SPOOL_BYTES)
        self.bad = _Spool(tmp, "bad", SPOOL_BYTES)
        self.result = IngestResult(table=self.schema.name)
        self._file_order: dict[str, int] = {}
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
        return rec

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
        return pa.table(cols, schema=pa.schema([f.with_type(c.type) for f, c in zip(fields, cols, strict=True)]))

    # ------------------------------------------------------------------ finish
    def finish(self, data_docs: bool = True) -> IngestResult:
        """Dedupe and write staged + quarantine partitions, mark inputs ingested, record counts.

        Each date is staged in one go when its rows fit the spool's memory bound, else one node
        bucket at a time; either way the file holds the buckets in order, each sorted by the unique
        key. With ``data_docs`` a GX Data Docs site of the run's merged validation result is
        written to ``validation/<run_id>/<table>/`` in the store (its URL is in the result and the
        manifest).
        """
        key = list(self.schema.unique_key)
        files = sorted(self._file_order, key=self._file_order.__getitem__)
        shas = pa.array(files, pa.string())
        dup_by_file = np.zeros(len(files), np.int64)
        conflict_by_file = np.zeros(len(files), np.int64)
        staged_by_file = np.zeros(len(files), np.int64)
        run_id = self.recorder.run_id
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
            path = self.store.path(self.store.staged_key(self.schema.name, date, run_id))
            tmp_local = Path(self._tmp.name) / f"out-{date}.parquet"
            writer = None
            written = 0
            try:
                for b in groups:
                    with self._timed("stage"):
                        t = self.good.read(date, b)
                        assert t is not None
                        t = _arrival_order(t)
                        ex = existing
                        if ex is not None and b is not None:
                            ex = ex.filter(pc.equal(ex.column(BUCKET), b))
                        keep, dup, conflict = self._dedupe(t, ex, key)
                        order = t.column(ORDER).to_numpy()
                        if conflict.any():
                            self._quarantine_conflicts(t.filter(pa.array(conflict)), date, key, shas)
                            conflict_by_file += np.bincount(order[conflict], minlength=len(files))
                        dup_by_file += np.bincount(order[dup & ~conflict], minlength=len(files))
                        staged_by_file += np.bincount(order[keep], minlength=len(files))
                    # taken and written in slices: the output buffers are reused, not fresh memory
                    t = _combine_dictionaries(t)
                    for start in range(0, len(keep), WRITE_ROWS):
                        with self._timed("stage"):
                            out = _take_columns(t, keep[start : start + WRITE_ROWS], shas, self.staged_schema, plain_read)
                        with self._timed("write"):
                            if writer is None:
                                writer = pq.ParquetWriter(
                                    tmp_local, out.schema, **_writer_options(out, self.schema.time_column, plain_read)
                                )
                            writer.write_table(out.cast(writer.schema) if not out.schema.equals(writer.schema) else out)
                            written += out.num_rows
                        del out
            finally:
                if writer is not None:
                    if plain_read and self.staged_schema.metadata:  # (the Arrow schema is not stored)
                        writer.add_key_value_metadata(self.staged_schema.metadata)
                    writer.close()
            with self._timed("write"):
                if written:
                    self.store.fs.makedirs(path.rpartition("/")[0], exist_ok=True)
                    tmp_remote = path.rpartition("/")[0] + f"/.tmp-{run_id}.parquet"
                    self.store.fs.put_file(str(tmp_local), tmp_remote)
                    self.store.fs.mv(tmp_remote, path)
                    self.result.staged_files.append(path)
                    self.result.dates.append(date)
                tmp_local.unlink(missing_ok=True)
        with self._timed("quarantine"):
            for date in self.bad.dates():
                q = self.bad.read(date)
                assert q is not None
                q = q.drop_columns([BUCKET]).sort_by([("source_sha256", "ascending"), ("source_offset", "ascending")])
                self.result.quarantine_files.append(
                    self.store.write_parquet(q, self.store.quarantine_key(self.schema.name, date, run_id))
                )
        for i, sha in enumerate(files):
            rec = self._per_file[sha]
            rec.counts.duplicates = int(dup_by_file[i])
            rec.counts.quarantined += int(conflict_by_file[i])
            rec.counts.staged = int(staged_by_file[i])
        for sha, rec in self._per_file.items():
            self.result.counts = self.result.counts.add(rec.counts)
            failed = self._requested.get(sha, "auto") if rec.status == "quarantined-file" else None
            self.store.mark_ingested(self.spec.name, sha, run_id, self.schema.name, failed_with_format=failed)
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
        self.bad.add(q, [date], np.zeros(q.num_rows, np.int64), np.zeros(q.num_rows, np.int64))


def _take_columns(t: pa.Table, rows: np.ndarray, shas: pa.Array, schema: pa.Schema, dictionaries: bool = False) -> pa.Table:
    """Rows ``rows`` of ``t`` as a table of ``schema``, ``source_sha256`` from the file order.

    Column by column: ``Table.take`` on a many-chunk table costs about twice as much. Rows that
    are already consecutive (input in staged order) are sliced, not gathered. ``dictionaries``:
    ``dictionary<int32, string>`` columns of string fields stay encoded and ``source_sha256`` is
    encoded over ``shas`` (the file is written with :func:`_writer_options` ``plain_read``: readers
    get plain strings); else they are decoded to the field types. Pass ``t`` through
    :func:`_combine_dictionaries` first (once for all slices), so a take gathers int32 codes of one
    dictionary."""
    n = len(rows)
    sl = None
    if n and int(rows[-1]) - int(rows[0]) == n - 1 and (n == 1 or bool(np.all(rows[1:] > rows[:-1]))):
        sl = int(rows[0])
    idx = pa.array(rows) if sl is None else None

    def pick(col: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
        return col.slice(sl, n) if sl is not None else col.take(idx)

    cols = []
    fields = []
    for f in schema:
        if f.name == "source_sha256":
            order = pick(t.column(ORDER))
            order = order.combine_chunks() if isinstance(order, pa.ChunkedArray) else order
            col = pa.DictionaryArray.from_arrays(order, shas) if dictionaries else pc.take(shas, order)
        else:
            col = pick(t.column(f.name))
            if not (dictionaries and col.type == _DICT and f.type == pa.string()):
                col = col.cast(f.type)
        cols.append(col)
        fields.append(f.with_type(col.type))
    return pa.table(cols, schema=pa.schema(fields, metadata=schema.metadata))


def _combine_dictionaries(t: pa.Table) -> pa.Table:
    """``t`` with each multi-chunk dictionary column as one chunk (one dictionary), once for all
    the slices taken from it."""
    if not any(pa.types.is_dictionary(c.type) and c.num_chunks > 1 for c in t.columns):
        return t
    cols = [c.combine_chunks() if pa.types.is_dictionary(c.type) and c.num_chunks > 1 else c for c in t.columns]
    return pa.table(cols, schema=t.schema)


@functools.cache
def _plain_read(schema: pa.Schema) -> bool:
    """Whether a parquet file of ``schema`` written without the stored Arrow schema
    (``store_schema=False``, the schema metadata as file key-value metadata) reads back as exactly
    ``schema`` (types, nullability, metadata). Then string columns can be written from their
    dictionary-encoded form (dictionary encoding is a storage detail: readers get ``string``)."""
    buf = pa.BufferOutputStream()
    with pq.ParquetWriter(buf, schema, store_schema=False) as w:
        w.write_table(schema.empty_table())
        if schema.metadata:
            w.add_key_value_metadata(schema.metadata)
    try:
        back = pq.read_schema(pa.BufferReader(buf.getvalue()))
    except (pa.ArrowException, OSError):
        return False
    return back.equals(schema, check_metadata=True)


def _writer_options(out: pa.Table, time_column: str, plain_read: bool) -> dict[str, Any]:
    """``ParquetWriter`` options for a staged file whose first slice is ``out``: zstd; dictionary
    encoding where it pays (:func:`_dictionary_columns`); statistics only for the time column (no
    reader prunes on the others; they cost a tenth of the write); ``source_offset`` (near-monotone
    within a node) delta-encoded (a third of the time and a fortieth of the size of plain + zstd);
    ``store_schema=False`` when ``plain_read`` (see :func:`_plain_read`)."""
    dictionary = _dictionary_columns(out)
    opts: dict[str, Any] = {
        "compression": "zstd",
        "use_dictionary": dictionary,
        "write_statistics": [time_column] if time_column in out.column_names else False,
    }
    offset = out.schema.field("source_offset") if "source_offset" in out.column_names else None
    if offset is not None and offset.name not in dictionary and pa.types.is_int64(offset.type):
        opts["column_encoding"] = {offset.name: "DELTA_BINARY_PACKED"}
    if plain_read:
        opts["store_schema"] = False
    return opts


def _arrival_order(t: pa.Table) -> pa.Table:
    """``t`` ordered by (file order, source offset): the spool keeps arrival order, so this only
    checks it (and sorts if a parser ever emits offsets out of order)."""
    o = t.column(ORDER).to_numpy()
    off = np.asarray(pc.fill_null(t.column("source_offset"), -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(o) < 2 or bool(np.all((o[1:] > o[:-1]) | ((o[1:] == o[:-1]) & (off[1:] >= off[:-1])))):
        return t
    return t.sort_by([(ORDER, "ascending"), ("source_offset", "ascending")])


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
        from nodewatch.tasks.ingest.topology import load_topology  # provided by the topology source
    except ImportError:
        load_topology = None
    if load_topology is not None:
        known, aliases, _ = load_topology(store)
        return (set(known) if known else None), dict(aliases)
    t = store.read_staged("topology", columns=["node"])
    if t is None:
        return None, {}
    return set(t.column("node").to_pylist()), {}
