"""The nightly scoring outputs: ``cubes/scores.zarr`` and the per-day summary / alert tables.

``scores.zarr`` dims ``(node, time)`` and ``(node, time, metric)``, aligned with ``telemetry.zarr``
(same epoch, step, node order and node chunk, so a (day, node batch) region of the scores cube is
scored from the same region of the telemetry cube):

``score``         float32  anomaly probability ``P = min(Error / max(Error_train), 1)`` (RUAD Eq. 3); NaN = not scored
``threshold``     float32  the threshold ``T`` of the node's model in force when the window was scored (Eq. 4)
``is_anomalous``  int8     1 if ``P >= T``, 0 if not, -1 if the window was not scored (no model, no complete window)
``contribution``  float32  per-metric share of the normalised error (sum over the four stats of a metric)

The per-node daily summary and the alert list are parquet tables with the Arrow schemas below.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from nodewatch.schemas.cubes import CubeSpec, VarSpec, check_step

SCORES = "scores"
TOP_METRICS = 3
"""Metrics named per node / alert (largest summed contribution)."""


def scores_spec(step: str | pd.Timedelta = "15min") -> CubeSpec:
    """Spec of ``cubes/scores.zarr`` for the telemetry cube's ``step``."""
    td = check_step(step)
    nt = ("node", "time")
    variables = (
        VarSpec("score", nt, "float32", np.nan, {
            "long_name": "anomaly probability P = min(Error / max(Error_train), 1) (RUAD Eq. 3)", "units": "1",
            "valid_min": 0.0, "valid_max": 1.0}),
        VarSpec("threshold", nt, "float32", np.nan, {
            "long_name": "classification threshold T of the node's model (RUAD Eq. 4)", "units": "1"}),
        VarSpec("is_anomalous", nt, "int8", -1, {
            "long_name": "P >= T (RUAD Eq. 4)", "flag_values": [-1, 0, 1],
            "flag_meanings": "not_scored normal anomalous"}),
        VarSpec("contribution", ("node", "time", "metric"), "float32", np.nan, {
            "long_name": "per-metric share of the normalised reconstruction error (sum over mean/min/max/var)",
            "units": "1"}),
    )
    attrs: dict[str, Any] = {
        "title": "nodewatch scores cube: nightly per-node anomaly scores",
        "Conventions": "CF-1.10",
        "step": pd.tseries.frequencies.to_offset(td).freqstr,
        "step_seconds": int(td.total_seconds()),
        "missing_data": "score/threshold/contribution NaN and is_anomalous -1 where a window was not scored",
        "references": "Molan et al., RUAD, Section 3.2 (Eq. 3, 4): reconstruction error normalised by the maximum "
                      "training error",
    }
    return CubeSpec(SCORES, "scores.zarr", {"time": td}, variables, attrs)


SUMMARY_SCHEMA = pa.schema([
    pa.field("day", pa.date32(), nullable=False),
    pa.field("node", pa.string(), nullable=False),
    pa.field("status", pa.string(), nullable=False),  # scored | no-model | no-data | failed
    pa.field("reason", pa.string()),
    pa.field("model_kind", pa.string()),
    pa.field("model_run", pa.string()),
    pa.field("threshold", pa.float32()),
    pa.field("windows", pa.int32(), nullable=False),
    pa.field("scored_windows", pa.int32(), nullable=False),
    pa.field("anomalous_windows", pa.int32(), nullable=False),
    pa.field("mean_score", pa.float32()),
    pa.field("peak_score", pa.float32()),
    pa.field("peak_time", pa.timestamp("ns", tz="UTC")),
    pa.field("first_anomalous", pa.timestamp("ns", tz="UTC")),
    pa.field("top_metrics", pa.list_(pa.string())),
])
"""One row per node and day (``scores/daily/date=YYYY-MM-DD/summary.parquet``)."""

ALERT_SCHEMA = pa.schema([
    pa.field("day", pa.date32(), nullable=False),
    pa.field("node", pa.string(), nullable=False),
    pa.field("first_time", pa.timestamp("ns", tz="UTC"), nullable=False),
    pa.field("peak_time", pa.timestamp("ns", tz="UTC"), nullable=False),
    pa.field("peak_score", pa.float32(), nullable=False),
    pa.field("anomalous_windows", pa.int32(), nullable=False),
    pa.field("top_metrics", pa.list_(pa.string()), nullable=False),
    pa.field("model_run", pa.string()),
])
"""One row per flagged node and day (``scores/daily/date=YYYY-MM-DD/alerts.parquet``)."""
