"""Clustering baseline CLU (Morrow et al. [20]; Molan et al., "RUAD", Section 3.4).

Per node, k-means on the (scaled) training rows, with k chosen by the highest silhouette score
on the training set (footnotes 1-2, ``S = (b - a) / max(a, b)``). Each cluster's anomaly
probability is the fraction of its training instances labelled anomalous — derived from the
labels, i.e. the paper's *upper bound* of what a post-training expert analysis could assign.
A new instance gets the probability of its nearest cluster. No time-consistency filter (Table 4).
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from nodewatch.models.anomaly.base import NodeEstimator
from nodewatch.models.anomaly.preprocess import valid_rows


def choose_k(Z: np.ndarray, k_values: tuple[int, ...], sample_size: int, seed: int) -> tuple[int, KMeans, dict[int, float]]:
    """k with the highest silhouette score on ``Z`` (Section 3.4, footnote 2); silhouette on a
    random sample of at most ``sample_size`` rows (it is quadratic in the number of rows)."""
    scores: dict[int, float] = {}
    best: tuple[float, int, KMeans] | None = None
    n_distinct = len(np.unique(Z, axis=0))
    for k in k_values:
        if k >= n_distinct:
            break
        km = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(Z)
        s = float(silhouette_score(Z, km.labels_, sample_size=min(sample_size, len(Z)), random_state=seed))
        scores[k] = s
        if best is None or s > best[0]:
            best = (s, k, km)
    if best is None:
        km = KMeans(n_clusters=1, n_init=1, random_state=seed).fit(Z)
        return 1, km, scores
    return best[1], best[2], scores


class KMeansClustering(NodeEstimator):
    """CLU baseline (Section 3.4): silhouette-chosen k in ``k_values`` and label-derived cluster probabilities."""

    def __init__(self, k_values: tuple[int, ...] = tuple(range(2, 11)), silhouette_sample: int = 2000,
                 threshold: float = 0.5, seed: int = 0) -> None:
        self.k_values = k_values
        self.silhouette_sample = silhouette_sample
        self.threshold = threshold
        self.seed = seed

    def fit(self, X: np.ndarray, y: np.ndarray | None = None) -> KMeansClustering:
        """Cluster each node's training rows and set each cluster's probability to its anomalous fraction."""
        if y is None:
            raise ValueError("CLU needs labels y[node, time]: cluster probabilities are derived from labels (Section 3.4)")
        Xs, rows, y = self._fit_scaler(X, y, semi=False)
        self.centers_: list[np.ndarray | None] = []
        self.cluster_probability_: list[np.ndarray | None] = []
        self.k_: list[int] = []
        self.silhouette_: list[dict[int, float]] = []
        self.failed_: dict[int, str] = {}
        for k in range(self.n_nodes_):
            Z = Xs[k, rows[k]]
            if len(Z) < 2:
                self.failed_[k] = f"only {len(Z)} valid training rows"
                self.centers_.append(None)
                self.cluster_probability_.append(None)
                self.k_.append(0)
                self.silhouette_.append({})
                continue
            kk, km, scores = choose_k(Z, tuple(self.k_values), self.silhouette_sample, self.seed)
            lab = y[k, rows[k]]  # type: ignore[index]
            prob = np.array([lab[km.labels_ == c].mean() if (km.labels_ == c).any() else 0.0 for c in range(kk)])
            self.centers_.append(km.cluster_centers_.astype(np.float32))
            self.cluster_probability_.append(prob)
            self.k_.append(kk)
            self.silhouette_.append(scores)
        self.n_train_windows_ = rows.sum(axis=1)
        self.max_error_ = np.array([np.nan if c is None else 1.0 for c in self.centers_])
        return self

    def score_samples(self, X: np.ndarray) -> np.ndarray:
        """Anomaly probability = the label-derived probability of the nearest cluster (Section 3.4)."""
        self._check_fitted()
        X3, single = self._check_X(X)
        Xs = self._transform(X3)
        ok = valid_rows(Xs)
        out = np.full(X3.shape[:2], np.nan)
        for k, (c, p) in enumerate(zip(self.centers_, self.cluster_probability_, strict=True)):
            if c is None or not ok[k].any():
                continue
            Z = Xs[k, ok[k]]
            d = ((Z[:, None, :] - c[None]) ** 2).sum(axis=2)
            out[k, ok[k]] = p[np.argmin(d, axis=1)]
        return out[0] if single else out

    def feature_contributions(self, X: np.ndarray) -> np.ndarray:
        """CLU has no reconstruction, hence no per-feature contributions: all NaN ``[node, time, feature]``."""
        self._check_fitted()
        X3, single = self._check_X(X)
        out = np.full(X3.shape, np.nan)
        return out[0] if single else out

    def node_state(self, k: int) -> dict[str, np.ndarray]:
        """Learned state of node ``k`` (scaler, centres, cluster probabilities)."""
        self._check_fitted()
        if self.centers_[k] is None:
            raise ValueError(f"node {k} was not fitted: {self.failed_.get(k)}")
        state = self._common_state(k)
        state.update({"centers": self.centers_[k], "cluster_probability": self.cluster_probability_[k]})
        return state

    @classmethod
    def from_node_states(cls, states: list[dict[str, np.ndarray]], **params: object) -> KMeansClustering:
        """Rebuild a fitted estimator from :meth:`node_state` outputs."""
        est = cls(**params)  # type: ignore[arg-type]
        est._restore_common(states)
        est.centers_ = [s["centers"] for s in states]
        est.cluster_probability_ = [s["cluster_probability"] for s in states]
        est.k_ = [len(c) for c in est.centers_]
        return est
