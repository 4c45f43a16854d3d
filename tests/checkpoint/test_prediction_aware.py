"""Prediction-aware checkpointing (Aupy et al. JPDC 2014 on Frank eq. 3.1/3.8) against its Monte-Carlo."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from nodewatch.models.checkpoint.intervals import daly_interval, expected_cost, young_interval
from nodewatch.models.checkpoint.mc import simulate_cost
from nodewatch.models.checkpoint.prediction import (
    Predictor,
    aupy_period,
    expected_cost_with_predictor,
    false_alarm_rate,
    first_order_waste,
    job_level_rates,
    predictor_pays,
    simulate_cost_with_predictor,
    trust_threshold,
)


def _shapes() -> list[tuple]:
    """24 job shapes: runtime, tau, t_c, MTBF, Weibull shape, recall, precision, C_p, policy (fixed seed)."""
    rng = np.random.default_rng(2014)
    out = []
    for k in range(24):
        t = float(rng.choice([6.0, 24.0, 72.0, 200.0]))
        tc = float(rng.choice([1 / 60, 0.1, 0.5]))
        m = float(rng.choice([5.0, 20.0, 100.0, 400.0]))
        w = float(rng.choice([0.7, 1.0, 1.5]))
        tau = float(max(young_interval(m, tc), 2 * tc)) * float(rng.choice([0.5, 1.0, 2.0]))
        r = float(rng.choice([0.3, 0.6, 0.85]))
        p = float(rng.choice([0.3, 0.7, 0.97]))
        cp = tc * float(rng.choice([0.3, 1.0]))
        pol = ("threshold", "trust")[k % 2]
        out.append((t, tau, tc, m, w, r, p, cp, pol))
    return out


SHAPES = _shapes()


def test_analytic_inside_monte_carlo_ci_on_24_shapes() -> None:
    inside = 0
    misses = []
    for k, (t, tau, tc, m, w, r, p, cp, pol) in enumerate(SHAPES):
        pred = Predictor(r, p, cp)
        a = float(expected_cost_with_predictor(t, tau, tc, m, pred, w, policy=pol))
        mc = simulate_cost_with_predictor(t, tau, tc, m, pred, w, failures=20_000, seed=k, policy=pol)
        if mc.lo_h[0] <= a <= mc.hi_h[0]:
            inside += 1
        else:
            misses.append((k, a, float(mc.lo_h[0]), float(mc.hi_h[0])))
    assert inside >= 23, misses  # 99 % CIs: ~0.24 expected misses in 24
    assert inside >= 20


def test_negative_control_detects_a_wrong_model() -> None:
    """Dropping the false-warning term or the recall puts the analytic value outside the CI: the check can fail."""
    outside = 0
    for k, (t, tau, tc, m, w, r, p, cp, pol) in enumerate(SHAPES):
        pred = Predictor(r, p, cp)
        wrong = float(expected_cost_with_predictor(t, tau, tc, m, Predictor(r, 1.0, cp), w, policy=pol))
        mc = simulate_cost_with_predictor(t, tau, tc, m, pred, w, failures=20_000, seed=k, policy=pol)
        outside += not (mc.lo_h[0] <= wrong <= mc.hi_h[0])
    assert outside >= 5  # measured: 7 of 24 (the correct model: 24 of 24 inside)


def test_recall_zero_and_ignore_are_eq_3_8_and_its_monte_carlo() -> None:
    pred = Predictor(0.0, 0.5, 0.1)
    for pol in ("threshold", "trust", "ignore"):
        a = expected_cost_with_predictor(24.0, 2.0, 0.1, 20.0, pred, 0.8, policy=pol)
        assert a == pytest.approx(expected_cost(24.0, 2.0, 0.1, 20.0, 0.8))
    pred = Predictor(0.8, 0.9, 0.1)
    a = expected_cost_with_predictor(24.0, 2.0, 0.1, 20.0, pred, 0.8, policy="ignore")
    assert a == pytest.approx(expected_cost(24.0, 2.0, 0.1, 20.0, 0.8))
    ours = simulate_cost_with_predictor(24.0, 2.0, 0.1, 20.0, pred, 0.8, seed=3, policy="ignore")
    base = simulate_cost(24.0, 2.0, 0.1, 20.0, 0.8, seed=3)
    assert ours.mean_h[0] == pytest.approx(base.mean_h[0])


def test_never_checkpointing_with_a_predictor() -> None:
    pred = Predictor(0.7, 0.9, 0.05)
    a = float(expected_cost_with_predictor(10.0, np.inf, 0.1, 20.0, pred))
    mc = simulate_cost_with_predictor(10.0, np.inf, 0.1, 20.0, pred, failures=50_000, seed=1)
    assert mc.lo_h[0] <= a <= mc.hi_h[0]


def test_aupy_first_order_formulas() -> None:
    m, c = 50.0, 0.2
    pred = Predictor(0.6, 0.8, 0.1)
    # T = sqrt(2 M C / (1 - r)) minimises the trust-all waste C/T + (1-r) T/(2M) + r C_p/(p M)
    t_trust = float(aupy_period(m, c, pred))
    assert t_trust == pytest.approx(np.sqrt(2 * m * c / 0.4))
    best = minimize_scalar(lambda t: float(first_order_waste(t, m, c, pred, "trust")), bounds=(0.3, 50), method="bounded")
    assert best.x == pytest.approx(t_trust, rel=1e-4)
    # refined period minimises the threshold-rule waste
    t_ref = float(aupy_period(m, c, pred, refined=True))
    assert t_ref == pytest.approx(np.sqrt((2 * m * c - 0.6 * (0.1 / 0.8) ** 2) / 0.4))
    best = minimize_scalar(lambda t: float(first_order_waste(t, m, c, pred)), bounds=(0.3, 50), method="bounded")
    assert best.x == pytest.approx(t_ref, rel=1e-4)
    # hand value: T = 10, waste = C/T + (1-r)T/(2M) + r/(pM) (p beta^2/2 + C_p (T - beta))/T
    beta = 0.1 / 0.8
    hand = 0.2 / 10 + 0.4 * 10 / 100 + 0.6 / (0.8 * 50) * (0.8 * beta**2 / 2 + 0.1 * (10 - beta)) / 10
    assert float(first_order_waste(10.0, m, c, pred)) == pytest.approx(hand)
    # no predictor: Young
    assert float(first_order_waste(10.0, m, c, None)) == pytest.approx(0.2 / 10 + 10 / 100)
    assert trust_threshold(pred) == pytest.approx(0.125)
    assert trust_threshold(pred, "trust") == 0.0 and trust_threshold(pred, "ignore") == np.inf
    assert false_alarm_rate(pred, 50.0) == pytest.approx(0.6 * 0.2 / (0.8 * 50))


def test_threshold_rule_is_never_worse_than_trusting_everything() -> None:
    for t, tau, tc, m, w, r, p, cp, _ in SHAPES:
        pred = Predictor(r, p, cp)
        thr = expected_cost_with_predictor(t, tau, tc, m, pred, w, policy="threshold")
        trust = expected_cost_with_predictor(t, tau, tc, m, pred, w, policy="trust")
        assert thr <= trust + 1e-12


def test_when_a_predictor_does_not_pay() -> None:
    t, tc, m = 48.0, 0.25, 20.0
    daly = float(daly_interval(m, tc))
    good = predictor_pays(t, tc, m, daly, Predictor(0.85, 0.97, 0.1))
    assert good.pays and good.saving > 0.1
    bad = predictor_pays(t, tc, m, daly, Predictor(0.85, 0.02, 0.25))
    assert not bad.pays and "precision" in bad.reason
    # node-level predictor at scale: the thesis's 1NN rates on 1024 nodes vs. the LSTM voter
    one = job_level_rates(0.8461, 0.00292, 0.0000099653, 1024, 15 / 3600)
    lstm = job_level_rates(0.7448, 0.00004, 0.0000099653, 1024, 15 / 3600)
    assert one.uc == pytest.approx(0.9499, abs=1e-4) and one.precision < 0.02
    assert lstm.precision > one.precision * 10
    mj = one.mtbf_h
    assert mj == pytest.approx(15 / 3600 / (1 - (1 - 0.0000099653) ** 1024))
    assert not predictor_pays(t, tc, mj, float(daly_interval(mj, tc)), Predictor(one.recall, one.precision, 0.1)).pays


@pytest.mark.parametrize(
    ("r", "p", "cp"), [(1.0, 0.5, 0.1), (-0.1, 0.5, 0.1), (0.5, 0.0, 0.1), (0.5, 1.1, 0.1), (0.5, 0.5, 0.0),
                       (float("nan"), 0.5, 0.1), (0.5, 0.5, float("inf"))]
)
def test_predictor_rejects_bad_rates(r: float, p: float, cp: float) -> None:
    with pytest.raises(ValueError):
        Predictor(r, p, cp)


def test_bad_policy_and_few_failures() -> None:
    pred = Predictor(0.5, 0.5, 0.1)
    with pytest.raises(ValueError):
        trust_threshold(pred, "maybe")
    with pytest.raises(ValueError):
        simulate_cost_with_predictor(10, 1, 0.1, 20, pred, failures=100)
    with pytest.raises(ValueError):
        job_level_rates(0.5, 0.01, 1e-5, 10, 0.0)
