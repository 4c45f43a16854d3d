"""Row validation with Great Expectations, and per-run Data Docs.

:class:`BatchValidator` validates Arrow batches of one staged table against the suite generated
from its :class:`~schemas.table.TableSchema` (plus run-time expectations) using GX's pandas
engine with ``result_format=COMPLETE``: GX's ``unexpected_index_list`` decides which rows go to
quarantine, and the failing expectations' labels become the quarantine reason. Extra vectorised
row checks (rules GX cannot express per column) run after GX and add their own labels.

Per-batch GX results are merged into one validation result per (run, table) which is rendered as
a Data Docs site by :func:`write_data_docs`.
"""

from __future__ import annotations

import copy
import functools
import os
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from schemas.gx_suite import build_suite, expectation_label
from schemas.table import Expectation, TableSchema

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
_LOCK = threading.RLock()
RowCheck = Callable[[pa.Table], list[tuple[str, Any]]]


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
        cols: set[str] = set()
        for e in self.expectations:
            cols.update(e.kwargs.get(k) for k in ("column", "column_A", "column_B") if e.kwargs.get(k))
            cols.update(e.kwargs.get("column_list", []))
        self.columns = sorted(cols)
        with _LOCK:
            ctx = gx_context()
            self.suite = ctx.suites.add_or_update(build_suite(self.suite_name, self.expectations))
            self._bd = _batch_definition(schema.name)
        self.merged: Any = None
        self.rows_validated = 0
        self.unexpected: dict[str, int] = {label: 0 for label in self.labels}

    def validate(self, batch: pa.Table) -> tuple[np.ndarray, list[str | None]]:
        """Return ``(ok_mask, reasons)`` for the rows of ``batch``; reasons is ``None`` for good rows."""
        n = batch.num_rows
        if n == 0:
            return np.ones(0, bool), []
        failures: list[tuple[np.ndarray, str]] = []
        if self.expectations:
            df = _gx_frame(batch.select(self.columns))
            with _LOCK:
                gx_batch = self._bd.get_batch(batch_parameters={"dataframe": df})
                res = gx_batch.validate(
                    self.suite,
                    result_format={
                        "result_format": "COMPLETE",
                        "partial_unexpected_count": 20,
                        "return_unexpected_index_query": False,
                    },
                )
            for r in res.results:
                label = (r.expectation_config.meta or {}).get("label") or r.expectation_config.type
                if r.exception_info and r.exception_info.get("raised_exception"):
                    raise RuntimeError(f"GX expectation {label} raised: {r.exception_info.get('exception_message')}")
                idx = r.result.get("unexpected_index_list") or []
                rows = np.fromiter((int(i["index"]) if isinstance(i, dict) else int(i) for i in idx), np.int64, len(idx))
                if rows.size:
                    failures.append((rows, label))
                self.unexpected[label] = self.unexpected.get(label, 0) + int(rows.size)
            self._merge(res, n)
        for check in self.row_checks:
            for label, mask in check(batch):
                mask = np.asarray(mask, dtype=bool)
                if mask.shape != (n,):
                    raise ValueError(f"row check {label} returned a mask of shape {mask.shape} for {n} rows")
                if mask.any():
                    failures.append((np.flatnonzero(mask), label))
                self.unexpected[label] = self.unexpected.get(label, 0) + int(mask.sum())
        self.rows_validated += n
        ok = np.ones(n, bool)
        reasons: list[str | None] = [None] * n
        for rows, label in failures:
            ok[rows] = False
            for i in rows.tolist():
                reasons[i] = label if reasons[i] is None else f"{reasons[i]}; {label}"
        return ok, reasons

    def _merge(self, res: Any, n: int) -> None:
        """Accumulate a batch result into one run-level result (counts summed, index lists dropped)."""
        for r in res.results:
            r.result.pop("unexpected_index_list", None)
            r.result.pop("unexpected_list", None)
        if self.merged is None:
            self.merged = copy.deepcopy(res)
            return
        for acc, r in zip(self.merged.results, res.results, strict=True):
            for key in ("element_count", "unexpected_count", "missing_count"):
                if key in r.result:
                    acc.result[key] = acc.result.get(key, 0) + r.result[key]
            ec = acc.result.get("element_count") or 0
            if ec:
                acc.result["unexpected_percent"] = 100.0 * acc.result.get("unexpected_count", 0) / ec
            acc.success = acc.success and r.success
        self.merged.success = all(r.success for r in self.merged.results)
        stats = self.merged.statistics
        stats["successful_expectations"] = sum(r.success for r in self.merged.results)
        stats["unsuccessful_expectations"] = len(self.merged.results) - stats["successful_expectations"]


def _gx_frame(batch: pa.Table) -> Any:
    """The pandas frame GX validates, with dtypes GX compares vectorised.

    GX's pandas ``between`` is vectorised only for int64/float64 columns; for datetimes and narrow
    integers it maps a Python function over every row. So timestamps become int64 ns since the
    epoch (matching the integer bounds :func:`schemas.gx_suite.build_suite` writes) and integers
    int64 (float64 with NaN where null); values and outcomes are unchanged.
    """
    import pandas as pd

    cols = {}
    for name in batch.column_names:
        col = batch.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ns", tz=col.type.tz)).cast(pa.int64())
        elif pa.types.is_integer(col.type):
            col = col.cast(pa.int64())
        elif pa.types.is_floating(col.type):
            col = col.cast(pa.float64())
        cols[name] = col.to_pandas()
    return pd.DataFrame(cols)


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
