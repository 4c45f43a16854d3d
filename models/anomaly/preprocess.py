"""RUAD data pre-processing (Molan et al., "RUAD", Section 3.7 and Figures 2-3; features Section 4.2).

Arrays follow one convention throughout ``models/``: a node batch of features is a float array
``X[node, time, feature]`` on a regular 15-minute grid, with ``NaN`` marking a missing timestamp
(any NaN in a row makes the whole row missing: "timestamps with missing values are dropped").
Labels are a boolean ``y[node, time]`` (True = *node anomaly*, Section 3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STATS: tuple[str, ...] = ("mean", "min", "max", "var")
"""The four 15-min aggregates of each metric (Section 4.2: minimum, maximum, average, variance)."""


def features_from_stats(
    mean: np.ndarray, mn: np.ndarray, mx: np.ndarray, std: np.ndarray, count: np.ndarray | None = None
) -> np.ndarray:
    """Feature tensor ``[node, time, 4*metric]`` from cube statistics ``[node, time, metric]`` (Section 4.2).

    The feature vector is the concatenation over stat in (mean, min, max, var) of all metrics
    (var = std**2). Windows with ``count == 0`` are missing: all their features become NaN.
    """
    arrays = [np.asarray(a, dtype=np.float32) for a in (mean, mn, mx, std)]
    shape = arrays[0].shape
    if len(shape) != 3 or any(a.shape != shape for a in arrays):
        raise ValueError(f"mean/min/max/std must share a [node, time, metric] shape, got {[a.shape for a in arrays]}")
    arrays[3] = arrays[3] ** 2
    X = np.concatenate(arrays, axis=2)
    if count is not None:
        count = np.asarray(count)
        if count.shape != shape:
            raise ValueError(f"count shape {count.shape} differs from stats shape {shape}")
        missing = np.tile(count <= 0, (1, 1, len(STATS)))
        X[missing] = np.nan
    return X


def feature_names(metrics: list[str] | tuple[str, ...]) -> list[str]:
    """Names ``<stat>:<metric>`` in the column order of :func:`features_from_stats`."""
    return [f"{s}:{m}" for s in STATS for m in metrics]


def feature_to_metric(n_metrics: int) -> np.ndarray:
    """Index of the metric each feature column belongs to (used to sum per-metric contributions)."""
    return np.tile(np.arange(n_metrics), len(STATS))


def chronological_split(n_times: int, train_fraction: float = 0.8) -> int:
    """Index of the first test timestamp of an 80/20 time-consecutive split (Section 3.7).

    Training data is ``[:split]``, test data ``[split:]``; no random split, so the model never
    sees the future.
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    if n_times < 2:
        raise ValueError(f"need at least 2 timestamps to split, got {n_times}")
    return min(max(int(round(n_times * train_fraction)), 1), n_times - 1)


def as_node_batch(X: np.ndarray) -> tuple[np.ndarray, bool]:
    """Return ``X`` as ``[node, time, feature]`` float32 and whether the input was a single node ``[time, feature]``."""
    X = np.asarray(X, dtype=np.float32)
    if X.ndim == 2:
        return X[None], True
    if X.ndim != 3:
        raise ValueError(f"expected features shaped [node, time, feature] or [time, feature], got shape {X.shape}")
    return X, False


def valid_rows(X: np.ndarray, y: np.ndarray | None = None, semi_supervised: bool = False) -> np.ndarray:
    """Boolean ``[node, time]``: rows with all features finite and, for the *semi-supervised filter*
    (Section 3.7, Fig. 2), not labelled anomalous."""
    ok = np.isfinite(X).all(axis=2)
    if semi_supervised:
        if y is None:
            raise ValueError("semi-supervised training needs labels y[node, time]")
        ok &= ~np.asarray(y, dtype=bool)
    return ok


@dataclass(frozen=True)
class MinMaxScaler:
    """Per-node, per-feature min-max scaler to [0, 1] fitted on training rows only (Section 3.7, [57])."""

    min_: np.ndarray  # [node, feature]
    max_: np.ndarray  # [node, feature]

    @classmethod
    def fit(cls, X: np.ndarray, rows: np.ndarray) -> MinMaxScaler:
        """Fit on the rows ``rows[node, time]`` of ``X`` (the filtered training split, Section 3.7)."""
        masked = np.where(rows[:, :, None], X, np.nan)
        with np.errstate(all="ignore"), _quiet_nan_warnings():
            mn = np.nanmin(masked, axis=1)
            mx = np.nanmax(masked, axis=1)
        return cls(mn.astype(np.float32), mx.astype(np.float32))

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Scale with the training min/max; a constant training feature maps to ``x - min``."""
        if X.shape[0] != self.min_.shape[0] or X.shape[2] != self.min_.shape[1]:
            raise ValueError(f"scaler fitted on {self.min_.shape[0]} nodes x {self.min_.shape[1]} features, got X {X.shape}")
        span = self.max_ - self.min_
        span = np.where(np.isfinite(span) & (span > 0), span, 1.0).astype(np.float32)
        return ((X - self.min_[:, None, :]) / span[:, None, :]).astype(np.float32)


    def node(self, k: int) -> MinMaxScaler:
        """The scaler of node ``k`` alone."""
        return MinMaxScaler(self.min_[k : k + 1], self.max_[k : k + 1])


class _quiet_nan_warnings:
    """Silence numpy's all-NaN slice warnings (nodes without training rows are reported elsewhere)."""

    def __enter__(self) -> None:
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)


def run_lengths(ok: np.ndarray) -> np.ndarray:
    """``c[node, t]`` = number of consecutive True rows ending at t (0 where ``ok`` is False)."""
    n, T = ok.shape
    idx = np.broadcast_to(np.arange(T), (n, T))
    last_false = np.maximum.accumulate(np.where(~ok, idx, -1), axis=1)
    return np.where(ok, idx - last_false, 0)


def chunk_lengths(ok: np.ndarray) -> np.ndarray:
    """Length of the chunk of consecutive True rows each row belongs to (0 where ``ok`` is False)."""
    fwd = run_lengths(ok)
    bwd = run_lengths(ok[:, ::-1])[:, ::-1]
    return np.where(ok, fwd + bwd - 1, 0)


def window_ends(ok: np.ndarray, window: int) -> list[np.ndarray]:
    """Time-consistency filter (Section 3.7, Fig. 3): per node, the end indices t of all windows
    ``[t-W+1, t]`` lying inside one chunk of consecutive valid rows; chunks shorter than W give none."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    c = run_lengths(ok)
    return [np.flatnonzero(row >= window) for row in c]


def pad_ragged(ends: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Stack ragged per-node index lists into ``idx[node, max_count]`` (padded with 0) and ``counts[node]``."""
    counts = np.array([len(e) for e in ends], dtype=np.int64)
    width = max(int(counts.max(initial=0)), 1)
    idx = np.zeros((len(ends), width), dtype=np.int64)
    for i, e in enumerate(ends):
        idx[i, : len(e)] = e
    return idx, counts
