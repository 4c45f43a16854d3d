"""Window features of Frank's failure predictor (thesis sec. 4.2.2, Table 4.3) and the lead-time sequences.

Every telemetry series (one node, one metric, fixed step) is cut into sliding windows of four minutes
(sec. 4.2.3: "each NN receives four minutes of time series window data"); each window gives the
seven features of Table 4.3 (median, minimum, standard deviation, sum, variance, maximum, mean), so
10 metrics give the 70 inputs of the reference network. Counters enter as per-step increments
(rates), gauges as values.

Lead times (sec. 4.2.3, Fig. 4.4): network ``L`` (``L`` = 7, 6, ..., 2 minutes) sees the window that
ends ``L`` minutes before the time the sequence predicts a failure for (the *anchor*); the sequence
starts with the 7-minute network and adds one newer window per minute, so the final prediction is
made two minutes before the anchor. :func:`sequence_index` gives, for anchors on the step grid, the
index of the window each network reads.
"""

from __future__ import annotations

import numpy as np

FEATURES = ("median", "min", "std", "sum", "var", "max", "mean")
"""Table 4.3, in the thesis's order."""
LEADS_MIN = (2, 3, 4, 5, 6, 7)
"""Lead times of the six networks (minutes, sec. 4.2.3)."""
WINDOW_S = 240
"""Four minutes of data per window (sec. 4.2.3)."""


def window_steps(step_s: int, window_s: int = WINDOW_S) -> int:
    """Samples in one window at a telemetry step of ``step_s`` seconds (at least 2)."""
    if step_s <= 0 or window_s % step_s or window_s // step_s < 2:
        raise ValueError(f"the {window_s}-s window needs a step that divides it into >= 2 samples, got step {step_s} s")
    return window_s // step_s


def window_features(x: np.ndarray, w: int) -> np.ndarray:
    """Table 4.3 features of every window of ``w`` samples: ``x`` (..., T) -> (..., T - w + 1, 7).

    Window ``j`` covers samples ``j .. j + w - 1`` (it *ends* at sample ``j + w - 1``). NaN samples make
    the window's features NaN (a gap is never silently averaged away).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape[-1] < w:
        return np.empty((*x.shape[:-1], 0, len(FEATURES)))
    v = np.lib.stride_tricks.sliding_window_view(x, w, axis=-1)
    s = np.sort(v, axis=-1)  # one sort gives median, min and max; NaN sorts last
    med = 0.5 * (s[..., (w - 1) // 2] + s[..., w // 2])
    mean = s.mean(axis=-1)
    d = s - mean[..., None]
    var = np.einsum("...i,...i->...", d, d) / w
    out = np.stack([med, s[..., 0], np.sqrt(var), mean * w, var, s[..., -1], mean], axis=-1)
    out[np.isnan(s[..., -1])] = np.nan
    return out


def node_feature_matrix(values: np.ndarray, counters: np.ndarray, w: int) -> np.ndarray:
    """Features of one node's metrics (M, T) -> (T, M * 7), row ``t`` = window *ending* at sample ``t``.

    ``counters`` (M,) marks cumulative counters, turned into per-step increments first (a negative
    increment, a counter reset at a reboot, becomes NaN). Rows before the first full window are NaN.
    """
    v = np.asarray(values, dtype=np.float64)
    m, t = v.shape
    x = v.copy()
    c = np.asarray(counters, dtype=bool)
    if c.any():
        d = np.diff(v[c], axis=-1, prepend=np.nan)
        d[d < 0] = np.nan
        x[c] = d
    f = window_features(x, w)  # (M, T - w + 1, 7)
    out = np.full((t, m * len(FEATURES)), np.nan)
    if f.shape[1]:
        out[w - 1 :] = np.transpose(f, (1, 0, 2)).reshape(f.shape[1], m * len(FEATURES))
    return out


def sequence_index(anchor_idx: np.ndarray, step_s: int, leads_min: tuple[int, ...] = LEADS_MIN) -> np.ndarray:
    """Index of the window (its last sample) each lead-time network reads for anchors ``anchor_idx``: (A, L)."""
    a = np.asarray(anchor_idx, dtype=np.int64)
    if any(60 * ld % step_s for ld in leads_min):
        raise ValueError(f"lead times must be whole multiples of the step {step_s} s")
    off = np.array([60 * ld // step_s for ld in leads_min], dtype=np.int64)
    return a[:, None] - off[None, :]


def sequences(feat: np.ndarray, anchor_idx: np.ndarray, step_s: int, leads_min: tuple[int, ...] = LEADS_MIN) -> np.ndarray:
    """Inputs of the six networks for each anchor: (A, L, F); anchors whose windows leave the series are dropped by the caller."""
    idx = sequence_index(anchor_idx, step_s, leads_min)
    return feat[idx]
