"""Window features (Table 4.3), lead-time indexing (Fig. 4.4), the batched ensemble and the voters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nodewatch.models.predict.ensemble import (
    BatchedMLP,
    LeadTimeEnsemble,
    fit_lstm_voter,
    logodds_to_proba,
    threshold_at_fpr,
    unanimous,
)
from nodewatch.models.predict.features import (
    FEATURES,
    node_feature_matrix,
    sequence_index,
    window_features,
    window_steps,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_table_4_3_features_by_hand() -> None:
    x = np.array([1.0, 3.0, 2.0, 10.0])
    f = window_features(x, 4)[0]
    got = dict(zip(FEATURES, f, strict=True))
    assert got["median"] == 2.5 and got["min"] == 1 and got["max"] == 10 and got["sum"] == 16
    assert got["mean"] == 4.0 and got["var"] == pytest.approx((9 + 1 + 4 + 36) / 4)
    assert got["std"] == pytest.approx(np.sqrt(12.5))
    assert window_features(np.arange(3.0), 4).shape == (0, 7)
    w = window_features(np.array([1.0, np.nan, 2.0, 3.0, 4.0]), 2)
    assert np.isnan(w[0]).all() and np.isnan(w[1]).all() and w[2, 0] == 2.5


def test_window_steps_and_bad_steps() -> None:
    assert window_steps(15) == 16 and window_steps(60) == 4
    for bad in (0, 7, 240, -15):
        with pytest.raises(ValueError):
            window_steps(bad)


def test_counter_increments_and_resets() -> None:
    vals = np.array([[10.0, 11, 12, 13, 14, 15], [0, 5, 10, 2, 4, 6]])  # gauge, counter reset at index 3
    f = node_feature_matrix(vals, np.array([False, True]), 2)
    assert f.shape == (6, 14)
    assert np.isnan(f[0]).all()
    assert f[1, 0] == 10.5  # gauge median of (10, 11)
    assert f[2, 7 + 6] == 5.0  # counter increments (5, 5) -> mean 5
    assert np.isnan(f[3, 7:]).all() and np.isnan(f[4, 7:]).all()  # reset -> NaN increment
    assert f[5, 7 + 6] == 2.0


def test_sequence_index_lead_order() -> None:
    idx = sequence_index(np.array([100]), 15)[0]
    # sequence order in the model is 7 -> 2 min; the helper returns leads 2..7 min (28..8 steps back)
    assert list(idx) == [92, 88, 84, 80, 76, 72]
    with pytest.raises(ValueError):
        sequence_index(np.array([10]), 7)


def test_batched_mlp_equals_six_separate_networks() -> None:
    net = BatchedMLP(6, 70, 52, seed=3)
    x = torch.randn(6, 5, 70)
    out = net(x)
    for k in range(6):
        ref = torch.tanh(x[k] @ net.w1[k] + net.b1[k]) @ net.w2[k] + net.b2[k]
        assert torch.allclose(out[k], ref, atol=1e-6)
    assert sum(p.numel() for p in net.parameters()) == 6 * (70 * 52 + 52 + 52 * 2 + 2)


def _toy(n_pos: int = 60, n_neg: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    x = g.normal(size=(n_pos + n_neg, 6, 70)).astype(np.float32)
    x[:n_pos, :, :5] += 3.0  # separable failures
    y = np.r_[np.ones(n_pos), np.zeros(n_neg)].astype(np.int64)
    return x, y


def test_ensemble_learns_and_round_trips_its_state() -> None:
    x, y = _toy()
    ens = LeadTimeEnsemble(epochs=60, seed=1).fit(x, y)
    p = ens.predict_proba(x)
    assert p.shape == (len(y), 6)
    assert (p[y == 1] > 0.5).mean() > 0.9 and (p[y == 0] > 0.5).mean() < 0.02
    again = LeadTimeEnsemble.from_state(ens.state()).predict_proba(x)
    assert np.allclose(p, again, atol=1e-6)
    with pytest.raises(RuntimeError):
        LeadTimeEnsemble().predict_proba(x)
    with pytest.raises(ValueError):
        LeadTimeEnsemble().fit(x, np.zeros(len(y), np.int64))
    with pytest.raises(ValueError):
        LeadTimeEnsemble().fit(x[:, 0], y)


def test_unanimous_voting_never_raises_fpr() -> None:
    p = np.array([[0.9, 0.9, 0.9, 0.9, 0.9, 0.9], [0.9, 0.4, 0.9, 0.9, 0.9, 0.9], [0.2, 0.9, 0.9, 0.9, 0.9, 0.9]])
    assert list(unanimous(p, 1)) == [True, True, False]
    assert list(unanimous(p, 2)) == [True, False, False]
    assert list(unanimous(p)) == [True, False, False]
    g = np.random.default_rng(0).random((1000, 6))
    rates = [unanimous(g, k).mean() for k in range(1, 7)]
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False))
    with pytest.raises(ValueError):
        unanimous(p, 7)


def test_lstm_voter_threshold_meets_target_on_validation() -> None:
    g = np.random.default_rng(1)
    neg = g.beta(1, 8, size=(1500, 6))
    pos = g.beta(8, 1, size=(150, 6))
    p = np.concatenate([pos, neg])
    lo = np.log(p / (1 - p)).astype(np.float32)
    y = np.r_[np.ones(150), np.zeros(1500)].astype(np.int64)
    fit = fit_lstm_voter(lo, y, target_fpr=2e-3, epochs=100)
    s = fit.score(lo)
    assert (s[y == 1] >= fit.threshold).mean() > 0.8
    assert (s[y == 0] >= fit.threshold).mean() < 0.01
    with pytest.raises(ValueError):
        fit_lstm_voter(lo, np.zeros(len(y), np.int64))


def test_threshold_at_fpr_by_hand() -> None:
    neg = np.array([0.1, 0.2, 0.9, 0.9, 0.3])
    assert threshold_at_fpr(neg, 0.0) > 0.9 and threshold_at_fpr(neg, 0.0) == np.nextafter(0.9, 1)
    assert threshold_at_fpr(neg, 0.2) == np.nextafter(0.9, 1)  # 1 allowed, but the two tie at 0.9: none pass
    assert threshold_at_fpr(neg, 0.4) == np.nextafter(0.3, 1)  # 2 allowed: the two at 0.9
    assert threshold_at_fpr(neg, 0.6) == np.nextafter(0.2, 1)  # 3 allowed: 0.9, 0.9, 0.3
    assert threshold_at_fpr(neg, 1.0) == 0.0


def test_lstm_voter_separates_saturated_positives_from_persistent_false_alarms() -> None:
    """The tpr-0 case: positives and a persistent false alarm both have P(failure) = 1.0 in float32 (log-odds >= 17);
    as probabilities they tie, so a threshold that keeps validation fpr tiny dropped every positive. The networks'
    log-odds still order them, and the voter reading log-odds keeps its recall at the same validation fpr."""
    g = np.random.default_rng(3)
    neg = g.normal(-8, 2, size=(6000, 6))
    neg[:40] = g.normal(19, 0.5, size=(40, 6))  # a persistent condition: all six windows alike, P = 1.0
    pos = g.normal(28, 2, size=(200, 6))
    lo = np.concatenate([pos, neg]).astype(np.float32)
    y = np.r_[np.ones(200), np.zeros(6000)].astype(np.int64)
    assert (logodds_to_proba(lo[y == 1]) == 1.0).all() and (logodds_to_proba(lo[200:240]) == 1.0).all()
    groups = np.r_[np.arange(200), 1000 + np.arange(6000) // 100]  # 60 ok "node-days" of 100 sequences
    fit = fit_lstm_voter(lo, y, target_fpr=1e-3, epochs=150, groups=groups)
    s = fit.score(lo)
    assert (s[y == 1] >= fit.threshold).mean() > 0.9
    assert (s[y == 0] >= fit.threshold).mean() < 0.01


def test_window_features_equal_the_numpy_definitions() -> None:
    g = np.random.default_rng(5)
    x = g.normal(size=(3, 200)).cumsum(axis=1) * 1e3
    x[1, 50] = np.nan
    f = window_features(x, 16)
    v = np.lib.stride_tricks.sliding_window_view(x, 16, axis=-1)
    ref = np.stack([np.median(v, -1), v.min(-1), v.std(-1), v.sum(-1), v.var(-1), v.max(-1), v.mean(-1)], axis=-1)
    assert np.allclose(f, ref, rtol=1e-9, atol=1e-6, equal_nan=True)
    assert np.isnan(f[1, 35:51]).all() and np.isfinite(f[1, 51:]).all()
