"""Alert-threshold calibration for per-node anomaly scores.

RUAD (Section 3.8, Eq. 4) classifies a window as anomalous when its probability ``P`` (Eq. 3: the
reconstruction error normalised by the node's maximum training error, capped at 1) is ≥ a
threshold ``T``, and leaves ``T`` as a tunable parameter (the paper evaluates F1 at several T,
Table 8). For nightly alerting one global ``T`` flags nodes whose *normal* scores sit above it
(their errors on new data are a large fraction of the maximum training error). We therefore
calibrate per node: ``T_node = max(T, q-quantile of the node's scores on held-out windows that
are not labelled anomalous)``, i.e. at most a share ``1 - q`` of a node's normal held-out windows
would alert. With too few held-out windows the global ``T`` is kept.
"""

from __future__ import annotations

import numpy as np


def calibrated_thresholds(
    scores: np.ndarray,
    labels: np.ndarray | None,
    base: float,
    quantile: float,
    min_windows: int = 20,
) -> np.ndarray:
    """Per-node thresholds from held-out scores.

    Args:
        scores: (node, time) probabilities P (Eq. 3) on held-out windows; NaN where no window.
        labels: (node, time) True for windows labelled anomalous (excluded), or ``None``.
        base: the global threshold T (Eq. 4); no node threshold is below it.
        quantile: q in (0, 1].
        min_windows: minimum held-out normal windows for a node to get its own threshold.

    Returns:
        (node,) thresholds in [base, 1].
    """
    if not 0.0 < quantile <= 1.0:
        raise ValueError(f"threshold quantile must be in (0, 1], got {quantile}")
    s = np.asarray(scores, dtype=np.float64)
    ok = np.isfinite(s)
    if labels is not None:
        ok &= ~np.asarray(labels, dtype=bool)
    out = np.full(s.shape[0], float(base))
    for k in range(s.shape[0]):  # one quantile per node (nodes per batch: tens)
        v = s[k, ok[k]]
        if v.size >= min_windows:
            out[k] = min(1.0, max(float(base), float(np.quantile(v, quantile))))
    return out
