"""Evaluation of per-node anomaly scores (Molan et al., "RUAD", Sections 3.2, 4.4-4.6).

The paper pools the test-set probabilities of *all* nodes of one method into one ROC curve and
reports its AUC (Section 4.1, Table 7), plus F1 scores at thresholds 0, 0.1, ..., 1 (Table 8,
class by Eq. 4: anomaly iff P >= T). Per-node AUCs are an addition (undefined for a node whose
test set has a single class). Timestamps without a score (NaN) are left out.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import f1_score, roc_auc_score, roc_curve

PAPER_THRESHOLDS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))
"""Decision thresholds T of Table 8."""


def _pool(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=bool).ravel()
    if s.shape != y.shape:
        raise ValueError(f"scores ({s.size}) and labels ({y.size}) differ in size")
    ok = np.isfinite(s)
    return s[ok], y[ok]


def pooled_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Combined ROC AUC over all nodes' scored timestamps (Section 4.1, Table 7); NaN if one class only."""
    s, y = _pool(scores, labels)
    if y.all() or not y.any():
        return float("nan")
    return float(roc_auc_score(y, s))


def pooled_roc(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Combined ROC curve (false-positive rate, true-positive rate) over all nodes (Figs. 4-7)."""
    s, y = _pool(scores, labels)
    if y.all() or not y.any():
        return np.array([0.0, 1.0]), np.array([0.0, 1.0])
    fpr, tpr, _ = roc_curve(y, s)
    return fpr, tpr


def per_node_auc(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ROC AUC per node of ``scores[node, time]``; NaN where a node's scored test data has one class."""
    scores = np.asarray(scores)
    return np.array([pooled_auc(scores[k], np.asarray(labels)[k]) for k in range(scores.shape[0])])


def f1_at_thresholds(
    scores: np.ndarray, labels: np.ndarray, thresholds: tuple[float, ...] = PAPER_THRESHOLDS
) -> dict[str, dict[float, float]]:
    """F1 at each threshold T with class = P >= T (Eq. 4, Table 8): ``{"anomaly": ..., "weighted": ...}``,
    the F1 of the anomaly class and the support-weighted F1 of both classes."""
    s, y = _pool(scores, labels)
    out: dict[str, dict[float, float]] = {"anomaly": {}, "weighted": {}}
    for t in thresholds:
        pred = s >= t
        out["anomaly"][t] = float(f1_score(y, pred, zero_division=0.0))
        out["weighted"][t] = float(f1_score(y, pred, average="weighted", zero_division=0.0))
    return out
