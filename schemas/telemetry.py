"""Staged ``telemetry`` table: one value of one metric of one node at one time (long format).

Columns: ``time`` (UTC, ns), ``node`` (validated name), ``metric`` (catalogue name, see
``schemas/metrics.py``), ``value`` (float64, finite, inside the metric's catalogue range) and
``source_offset`` (1-based line of a text input, row index of a columnar input).
Unique key ``(node, time, metric)``. Counters are staged as their ``<name>_rate`` gauges.

Per-metric checks (interface agreed with ``tasks/ingest/pipeline.py``)
----------------------------------------------------------------------
The generic pipeline checks the column rules of :data:`TELEMETRY` (types, not-null, node regex,
known node, time window). A value range depends on the metric, which a per-column rule cannot
express, so this module adds three row checks, exported as :data:`ROW_CHECKS` and plugged into the
telemetry ``SourceSpec.row_checks`` (``tasks/ingest/base.py``): each is a function
``check(table: pa.Table) -> list[(label, failing_mask)]`` with a boolean numpy mask
(True = the row fails), fully vectorised (one ``index_in`` + numpy comparisons per batch):

* ``expect_column_values_to_be_finite(value)``: NaN, +inf, -inf fail;
* ``expect_metric_in_catalogue(metric)``: metrics not in :data:`nodewatch.schemas.metrics.STAGED_METRICS`
  fail (unknown-metric policy: quarantine, see ``schemas/metrics.py``);
* ``expect_metric_values_in_catalogue_range(value)``: ``value`` outside ``[min, max]`` of its metric;
  the quarantine reason names the metric, range and unit
  (``expect_metric_values_in_catalogue_range(value): power_node outside [1, 20000] W``).

The same rules written as GX expectations are :func:`catalogue_expectations`
(``ExpectColumnValuesToBeInSet`` on ``metric``; one ``ExpectColumnValuesToBeBetween`` on ``value``
per metric with ``row_condition='metric=="<name>"'``, ``condition_parser="pandas"``). They are
deliberately *not* in :data:`TELEMETRY` ``.extra_expectations``: the pipeline runs the GX suite on
every batch with the pandas engine, and ~180 row-conditioned expectations would evaluate ~180
pandas queries per batch, where :data:`ROW_CHECKS` does it with one vectorised lookup.
:func:`metric_range_violations` gives the per-row reason strings directly (``None`` = row passes),
for callers that want one detailed reason per row.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.metrics import CATALOGUE, STAGED_METRICS, staged_bounds
from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, Expectation, TableSchema

FINITE_LABEL = "expect_column_values_to_be_finite(value)"
CATALOGUE_LABEL = "expect_metric_in_catalogue(metric)"
RANGE_LABEL = "expect_metric_values_in_catalogue_range(value)"


def catalogue_expectations() -> tuple[Expectation, ...]:
    """The per-metric rules of :data:`ROW_CHECKS` as GX expectation data (documentation, Data Docs)."""
    out = [Expectation("ExpectColumnValuesToBeInSet", {"column": "metric", "value_set": list(STAGED_METRICS)})]
    for name in STAGED_METRICS:
        m = CATALOGUE[name]
        out.append(
            Expectation(
                "ExpectColumnValuesToBeBetween",
                {
                    "column": "value",
                    "min_value": m.min,
                    "max_value": m.max,
                    "row_condition": f'metric=="{name}"',
                    "condition_parser": "pandas",
                },
            )
        )
    return tuple(out)


TELEMETRY = TableSchema(
    name="telemetry",
    columns=(
        Column("time", pa.timestamp("ns", tz="UTC"), nullable=False, description="sample time (UTC)"),
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="node name"),
        Column("metric", pa.string(), nullable=False, description="metric name from the catalogue (schemas/metrics.py)"),
        Column("value", pa.float64(), nullable=False, description="value in the metric's catalogue unit; finite, in range"),
        Column("source_offset", pa.int64(), nullable=False, description="1-based line (text) or row index (columnar)"),
    ),
    time_column="time",
    unique_key=("node", "time", "metric"),
    description="Node telemetry in long format; counters staged as per-second rates `<name>_rate`.",
)


@functools.cache
def _bounds() -> tuple[pa.Array, np.ndarray, np.ndarray]:
    names, lo, hi = staged_bounds()
    return pa.array(list(names), pa.string()), lo, hi


def _masks(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(non-finite, unknown metric, out of range) masks of a telemetry batch."""
    nonfinite, unknown, out, _ = _masks_idx(table)
    return nonfinite, unknown, out


