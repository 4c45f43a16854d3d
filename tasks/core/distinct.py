"""GX on distinct values: the reduction :class:`nodewatch.tasks.core.validate.BatchValidator` uses for
row-map expectations.

GX sees distinct values, not rows
---------------------------------
Most expectations are *row-map* expectations: whether a row passes depends only on that row's
values in the columns the expectation names (``ExpectColumnValuesToBeBetween``, ``…InSet``,
``…MatchRegex``, ``…NotBeNull``, ``ExpectColumnValueLengthsToBeBetween``, the column-pair
rules, …; see :data:`ROW_MAP`). For those, GX is given one row per *distinct value* (per
distinct tuple of values for multi-column rules) instead of one row per input row, and the
failing distinct values are mapped back to the rows holding them. Every row gets exactly the
outcome it would get if GX validated the whole batch, at a cost that grows with the number of
distinct values (node, metric, app, severity, timestamps of a telemetry sweep are few) instead
of rows. Details:

* columns are grouped into *components* (columns linked by a multi-column rule share one: the
  distinct *tuples* of (A, B) are validated, which is exact for a per-row rule);
* a column whose only rules are ``ExpectColumnValuesToNotBeNull`` / ``…ToBeNull`` (whose
  outcome depends only on whether the value is missing, as pandas sees it: null, or NaN in a
  float column) is reduced to one present and one missing value;
* the frame GX sees must be rectangular: shorter components are padded by repeating one of
  their own values (the most frequent one), so the set of values (and with it the pandas dtype
  of each column) is exactly the set in the batch; components with few distinct values and
  components with many go to two separate frames (two GX calls) so that low-cardinality
  string columns are not padded to the length of e.g. ``source_offset``;
* columns no expectation names are not given to GX at all;
* expectations that are not row-map (uniqueness, aggregates, ``row_condition``, …) and
  columns of types the reduction does not handle are validated on the full rows, as before.

Counts stay in rows: in each per-expectation result ``element_count``, ``unexpected_count``,
``missing_count``, the percentages and ``partial_unexpected_counts`` are re-weighted by the
number of rows holding each distinct value, and ``success`` is recomputed for ``mostly``
expectations, so the Data Docs read as if GX had seen every row. ``partial_unexpected_list``
holds distinct failing values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.table import Expectation

NULL_ONLY = frozenset({"ExpectColumnValuesToNotBeNull", "ExpectColumnValuesToBeNull"})
"""Row-map expectations whose outcome depends only on whether the value is missing."""
ROW_MAP = NULL_ONLY | frozenset(
    {
        "ExpectColumnValuesToBeBetween",
        "ExpectColumnValuesToBeInSet",
        "ExpectColumnValuesToNotBeInSet",
        "ExpectColumnValuesToMatchRegex",
        "ExpectColumnValuesToNotMatchRegex",
        "ExpectColumnValuesToMatchRegexList",
        "ExpectColumnValuesToNotMatchRegexList",
        "ExpectColumnValueLengthsToBeBetween",
        "ExpectColumnValueLengthsToEqual",
        "ExpectColumnPairValuesAToBeGreaterThanB",
        "ExpectColumnPairValuesToBeEqual",
        "ExpectColumnPairValuesToBeInSet",
        "ExpectMulticolumnSumToEqual",
        "ExpectSelectColumnValuesToBeUniqueWithinRecord",
    }
)
"""GX expectations whose outcome for a row depends only on that row's values in the columns the
expectation names (validated on distinct values / tuples)."""


def expectation_columns(e: Expectation) -> list[str]:
    """Columns an expectation names (``column``, ``column_A``/``column_B``, ``column_list``)."""
    cols = [e.kwargs[k] for k in ("column", "column_A", "column_B") if e.kwargs.get(k)]
    return cols + [c for c in e.kwargs.get("column_list", []) if c not in cols]


def _row_map(e: Expectation) -> bool:
    return e.type in ROW_MAP and not e.kwargs.get("row_condition")


def _reducible_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
    )


def _gx_array(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A column with the Arrow type GX gets it in (see :func:`_gx_frame`); dictionary columns decoded."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if pa.types.is_timestamp(col.type):
        return col.cast(pa.timestamp("ns", tz=col.type.tz)).cast(pa.int64())
    if pa.types.is_integer(col.type):
        return col.cast(pa.int64())
    if pa.types.is_floating(col.type):
        return col.cast(pa.float64())
    return col


def _gx_frame(batch: pa.Table) -> Any:
    """The pandas frame GX validates, with dtypes GX compares vectorised.

    GX's pandas ``between`` is vectorised only for int64/float64 columns; for datetimes and narrow
    integers it maps a Python function over every row. So timestamps become int64 ns since the
    epoch (matching the integer bounds :func:`nodewatch.schemas.gx_suite.build_suite` writes) and integers
    int64 (float64 with NaN where null); values and outcomes are unchanged.
    """
    import pandas as pd

    return pd.DataFrame({name: _gx_array(batch.column(name)).to_pandas() for name in batch.column_names})


@dataclass
class _Component:
    """Columns validated together on their distinct value tuples, and the row -> tuple map."""

    columns: list[str]
    expectations: list[int]
    ids: np.ndarray  # per row: index of its distinct tuple (its *class*)
    values: dict[str, pa.Array]  # per column: the value of each class
    weights: np.ndarray  # rows per class
    _first: np.ndarray | None = None

    @property
    def k(self) -> int:
        return len(self.weights)

    def first_rows(self) -> np.ndarray:
        """Row index of the first row of each class."""
        if self._first is None:
            first = np.empty(self.k, np.int64)
            n = len(self.ids)
            first[self.ids[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
            self._first = first
        return self._first


def _missing(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Missing as pandas sees it once converted: null, or NaN in a float column."""
    if pa.types.is_dictionary(arr.type):
        values = pa.chunked_array(arr).combine_chunks()
        if values.dictionary.null_count == 0 and not pa.types.is_floating(arr.type.value_type):
            return np.asarray(pc.is_null(values.indices).to_numpy(zero_copy_only=False), dtype=bool)
        arr = _gx_array(arr)
    m = pc.is_null(arr, nan_is_null=True) if pa.types.is_floating(arr.type) else pc.is_null(arr)
    return np.asarray(m.to_numpy(zero_copy_only=False), dtype=bool)


