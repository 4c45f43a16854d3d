"""Dedupe of staged rows: one stable sort by (node bucket, unique key) that finds duplicates and conflicts.

:func:`_sort_dedupe` sorts a date's (or a node bucket's) rows after the rows staged by earlier
runs and returns the rows to stage, the duplicates and the conflicts (same key, different
values), with no Python loop over rows: string keys become integer rank codes
(:func:`_rank_codes`) sorted by least-significant-first numpy passes (:func:`_lsd_order`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.tasks.ingest.spool import BUCKET, _bucket_of_values


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
