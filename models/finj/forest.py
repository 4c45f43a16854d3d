"""Decision trees and random forests as plain arrays: stored without pickle, evaluated with numpy.

A fitted ``sklearn`` :class:`~sklearn.tree.DecisionTreeClassifier` or
:class:`~sklearn.ensemble.RandomForestClassifier` is exported to five stacked arrays (trees x nodes,
padded): ``left``, ``right``, ``feature``, ``threshold`` and ``value`` (class probabilities per node).
:class:`ArrayForest` predicts class probabilities as the mean of the trees' leaf distributions, which is
what ``RandomForestClassifier.predict_proba`` computes (Breiman 2001; scikit-learn's soft voting).
"""

from __future__ import annotations

import numpy as np


def export(model: object) -> dict[str, np.ndarray]:
    """Arrays of a fitted sklearn tree or forest (see module doc); ``classes`` as int64 codes are the caller's."""
    trees = [model] if hasattr(model, "tree_") else list(model.estimators_)
    n = max(t.tree_.node_count for t in trees)
    k = trees[0].tree_.value.shape[-1]
    left = np.full((len(trees), n), -1, np.int32)
    right = np.full((len(trees), n), -1, np.int32)
    feat = np.zeros((len(trees), n), np.int32)
    thr = np.zeros((len(trees), n), np.float64)
    val = np.zeros((len(trees), n, k), np.float32)
    for i, t in enumerate(trees):
        tr = t.tree_
        c = tr.node_count
        left[i, :c] = tr.children_left
        right[i, :c] = tr.children_right
        feat[i, :c] = np.maximum(tr.feature, 0)
        thr[i, :c] = tr.threshold
        v = tr.value[:, 0, :].astype(np.float64)
        val[i, :c] = v / np.maximum(v.sum(axis=1, keepdims=True), 1e-300)
    return {"left": left, "right": right, "feature": feat, "threshold": thr, "value": val}


class ArrayForest:
    """Predicts with the arrays of :func:`export` (all trees and samples advance one level per step)."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.left = np.asarray(arrays["left"], np.int64)
        self.right = np.asarray(arrays["right"], np.int64)
        self.feature = np.asarray(arrays["feature"], np.int64)
        self.threshold = np.asarray(arrays["threshold"], np.float64)
        self.value = np.asarray(arrays["value"], np.float64)
        n_trees, n_nodes = self.left.shape
        if not (self.right.shape == self.feature.shape == self.threshold.shape == (n_trees, n_nodes)):
            raise ValueError("tree arrays have different shapes")
        if self.value.shape[:2] != (n_trees, n_nodes):
            raise ValueError("value array does not match the trees")
        if (self.left >= n_nodes).any() or (self.right >= n_nodes).any():
            raise ValueError("child index out of range")

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Mean leaf distribution over the trees, (n_samples, n_classes)."""
        x = np.asarray(x, np.float64)
        if x.ndim != 2:
            raise ValueError("x must be samples x features")
        if self.feature.size and self.feature.max() >= x.shape[1]:
            raise ValueError(f"model needs {self.feature.max() + 1} features, got {x.shape[1]}")
        n_trees = self.left.shape[0]
        rows = np.arange(n_trees)[:, None]
        node = np.zeros((n_trees, x.shape[0]), np.int64)
        samples = np.arange(x.shape[0])[None, :]
        for _ in range(self.left.shape[1]):
            lf = self.left[rows, node]
            leaf = lf < 0
            if leaf.all():
                break
            go_left = x[samples, self.feature[rows, node]] <= self.threshold[rows, node]
            nxt = np.where(go_left, lf, self.right[rows, node])
            node = np.where(leaf, node, nxt)
        return self.value[rows, node].mean(axis=0)