def _codes(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """``(ids, values)``: each row's index into the distinct (GX-typed) ``values``, null included.

    A dictionary column brings its own codes (no hashing) when its dictionary is distinct and used.
    """
    if pa.types.is_dictionary(col.type):
        d = pa.chunked_array(col).combine_chunks()  # unifies the chunks' dictionaries
        values, k = d.dictionary, len(d.dictionary)
        ids = np.asarray(pc.fill_null(d.indices, k).to_numpy(zero_copy_only=False), dtype=np.int64)
        if d.indices.null_count:
            values = pa.concat_arrays([values, pa.nulls(1, values.type)])
        used = np.bincount(ids, minlength=len(values)) > 0
        if used.all() and pc.count_distinct(values, mode="all").as_py() == len(values):
            return ids, _gx_array(values)
        col = d
    arr = _gx_array(col)
    enc = pc.dictionary_encode(arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr, null_encoding="encode")
    return np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64), enc.dictionary


def _component(batch: pa.Table, columns: list[str], expectations: list[int], null_only: bool) -> _Component:
    n = batch.num_rows
    raw = {c: batch.column(c) for c in columns}
    if null_only:
        (c,) = columns
        miss = _missing(raw[c])
        reps, ids = [], np.zeros(n, np.int64)
        present = ~miss
        if present.any():
            reps.append(int(np.argmax(present)))
        if miss.any():
            if reps:
                ids = miss.astype(np.int64)
            reps.append(int(np.argmax(miss)))
        weights = np.bincount(ids, minlength=len(reps))
        values = _gx_array(raw[c].take(pa.array(reps, pa.int64())))
        return _Component(columns, expectations, ids, {c: pa.chunked_array(values).combine_chunks()}, weights)
    if len(columns) == 1 and not pa.types.is_dictionary(raw[columns[0]].type):
        arr = _gx_array(raw[columns[0]])
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        probe = arr.slice(0, 4096)
        present = len(probe) - probe.null_count
        if n > len(probe) and present and pc.count_distinct(probe, mode="only_valid").as_py() > 0.9 * present:
            # mostly distinct where present (offsets, sub-second times, pids with nulls where a line
            # has none): one class per row, skip the hashing
            return _Component(columns, expectations, np.arange(n, dtype=np.int64), {columns[0]: arr}, np.ones(n, np.int64))
        raw = {columns[0]: arr}
    codes = [_codes(raw[c]) for c in columns]
    if len(columns) == 1:
        ids, dictionary = codes[0]
        weights = np.bincount(ids, minlength=len(dictionary))
        return _Component(columns, expectations, ids, {columns[0]: dictionary}, weights)
    key, card = codes[0][0], len(codes[0][1])
    for code, dictionary in codes[1:]:
        key = key * len(dictionary) + code  # < card * len(dictionary) <= n * n
        enc = pc.dictionary_encode(pa.array(key, pa.int64()))
        key, card = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64), len(enc.dictionary)
    comp = _Component(columns, expectations, key, {}, np.bincount(key, minlength=card))
    first = comp.first_rows()
    comp.values = {c: codes[j][1].take(pa.array(codes[j][0][first])) for j, c in enumerate(columns)}
    return comp


