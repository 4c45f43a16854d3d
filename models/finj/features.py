"""Window features for fault classification (Netti et al., Sec. 6 "Creation of Features").

From a node's 1-s samples (time x metric): raw counters are replaced by their first derivative, an
``allocated`` metric (node and per core) is added, then the first derivative of every metric is appended
(Guan et al., as in Sec. 6); every 60-s aggregation window, one every 10 s, is summarised by 11 statistics
per metric and per derivative (mean, std, median, min, max, skewness, kurtosis, 5/25/75/95th percentiles).
A core's feature set is the node-level metrics plus that core's own metrics (Sec. 6, "Detection System
Architecture"): one classifier serves every core.

Everything is vectorised over all windows and metrics at once (``numpy.lib.stride_tricks.sliding_window_view``,
one sort per window for the order statistics, moments from the centred window); no per-window Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

STATS = ("avg", "std", "perc50", "min", "max", "skew", "kurt", "perc5", "perc25", "perc75", "perc95")
"""The 11 statistics of Sec. 6, named as in the paper's Table 2 (``<metric>[_der]_<stat>``)."""
WINDOW = 60
STEP = 10
_PCTS = (5.0, 25.0, 75.0, 95.0)


def window_stats(x: np.ndarray, window: int = WINDOW, step: int = STEP, ends: np.ndarray | None = None) -> np.ndarray:
    """The 11 :data:`STATS` of every ``window``-long window of ``x`` (time x metric).

    Windows end at rows ``ends`` (inclusive; default every ``step`` rows from ``window - 1``). Returns an
    array (n_windows, n_metrics, 11) in :data:`STATS` order. Skewness and kurtosis are the biased
    moment estimators (``scipy.stats.skew``/``kurtosis`` defaults: Fisher, excess kurtosis); a constant
    window has skewness and kurtosis 0. Percentiles interpolate linearly (``numpy.percentile`` default).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("x must be time x metric")
    t, m = x.shape
    if ends is None:
        ends = np.arange(window - 1, t, step)
    ends = np.asarray(ends, dtype=np.int64)
    if ends.size and (ends.min() < window - 1 or ends.max() >= t):
        raise ValueError("window end outside the data")
    out = np.empty((ends.size, m, len(STATS)))
    if ends.size == 0:
        return out
    view = np.lib.stride_tricks.sliding_window_view(x, window, axis=0)  # (t-window+1, m, window)
    w = view[ends - (window - 1)]  # (n, m, window): a gather, one copy
    s = np.sort(w, axis=-1)
    mean = s.mean(axis=-1)
    c = s - mean[..., None]
    m2 = (c * c).mean(axis=-1)
    m3 = (c * c * c).mean(axis=-1)
    m4 = (c * c * c * c).mean(axis=-1)
    std = np.sqrt(m2)
    flat = m2 <= 1e-24 * np.maximum(1.0, mean * mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        skew = np.where(flat, 0.0, m3 / np.where(flat, 1.0, m2) ** 1.5)
        kurt = np.where(flat, 0.0, m4 / np.where(flat, 1.0, m2) ** 2 - 3.0)

    def pct(q: float) -> np.ndarray:
        pos = q / 100.0 * (window - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, window - 1)
        f = pos - lo
        return s[..., lo] * (1 - f) + s[..., hi] * f

    out[..., 0] = mean
    out[..., 1] = std
    out[..., 2] = pct(50.0)
    out[..., 3] = s[..., 0]
    out[..., 4] = s[..., -1]
    out[..., 5] = skew
    out[..., 6] = kurt
    for i, q in enumerate(_PCTS):
        out[..., 7 + i] = pct(q)
    return out


def derivative(x: np.ndarray) -> np.ndarray:
    """First-order derivative per 1-s step (``x[t] - x[t-1]``, 0 at the first row)."""
    d = np.diff(x, axis=0, prepend=x[:1])
    return d


@dataclass(frozen=True)
class FeatureLayout:
    """Which raw columns are node metrics, which are per-core metrics (``name#core``), which are counters."""

    node: tuple[str, ...]
    """Node-level metric names (columns of the node matrix)."""
    core: tuple[str, ...]
    """Per-core metric base names (each present for every core)."""
    counters: frozenset[str]
    """Base names of raw counters (replaced by their derivative before the statistics)."""

    def feature_names(self) -> list[str]:
        """Column names of a core's feature set: node metrics then core metrics, each value then ``_der``, x 11 stats."""
        names: list[str] = []
        for base in (*self.node, *(f"core.{c}" for c in self.core)):
            for suffix in ("", "_der"):
                names += [f"{base}{suffix}_{s}" for s in STATS]
        return names


def prepare(x: np.ndarray, counter_mask: np.ndarray) -> np.ndarray:
    """Sec. 6 post-processing of one matrix (time x metric): counters -> first derivative, then the derivative of
    every metric appended per metric (columns interleaved: metric, its derivative, next metric ...)."""
    v = np.where(counter_mask[None, :], derivative(x), x)
    d = derivative(v)
    out = np.empty((x.shape[0], 2 * x.shape[1]))
    out[:, 0::2] = v
    out[:, 1::2] = d
    return out


def core_features(
    node_x: np.ndarray,
    core_x: Sequence[np.ndarray],
    layout: FeatureLayout,
    ends: np.ndarray | None = None,
    window: int = WINDOW,
    step: int = STEP,
) -> np.ndarray:
    """Feature sets of every window and core: array (n_windows, n_cores, n_features) in
    :meth:`FeatureLayout.feature_names` order. ``node_x`` is time x len(layout.node); ``core_x[k]`` is
    time x len(layout.core) for core ``k`` (the ``allocated`` columns included by the caller)."""
    node_counters = np.array([n in layout.counters for n in layout.node], dtype=bool)
    core_counters = np.array([c in layout.counters for c in layout.core], dtype=bool)
    node_stats = window_stats(prepare(node_x, node_counters), window, step, ends)  # (n, 2*mn, 11)
    n = node_stats.shape[0]
    node_flat = node_stats.reshape(n, -1)
    per_core = [window_stats(prepare(cx, core_counters), window, step, ends).reshape(n, -1) for cx in core_x]
    out = np.empty((n, len(core_x), node_flat.shape[1] + (per_core[0].shape[1] if per_core else 0)))
    for k, cf in enumerate(per_core):
        out[:, k, : node_flat.shape[1]] = node_flat
        out[:, k, node_flat.shape[1] :] = cf
    return out
