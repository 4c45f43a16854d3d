"""Online scoring: telemetry -> lead-time sequences -> ensemble -> voting -> warnings (Frank sec. 4.2.3, Fig. 4.6).

Input is one node's series on the predictor's step grid (``params["step_s"]``). Every step is an anchor:
the six networks read the windows ending 7, 6, ..., 2 minutes before it, and the final decision is
known at the last of them, two minutes before the anchor, so a warning at time ``t`` says "failure
expected around ``t + 2 min``" (``lead_min = 2``; the sequence began five minutes earlier). The
decision is the LSTM voter's (Table 4.1 d) when the run has one, else the unanimous 6-network vote;
``confidence`` is the voter's P(failure) (or the smallest of the six networks' P(failure)).
Consecutive positive steps of one node are one warning (its first time, the highest confidence).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nodewatch.models.predict.ensemble import logodds_to_proba, unanimous
from nodewatch.models.predict.features import LEADS_MIN, node_feature_matrix, sequence_index, window_steps
from nodewatch.tasks.predict.registry import LoadedPredictor
from nodewatch.tasks.simulate.metrics import COUNTERS

FINAL_LEAD_MIN = min(LEADS_MIN)


def _grid(times: pd.DatetimeIndex, values: np.ndarray, step_s: int) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """Put samples on a regular ``step_s`` grid (nearest sample within half a step, else NaN)."""
    if len(times) == 0:
        return times, values[:, :0]
    t = pd.DatetimeIndex(times).tz_convert("UTC") if pd.DatetimeIndex(times).tz is not None else pd.DatetimeIndex(times)
    start, end = t.min().floor(f"{step_s}s"), t.max().ceil(f"{step_s}s")
    grid = pd.date_range(start, end, freq=f"{step_s}s")
    df = pd.DataFrame(values.T, index=t)
    df = df[~df.index.duplicated(keep="last")].sort_index()
    out = df.reindex(grid, method="nearest", tolerance=pd.Timedelta(seconds=step_s / 2))
    return grid, out.to_numpy().T


def score_node(pred: LoadedPredictor, times: pd.DatetimeIndex, values: np.ndarray, cumulative: bool = True) -> pd.DataFrame:
    """Decisions at every anchor of one node: ``values`` (M, T) of ``params["metrics"]`` in that order.

    ``cumulative=True``: counters are cumulative (LDMS CSV); ``False``: counters are per-second rates
    (the staged ``<counter>_rate`` gauges), turned into per-step increments like the training data.
    """
    step = int(pred.params["step_s"])
    metrics = list(pred.params["metrics"])
    if values.shape[0] != len(metrics):
        raise ValueError(f"expected {len(metrics)} metric rows ({', '.join(metrics)}), got {values.shape[0]}")
    grid, v = _grid(times, np.asarray(values, float), step)
    is_counter = np.array([m in COUNTERS for m in metrics])
    if not cumulative:
        v = v.copy()
        v[is_counter] = v[is_counter] * step
        feat = node_feature_matrix(v, np.zeros(len(metrics), bool), window_steps(step))
    else:
        feat = node_feature_matrix(v, is_counter, window_steps(step))
    back = max(LEADS_MIN) * 60 // step
    fwd = FINAL_LEAD_MIN * 60 // step
    anchors = np.arange(back, len(grid) + fwd)
    idx = sequence_index(anchors, step)[:, ::-1]  # sequence order: 7 -> 2 minutes
    idx = idx[idx[:, -1] < len(grid)]  # the last window (2 min) must have been seen
    anchors = anchors[: len(idx)]
    if len(idx) == 0:
        return pd.DataFrame(columns=["time", "positive", "confidence"])
    x = feat[idx]
    ok = ~np.isnan(x).any(axis=(1, 2))
    lo = np.zeros((len(x), len(LEADS_MIN)), np.float32)
    if ok.any():
        lo[ok] = pred.ensemble.predict_logodds(x[ok])
    p = logodds_to_proba(lo)
    if pred.voter is not None:
        conf = np.zeros(len(x))
        if ok.any():
            conf[ok] = pred.voter.score(lo[ok])
        positive = ok & (conf >= pred.voter.threshold)
    else:
        positive = ok & unanimous(p)
        conf = p.min(axis=1)
    at = grid[idx[:, -1]]  # the final (2-minute) window ends here: the decision time
    return pd.DataFrame({"time": at, "positive": positive, "confidence": conf})


def warnings_from_decisions(node: str, dec: pd.DataFrame, step_s: int) -> list[dict[str, Any]]:
    """Runs of consecutive positive steps -> one warning each: ``{node, at, lead_min, confidence}``."""
    if dec.empty or not dec["positive"].any():
        return []
    pos = dec[dec["positive"]].reset_index(drop=True)
    t = pd.DatetimeIndex(pos["time"])
    new = np.r_[True, np.diff(t.asi8) > step_s * 1_000_000_000]
    run = np.cumsum(new)
    out = []
    for _, g in pos.groupby(run):
        out.append(
            {
                "node": node,
                "at": pd.Timestamp(g["time"].iloc[0]).isoformat(),
                "lead_min": float(FINAL_LEAD_MIN),
                "confidence": round(float(g["confidence"].max()), 6),
            }
        )
    return out


def median_step_s(times: pd.DatetimeIndex) -> float:
    """Median sampling step (s) of one node's sorted-or-not timestamps (NaN with fewer than two distinct times)."""
    t = np.sort(np.asarray(times.as_unit("ns").asi8, dtype=np.int64))
    d = np.diff(t)
    d = d[d > 0]
    return float(np.median(d)) / 1e9 if len(d) else float("nan")


def staged_day_frames(store: Any, day: str, metrics: list[str]) -> dict[str, tuple[pd.DatetimeIndex, np.ndarray]]:
    """The day's staged telemetry of ``metrics`` per node (counters from their ``_rate`` gauges)."""
    import pyarrow.compute as pc

    names = [f"{m}_rate" if m in COUNTERS else m for m in metrics]
    tbl = store.read_staged("telemetry", dates=[day], columns=["time", "node", "metric", "value"])
    if tbl is None or tbl.num_rows == 0:
        return {}
    tbl = tbl.filter(pc.is_in(tbl["metric"], value_set=__import__("pyarrow").array(names)))
    df = tbl.to_pandas()
    out = {}
    for node, g in df.groupby("node", sort=True):
        wide = g.pivot_table(index="time", columns="metric", values="value", aggfunc="last").reindex(columns=names)
        out[str(node)] = (pd.DatetimeIndex(wide.index), wide.to_numpy().T)
    return out
