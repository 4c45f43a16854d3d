"""The alert budget sets the thresholds (models/anomaly/verdicts.py gumbel_censored_fit, budget_thresholds).

Hand values: a Gumbel(mu, beta) day score exceeds ``mu - beta * ln(-ln(1 - b))`` with probability ``b``
(Coles 2001 Eq. 3.4); with mu = 3, beta = 0.4, b = 0.01 that is 3 + 0.4 * 4.600149 = 4.84006.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import poisson

from nodewatch.models.anomaly.verdicts import budget_thresholds, gumbel_censored_fit


def test_gumbel_fit_recovers_parameters_and_ignores_contamination_above_the_censoring() -> None:
    rng = np.random.default_rng(1)
    s = rng.gumbel(3.0, 0.4, 20_000)
    mu, beta = gumbel_censored_fit(s, 0.5)
    assert mu == pytest.approx(3.0, abs=0.03) and beta == pytest.approx(0.4, abs=0.03)
    # 30% of the "normal" days are anomalies scoring 50-300: censored at the median they only count as "above
    # it": the fit moves up a little (conservative), an uncensored fit (censor_q = 1) follows the anomalies
    dirty = np.concatenate([s[:14_000], rng.uniform(50, 300, 6_000)])
    mu2, beta2 = gumbel_censored_fit(dirty, 0.5)
    assert 0.4 <= beta2 <= 0.7 and 3.0 <= mu2 <= 3.3
    assert gumbel_censored_fit(dirty, 1.0)[1] > 10
    with pytest.raises(ValueError, match="at least 3"):
        gumbel_censored_fit(np.array([1.0, np.nan]))


def test_budget_threshold_by_hand_and_measured_exceedance() -> None:
    rng = np.random.default_rng(2)
    held = rng.gumbel(3.0, 0.4, (2000, 7))  # 2,000 nodes x 7 held-back days of normal day scores
    thr = budget_thresholds(held, 10.0, floor=0.0)
    assert np.median(thr) == pytest.approx(3 + 0.4 * 4.600149, abs=0.1)
    # fresh normal nights: measured false alerts per 1,000 node-days match the budget within the Poisson CI
    nights = rng.gumbel(3.0, 0.4, (2000, 5))
    k, n = int((nights > thr[:, None]).sum()), nights.size
    lo, hi = poisson.ppf([0.005, 0.995], 10.0 / 1000 * n)
    assert lo <= k <= hi, (k, lo, hi)
    # a smaller budget gives higher thresholds; the floor is only a minimum; a bad budget is an error
    assert (budget_thresholds(held, 1.0, 0.0) > thr).all()
    assert budget_thresholds(held, 10.0, floor=1e6).min() == 1e6
    for bad in (0.0, 1000.0, -1.0):
        with pytest.raises(ValueError, match="alert budget"):
            budget_thresholds(held, bad, 0.0)


def test_per_node_location_shift_and_contaminated_nodes() -> None:
    rng = np.random.default_rng(3)
    held = rng.gumbel(3.0, 0.4, (200, 7))
    held[0] += 2.0  # a node whose normal days are noisier: its threshold moves up with them
    held[1, :4] = 300.0  # anomalies on 4 of 7 held-back days: the low quantile keeps the threshold near the others
    held[2, :] = np.nan  # no held-back day: the pooled threshold
    thr = budget_thresholds(held, 10.0, floor=0.0)
    others = np.median(thr[3:])
    assert thr[0] == pytest.approx(others + 2.0, abs=0.6)
    assert thr[1] < others + 3.0
    assert thr[2] == pytest.approx(others, abs=0.3)
    # no usable scores at all: the floor
    assert budget_thresholds(np.full((3, 7), np.nan), 10.0, floor=6.0).tolist() == [6.0, 6.0, 6.0]


def test_union_bound_floor_by_hand_and_a_point_mass_of_day_scores() -> None:
    from nodewatch.models.anomaly.verdicts import Evidence, VerdictConfig, calibrate, union_bound_floor

    # Eq. B1: 57 metrics x 96 windows, budget 10 per 1,000: Phi^-1(1 - 0.01 / 10,944) = Phi^-1(1 - 9.1374e-7) = 4.7716
    assert union_bound_floor(10.0, 57 * 96) == pytest.approx(4.7716, abs=1e-4)
    assert union_bound_floor(10.0, 1) == pytest.approx(2.5758, abs=1e-4)  # one test: the two-sided 1% level
    with pytest.raises(ValueError):
        union_bound_floor(10.0, 0)
    # clean held-back days: every node-day scores the same usual step (3.07), a few just below it: the censored
    # Gumbel fit collapses onto the point mass and the threshold sits at it (every node would alert on a normal
    # night); the floor keeps it at the budget's union-bound level of 6 metrics x 96 windows
    rng = np.random.default_rng(0)
    held = []
    for _ in range(7):
        s = np.full((64, 96), 3.07)
        s[rng.integers(0, 64, 3), rng.integers(0, 96, 3)] = 2.9
        s[:, ::2] = 1.0  # the usual step is in every other window: the day score (2 of 3) is exactly 3.07
        held.append(Evidence(np.zeros((64, 96, 6)), np.zeros((64, 96, 6), np.float32), s, np.zeros_like(s)))
    off = calibrate(held, VerdictConfig(union_floor=False)).node
    on = calibrate(held, VerdictConfig()).node
    assert np.median(off) < 3.2
    assert on.min() == pytest.approx(union_bound_floor(10.0, 6 * 96), abs=1e-9)  # 4.3822
