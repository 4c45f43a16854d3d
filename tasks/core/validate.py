"""Row validation with Great Expectations, and per-run Data Docs.

:class:`BatchValidator` validates Arrow batches of one staged table against the suite generated
from its :class:`~nodewatch.schemas.table.TableSchema` (plus run-time expectations) using GX's pandas
engine with ``result_format=COMPLETE``: GX's ``unexpected_index_list`` decides which rows go to
quarantine, and the failing expectations' labels become the quarantine reason. Extra vectorised
row checks (rules GX cannot express per column) run after GX and add their own labels.

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

Per-batch GX results are merged into one validation result per (run, table) which is rendered as
a Data Docs site by :func:`write_data_docs`.
"""

from __future__ import annotations

import copy
import functools
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.gx_suite import build_suite, expectation_label
from nodewatch.schemas.table import Expectation, TableSchema

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
_LOCK = threading.RLock()
RowCheck = Callable[[pa.Table], list[tuple[str, Any]]]

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
SMALL_FRAME = 65_536
"""Components with at most this many distinct values are validated in one frame, the others in a
second one (padding a 1000-value string column to a million rows would cost more than a call)."""
_INDEX = "nodewatch_expectation_index"  # meta key mapping GX results back to our expectations
_RESULT_FORMAT = {"result_format": "COMPLETE", "partial_unexpected_count": 20, "return_unexpected_index_query": False}


@functools.cache
def gx_context() -> Any:
    """One ephemeral GX context per process (building one takes seconds)."""
    import logging

    quiet = ("great_expectations", "great_expectations._docs_decorators", "great_expectations.data_context.types.base")
    for name in quiet:  # GX logs INFO noise at import and context creation
        logging.getLogger(name).setLevel(logging.ERROR)
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    for name in quiet:
        logging.getLogger(name).setLevel(logging.ERROR)

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    ctx.data_sources.add_pandas("nodewatch")
    return ctx


def _batch_definition(table: str) -> Any:
    ctx = gx_context()
    ds = ctx.data_sources.get("nodewatch")
    try:
        asset = ds.get_asset(table)
    except LookupError:
        asset = ds.add_dataframe_asset(name=table)
    try:
        return asset.get_batch_definition("whole")
    except (KeyError, LookupError):
        return asset.add_batch_definition_whole_dataframe("whole")


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


