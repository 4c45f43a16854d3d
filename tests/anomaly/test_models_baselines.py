"""EXP (Section 3.3, Eq. 5) and CLU (Section 3.4) baselines against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.anomaly.base import NotFittedError
from nodewatch.models.anomaly.clustering import KMeansClustering, choose_k
from nodewatch.models.anomaly.exp_smoothing import ExpSmoothing, exponential_smoothing


def test_exponential_smoothing_eq5_and_restart_after_gap():
    x = np.array([[[1.0], [3.0], [np.nan], [2.0], [4.0]]], dtype=np.float32)
    s = exponential_smoothing(x, 0.5)[0, :, 0]
    assert s[0] == 1.0 and s[1] == pytest.approx(2.0)  # 0.5*3 + 0.5*1
    assert np.isnan(s[2])
    assert s[3] == 2.0 and s[4] == pytest.approx(3.0)  # restarts at the chunk start: x_hat_t0 = x_t0


def test_exp_scores_normalised_by_max_training_error():
    X = np.array([[[0.0], [1.0], [0.0], [1.0], [0.0], [0.0], [0.0], [0.0]]], dtype=np.float32)
    est = ExpSmoothing(alpha=0.1)
    with pytest.raises(NotFittedError):
        est.predict(X)
    est.fit(X[:, :6])
    # scaled = X; smoothed: 0, .1, .09, .181, .1629, ... errors |s - x|: 0, .9, .09, .819, ...
    assert est.max_error_[0] == pytest.approx(0.9)
    s = est.score_samples(X[:, :4])
    np.testing.assert_allclose(s[0], [0.0, 1.0, 0.1, 0.91], rtol=1e-5)
    with pytest.raises(ValueError, match="alpha"):
        ExpSmoothing(alpha=2).fit(X)


def test_exp_min_chunk_drops_short_chunks():
    X = np.array([[[0.0], [np.nan], [1.0], [2.0], [3.0]]], dtype=np.float32)
    est = ExpSmoothing(min_chunk=2).fit(X)
    s = est.score_samples(X)[0]
    assert np.isnan(s[:2]).all() and np.isfinite(s[2:]).all()
    back = ExpSmoothing.from_node_states([est.node_state(0)], min_chunk=2)
    np.testing.assert_array_equal(back.score_samples(X), est.score_samples(X))


def _blobs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.normal(0, 0.05, (60, 2))
    b = rng.normal(5, 0.05, (20, 2))
    X = np.concatenate([a, b])[None].astype(np.float32)
    y = np.zeros((1, 80), bool)
    y[0, 60:70] = True  # half of cluster b is labelled anomalous
    return X, y


def test_clustering_silhouette_k_and_label_probabilities():
    X, y = _blobs()
    est = KMeansClustering(k_values=(2, 3, 4)).fit(X, y)
    assert est.k_ == [2]
    assert sorted(est.cluster_probability_[0].tolist()) == [0.0, 0.5]
    s = est.score_samples(np.array([[[0.0, 0.0], [5.0, 5.0], [np.nan, 1.0]]], dtype=np.float32))
    assert s[0, 0] == 0.0 and s[0, 1] == 0.5 and np.isnan(s[0, 2])
    back = KMeansClustering.from_node_states([est.node_state(0)])
    np.testing.assert_array_equal(back.score_samples(X), est.score_samples(X))
    assert np.isnan(est.feature_contributions(X)).all()


def test_clustering_needs_labels_and_handles_degenerate_nodes():
    X, y = _blobs()
    with pytest.raises(ValueError, match="labels"):
        KMeansClustering().fit(X)
    X2 = np.concatenate([X, np.full_like(X, np.nan)])
    est = KMeansClustering(k_values=(2,)).fit(X2, np.concatenate([y, y]))
    assert 1 in est.failed_ and np.isnan(est.score_samples(X2)[1]).all()
    k, _, scores = choose_k(np.zeros((5, 2)), (2, 3), 100, 0)  # identical points: one cluster
    assert k == 1 and scores == {}
