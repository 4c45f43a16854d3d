"""Evaluation metrics (paper Sections 4.4-4.6) against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.anomaly.base import anomaly_probability, classify, paper_layer_sizes, reconstruction_error
from nodewatch.models.anomaly.metrics import PAPER_THRESHOLDS, f1_at_thresholds, per_node_auc, pooled_auc, pooled_roc
from nodewatch.models.anomaly.ruad import errors_per_metric


def test_pooled_auc_hand_value_and_nan_ignored():
    s = np.array([[0.1, 0.4, np.nan], [0.35, 0.8, 0.9]])
    y = np.array([[0, 0, 1], [1, 1, 0]], dtype=bool)
    # scored pairs: (0.1,0) (0.4,0) (0.35,1) (0.8,1) (0.9,0): positives beat 3 of 6 negative pairs... count:
    # pos 0.35 > 0.1 only (1 of 3); pos 0.8 > 0.1, 0.4 (2 of 3) -> 3/6 = 0.5
    assert pooled_auc(s, y) == pytest.approx(0.5)
    assert pooled_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1], bool)) == pytest.approx(0.75)
    fpr, tpr = pooled_roc(s, y)
    assert fpr[0] == 0 and tpr[-1] == 1


def test_per_node_auc_single_class_is_nan():
    s = np.array([[0.1, 0.9], [0.2, 0.3]])
    y = np.array([[0, 1], [0, 0]], dtype=bool)
    a = per_node_auc(s, y)
    assert a[0] == 1.0 and np.isnan(a[1])
    assert np.isnan(pooled_auc(s[1], y[1]))


def test_f1_at_paper_thresholds():
    s = np.array([0.0, 0.2, 0.6, 1.0])
    y = np.array([0, 0, 1, 1], dtype=bool)
    f1 = f1_at_thresholds(s, y)
    assert PAPER_THRESHOLDS[0] == 0.0 and PAPER_THRESHOLDS[-1] == 1.0 and len(PAPER_THRESHOLDS) == 11
    assert f1["anomaly"][0.0] == pytest.approx(2 * 0.5 / 1.5)  # everything flagged: precision 0.5, recall 1
    assert f1["anomaly"][0.5] == pytest.approx(1.0)
    assert f1["anomaly"][1.0] == pytest.approx(2 / 3)  # only P >= 1 flagged (Eq. 4)
    assert 0 <= f1["weighted"][0.3] <= 1


def test_equations_2_to_4():
    assert reconstruction_error(np.array([[0.1, -0.2], [0.3, 0.3]]) ** 2).tolist() == pytest.approx([0.05, 0.18])
    p = anomaly_probability(np.array([0.5, 2.0, 4.0, np.nan]), 2.0)
    assert p[:3].tolist() == [0.25, 1.0, 1.0] and np.isnan(p[3])
    assert classify(np.array([0.2, 0.5, np.nan]), 0.5).tolist() == [False, True, False]


def test_layer_sizes_scale_with_features():
    assert paper_layer_sizes(462) == (16, 8, 16)
    assert paper_layer_sizes(200) == (7, 3, 7)
    assert paper_layer_sizes(8) == (4, 2, 4)


def test_errors_per_metric_sums_the_four_stats():
    contrib = np.array([[1.0, 2.0, 0.5, 0.5, 0, 0, 1, 1], [np.nan] * 8])
    out = errors_per_metric(contrib, np.tile(np.arange(2), 4), 2)
    assert out[0].tolist() == [2.5, 3.5]
    assert np.isnan(out[1]).all()
