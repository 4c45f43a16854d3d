"""Exponential smoothing, the trivial baseline EXP (Molan et al., "RUAD", Section 3.3, Eq. 5).

Per feature independently, ``x_hat_t = alpha * x_t + (1 - alpha) * x_hat_{t-1}`` with
``x_hat_{t0} = x_{t0}`` at the start of each chunk of consecutive timestamps (EXP uses the
time-consistency filter, Table 4: the smoothing restarts after every gap, and chunks shorter than
``min_chunk`` are not scored). The error is ``sum_i |x_hat_t^i - x_t^i|`` (Section 3.2); EXP has no
weights, ``fit`` only fits the min-max scaler and the maximum training error used by Eq. 3.
"""

from __future__ import annotations

import numpy as np

from nodewatch.models.anomaly.base import NodeEstimator, reconstruction_error
from nodewatch.models.anomaly.preprocess import chunk_lengths, run_lengths, valid_rows


def exponential_smoothing(Xs: np.ndarray, alpha: float) -> np.ndarray:
    """Eq. 5 over ``Xs[node, time, feature]``, restarting (``x_hat = x``) after every missing row;
    NaN where the row is missing."""
    ok = valid_rows(Xs)
    out = np.full(Xs.shape, np.nan, dtype=np.float32)
    prev = np.zeros(Xs.shape[::2], dtype=np.float32)
    prev_ok = np.zeros(Xs.shape[0], dtype=bool)
    for t in range(Xs.shape[1]):
        x = Xs[:, t]
        cur = np.where(prev_ok[:, None], alpha * x + (1.0 - alpha) * prev, x)
        out[:, t] = np.where(ok[:, t, None], cur, np.nan)
        prev = np.where(ok[:, t, None], cur, prev)
        prev_ok = ok[:, t]
    return out


class ExpSmoothing(NodeEstimator):
    """EXP baseline (Section 3.3), smoothing factor ``alpha`` = 0.1 (Section 4.3)."""

    def __init__(self, alpha: float = 0.1, min_chunk: int = 1, threshold: float = 0.5) -> None:
        self.alpha = alpha
        self.min_chunk = min_chunk
        self.threshold = threshold

    def fit(self, X: np.ndarray, y: np.ndarray | None = None) -> ExpSmoothing:
        """Fit the scaler on the training split and record the maximum training error per node (Eq. 3)."""
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        Xs, _, _ = self._fit_scaler(X, y, semi=False)
        self.n_train_windows_ = (run_lengths(valid_rows(Xs)) >= self.min_chunk).sum(axis=1)
        err = reconstruction_error(self._errors(Xs))
        with np.errstate(all="ignore"):
            self.max_error_ = np.array([np.nanmax(e) if np.isfinite(e).any() else np.nan for e in err])
        self.failed_ = {int(k): "no valid training timestamp" for k in np.flatnonzero(~np.isfinite(self.max_error_))}
        return self

    def _errors(self, Xs: np.ndarray) -> np.ndarray:
        err = np.abs(exponential_smoothing(Xs, self.alpha) - Xs)
        if self.min_chunk > 1:
            err[chunk_lengths(valid_rows(Xs)) < self.min_chunk] = np.nan
        return err

    def node_state(self, k: int) -> dict[str, np.ndarray]:
        """Learned state of node ``k`` (scaler and maximum training error)."""
        return self._common_state(k)

    @classmethod
    def from_node_states(cls, states: list[dict[str, np.ndarray]], **params: object) -> ExpSmoothing:
        """Rebuild a fitted estimator from :meth:`node_state` outputs."""
        est = cls(**params)  # type: ignore[arg-type]
        est._restore_common(states)
        return est
