"""Vicinity math and verdict primitives against hand-computed values (models/anomaly/vicinity.py, verdicts.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nodewatch.models.anomaly.verdicts import alert_score, flagged_windows, persistent_score
from nodewatch.models.anomaly.vicinity import (
    Reference,
    conditioned_z,
    fit_reference,
    group_shift,
    kmeans_vicinity_outliers,
    own_history_baseline,
    relative_density,
    robust_location_scale,
    robust_z,
    shared_component,
    two_means_1d,
)


def test_robust_z_by_hand() -> None:
    loc, sc = robust_location_scale(np.array([[1.0, 2, 3, 4, 100]]), axis=1)
    # median 3; |x - 3| = 2, 1, 0, 1, 97 -> MAD 1 -> scale 1.4826
    assert loc[0] == 3.0 and sc[0] == pytest.approx(1.4826)
    assert robust_z(np.array(100.0), loc[0], sc[0]) == pytest.approx(97 / 1.4826)
    _, floored = robust_location_scale(np.array([[5.0, 5, 5, 5]]), axis=1, floor=0.02)
    assert floored[0] == 0.02  # a constant metric: the floor, not a zero scale


def test_two_means_and_relative_density_by_hand() -> None:
    v = np.array([10.0, 0.0, 0.1, 10.2, 0.2])
    labels, centers, wcss, tss = two_means_1d(v)
    assert labels.tolist() == [1, 0, 0, 1, 0]
    assert centers == pytest.approx([0.1, 10.1])
    assert wcss == pytest.approx(0.04)  # (0.01 + 0 + 0.01) + (0.01 + 0.01)
    assert tss == pytest.approx(120.04)  # mean 4.1: 16.81 + 16 + 15.21 + 34.81 + 37.21
    assert relative_density(v) == pytest.approx(0.04 / 120.04)
    # exact: no other split of the sorted values has a smaller WCSS
    s = np.sort(v)
    for k in range(1, len(s)):
        w = ((s[:k] - s[:k].mean()) ** 2).sum() + ((s[k:] - s[k:].mean()) ** 2).sum()
        assert w >= wcss - 1e-12


def test_kmeans_vicinity_outliers() -> None:
    # five nodes agree, one deviates: the minority cluster is abnormal (relative density 0.032 / 13.3)
    assert kmeans_vicinity_outliers(np.array([1.0, 1.1, 0.9, 1.0, 1.05, 5.0])).tolist() == [False] * 5 + [True]
    # evenly spread: best split is 3/3 with WCSS/TSS = 4 / 17.5 = 0.23 > 0.2 -> nobody is an outlier
    assert relative_density(np.array([1.0, 2, 3, 4, 5, 6])) == pytest.approx(4 / 17.5)
    assert not kmeans_vicinity_outliers(np.array([1.0, 2, 3, 4, 5, 6])).any()
    # NaN (no data) is never an outlier; fewer than 3 values: no judgement
    out = kmeans_vicinity_outliers(np.array([1.0, np.nan, 1.0, 1.0, 1.0, 9.0]))
    assert out.tolist() == [False, False, False, False, False, True]
    assert not kmeans_vicinity_outliers(np.array([1.0, 9.0])).any()


def test_shared_component() -> None:
    v = np.array([[3.0], [5.0]])
    assert shared_component(v).tolist() == [3.0]  # two members, same sign: the smaller magnitude
    assert shared_component(np.array([[3.0], [-5.0]])).tolist() == [0.0]
    assert shared_component(np.array([[1.0], [5.0], [9.0]])).tolist() == [5.0]  # median
    assert shared_component(np.array([[7.0], [np.nan]])).tolist() == [0.0]  # one member with data


def test_group_shift_against_other_racks() -> None:
    vals = np.array([10, 10, 10, 10, 0, 1, -1, 0, 0.5, -0.5], dtype=float)[:, None, None]
    members = np.arange(4)
    ref = np.zeros(10, dtype=bool)
    ref[4:] = True
    # reference median 0, MAD 0.5 -> 0.74 < floor 1 -> shift = (10 - 0) / 1
    assert group_shift(vals, members, ref)[0, 0] == pytest.approx(10.0)
    # the rack's own median moves with the rack: against itself there is no shift
    own = np.zeros(10, dtype=bool)
    own[:4] = True
    assert group_shift(vals, members, own)[0, 0] == pytest.approx(0.0)


def test_conditioned_z_and_transition_envelope() -> None:
    ref = Reference(loc=np.array([[[0.0]], [[10.0]]]), scale=np.array([[[1.0]], [[2.0]]]))
    x = np.array([[[5.0], [12.0], [-4.0], [5.0]]])
    busy = np.array([[False, True, False, True]])
    z = conditioned_z(x, busy, ref)
    assert z[0, :, 0].tolist() == [5.0, 1.0, -4.0, -2.5]
    tr = np.ones((1, 4), dtype=bool)
    # a job start/stop window is judged against the envelope [0, 10] in units of the larger scale (2)
    assert conditioned_z(x, busy, ref, tr)[0, :, 0].tolist() == [0.0, 1.0, -2.0, 0.0]


def test_fit_reference_tail_floor_for_rare_jumps() -> None:
    # a counter that is 0 except for three jumps of 1: MAD 0, so the scale comes from the tail width:
    # q0.999 of |dev| over 1002 windows (position 999.999 of the sorted values, all 1 from 999) = 1
    # -> scale 1 / Phi^-1(0.9995) = 1 / 3.2905
    h = np.zeros((3, 1002, 1))
    h[:, :3, 0] = 1.0
    ref = fit_reference(h, None)
    assert ref.loc[0, 0, 0] == 0.0
    assert ref.scale[0, 0, 0] == pytest.approx(1 / 3.2905, rel=1e-3)
    # a normal metric keeps its MAD scale (the tail width is about sigma)
    rng = np.random.default_rng(0)
    g = rng.normal(0, 0.5, (3, 5000, 1))
    assert fit_reference(g, None).scale[0, 0, 0] == pytest.approx(0.5, rel=0.1)


def test_persistence_k_of_n_by_hand() -> None:
    s = np.array([0.0, 5, 0, 5, 5, 0])
    assert persistent_score(s, 2, 3).tolist() == [0, 0, 0, 5, 5, 5]
    assert flagged_windows(s, np.array(5.0), 2, 3).tolist() == [False, True, False, True, True, False]
    # one window alone is not enough, unless two metrics are `strong` times above the threshold
    one = np.array([0.0, 0, 30, 0])
    assert not flagged_windows(one, np.array(5.0), 2, 3).any()
    assert flagged_windows(one, np.array(5.0), 2, 3, strong=4.0).tolist() == [False, False, True, False]
    assert not flagged_windows(one, np.array(5.0), 2, 3, strong=4.0, s2=np.array([0.0, 0, 3, 0])).any()
    assert alert_score(one, 2, 3, 4.0).max() == pytest.approx(7.5)
    with pytest.raises(ValueError):
        persistent_score(s, 4, 3)


def test_own_history_baseline_rule() -> None:
    hist = np.full((1, 100, 1), math.e - 1)  # log1p = 1 everywhere: median 1, MAD 0 -> floor 1e-3
    hist[0, ::2, 0] = math.e**1.1 - 1  # half the windows at 1.1: median 1.05 (interpolated), MAD 0.05
    night = np.full((1, 6, 1), math.e - 1)
    night[0, 2:4, 0] = math.e**2 - 1  # log1p = 2: z = (2 - 1.05) / (1.4826 * 0.05) = 12.8 in windows 2, 3
    night[0, 5, 0] = math.e**2 - 1
    assert own_history_baseline(hist, night, k=8, m=2)[0].tolist() == [False, False, False, True, False, False]
    assert own_history_baseline(hist, night, k=8, m=1)[0].tolist() == [False, False, True, True, False, True]
    assert not own_history_baseline(hist, night, k=13, m=1).any()


def test_metric_offsets() -> None:
    from nodewatch.models.anomaly.vicinity import log_transform, metric_offsets

    h = np.zeros((2, 4, 2))
    h[..., 0] = 90.0  # a percentage that is usually large (CPU idle): offset 5% of its median = 4.5
    off = metric_offsets(h)  # the second metric is always 0: the minimum offset 1e-3
    assert off.tolist() == pytest.approx([4.5, 1e-3])
    # 0% vs 0.6% idle on a saturated node is a small change after the offset, not log(0.6 / 0.001)
    x = log_transform(np.array([[0.0, 0.0], [0.6, 0.0]]), off)
    assert x[1, 0] - x[0, 0] == pytest.approx(np.log(5.1 / 4.5), rel=1e-5)


def test_nanmedian_equals_numpy_with_all_nan_slices() -> None:
    import warnings

    from nodewatch.models.anomaly.vicinity import _nanmedian

    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        for shape, ax in (((7, 5, 3), 0), ((7, 5, 3), 1), ((4, 6), 1), ((9,), 0)):
            a = rng.standard_normal(shape).astype(dt)
            a[rng.random(shape) < 0.4] = np.nan
            if len(shape) > 1:
                a[0] = np.nan  # all-NaN slices along the other axes
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns on all-NaN slices
                ref = np.nanmedian(a, axis=ax)
            got = _nanmedian(a, ax)
            assert got.dtype == ref.dtype and np.array_equal(got, ref, equal_nan=True)
    assert _nanmedian(np.array([[1.0, np.nan, 3.0, 10.0]]), 1).tolist() == [3.0]  # (1, 3, 10): the middle one
    assert _nanmedian(np.array([[1.0, np.nan, 3.0, np.nan]]), 1).tolist() == [2.0]  # (1 + 3) / 2


def test_rare_quantum_scale_by_hand() -> None:
    """Eq. Q1: an error counter at 0 except one count in 2 of 4,000 windows (log step log(1 + (1/900) / 1e-3) =
    0.7472): the median node's q0.999 is 0, so without Q1 the scale is the floor 0.02 and one count scores 37.36;
    with Q1 the scale is 0.7472 / Phi^-1(1 - 2/4000/2) = 0.7472 / 3.4808 and one count scores 3.48, the normal
    score of its frequency. A metric whose steps are not rare (every 10th window) keeps the tail-width scale."""
    from statistics import NormalDist

    step = math.log(1 + (1 / 900) / 1e-3)
    h = np.zeros((4, 1000, 2))
    h[0, [10, 500], 0] = step
    h[:, ::10, 1] = step  # common steps: q0.999 per node = step, Eq. Q1 does not apply
    off = fit_reference(h, None)
    assert off.scale[0, 0, 0] == pytest.approx(0.02)
    assert step / off.scale[0, 0, 0] == pytest.approx(37.36, abs=0.01)
    ref = fit_reference(h, None, rare_quantum=True)
    want = step / NormalDist().inv_cdf(1 - 2 / 4000 / 2)
    assert want == pytest.approx(0.7472 / 3.4808, rel=1e-3)
    assert ref.scale[0, :, 0] == pytest.approx([want] * 4, rel=1e-5)
    assert step / ref.scale[0, 0, 0] == pytest.approx(3.4808, rel=1e-3)
    assert ref.scale[0, 0, 1] == pytest.approx(off.scale[0, 0, 1]) == pytest.approx(step / 3.2905, rel=1e-3)
