"""The Zarr cubes: dims, coords, dtypes, chunk rules, attrs and encodings (one definition per cube).

Two cubes live under ``cubes/`` in the store (documented for readers in ``docs/cubes.md``):

``telemetry.zarr``  dims ``(node, time, metric)``
    ``mean``, ``min``, ``max``, ``std`` (float32, NaN where no sample) and ``count`` (int32, samples
    in the window, 0 where none) of fixed windows (default 15 min, RUAD §4.1: "Four values were
    calculated for each 15 minute period and each feature: minimum, maximum, average, and variance";
    the variance is ``std**2``; ``std`` is the population standard deviation, ddof=0).

``syslog.zarr``  dims ``(node, time, severity)`` and ``(node, time_1min, severity)``
    ``lines`` = syslog lines per 30-min window (Ghiasvand & Ciorba §3, the "syslog generation" SG
    parameter counts entries "during a fixed time window (e.g. 30 minutes)") split by severity, and
    ``lines_1min`` = the same at 1-minute resolution (for node-state derivation). A severity dim (not
    one variable per severity) keeps the total a one-liner: ``lines.sum("severity", min_count=1)``.
    Windows of days not aggregated (yet) are stored as -1 and declared as CF ``_FillValue``, so xarray
    reads them as NaN (float64); ``min_count=1`` keeps them NaN in the total (xarray's default
    ``skipna`` sum would turn an all-NaN window into 0).

Invariants shared by both cubes (the writer in ``tasks/cubes/writer.py`` relies on them):

* the time chunk is exactly one UTC day, and the time axis starts at midnight of ``attrs["epoch"]``,
  so a day never shares a chunk with another day;
* the node chunk is fixed at creation (:func:`node_chunk`), sized for 1-16 MiB per chunk of the
  largest variable, never below the configured node batch;
* string coordinates (``node``, ``rack``, ``row``, ``metric``) use the Zarr v3 ``string`` data type
  (variable-length UTF-8, which has a v3 spec; fixed-width ``<U``/``S`` types raise
  ``UnstableSpecificationWarning`` in zarr 3.1);
* every variable has an explicit encoding (chunks, compressor, fill value): nothing is left to
  xarray's or zarr's defaults.

This module only describes data; it imports nothing of ours except the optional metric catalogue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

MIB = 1 << 20
CHUNK_MIN_BYTES = 1 * MIB
CHUNK_MAX_BYTES = 16 * MIB
DAY = pd.Timedelta("1D")

TELEMETRY = "telemetry"
SYSLOG = "syslog"
CUBE_KINDS = (TELEMETRY, SYSLOG)

SEVERITY_NAMES: tuple[str, ...] = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "unset")
"""Labels of the ``severity`` dim (RFC 5424 codes 0-7, then 8 = severity missing in the input)."""
SEVERITY_UNSET = 8

UNITS_COMMENT = (
    "units differ per metric: they are in the auxiliary coordinate metric_units (a variable's units attribute "
    "cannot vary along the metric axis)"
)
"""``comment`` attr of the telemetry statistics (CF: ``units`` is one string per variable)."""
SYSLOG_FILL = -1
"""Stored value of syslog windows of days not aggregated (yet); declared ``_FillValue``, so xarray reads NaN."""

SYSLOG_STEP = pd.Timedelta("30min")
SYSLOG_FINE_STEP = pd.Timedelta("1min")
TIME_UNITS = "seconds since 1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class VarSpec:
    """One data variable: dims, dtype, fill value and CF attrs."""

    name: str
    dims: tuple[str, ...]
    dtype: str
    fill_value: Any
    attrs: dict[str, Any] = field(default_factory=dict)
    cf_fill: bool = False
    """Declare ``fill_value`` as CF ``_FillValue`` too, so xarray masks it (NaN) on read (integer variables
    whose fill is not a valid value; float variables use NaN, which needs no declaration)."""

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class CubeSpec:
    """A cube: its store key, step(s) per time dim, data variables and global attrs."""

    kind: str
    key: str
    steps: dict[str, pd.Timedelta]
    """Time dims and their step, e.g. ``{"time": 15 min}``; every step must divide a day."""
    variables: tuple[VarSpec, ...]
    attrs: dict[str, Any]
    inner_dims: dict[str, int] = field(default_factory=dict)
    """Fixed-size non-node, non-time dims created with the cube (``severity``)."""

    def steps_per_day(self, time_dim: str) -> int:
        """Number of steps of ``time_dim`` in one day."""
        return int(DAY / self.steps[time_dim])

    def var(self, name: str) -> VarSpec:
        """The variable called ``name``."""
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    def per_node_day_bytes(self, n_metric: int = 1) -> int:
        """Uncompressed bytes of one node × one day of the largest variable (sizes the node chunk)."""
        best = 0
        for v in self.variables:
            n = v.itemsize
            for d in v.dims:
                if d in self.steps:
                    n *= self.steps_per_day(d)
                elif d == "metric":
                    n *= max(n_metric, 1)
                elif d in self.inner_dims:
                    n *= self.inner_dims[d]
            best = max(best, n)
        return best


def check_step(step: str | pd.Timedelta) -> pd.Timedelta:
    """Parse an aggregation step and check that it divides one day (so days align with chunks)."""
    try:
        td = pd.Timedelta(step)
    except ValueError as e:
        raise ValueError(f"invalid step {step!r}: {e}") from None
    if td <= pd.Timedelta(0) or DAY % td != pd.Timedelta(0) or td % pd.Timedelta("1s") != pd.Timedelta(0):
        raise ValueError(f"invalid step {step!r}: must be a whole number of seconds that divides 24 h (e.g. 15min)")
    return td


def node_chunk(per_node_day_bytes: int, node_batch: int) -> int:
    """Nodes per chunk: at least ``node_batch`` and enough for a 1 MiB chunk, at most 16 MiB.

    >>> node_chunk(96 * 50 * 4, 50)  # 15-min float32, 50 metrics: 19.2 kB per node-day
    55
    """
    if per_node_day_bytes <= 0 or node_batch <= 0:
        raise ValueError(f"node chunk needs positive sizes, got {per_node_day_bytes=} {node_batch=}")
    n = max(node_batch, math.ceil(CHUNK_MIN_BYTES / per_node_day_bytes))
    return max(1, min(n, CHUNK_MAX_BYTES // per_node_day_bytes))


def telemetry_spec(step: str | pd.Timedelta = "15min") -> CubeSpec:
    """Spec of ``cubes/telemetry.zarr`` for an aggregation ``step`` (RUAD §4.1 uses 15 min)."""
    td = check_step(step)
    win = f"{int(td.total_seconds())} s windows"
    dims = ("node", "time", "metric")
    stat = {"coverage_content_type": "physicalMeasurement", "comment": UNITS_COMMENT}
    variables = (
        VarSpec(
            "mean",
            dims,
            "float32",
            np.nan,
            {"long_name": "mean of the metric's samples in the window", **stat, "cell_methods": f"time: mean (interval: {win})"},
        ),
        VarSpec(
            "min",
            dims,
            "float32",
            np.nan,
            {
                "long_name": "minimum of the metric's samples in the window",
                **stat,
                "cell_methods": f"time: minimum (interval: {win})",
            },
        ),
        VarSpec(
            "max",
            dims,
            "float32",
            np.nan,
            {
                "long_name": "maximum of the metric's samples in the window",
                **stat,
                "cell_methods": f"time: maximum (interval: {win})",
            },
        ),
        VarSpec(
            "std",
            dims,
            "float32",
            np.nan,
            {
                "long_name": "population standard deviation (ddof=0) of the metric's samples in the window",
                **stat,
                "cell_methods": f"time: standard_deviation (interval: {win})",
                "ddof": 0,
            },
        ),
        VarSpec(
            "count",
            dims,
            "int32",
            0,
            {"long_name": "number of samples in the window", "units": "1", "coverage_content_type": "auxiliaryInformation"},
        ),
    )
    attrs = {
        "title": "nodewatch telemetry cube: per-node windowed statistics of every metric",
        "Conventions": "CF-1.10",
        "step": pd.tseries.frequencies.to_offset(td).freqstr,
        "step_seconds": int(td.total_seconds()),
        "missing_data": "statistics are NaN and count is 0 where a window has no sample; never 0",
        "references": "Molan et al., RUAD (per-node LSTM autoencoder), section 4.1: min/max/avg/var of 15-min windows",
    }
    return CubeSpec(TELEMETRY, "telemetry.zarr", {"time": td}, variables, attrs)


def syslog_spec() -> CubeSpec:
    """Spec of ``cubes/syslog.zarr``: line counts per 30 min and per 1 min by severity (Ghiasvand §3)."""
    variables = (
        VarSpec(
            "lines",
            ("node", "time", "severity"),
            "int32",
            SYSLOG_FILL,
            {
                "long_name": "syslog lines per 30-min window (syslog generation, SG)",
                "units": "1",
                "cell_methods": "time: sum (interval: 1800 s)",
            },
            cf_fill=True,
        ),
        VarSpec(
            "lines_1min",
            ("node", "time_1min", "severity"),
            "int32",
            SYSLOG_FILL,
            {"long_name": "syslog lines per 1-min window", "units": "1", "cell_methods": "time_1min: sum (interval: 60 s)"},
            cf_fill=True,
        ),
    )
    attrs = {
        "title": "nodewatch syslog cube: syslog lines per node, window and severity",
        "Conventions": "CF-1.10",
        "missing_data": (
            "windows of days not aggregated (yet) are stored as -1, declared as _FillValue: xarray reads them as NaN "
            "(sum over severity with min_count=1 to keep them NaN); 0 = aggregated, no line"
        ),
        "references": "Ghiasvand & Ciorba, syslog generation (SG) over 30-min windows, section 3",
    }
    return CubeSpec(
        SYSLOG,
        "syslog.zarr",
        {"time": SYSLOG_STEP, "time_1min": SYSLOG_FINE_STEP},
        variables,
        attrs,
        inner_dims={"severity": len(SEVERITY_NAMES)},
    )


def spec_for(kind: str, step: str | pd.Timedelta = "15min") -> CubeSpec:
    """The spec of cube ``kind`` (``telemetry`` or ``syslog``)."""
    if kind == TELEMETRY:
        return telemetry_spec(step)
    if kind == SYSLOG:
        return syslog_spec()
    raise ValueError(f"unknown cube {kind!r}: expected one of {', '.join(CUBE_KINDS)}")


def metric_attrs(name: str) -> dict[str, Any]:
    """CF attrs of one metric from the catalogue (``nodewatch.schemas.metrics``), or a fallback (unit ``"1"``)."""
    try:
        from nodewatch.schemas.metrics import CATALOGUE  # optional: written by another module owner
    except ImportError:  # pragma: no cover - catalogue always present once merged
        CATALOGUE = {}
    m = CATALOGUE.get(name)
    if m is None:
        return {"units": "1", "long_name": name, "kind": "unknown"}
    out: dict[str, Any] = {"units": m.unit, "long_name": m.long_name, "kind": m.kind}
    if m.min is not None:
        out["valid_min"] = float(m.min)
    if m.max is not None:
        out["valid_max"] = float(m.max)
    return out


def time_encoding(chunk: int) -> dict[str, Any]:
    """Encoding of a time coordinate: int64 seconds since the Unix epoch, one day per chunk."""
    return {"chunks": (chunk,), "units": TIME_UNITS, "calendar": "proleptic_gregorian", "dtype": "int64", "compressors": None}


def string_encoding(chunk: int) -> dict[str, Any]:
    """Encoding of a string coordinate (Zarr v3 ``string`` data type)."""
    return {"chunks": (chunk,), "compressors": None}


def compressors() -> tuple[Any, ...]:
    """Compressor of every data variable: zstd level 3 (deterministic, so re-runs give equal bytes)."""
    from zarr.codecs import ZstdCodec

    return (ZstdCodec(level=3, checksum=False),)
