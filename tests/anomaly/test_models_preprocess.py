"""Unit tests of the RUAD pre-processing (paper Section 3.7, Fig. 3) and labels (Section 3.1)."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.anomaly.labels import critical_minus_false_positives, labels_from_intervals, subtract_intervals
from nodewatch.models.anomaly.preprocess import (
    MinMaxScaler,
    chronological_split,
    chunk_lengths,
    feature_names,
    feature_to_metric,
    features_from_stats,
    pad_ragged,
    valid_rows,
    window_ends,
)


def test_features_order_variance_and_missing_counts():
    mean = np.array([[[1.0, 2.0], [3.0, 4.0]]])
    mn, mx, std = mean - 1, mean + 1, np.full_like(mean, 3.0)
    count = np.array([[[5, 5], [0, 5]]])
    X = features_from_stats(mean, mn, mx, std, count)
    assert X.shape == (1, 2, 8)
    np.testing.assert_allclose(X[0, 0], [1, 2, 0, 1, 2, 3, 9, 9])
    assert np.isnan(X[0, 1, [0, 2, 4, 6]]).all() and not np.isnan(X[0, 1, [1, 3, 5, 7]]).any()
    assert valid_rows(X)[0].tolist() == [True, False]  # one metric missing -> the timestamp is missing
    assert feature_names(["a", "b"]) == ["mean:a", "mean:b", "min:a", "min:b", "max:a", "max:b", "var:a", "var:b"]
    assert feature_to_metric(2).tolist() == [0, 1, 0, 1, 0, 1, 0, 1]


def test_features_shape_mismatch_is_a_clear_error():
    a = np.zeros((1, 2, 3))
    with pytest.raises(ValueError, match="share"):
        features_from_stats(a, a, a, np.zeros((1, 2, 4)))


def test_chronological_split_is_80_20():
    assert chronological_split(100) == 80
    assert chronological_split(5760) == 4608
    with pytest.raises(ValueError):
        chronological_split(1)
    with pytest.raises(ValueError):
        chronological_split(10, 1.0)


def test_scaler_uses_training_rows_only():
    X = np.array([[[0.0], [10.0], [5.0], [100.0]]], dtype=np.float32)
    rows = np.array([[True, True, True, False]])  # the 100 is outside the training rows
    sc = MinMaxScaler.fit(X, rows)
    np.testing.assert_allclose(sc.transform(X)[0, :, 0], [0.0, 1.0, 0.5, 10.0])


def test_scaler_refuses_other_node_count():
    X = np.zeros((3, 4, 2), dtype=np.float32)
    sc = MinMaxScaler.fit(X, np.ones((3, 4), bool))
    with pytest.raises(ValueError, match="3 nodes"):
        sc.transform(X[:1])
    assert sc.node(1).transform(X[1:2]).shape == (1, 4, 2)


def test_constant_feature_does_not_divide_by_zero():
    X = np.full((1, 3, 1), 7.0, dtype=np.float32)
    sc = MinMaxScaler.fit(X, np.ones((1, 3), bool))
    np.testing.assert_allclose(sc.transform(X)[0, :, 0], [0, 0, 0])


def test_time_consistency_filter_matches_figure_3():
    ok = np.array([[1, 1, 0, 1, 1, 1, 0, 1]], dtype=bool)
    assert window_ends(ok, 2)[0].tolist() == [1, 4, 5]
    assert window_ends(ok, 3)[0].tolist() == [5]  # chunks shorter than W are dropped
    assert window_ends(ok, 4)[0].tolist() == []
    assert chunk_lengths(ok)[0].tolist() == [2, 2, 0, 3, 3, 3, 0, 1]
    with pytest.raises(ValueError):
        window_ends(ok, 0)


def test_semi_supervised_filter_splits_chunks_at_anomalies():
    X = np.zeros((1, 6, 2), dtype=np.float32)
    X[0, 1, 0] = np.nan
    y = np.array([[0, 0, 0, 1, 0, 0]], dtype=bool)
    assert valid_rows(X)[0].tolist() == [True, False, True, True, True, True]
    assert valid_rows(X, y, semi_supervised=True)[0].tolist() == [True, False, True, False, True, True]
    with pytest.raises(ValueError, match="labels"):
        valid_rows(X, None, semi_supervised=True)


def test_pad_ragged():
    idx, counts = pad_ragged([np.array([3, 4]), np.array([], dtype=np.int64), np.array([9])])
    assert counts.tolist() == [2, 0, 1]
    assert idx.tolist() == [[3, 4], [0, 0], [9, 0]]


def test_labels_from_intervals_overlap_rule():
    times = np.datetime64("2026-01-01T00:00", "ns") + np.arange(6) * np.timedelta64(15, "m")
    step = np.timedelta64(15, "m")
    start = np.array(["2026-01-01T00:20", "2026-01-01T01:15"], dtype="datetime64[ns]")
    end = np.array(["2026-01-01T00:31", "2026-01-01T01:15"], dtype="datetime64[ns]")  # second: an instant
    y = labels_from_intervals(np.array([0, 1]), start, end, 2, times, step)
    assert y[0].tolist() == [False, True, True, False, False, False]  # 00:15-00:30 and 00:30-00:45
    assert y[1].tolist() == [False, False, False, False, False, True]
    with pytest.raises(ValueError, match="outside"):
        labels_from_intervals(np.array([5]), start[:1], end[:1], 2, times, step)


def test_critical_alerts_minus_ticketed_false_positives():
    t = lambda s: np.datetime64(f"2026-01-01T{s}", "ns")  # noqa: E731
    alerts = {
        "node": ["n1", "n1", "n2"],
        "start": [t("00:00"), t("05:00"), t("01:00")],
        "end": [t("02:00"), t("06:00"), t("02:00")],
        "severity": ["CRITICAL", "warning", "critical"],
    }
    fps = {"node": ["n1", "n2"], "start": [t("00:30")], "end": [t("01:00")]}
    fps["start"] = [t("00:30"), t("00:00")]
    fps["end"] = [t("01:00"), t("03:00")]
    out = critical_minus_false_positives(alerts, fps)
    assert out["node"] == ["n1", "n1"]  # n2's alert is entirely a false positive; the warning is dropped
    assert out["start"] == [t("00:00"), t("01:00")] and out["end"] == [t("00:30"), t("02:00")]
    assert subtract_intervals(np.array([t("00:00")]), np.array([t("01:00")]), np.array([]), np.array([])) == [
        (t("00:00"), t("01:00"))
    ]
