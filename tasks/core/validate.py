"""Row validation with Great Expectations, and per-run Data Docs.

:class:`BatchValidator` validates Arrow batches of one staged table against the suite generated
from its :class:`~nodewatch.schemas.table.TableSchema` (plus run-time expectations) using GX's pandas
engine with ``result_format=COMPLETE``: GX's ``unexpected_index_list`` decides which rows go to
quarantine, and the failing expectations' labels become the quarantine reason. Extra vectorised
row checks (rules GX cannot express per column) run after GX and add their own labels.

GX is given one row per distinct value (or tuple) instead of one row per input row wherever that
gives every row the same outcome; the reduction and the mapping back to rows are in
:mod:`nodewatch.tasks.core.distinct`.

Per-batch GX results are merged into one validation result per (run, table) which is rendered as
a Data Docs site by :func:`nodewatch.tasks.core.datadocs.write_data_docs`.
"""

from __future__ import annotations

import copy
import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from nodewatch.schemas.gx_suite import build_suite, expectation_label
from nodewatch.schemas.table import Expectation, TableSchema
from nodewatch.tasks.core.distinct import (
    NULL_ONLY,
    _component,
    _gx_frame,
    _index_rows,
    _reducible_type,
    _reweight,
    _row_map,
    expectation_columns,
)

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
_LOCK = threading.RLock()
RowCheck = Callable[[pa.Table], list[tuple[str, Any]]]

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
