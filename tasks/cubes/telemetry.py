"""Windowed statistics of staged telemetry: streaming, mergeable, out-of-core.

The staged ``telemetry`` table is long format (``time, node, metric, value``). For one UTC day we
stream a slab of a staged parquet file in record batches, map every row to a flat window index
``(node * T + t) * M + metric`` and accumulate per window the count, mean, M2 (sum of squared
deviations), min and max. Each batch is reduced with ``np.bincount``/``np.minimum.at`` and merged
into the running state with the pairwise update of Chan, Golub & LeVeque (1979), which is
numerically stable for large means with small variance (a plain sum of squares is not). Partial
states of different slabs merge the same way, so a day can be scanned in parallel and the result
only depends on the input and the (deterministic) slab plan. Memory is bounded by the state
(40 B per window) plus one record batch, never by the size of the day.

RUAD (Molan et al., §4.1) aggregates each feature into "minimum, maximum, average, and variance"
of 15-min windows; the cube stores ``std`` (population, ddof=0) so that ``var = std**2``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nodewatch.tasks.core.store import Store

COLUMNS = ["time", "node", "metric", "value"]
DEFAULT_BATCH_ROWS = 2_000_000
DEFAULT_SLAB_ROWS = 36_000_000


class StagedFileError(ValueError):
    """A staged parquet file cannot be read (corrupt, truncated, missing columns): one-line message."""


def staged_batches(
    store: Store,
    path: str,
    columns: list[str],
    dictionary: list[str],
    batch_rows: int = DEFAULT_BATCH_ROWS,
    row_groups: list[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Record batches of a staged file; any read error becomes a :class:`StagedFileError` naming the file."""
    try:
        with store.fs.open(path, "rb") as f:
            pf = pq.ParquetFile(f, read_dictionary=dictionary)
            missing = [c for c in columns if c not in pf.schema_arrow.names]
            if missing:
                raise StagedFileError(f"staged file {path}: missing column(s) {', '.join(missing)}")
            yield from pf.iter_batches(batch_size=batch_rows, row_groups=row_groups, columns=columns)
    except StagedFileError:
        raise
    except (OSError, pa.ArrowException, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise StagedFileError(f"staged file {path}: unreadable parquet ({msg}); re-stage or remove it, then rebuild") from None


def staged_row_groups(store: Store, path: str) -> list[int]:
    """Row counts of the row groups of a staged file (``StagedFileError`` if unreadable)."""
    try:
        with store.fs.open(path, "rb") as f:
            md = pq.ParquetFile(f).metadata
        return [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    except (OSError, pa.ArrowException, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise StagedFileError(f"staged file {path}: unreadable parquet ({msg}); re-stage or remove it, then rebuild") from None


@dataclass
class WindowStats:
    """Running statistics of ``n`` windows (flat arrays); merge with :meth:`merge`.

    28 bytes per window: int32 count, float64 mean and M2, float32 min and max (rounding to float32
    is monotonic, so the float32 min of the samples equals the float64 min rounded to float32).
    """

    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    min: np.ndarray
    max: np.ndarray

    @classmethod
    def empty(cls, n: int) -> WindowStats:
        """State of ``n`` windows without any sample."""
        return cls(
            np.zeros(n, np.int32), np.zeros(n), np.zeros(n), np.full(n, np.inf, np.float32), np.full(n, -np.inf, np.float32)
        )

    def __len__(self) -> int:
        return len(self.count)

    def add(self, idx: np.ndarray, x: np.ndarray) -> None:
        """Add samples ``x`` falling in windows ``idx`` (in place).

        Only the window range ``[idx.min(), idx.max()]`` is touched, so batches of time- or
        node-ordered rows cost in proportion to the windows they hit, not to the whole day.
        """
        if len(idx) == 0:
            return
        lo, hi = int(idx.min()), int(idx.max()) + 1
        if lo < 0 or hi > len(self):
            raise IndexError(f"window index outside 0..{len(self) - 1}")
        if lo:
            idx = idx - lo
        n = hi - lo
        cb = np.bincount(idx, minlength=n)
        sb = np.bincount(idx, weights=x, minlength=n)
        hit = cb > 0
        mb = np.zeros(n)
        np.divide(sb, cb, out=mb, where=hit)
        d = x - mb[idx]
        m2b = np.bincount(idx, weights=d * d, minlength=n)
        x32 = x.astype(np.float32)  # same dtype as the target keeps ufunc.at on its fast path
        np.minimum.at(self.min[lo:hi], idx, x32)
        np.maximum.at(self.max[lo:hi], idx, x32)
        self._merge_moments(cb, mb, m2b, lo, hi)

    def _merge_moments(self, cb: np.ndarray, mb: np.ndarray, m2b: np.ndarray, lo: int = 0, hi: int | None = None) -> None:
        s = np.s_[lo:hi]
        ca = self.count[s]
        tot = ca + cb
        if tot.max(initial=0) > np.iinfo(np.int32).max:
            raise ValueError("more than 2**31 samples in one window: use a shorter step")
        delta = mb - self.mean[s]
        frac = np.zeros(len(cb))
        np.divide(cb, tot, out=frac, where=cb > 0)
        self.mean[s] += delta * frac  # windows without new samples: frac = 0
        self.m2[s] += m2b + delta * delta * ca * frac
        self.count[s] = tot.astype(np.int32)

    def merge(self, other: WindowStats) -> WindowStats:
        """Merge another state of the same windows into this one (in place) and return self."""
        if len(other) != len(self):
            raise ValueError(f"cannot merge window states of {len(self)} and {len(other)} windows")
        np.minimum(self.min, other.min, out=self.min)
        np.maximum(self.max, other.max, out=self.max)
        self._merge_moments(other.count, other.mean, other.m2)
        return self

    def slice(self, start: int, stop: int) -> WindowStats:
        """Copy of windows ``start:stop``."""
        s = np.s_[start:stop]
        return WindowStats(self.count[s].copy(), self.mean[s].copy(), self.m2[s].copy(), self.min[s].copy(), self.max[s].copy())

    def finalize(self, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """Cube variables: float32 ``mean/min/max/std`` (NaN without sample) and int32 ``count``."""
        c = self.count
        empty = c == 0
        std = np.sqrt(np.divide(self.m2, c, out=np.zeros(len(c)), where=~empty).clip(min=0.0))
        out = {}
        for name, arr in (("mean", self.mean), ("min", self.min), ("max", self.max), ("std", std)):
            a = arr.astype(np.float32)
            a[empty] = np.nan
            out[name] = a.reshape(shape)
        out["count"] = c.astype(np.int32).reshape(shape)
        return out


@dataclass(frozen=True)
class Slab:
    """A contiguous run of row groups of one staged parquet file (one scan task)."""

    path: str
    row_groups: tuple[int, ...]
    rows: int


@dataclass
class ScanReport:
    """Row accounting of a scan: rows read = used + each drop reason."""

    rows_read: int = 0
    rows_used: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def drop(self, reason: str, n: int) -> None:
        """Count ``n`` rows dropped for ``reason``."""
        if n:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(n)

    def merge(self, other: ScanReport) -> ScanReport:
        """Sum of two reports."""
        out = ScanReport(
            self.rows_read + other.rows_read, self.rows_used + other.rows_used, dict(self.dropped), self.seconds + other.seconds
        )
        for k, v in other.dropped.items():
            out.drop(k, v)
        return out

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly form."""
        return {
            "rows_read": self.rows_read,
            "rows_used": self.rows_used,
            "dropped": dict(sorted(self.dropped.items())),
            "scan_task_s": round(self.seconds, 3),
        }


def plan_slabs(store: Store, files: list[str], slab_rows: int = DEFAULT_SLAB_ROWS) -> list[Slab]:
    """Split staged files into slabs of whole row groups with about ``slab_rows`` rows each."""
    slabs: list[Slab] = []
    for path in files:
        groups: list[int] = []
        rows = 0
        for i, n in enumerate(staged_row_groups(store, path)):
            groups.append(i)
            rows += n
            if rows >= slab_rows:
                slabs.append(Slab(path, tuple(groups), rows))
                groups, rows = [], 0
        if groups:
            slabs.append(Slab(path, tuple(groups), rows))
    return slabs


def _lookup(col: pa.Array, index: dict[str, int]) -> np.ndarray:
    """Positions of the strings of ``col`` in ``index`` (-1 for unknown or null)."""
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    lut = np.array([index.get(s, -1) for s in col.dictionary.to_pylist()] + [-1], dtype=np.int64)
    codes = col.indices.to_numpy(zero_copy_only=False)
    codes = np.where(col.indices.is_null().to_numpy(zero_copy_only=False), len(lut) - 1, codes) if col.null_count else codes
    return lut[codes]


def scan_slab(
    store: Store,
    slab: Slab,
    day: date,
    step: pd.Timedelta,
    nodes: dict[str, int],
    metrics: dict[str, int],
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> tuple[WindowStats, ScanReport, bool]:
    """Window statistics of one slab for ``day`` over the full node × time × metric grid of the day.

    Returns ``(stats, report, time_major)``: the flat window index of ``stats`` is
    ``(t * N + n) * M + m`` if ``time_major`` else ``(n * T + t) * M + m`` (see :func:`split_by_batch`).
    """
    steps = int(pd.Timedelta("1D") / step)
    n_m, n_n = len(metrics), len(nodes)
    stats = WindowStats.empty(n_n * steps * n_m)
    time_major: bool | None = None  # layout of the flat index, chosen from the first batch
    rep = ScanReport()
    day0 = pd.Timestamp(day, tz="UTC").value
    step_ns = step.value
    for rb in staged_batches(store, slab.path, COLUMNS, ["node", "metric"], batch_rows, list(slab.row_groups)):
        rep.rows_read += rb.num_rows
        t = rb.column("time").cast(pa.timestamp("ns", tz="UTC")).to_numpy(zero_copy_only=False).view(np.int64)
        x = rb.column("value").to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        ni = _lookup(rb.column("node"), nodes)
        mi = _lookup(rb.column("metric"), metrics)
        ti = (t - day0) // step_ns  # NaT (int64 min) lands far below 0
        ok = (ti >= 0) & (ti < steps) & np.isfinite(x) & (ni >= 0) & (mi >= 0)
        if not ok.all():
            ok_time = (ti >= 0) & (ti < steps)
            ok_val = np.isfinite(x)
            rep.drop("time outside the day", (~ok_time).sum())
            rep.drop("value null or not finite", (ok_time & ~ok_val).sum())
            rep.drop("node not on the cube axis", (ok_time & ok_val & (ni < 0)).sum())
            rep.drop("metric not on the cube axis", (ok_time & ok_val & (ni >= 0) & (mi < 0)).sum())
            ni, ti, mi, x = ni[ok], ti[ok], mi[ok], x[ok]
        rep.rows_used += len(x)
        if len(x) == 0:
            continue
        if time_major is None:
            # time-ordered input (collector order) hits few windows per batch in a time-major layout,
            # node-ordered input in a node-major one; the result is the same, only the speed differs
            time_major = (int(ti.max()) - int(ti.min()) + 1) / steps <= (int(ni.max()) - int(ni.min()) + 1) / n_n
        flat = (ti * n_n + ni) * n_m + mi if time_major else (ni * steps + ti) * n_m + mi
        stats.add(flat, x)
    return stats, rep, bool(time_major)


def split_by_batch(
    stats: WindowStats, node_chunk: int, grid: tuple[int, int, int], time_major: bool = False
) -> list[WindowStats]:
    """Split a day state over ``grid = (nodes, steps, metrics)`` into node-major states per node batch.

    ``time_major`` states (flat index ``(t * N + n) * M + m``) are transposed batch by batch, so the
    whole day is never copied at once.
    """
    n_n, steps, n_m = grid
    out = []
    for s0 in range(0, n_n, node_chunk):
        s1 = min(s0 + node_chunk, n_n)
        if not time_major:
            out.append(stats.slice(s0 * steps * n_m, s1 * steps * n_m))
            continue

        def part(a: np.ndarray, s0: int = s0, s1: int = s1) -> np.ndarray:
            return np.ascontiguousarray(a.reshape(steps, n_n, n_m)[:, s0:s1].transpose(1, 0, 2)).ravel()

        out.append(WindowStats(part(stats.count), part(stats.mean), part(stats.m2), part(stats.min), part(stats.max)))
    return out


def merge_all(parts: list[WindowStats]) -> WindowStats:
    """Merge states in the given order (the order is part of the deterministic plan)."""
    if not parts:
        raise ValueError("nothing to merge")
    out = parts[0].slice(0, len(parts[0]))
    for p in parts[1:]:
        out.merge(p)
    return out


def scan_nodes_metrics(store: Store, files: list[str]) -> tuple[set[str], set[str]]:
    """Distinct node and metric names of staged telemetry files (reads only those two columns)."""
    nodes: set[str] = set()
    metrics: set[str] = set()
    for path in files:
        for rb in staged_batches(store, path, ["node", "metric"], ["node", "metric"]):
            for col, acc in ((rb.column("node"), nodes), (rb.column("metric"), metrics)):
                if not pa.types.is_dictionary(col.type):
                    col = pc.dictionary_encode(col)
                codes = col.indices.drop_null().to_numpy(zero_copy_only=False)
                used = np.flatnonzero(np.bincount(codes, minlength=len(col.dictionary)))
                acc.update(s for s in col.dictionary.take(pa.array(used, pa.int32())).to_pylist() if s is not None)
    return nodes, metrics
