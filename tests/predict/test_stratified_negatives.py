"""Stratified hard negatives in the networks' epoch sample and the LSTM voter's loss (issue 18)."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.predict.ensemble import epoch_negatives, fit_lstm_voter, stratified_weights, stratum_pools
from nodewatch.models.predict.features import FEATURES
from nodewatch.tasks.predict.dataset import ANOMALY_KINDS, PREDICTOR_METRICS, Sequences, busy, hard_strata
from nodewatch.tasks.predict.evaluate import fit_ensemble_and_voter

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_without_strata_the_epoch_sample_is_the_old_uniform_draw() -> None:
    neg = np.arange(10, 1010)
    rest, pools = stratum_pools(neg, None)
    a = epoch_negatives(np.random.default_rng(5), 200, rest, pools)
    b = np.random.default_rng(5).choice(neg, size=200, replace=False)
    assert np.array_equal(a, b)


def test_stratified_sample_counts() -> None:
    neg = np.arange(1000)
    strata = np.full(1000, -1)
    strata[:3] = 4  # a stratum of 3 negatives: drawn with replacement
    strata[100:400] = 0
    rest, pools = stratum_pools(neg, strata)
    assert len(rest) == 697 and [len(p) for p in pools] == [300, 3]
    idx = epoch_negatives(np.random.default_rng(0), 100, rest, pools, share=0.5)
    assert len(idx) == 100  # k kept: 25 + 25 from the two strata, 50 from the rest
    s = strata[idx]
    assert (s == 0).sum() == 25 and (s == 4).sum() == 25 and (s == -1).sum() == 50
    assert len(np.unique(idx[s == -1])) == 50 and set(idx[s == 4]) <= {0, 1, 2}


def test_hard_strata_kind_times_load() -> None:
    col = PREDICTOR_METRICS.index("cpu0_load") * len(FEATURES) + FEATURES.index("mean")
    x = np.zeros((4, 6, 70), np.float32)
    x[:, -1, col] = [0.5, 20.0, 20.0, 0.5]  # idle, busy, busy, idle (last window decides)
    x[3, 0, col] = 30.0  # busy only in the 7-min window: still idle
    nd = ANOMALY_KINDS.index("network_degradation") + 1
    an = np.array([nd, nd, 0, 1], np.int8)
    seq = Sequences(x=x, y=np.zeros(4, np.int64), group=-np.arange(1, 5), has_precursor=np.zeros(4, bool),
                    node=np.zeros(4, np.int64), time_s=np.zeros(4), anomaly=an)
    assert list(busy(x)) == [False, True, True, False]
    assert list(hard_strata(seq)) == [2 * (nd - 1), 2 * (nd - 1) + 1, -1, 0]
    seq.anomaly = None
    assert list(hard_strata(seq)) == [-1] * 4


def test_stratified_weights_by_hand() -> None:
    """2 positives -> negatives weigh 20 in all: 10 over the 4 'rest' negatives, 5 each over strata 0 (2) and 3 (1)."""
    y = np.array([1, 1, 0, 0, 0, 0, 0, 0, 0])
    st = np.array([-1, -1, -1, -1, -1, -1, 0, 0, 3])
    w = stratified_weights(y, st)
    assert np.allclose(w, [1, 1, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 5.0])
    assert np.isclose(w.sum(), 2 * 11)
    w = stratified_weights(y, np.full(9, -1))  # no stratum: the plain 10:1 class weight
    assert np.allclose(w[2:], 20 / 7) and np.allclose(w[:2], 1)
    w = stratified_weights(y[[0, 1, 6, 7, 8]], st[[0, 1, 6, 7, 8]])  # strata only: they take all the negatives' weight
    assert np.allclose(w, [1, 1, 5, 5, 10])


def test_voter_threshold_ignores_hard_negatives() -> None:
    """Hard negatives (natural=False) train the voter but never set its threshold: here they look exactly like the
    failures, so counting them in the validation fpr would push the threshold above every failure."""
    g = np.random.default_rng(2)
    lo = np.concatenate([g.normal(8, 1, (60, 6)), g.normal(-8, 1, (1000, 6)), g.normal(8, 1, (100, 6))])
    y = np.r_[np.ones(60), np.zeros(1100)].astype(np.int64)
    groups = np.r_[np.arange(60), 1000 + np.arange(1000) // 50, 5000 + np.arange(100) // 50]
    strata = np.r_[np.full(1060, -1), np.zeros(100)]
    nat = np.r_[np.ones(1060, bool), np.zeros(100, bool)]
    fit = fit_lstm_voter(lo.astype(np.float32), y, target_fpr=1e-3, epochs=30, groups=groups, strata=strata, natural=nat)
    assert (fit.score(lo[:60].astype(np.float32)) >= fit.threshold).mean() > 0.9
    counted = fit_lstm_voter(lo.astype(np.float32), y, target_fpr=1e-3, epochs=30, groups=groups, strata=strata)
    assert (counted.score(lo[:60].astype(np.float32)) >= counted.threshold).mean() < 0.5


def test_voter_hard_leaves_the_networks_unchanged() -> None:
    """The cross-fitted outputs on hard node-days are for the voter only: the deployed networks are the same."""
    g = np.random.default_rng(0)

    def seqs(n: int, y: int, group: np.ndarray, an: int = 0, shift: float = 0.0) -> Sequences:
        x = g.normal(shift, 1.0, size=(n, 6, 70)).astype(np.float32)
        return Sequences(x=x, y=np.full(n, y, np.int64), group=group, has_precursor=np.full(n, y == 1),
                         node=np.zeros(n, np.int64), time_s=np.zeros(n), anomaly=np.full(n, an, np.int8))

    pos = seqs(40, 1, np.arange(40), shift=1.0)
    neg = seqs(1000, 0, -1 - np.arange(1000) // 50)
    hard = seqs(200, 0, -1000 - np.arange(200) // 50, an=3, shift=0.5)
    a, _ = fit_ensemble_and_voter(pos, neg, hard=hard, epochs=5, voter_hard=False)
    b, vb = fit_ensemble_and_voter(pos, neg, hard=hard, epochs=5, voter_hard=True)
    assert all(np.array_equal(v, b.state()[k]) for k, v in a.state().items()) and vb is not None
