"""Failure-model fitting for the checkpoint tables: clean failure times, fit per group, Q-Q plots.

Input is a plain DataFrame with columns ``group`` (system or node group), ``node`` and ``start``
(UTC timestamps), so both the staged ``failures`` table (LANL/PNNL records) and the
``failure_events`` derived from node states feed it. :func:`prepare_failures` drops duplicates and
events outside the observation window and sorts unsorted input, counting each; :func:`fit_groups`
fits exponential and Weibull by censored MLE (:mod:`nodewatch.models.checkpoint.failures`) per group.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from nodewatch.models.checkpoint.failures import FailureModel, Fit, fit_exponential, fit_weibull, interarrival_times

_UNITS_H = {
    "s": 1 / 3600,
    "sec": 1 / 3600,
    "secs": 1 / 3600,
    "second": 1 / 3600,
    "seconds": 1 / 3600,
    "m": 1 / 60,
    "min": 1 / 60,
    "mins": 1 / 60,
    "minute": 1 / 60,
    "minutes": 1 / 60,
    "h": 1.0,
    "hr": 1.0,
    "hrs": 1.0,
    "hour": 1.0,
    "hours": 1.0,
    "d": 24.0,
    "day": 24.0,
    "days": 24.0,
    "w": 168.0,
    "wk": 168.0,
    "week": 168.0,
    "weeks": 168.0,
    "y": 8766.0,
    "yr": 8766.0,
    "yrs": 8766.0,
    "year": 8766.0,
    "years": 8766.0,
}
_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*([A-Za-z]*)")


def parse_duration_hours(text: str, what: str = "duration") -> float:
    """Parse ``"5y"``, ``"10m"``, ``"1h30m"``, ``"0.25h"`` into hours (y = 365.25 d, m = minutes).

    Raises a one-line ``ValueError`` for a missing or unknown unit, garbage and values <= 0.
    """
    s = str(text).strip()
    if not s:
        raise ValueError(f"{what}: empty; give a number with a unit, e.g. 10m, 6h, 5y")
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m or m.end() == pos:
            raise ValueError(f"{what}: cannot parse {s!r}; give a number with a unit, e.g. 10m, 6h, 5y")
        num = float(s[m.start(1) : m.start(2)].strip() or "nan")
        unit = m.group(2).lower()
        if not unit:
            raise ValueError(f"{what}: {s!r} has no unit; use s, m (minutes), h, d, w or y")
        if unit not in _UNITS_H:
            raise ValueError(f"{what}: unknown unit {m.group(2)!r} in {s!r}; use s, m (minutes), h, d, w or y")
        total += num * _UNITS_H[unit]
        pos = m.end()
    if not math.isfinite(total) or total <= 0:
        raise ValueError(f"{what}: {s!r} must be a positive duration")
    return total


@dataclass
class PrepCounts:
    """What :func:`prepare_failures` did to the input rows (rows_in = kept + duplicates + outside + missing)."""

    rows_in: int = 0
    kept: int = 0
    duplicates: int = 0
    outside_window: int = 0
    missing_time: int = 0
    out_of_order: int = 0  # rows whose start was earlier than the row before them (input was re-sorted)
    per_group: dict[str, int] = field(default_factory=dict)
    window_start: str | None = None  # observation window used by fit_groups (ISO, UTC)
    window_end: str | None = None
    window_source: str = "none"  # "given", "first..last record", or "none"


def prepare_failures(
    df: pd.DataFrame,
    window: tuple[pd.Timestamp | None, pd.Timestamp | None] | None = None,
) -> tuple[pd.DataFrame, PrepCounts]:
    """Clean a (group, node, start) frame: drop missing times, exact duplicates and events outside the window.

    The window is half-open ``[start, end)``; the result is sorted by (group, start, node).
    """
    missing = [c for c in ("group", "node", "start") if c not in df.columns]
    if missing:
        raise ValueError(f"failure frame lacks columns {missing}; need group, node, start")
    c = PrepCounts(rows_in=len(df))
    d = df[["group", "node", "start"]].copy()
    d["start"] = pd.to_datetime(d["start"], utc=True)
    c.missing_time = int(d["start"].isna().sum())
    d = d[d["start"].notna()]
    c.out_of_order = int((d.groupby("group", sort=False)["start"].diff() < pd.Timedelta(0)).sum())
    dup = d.duplicated(["group", "node", "start"])
    c.duplicates = int(dup.sum())
    d = d[~dup]
    if window is not None:
        lo, hi = (pd.Timestamp(x) if x is not None else None for x in window)
        lo = lo.tz_localize("UTC") if lo is not None and lo.tzinfo is None else lo
        hi = hi.tz_localize("UTC") if hi is not None and hi.tzinfo is None else hi
        inside = pd.Series(True, index=d.index)
        if lo is not None:
            inside &= d["start"] >= lo
        if hi is not None:
            inside &= d["start"] < hi
        c.outside_window = int((~inside).sum())
        d = d[inside]
    d = d.sort_values(["group", "start", "node"], kind="stable").reset_index(drop=True)
    c.kept = len(d)
    c.per_group = {str(k): int(v) for k, v in d.groupby("group").size().items()}
    return d, c


RECORD_RESOLUTION = pd.Timedelta(minutes=1)
"""Clock resolution of the failure records (LANL and PNNL log minutes); see :func:`fit_groups`."""


def _utc(x: pd.Timestamp | str | None) -> pd.Timestamp | None:
    if x is None:
        return None
    t = pd.Timestamp(x)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def observation_window(
    df: pd.DataFrame, start: pd.Timestamp | str | None = None, end: pd.Timestamp | str | None = None
) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    """Observation window of failure records: the given bounds, else first record .. last record + one
    clock tick (:data:`RECORD_RESOLUTION`; the half-open window then still holds the last record).

    The LANL and PNNL files carry no observation period per system (LANL's node production/decommission
    dates are month-level and not parsed), so first..last record is the default; the records were
    observed at least that long. Records outside given bounds are counted by :func:`prepare_failures`.
    """
    times = pd.to_datetime(df["start"], utc=True).dropna()
    lo = _utc(start)
    hi = _utc(end)
    if hi is None and len(times):
        hi = times[times >= lo].max() + RECORD_RESOLUTION if lo is not None else times.max() + RECORD_RESOLUTION
    return lo, hi


def fit_groups(
    df: pd.DataFrame,
    window: tuple[pd.Timestamp | str | None, pd.Timestamp | str | None] | None = None,
    min_failures: int = 10,
) -> tuple[pd.DataFrame, dict[str, tuple[np.ndarray, np.ndarray]], PrepCounts]:
    """Fit exponential and Weibull to the failure inter-arrival times of every group.

    The observation window ``[start, end)`` filters the events (outside ones are counted) and its end
    closes every group: the gap from a group's last failure to ``end`` is one right-censored
    observation. Without an end (``window=None`` or ``(start, None)``) each group ends at its own last
    failure (no censored gap); callers that know the groups were observed together pass the common end,
    e.g. :func:`observation_window` (first..last record + one clock tick), as
    :func:`nodewatch.tasks.checkpoint.tables.models_from_failures` does per system. The window used is in the
    counts and in the fit table (``window_start``/``window_end``). Groups with fewer than
    ``min_failures`` failures are skipped. Returns the fit table (one row per group and distribution:
    shape, scale, MTBF with 95% CI, KS, AIC, n, n_censored, best-by-AIC flag), the gaps per group and
    the counts.
    """
    lo, hi = (_utc(x) for x in (window or (None, None)))
    if lo is not None and hi is not None and hi <= lo:
        raise ValueError(f"observation window end {hi} is not after its start {lo}")
    d, counts = prepare_failures(df, (lo, hi))
    counts.window_source = "given" if hi is not None else "each group's last failure (no censoring)"
    first = d["start"].min() if len(d) else None
    lo_used = lo if lo is not None else first
    counts.window_start = None if lo_used is None else lo_used.isoformat()
    counts.window_end = None if hi is None else hi.isoformat()
    rows = []
    gaps_by_group: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for g, part in d.groupby("group", sort=True):
        if len(part) < min_failures:
            continue
        t0 = part["start"].iloc[0]
        hours = ((part["start"] - t0) / pd.Timedelta(hours=1)).to_numpy(float)
        end = float(((hi if hi is not None else part["start"].iloc[-1]) - t0) / pd.Timedelta(hours=1))
        gaps, cens = interarrival_times(hours, end)
        gaps_by_group[str(g)] = (gaps, cens)
        fits: list[Fit] = [fit_exponential(gaps, cens), fit_weibull(gaps, cens)]
        best = min(fits, key=lambda f: f.aic).dist
        for f in fits:
            r = asdict(f)
            lo_m, hi_m = r.pop("mtbf_ci_h")
            slo, shi = r.pop("shape_ci")
            rows.append(
                {
                    "group": str(g),
                    **r,
                    "mtbf_lo_h": lo_m,
                    "mtbf_hi_h": hi_m,
                    "shape_lo": slo,
                    "shape_hi": shi,
                    "nodes_seen": int(part["node"].nunique()),
                    "first": part["start"].iloc[0],
                    "last": part["start"].iloc[-1],
                    "window_start": lo_used,
                    "window_end": hi if hi is not None else part["start"].iloc[-1],
                    "best_aic": f.dist == best,
                }
            )
    return pd.DataFrame(rows), gaps_by_group, counts


FIT_COLUMNS: tuple[str, ...] = (
    "group",
    "dist",
    "shape",
    "shape_lo",
    "shape_hi",
    "scale_h",
    "mtbf_h",
    "mtbf_lo_h",
    "mtbf_hi_h",
    "ks_stat",
    "ks_p",
    "aic",
    "n_failures",
    "n_censored",
    "best_aic",
)
"""Columns of the fit table written to ``fits.csv``/``table.md`` (plus ``machine_nodes`` and the window)."""


def failure_model_from_fit(fit_row: pd.Series | dict, n_machine: int, name: str | None = None) -> FailureModel:
    """Per-node failure model from a system-level fit: ``MTBF_node = MTBF_system * N_machine`` (Frank eq. 3.14)."""
    r = dict(fit_row)
    if n_machine < 1:
        raise ValueError(f"machine node count must be >= 1, got {n_machine}")
    return FailureModel(
        name=name or f"{r['group']}-{r['dist']}",
        mtbf_node_h=float(r["mtbf_h"]) * n_machine,
        shape=float(r["shape"]),
        source=f"fit:{r['group']}:{r['dist']}",
    )


def qq_plot(gaps: np.ndarray, censored: np.ndarray, fits: pd.DataFrame, path: Path, title: str) -> Path:
    """Q-Q plot PNG of the observed inter-arrival times against each fitted distribution (log axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy import stats

    x = np.sort(gaps[~censored])
    p = (np.arange(1, x.size + 1) - 0.5) / x.size
    fig, ax = plt.subplots(figsize=(5, 5))
    for _, f in fits.iterrows():
        dist = (
            stats.expon(scale=f["scale_h"]) if f["dist"] == "exponential" else stats.weibull_min(f["shape"], scale=f["scale_h"])
        )
        ax.loglog(dist.ppf(p), x, ".", ms=3, label=f"{f['dist']} (w={f['shape']:.2f}, AIC={f['aic']:.0f})")
    lim = [max(x.min(), 1e-3) / 2, x.max() * 2]
    ax.plot(lim, lim, "k--", lw=0.8)
    ax.set_xlabel("fitted quantile [h]")
    ax.set_ylabel("observed inter-arrival time [h]")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def failures_frame(
    table: pd.DataFrame, group_by: str = "system", purpose: str | None = None, exclude_same_event: bool = True
) -> pd.DataFrame:
    """(group, node, start) frame from staged ``failures`` rows (optionally one node purpose only).

    LANL rows marked ``same_event`` repeat an event already recorded and are dropped by default.
    """
    t = table
    if purpose is not None and "purpose" not in t.columns:
        raise ValueError(f"cannot select purpose {purpose!r}: the failure records have no purpose column")
    if purpose is not None:
        t = t[t["purpose"].astype("string").str.contains(purpose, regex=False, na=False)]
    if exclude_same_event and "same_event" in t.columns:
        t = t[~t["same_event"].fillna(False).astype(bool)]
    if group_by not in t.columns:
        raise ValueError(f"cannot group failures by {group_by!r}: no such column")
    return pd.DataFrame(
        {"group": t[group_by].astype("string").fillna("<none>").astype(str), "node": t["node"], "start": t["start"]}
    )
