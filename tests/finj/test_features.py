"""Feature math (Netti et al. Sec. 6) against hand-computed values and scipy/numpy; labels; array forests."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from nodewatch.models.finj.features import STATS, FeatureLayout, core_features, prepare, window_stats
from nodewatch.models.finj.forest import ArrayForest, export
from nodewatch.models.finj.labels import window_labels


def test_eleven_statistics_by_hand() -> None:
    x = np.array([[1.0], [2.0], [3.0], [4.0]])
    s = dict(zip(STATS, window_stats(x, window=4, step=1)[0, 0], strict=True))
    assert s["avg"] == 2.5 and s["perc50"] == 2.5 and s["min"] == 1 and s["max"] == 4
    assert s["std"] == pytest.approx(np.sqrt(1.25))
    assert s["skew"] == pytest.approx(0.0)
    assert s["kurt"] == pytest.approx(2.5625 / 1.5625 - 3)  # m4 = (2*1.5^4 + 2*0.5^4)/4, m2 = 1.25: -1.36
    assert s["perc5"] == pytest.approx(1.15) and s["perc25"] == pytest.approx(1.75)
    assert s["perc75"] == pytest.approx(3.25) and s["perc95"] == pytest.approx(3.85)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_matches_scipy_and_numpy_on_random_windows() -> None:
    rng = np.random.default_rng(3)
    x = rng.lognormal(size=(400, 7))
    x[:, 3] = 5.0  # constant metric: skew and kurtosis 0
    out = window_stats(x)
    ends = np.arange(59, 400, 10)
    assert out.shape == (len(ends), 7, 11)
    for i, e in enumerate(ends):
        w = x[e - 59 : e + 1]
        ref = [w.mean(0), w.std(0), np.median(w, 0), w.min(0), w.max(0)]
        with np.errstate(all="ignore"):
            ref += [np.nan_to_num(stats.skew(w, 0)), np.nan_to_num(stats.kurtosis(w, 0))]
        ref += [np.percentile(w, q, 0) for q in (5, 25, 75, 95)]
        ref = np.array(ref).T
        ref[3, 5:7] = 0.0
        np.testing.assert_allclose(out[i], ref, rtol=1e-9, atol=1e-9)


def test_window_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="outside"):
        window_stats(np.zeros((100, 2)), ends=np.array([30]))
    with pytest.raises(ValueError):
        window_stats(np.zeros(100))


def test_counters_become_derivatives_and_every_metric_gets_one() -> None:
    x = np.array([[10.0, 1.0], [13.0, 2.0], [19.0, 2.0]])
    p = prepare(x, np.array([True, False]))
    # columns: counter rate, its derivative, gauge, its derivative
    np.testing.assert_array_equal(p[:, 0], [0, 3, 6])
    np.testing.assert_array_equal(p[:, 1], [0, 3, 3])
    np.testing.assert_array_equal(p[:, 2], [1, 2, 2])
    np.testing.assert_array_equal(p[:, 3], [0, 1, 0])


def test_core_features_share_node_part_and_differ_per_core() -> None:
    lay = FeatureLayout(("allocated", "mem"), ("allocated", "user"), frozenset())
    rng = np.random.default_rng(0)
    node = rng.random((120, 2))
    cores = [rng.random((120, 2)), rng.random((120, 2))]
    f = core_features(node, cores, lay)
    names = lay.feature_names()
    assert f.shape == (7, 2, len(names)) and len(names) == 4 * 2 * 11
    assert names[0] == "allocated_avg" and names[11] == "allocated_der_avg" and names[-1] == "core.user_der_perc95"
    half = 2 * 2 * 11
    np.testing.assert_array_equal(f[:, 0, :half], f[:, 1, :half])
    assert not np.allclose(f[:, 0, half:], f[:, 1, half:])


def test_mode_recent_ambiguous() -> None:
    lab = np.array([0] * 40 + [3] * 30 + [0] * 130)
    mode, recent, amb = window_labels(lab, np.array([59, 69, 79, 179]))
    # window 0..59: 40 healthy 20 fault -> healthy; 10..69: 30/30 tie -> healthy; 20..79: 20 h + 30 f + 10 h -> healthy
    np.testing.assert_array_equal(mode, [0, 0, 0, 0])
    np.testing.assert_array_equal(recent, [3, 3, 0, 0])
    np.testing.assert_array_equal(amb, [True, True, True, False])
    mode, _, _ = window_labels(np.array([0] * 10 + [2] * 50), np.array([59]))
    assert mode[0] == 2


def test_array_forest_reproduces_sklearn() -> None:
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    x, y = make_classification(n_samples=300, n_features=20, n_informative=6, n_classes=4, random_state=0)
    for m in (RandomForestClassifier(n_estimators=15, random_state=0), DecisionTreeClassifier(random_state=0)):
        m.fit(x, y)
        np.testing.assert_allclose(ArrayForest(export(m)).predict_proba(x), m.predict_proba(x), atol=1e-6)
    with pytest.raises(ValueError, match="needs 20 features"):
        ArrayForest(export(m)).predict_proba(x[:, :5])
    arrays = export(m)
    arrays["left"] = arrays["left"] + 10_000
    with pytest.raises(ValueError, match="out of range"):
        ArrayForest(arrays)


def test_torch_mlp_learns_and_standardises() -> None:
    from nodewatch.models.finj.classify import make
    from nodewatch.models.finj.mlp import TorchMLP

    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 300) * 2 + 1  # labels 1, 3, 5 (not 0..k-1)
    x = rng.normal(size=(300, 20))
    x[:, 0] = y * 1e6 + rng.normal(0, 2e5, 300)  # informative feature on a huge scale: needs standardising
    x[:, 1] = 7.0  # constant feature
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        m = TorchMLP(hidden=(32, 32), epochs=100).fit(x[:200], y[:200])
        assert set(m.classes_.tolist()) == {1, 3, 5}
        assert (m.predict(x[200:]) == y[200:]).mean() > 0.9
        assert torch.get_num_threads() == 2  # fit and predict (one thread inside) restore the caller's count
    finally:
        torch.set_num_threads(before)
    p = m.predict_proba(x[200:])
    assert p.shape == (100, 3) and np.allclose(p.sum(axis=1), 1.0, atol=1e-5)
    nn = make("nn")
    assert isinstance(nn, TorchMLP) and nn.hidden == (1000, 1000)