class BatchValidator:
    """Validates batches of one table and accumulates a merged GX result for Data Docs."""

    def __init__(
        self,
        schema: TableSchema,
        expectations: Sequence[Expectation],
        row_checks: Sequence[RowCheck] = (),
        suite_name: str | None = None,
    ) -> None:
        self.schema = schema
        self.expectations = list(expectations)
        self.labels = [expectation_label(e) for e in self.expectations]
        self.row_checks = list(row_checks)
        self.suite_name = suite_name or f"{schema.name}-suite"
        self.columns = sorted({c for e in self.expectations for c in expectation_columns(e)})
        with _LOCK:
            ctx = gx_context()
            self.suite = ctx.suites.add_or_update(build_suite(self.suite_name, self.expectations))
            self._bd = _batch_definition(schema.name)
        self._suites: dict[tuple[int, ...], Any] = {}
        self.merged: Any = None
        self.rows_validated = 0
        self.gx_rows = 0
        """Rows of the frames given to GX (distinct values + padding, or full rows)."""
        self.unexpected: dict[str, int] = {label: 0 for label in self.labels}

    # ------------------------------------------------------------------ plan
    def _plan(self, batch: pa.Table, reduce: bool) -> tuple[list[tuple[list[str], list[int], bool]], list[int]]:
        """Split expectations into components validated on distinct values, and the rest (full rows)."""
        if not reduce:
            return [], list(range(len(self.expectations)))
        types = {f.name: f.type for f in batch.schema}
        parent: dict[str, str] = {}

        def find(c: str) -> str:
            while parent[c] != c:
                parent[c] = parent[parent[c]]
                c = parent[c]
            return c

        full, mapped = [], []
        for i, e in enumerate(self.expectations):
            cols = expectation_columns(e)
            if _row_map(e) and cols and all(c in types and _reducible_type(types[c]) for c in cols):
                mapped.append(i)
                for c in cols:
                    parent.setdefault(c, c)
                for c in cols[1:]:
                    parent[find(c)] = find(cols[0])
            else:
                full.append(i)
        groups: dict[str, tuple[list[str], list[int]]] = {}
        for i in mapped:
            cols = expectation_columns(self.expectations[i])
            g = groups.setdefault(find(cols[0]), ([], []))
            g[1].append(i)
            for c in cols:
                if c not in g[0]:
                    g[0].append(c)
        comps = []
        for cols, idx in groups.values():
            null_only = len(cols) == 1 and all(self.expectations[i].type in NULL_ONLY for i in idx)
            comps.append((cols, idx, null_only))
        return comps, full

    def _sub_suite(self, idx: tuple[int, ...]) -> Any:
        if idx not in self._suites:
            suite = build_suite(f"{self.suite_name}-part", [self.expectations[i] for i in idx])
            for i, exp in zip(idx, suite.expectations, strict=True):
                exp.meta = {**(exp.meta or {}), _INDEX: i}
            self._suites[idx] = suite
        return self._suites[idx]

    def _run_gx(self, df: Any, idx: list[int]) -> Any:
        """Validate ``df`` against the expectations ``idx`` (one GX call): ``(result, {index: result})``.

        Uses GX's V1 ``Validator`` on the ``whole`` batch definition (what ``ValidationDefinition.run``
        does, without storing a result per call): the batch, with its fingerprint hash of the frame,
        is built once (``BatchDefinition.get_batch(...).validate(...)`` builds it twice).
        """
        from great_expectations.validator.v1_validator import Validator

        suite = self._sub_suite(tuple(idx))
        with _LOCK:
            res = Validator(
                batch_definition=self._bd, batch_parameters={"dataframe": df}, result_format=_RESULT_FORMAT
            ).validate_expectation_suite(suite)
        self.gx_rows += len(df)
        by_idx = {}
        for r in res.results:  # GX does not keep the suite's order
            meta = dict(r.expectation_config.meta or {})
            i = meta.pop(_INDEX)
            r.expectation_config.meta = meta
            by_idx[i] = r
            if r.exception_info and r.exception_info.get("raised_exception"):
                msg = r.exception_info.get("exception_message")
                raise RuntimeError(f"GX expectation {self.labels[i]} raised: {msg}")
        if sorted(by_idx) != sorted(idx):
            raise RuntimeError(f"GX returned results for expectations {sorted(by_idx)}, expected {sorted(idx)}")
        return res, by_idx

    # ------------------------------------------------------------------ validate
    def validate(self, batch: pa.Table, *, distinct: bool = True, plain: pa.Table | None = None) -> tuple[np.ndarray, pa.Array]:
        """Return ``(ok_mask, reasons)`` for the rows of ``batch``.

        ``reasons`` is a string array (dictionary-encoded) with the failing labels of each bad row
        joined by ``"; "`` in expectation order, then row-check order, null for good rows.
        ``distinct=False`` gives GX the full rows (the reference the distinct path must match).
        ``plain``: the same rows without the columns the pipeline dictionary-encoded (columns a
        parser passed on encoded stay encoded), for the row checks (else ``batch`` is decoded for them).
        """
        import pandas as pd

        n = batch.num_rows
        if n == 0:
            return np.ones(0, bool), pa.array([], pa.string()).dictionary_encode()
        failures: list[tuple[np.ndarray, str]] = []  # (row mask, label)
        per_exp: dict[int, Any] = {}
        template = None
        if self.expectations:
            comps_plan, full = self._plan(batch, distinct)
            comps = [_component(batch, cols, idx, null_only) for cols, idx, null_only in comps_plan]
            small = [c for c in comps if c.k <= SMALL_FRAME]
            big = [c for c in comps if c.k > SMALL_FRAME]
            masks: dict[int, np.ndarray | None] = {}
            for frame in (small, big):
                if not frame:
                    continue
                length = max(c.k for c in frame)
                cols = {}
                for c in frame:
                    take = None
                    if c.k < length:
                        pad = np.full(length - c.k, int(np.argmax(c.weights)), np.int64)
                        take = pa.array(np.concatenate([np.arange(c.k, dtype=np.int64), pad]))
                    for name in c.columns:
                        v = c.values[name]
                        cols[name] = (v.take(take) if take is not None else v).to_pandas()
                idx = [i for c in frame for i in c.expectations]
                res, by_idx = self._run_gx(pd.DataFrame(cols), idx)
                template = res if template is None else template
                for c in frame:
                    for i in c.expectations:
                        masks[i] = _reweight(by_idx[i], self.expectations[i], c, n)
                        per_exp[i] = by_idx[i]
            if full:
                cols_full = sorted({c for i in full for c in expectation_columns(self.expectations[i])})
                res, by_idx = self._run_gx(_gx_frame(batch.select(cols_full)), full)
                template = res if template is None else template
                for i, r in by_idx.items():
                    rows = _index_rows(r)
                    m = None
                    if rows.size:
                        m = np.zeros(n, bool)
                        m[rows] = True
                    masks[i], per_exp[i] = m, r
            for i, label in enumerate(self.labels):
                m = masks[i]
                cnt = 0 if m is None else int(m.sum())
                if cnt:
                    failures.append((m, label))
                self.unexpected[label] = self.unexpected.get(label, 0) + cnt
            self._merge(template, [per_exp[i] for i in range(len(self.expectations))])
        if plain is None or plain.num_rows != n:
            plain = _decoded(batch) if self.row_checks else batch
        for check in self.row_checks:
            for label, mask in check(plain):
                mask = np.asarray(mask, dtype=bool)
                if mask.shape != (n,):
                    raise ValueError(f"row check {label} returned a mask of shape {mask.shape} for {n} rows")
                cnt = int(mask.sum())
                if cnt:
                    failures.append((mask, label))
                self.unexpected[label] = self.unexpected.get(label, 0) + cnt
        self.rows_validated += n
        return _outcome(n, failures)

    def _merge(self, template: Any, results: list[Any]) -> None:
        """Accumulate a batch result into one run-level result (counts summed, index lists dropped)."""
        for r in results:
            for key in ("unexpected_index_list", "unexpected_list"):
                r.result.pop(key, None)
        if self.merged is None:
            self.merged = copy.deepcopy(template)
            self.merged.results = copy.deepcopy(results)
            self.merged.suite_name = self.suite_name
        else:
            for acc, r in zip(self.merged.results, results, strict=True):
                for key in ("element_count", "unexpected_count", "missing_count"):
                    if r.result.get(key) is not None:
                        acc.result[key] = (acc.result.get(key) or 0) + r.result[key]
                ec = acc.result.get("element_count") or 0
                if ec:
                    unexp = acc.result.get("unexpected_count") or 0
                    miss = acc.result.get("missing_count")
                    considered = ec - (miss or 0)
                    pct_nonmissing = 100.0 * unexp / considered if considered else None
                    if "unexpected_percent_total" in acc.result:
                        acc.result["unexpected_percent_total"] = 100.0 * unexp / ec
                    if "unexpected_percent_nonmissing" in acc.result:
                        acc.result["unexpected_percent_nonmissing"] = pct_nonmissing
                    if "missing_percent" in acc.result and miss is not None:
                        acc.result["missing_percent"] = 100.0 * miss / ec
                    acc.result["unexpected_percent"] = pct_nonmissing if miss is not None else 100.0 * unexp / ec
                acc.success = acc.success and r.success
        self.merged.success = all(r.success for r in self.merged.results)
        stats = self.merged.statistics
        total = len(self.merged.results)
        stats["evaluated_expectations"] = total
        stats["successful_expectations"] = sum(bool(r.success) for r in self.merged.results)
        stats["unsuccessful_expectations"] = total - stats["successful_expectations"]
        stats["success_percent"] = 100.0 * stats["successful_expectations"] / total if total else None