def _missing_classes(e: Expectation, comp: _Component, kwargs: dict[str, Any]) -> np.ndarray:
    """Per class of ``comp``: whether GX counts its rows as missing (not considered) for ``e``
    (``kwargs``: the expectation's kwargs as GX ran it, e.g. with ``ignore_row_if`` filled in)."""
    cols = expectation_columns(e)
    miss = np.stack([_missing(comp.values[c]) for c in cols]) if cols else np.zeros((1, comp.k), bool)
    if e.type in NULL_ONLY:
        return miss[0]
    if e.type.startswith("ExpectColumnPair"):
        how = kwargs.get("ignore_row_if") or "both_values_are_missing"
        return {"both_values_are_missing": miss.all(0), "either_value_is_missing": miss.any(0)}.get(how, np.zeros(comp.k, bool))
    if len(cols) > 1:
        how = kwargs.get("ignore_row_if") or "all_values_are_missing"
        return {"all_values_are_missing": miss.all(0), "any_value_is_missing": miss.any(0)}.get(how, np.zeros(comp.k, bool))
    return miss[0]


def _index_rows(r: Any) -> np.ndarray:
    idx = r.result.get("unexpected_index_list") or []
    return np.fromiter((int(i["index"]) if isinstance(i, dict) else int(i) for i in idx), np.int64, len(idx))


def _reweight(r: Any, e: Expectation, comp: _Component, n: int) -> np.ndarray | None:
    """Turn the result ``r`` of ``e`` on the distinct tuples of ``comp`` into a result over the ``n``
    rows (counts, percentages, success); return the failing-row mask (``None`` if none fail)."""
    res = r.result
    idx = _index_rows(r)
    keep = idx < comp.k  # padding rows repeat a class that also has its own row
    fail = np.zeros(comp.k, bool)
    fail[idx[keep]] = True
    w = comp.weights
    unexpected = int(w[fail].sum())
    if "element_count" in res:
        res["element_count"] = n
    if res.get("unexpected_count") is not None:
        res["unexpected_count"] = unexpected
    considered = n
    if "missing_count" in res:
        missing = int(w[_missing_classes(e, comp, dict(r.expectation_config.kwargs))].sum())
        considered = n - missing
        res["missing_count"] = missing
        res["missing_percent"] = 100.0 * missing / n if n else None
        res["unexpected_percent_total"] = 100.0 * unexpected / n if n else None
        res["unexpected_percent_nonmissing"] = 100.0 * unexpected / considered if considered else None
        res["unexpected_percent"] = res["unexpected_percent_nonmissing"]
    elif "unexpected_percent" in res:
        res["unexpected_percent"] = 100.0 * unexpected / n if n else None
    if "partial_unexpected_index_list" in res and idx.size:
        first = comp.first_rows()
        res["partial_unexpected_index_list"] = [int(first[i]) for i in idx[keep][:20]]
    values = res.get("unexpected_list")
    if values is not None and "partial_unexpected_counts" in res:
        counts: dict[Any, int] = {}
        try:
            for i, v in zip(idx.tolist(), values, strict=False):
                if i < comp.k:
                    key = tuple(v.values()) if isinstance(v, dict) else v
                    counts[key] = counts.get(key, 0) + int(w[i])
            top = sorted(counts.items(), key=lambda kv: -kv[1])[:20]
            res["partial_unexpected_counts"] = [{"value": v, "count": c} for v, c in top]
        except TypeError:  # unhashable values: keep GX's (distinct-value) counts
            pass
    mostly = e.kwargs.get("mostly")
    if mostly is not None and res.get("unexpected_count") is not None:
        r.success = considered == 0 or (considered - unexpected) / considered >= mostly
    if not fail.any():
        return None
    return fail[comp.ids]
