import numpy as np
import pytest

from nodewatch.models.anomaly.thresholds import calibrated_thresholds


def test_quantile_of_normal_windows_never_below_base():
    s = np.array([np.linspace(0, 0.8, 101), np.linspace(0, 0.2, 101), np.full(101, np.nan)])
    thr = calibrated_thresholds(s, None, base=0.5, quantile=0.99)
    assert thr[0] == pytest.approx(0.792)  # 99th percentile of 0..0.8 (101 points)
    assert thr[1] == 0.5  # quiet node keeps the global T
    assert thr[2] == 0.5  # no held-out windows


def test_labelled_anomalies_are_excluded_and_cap_is_one():
    s = np.r_[np.full(50, 0.3), np.full(50, 1.0)][None, :]
    lab = np.r_[np.zeros(50, bool), np.ones(50, bool)][None, :]
    assert calibrated_thresholds(s, lab, 0.1, 0.9)[0] == pytest.approx(0.3)
    assert calibrated_thresholds(s, None, 0.1, 1.0)[0] == 1.0


def test_bad_quantile():
    with pytest.raises(ValueError, match="quantile"):
        calibrated_thresholds(np.zeros((1, 30)), None, 0.5, 0.0)
