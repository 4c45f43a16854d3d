"""Stratified hard negatives in the networks' epoch sample (issue 18: busy degraded node-days)."""

from __future__ import annotations

import numpy as np

from nodewatch.models.predict.ensemble import epoch_negatives, stratum_pools
from nodewatch.models.predict.features import FEATURES
from nodewatch.tasks.predict.dataset import ANOMALY_KINDS, PREDICTOR_METRICS, Sequences, busy, hard_strata


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