def _masks_idx(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_masks` plus each row's index into :data:`STAGED_METRICS` (-1 = unknown)."""
    names, lo, hi = _bounds()
    value = table.column("value").to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    metric = table.column("metric")
    if pa.types.is_dictionary(metric.type):  # look the few distinct names up, then map the codes
        metric = metric.combine_chunks() if isinstance(metric, pa.ChunkedArray) else metric
        d_idx = pc.fill_null(pc.index_in(metric.dictionary, value_set=names), -1).to_numpy(zero_copy_only=False)
        lut = np.append(np.asarray(d_idx, dtype=np.int64), -1)  # null code -> unknown
        codes = pc.fill_null(metric.indices, len(metric.dictionary)).to_numpy(zero_copy_only=False)
        idx_np = lut[np.asarray(codes, dtype=np.int64)]
    else:
        idx = pc.index_in(metric, value_set=names)
        idx_np = pc.fill_null(idx, -1).to_numpy(zero_copy_only=False) if idx.null_count else idx.to_numpy(zero_copy_only=False)
        idx_np = np.asarray(idx_np, dtype=np.int64)
    unknown = idx_np < 0
    nonfinite = ~np.isfinite(value)
    safe = np.where(unknown, 0, idx_np)
    with np.errstate(invalid="ignore"):
        out = ~unknown & ~nonfinite & ((value < lo[safe]) | (value > hi[safe]))
    return nonfinite, unknown, out, idx_np


def range_label(name: str) -> str:
    """Quarantine reason of a value of metric ``name`` outside its catalogue range, e.g.
    ``expect_metric_values_in_catalogue_range(value): power_node outside [1, 20000] W``."""
    m = CATALOGUE[name]
    lo = "-inf" if m.min is None else f"{m.min:g}"
    hi = "inf" if m.max is None else f"{m.max:g}"
    return f"{RANGE_LABEL}: {name} outside [{lo}, {hi}] {m.unit}"


def row_checks(table: pa.Table) -> list[tuple[str, np.ndarray]]:
    """Per-metric row checks for ``SourceSpec.row_checks``: ``[(label, failing_mask), ...]``.

    A range violation's label names the metric, its range and unit (:func:`range_label`): one
    label per metric with violations in the batch, so the quarantine reason says which rule failed.
    """
    nonfinite, unknown, out, idx = _masks_idx(table)
    checks = [(FINITE_LABEL, nonfinite), (CATALOGUE_LABEL, unknown)]
    if out.any():
        for k in np.unique(idx[out]).tolist():
            checks.append((range_label(STAGED_METRICS[k]), out & (idx == k)))
    else:
        checks.append((RANGE_LABEL, out))
    return checks


ROW_CHECKS = (row_checks,)
"""The telemetry row checks, ready for ``SourceSpec(row_checks=ROW_CHECKS)``."""


def metric_range_violations(table: pa.Table) -> pa.Array:
    """One reason per row (``None`` = passes) for non-finite values, unknown metrics, out-of-range values.

    The reason starts with the check label, e.g.
    ``expect_metric_values_in_catalogue_range(value): temp_cpu0=1e+30 outside [-20, 130] degC``.
    Vectorised except for building the strings of the failing rows.
    """
    nonfinite, unknown, out = _masks(table)
    bad = nonfinite | unknown | out
    reasons: list[str | None] = [None] * table.num_rows
    if bad.any():
        rows = np.flatnonzero(bad)
        metric = table.column("metric").take(pa.array(rows)).to_pylist()
        value = table.column("value").to_numpy(zero_copy_only=False)[rows]
        for j, i in enumerate(rows):
            name, v = metric[j], value[j]
            if nonfinite[i]:
                reasons[i] = f"{FINITE_LABEL}: {name}={v}"
            elif unknown[i]:
                reasons[i] = f"{CATALOGUE_LABEL}: unknown metric {name!r} (add it to schemas/metrics.py)"
            else:
                m = CATALOGUE[name]
                lo = "-inf" if m.min is None else f"{m.min:g}"
                hi = "inf" if m.max is None else f"{m.max:g}"
                reasons[i] = f"{RANGE_LABEL}: {name}={v:g} outside [{lo}, {hi}] {m.unit}"
    return pa.array(reasons, pa.string())
