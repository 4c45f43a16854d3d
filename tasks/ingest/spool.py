"""The ingest spool: validated rows held by (date, node bucket) until the run is staged.

``ORDER`` / ``BUCKET`` are the spool-only columns (file order in the run, node bucket);
:func:`_date_codes` and :func:`_buckets` compute a row's date and node bucket; :class:`_Spool`
keeps rows in arrival order in memory up to ``SPOOL_BYTES`` and spills beyond to temporary
parquet files partitioned by (date, bucket).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

N_BUCKETS = 16
SPOOL_BYTES = 512 * 2**20
"""Bytes of rows the spool holds in memory (then it spills to disk by (date, node bucket)); a date
with more is staged one node bucket at a time."""


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