def _decoded(batch: pa.Table) -> pa.Table:
    """``batch`` with dictionary columns decoded (row checks see the plain column types)."""
    if not any(pa.types.is_dictionary(f.type) for f in batch.schema):
        return batch
    return pa.table(
        [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in batch.columns], names=batch.column_names
    )


def _outcome(n: int, failures: list[tuple[np.ndarray, str]]) -> tuple[np.ndarray, pa.Array]:
    """``ok`` mask and per-row reasons (labels joined in order) without a Python loop over rows."""
    bad = np.zeros(n, bool)
    for m, _ in failures:
        bad |= m
    ok = ~bad
    rows = np.flatnonzero(bad)
    indices = np.zeros(n, np.int32)
    if not rows.size:
        return ok, pa.DictionaryArray.from_arrays(pa.array(indices, mask=ok), pa.array([], pa.string()))
    # one bit per failure: rows with the same set of failures share one reason string
    bits = np.zeros((rows.size, len(failures)), bool)
    for j, (m, _) in enumerate(failures):
        bits[:, j] = m[rows]
    combos, inv = np.unique(np.packbits(bits, axis=1), axis=0, return_inverse=True)
    labels = []
    for combo in combos:
        on = np.unpackbits(combo)[: len(failures)].astype(bool)
        labels.append("; ".join(failures[j][1] for j in np.flatnonzero(on)))
    indices[rows] = np.asarray(inv, dtype=np.int32).ravel()
    return ok, pa.DictionaryArray.from_arrays(pa.array(indices, mask=ok), pa.array(labels, pa.string()))


def write_data_docs(validators: Sequence[BatchValidator], run_id: str, directory: Path) -> Path | None:
    """Render the merged results of ``validators`` as a static GX Data Docs site in ``directory``.

    Returns the path of ``index.html`` (``None`` if nothing was validated).
    """
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    results = [v for v in validators if v.merged is not None]
    if not results:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    ctx = gx_context()
    site = f"run-{run_id}"
    with _LOCK:
        ctx.add_data_docs_site(
            site_name=site,
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(directory)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        try:
            keys = []
            for v in results:
                key = ValidationResultIdentifier(
                    expectation_suite_identifier=ExpectationSuiteIdentifier(name=v.suite_name),
                    run_id=RunIdentifier(run_name=run_id, run_time=datetime.now(UTC)),
                    batch_identifier=v.schema.name,
                )
                ctx.validation_results_store.set(key, v.merged)
                keys.append(key)
            ctx.build_data_docs(site_names=[site], resource_identifiers=keys)
        finally:
            ctx.delete_data_docs_site(site)
    index = directory / "index.html"
    return index if index.exists() else None
