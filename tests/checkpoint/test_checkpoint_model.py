"""Eq. 3.2-3.14 and Algorithm 1 of Frank ch. 3 (models/checkpoint/intervals.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

from nodewatch.models.checkpoint.intervals import (
    aware_interval,
    aware_interval_loop,
    cost_grid,
    daly_first_order_interval,
    daly_interval,
    expected_cost,
    failure_cdf,
    truncated_mean,
    weibull_scale,
    young_interval,
)


def _cost_by_integration(t: float, tau: float, tc: float, m: float, w: float) -> float:
    """Eq. 3.5a/3.6b integrated numerically, piece by piece (independent of the closed form)."""
    lam = m / math.gamma(1 + 1 / w)

    def pdf(x: float) -> float:
        return w / lam * (x / lam) ** (w - 1) * math.exp(-((x / lam) ** w))

    tu = tau + tc
    n = math.floor(t / tu)
    edges = [i * tu for i in range(n + 1)] + [t]
    fail = 0.0
    for i, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        if b > a:
            fail += quad(lambda x, i=i: (x - i * tau) * pdf(x), a, b, limit=200)[0]
    p_t = 1 - math.exp(-((t / lam) ** w))
    return fail + n * tc * (1 - p_t)


def test_hand_computed_poisson_case() -> None:
    # M=10 h, t=3 h, tc=0.5 h, tau=0.5 h -> t_u=1 h, n=3. By hand:
    # P(1)=0.09516258, P(2)=0.18126925, P(3)=0.25918178; n_f = 3 P(3) - (P1+P2+P3) = 0.24193173
    # mu^t = 10 (1 - 1.3 e^-0.3) = 0.36936313; E_C = 0.36936313 - 0.5*0.24193173 + 1.5*(1-0.25918178) = 1.35962460
    assert float(expected_cost(3.0, 0.5, 0.5, 10.0, 1.0)) == pytest.approx(1.3596246, abs=1e-7)


def test_hand_computed_makespan() -> None:
    from nodewatch.models.checkpoint.intervals import expected_makespan

    # Same job: t = 3 h is the wall clock including the n = 3 checkpoints (eq. 3.8's t), so the
    # makespan is t + expected lost work t_f mod t_u: 3 + mu^t - t_u n_f = 3 + 0.36936313 - 1 * 0.24193173.
    assert float(expected_makespan(3.0, 0.5, 0.5, 10.0, 1.0)) == pytest.approx(3.12743140, abs=1e-7)
    # = t + E_C - t_c (n_f + n (1 - P(t))): E_C minus the checkpoint time t already contains
    assert float(expected_makespan(3.0, 0.5, 0.5, 10.0, 1.0)) == pytest.approx(
        3.0 + 1.3596246 - 0.5 * (0.24193173 + 3 * (1 - 0.25918178)), abs=1e-7
    )
    # restart R adds R P(t); never checkpointing: t + mu^t
    assert float(expected_makespan(3.0, 0.5, 0.5, 10.0, 1.0, restart_h=0.2)) == pytest.approx(
        3.12743140 + 0.2 * 0.25918178, abs=1e-7
    )
    assert float(expected_makespan(3.0, np.inf, 0.5, 10.0, 1.0)) == pytest.approx(3.36936313, abs=1e-7)


@pytest.mark.parametrize("w", [0.5, 0.8, 1.0, 1.7])
@pytest.mark.parametrize("t,tau,tc", [(6.59, 1.3, 0.5), (18.99, 4.25, 0.5), (5.0, 1.0, 0.25), (3.0, 2.9, 0.05)])
def test_closed_form_matches_integration(w: float, t: float, tau: float, tc: float) -> None:
    got = float(expected_cost(t, tau, tc, 24.0, w))
    assert got == pytest.approx(_cost_by_integration(t, tau, tc, 24.0, w), rel=1e-6)


def test_truncated_mean_and_cdf() -> None:
    assert float(truncated_mean(1.0, 1.0, 1.0)) == pytest.approx(1 - 2 / math.e)  # eq. 3.12 Poisson form
    assert float(truncated_mean(1e6, 7.0, 0.8)) == pytest.approx(7.0)  # full mean is M
    assert float(weibull_scale(24.0, 1.0)) == pytest.approx(24.0)
    assert float(failure_cdf(24.0, 24.0, 1.0)) == pytest.approx(1 - math.exp(-1))
    w = 0.8
    lam = 24 / math.gamma(1 + 1 / w)
    assert float(failure_cdf(10.0, 24.0, w)) == pytest.approx(1 - math.exp(-((10 / lam) ** w)))


def test_thesis_failure_probabilities() -> None:
    # Figures 3.4-3.7: M = 24 h, w = 0.8; runtimes 18.99, 6.59, 22.51, 116.54 h give P = 60%, 33%, 65%, 98%.
    p = failure_cdf(np.array([18.99, 6.59, 22.51, 116.54]), 24.0, 0.8)
    np.testing.assert_allclose(p, [0.60, 0.325, 0.65, 0.98], atol=0.006)


def test_classical_intervals() -> None:
    assert float(young_interval(24.0, 0.5)) == pytest.approx(math.sqrt(24.0))
    assert float(daly_first_order_interval(24.0, 0.5)) == pytest.approx(math.sqrt(24.0) + 0.5)
    r = 0.5 / 48
    assert float(daly_interval(24.0, 0.5)) == pytest.approx(math.sqrt(24.0) * (1 + math.sqrt(r) / 3 + r / 9) - 0.5)
    assert float(daly_interval(1.0, 3.0)) == 1.0  # tc >= 2M -> tau = M


def test_vectorised_equals_literal_algorithm_1() -> None:
    cases = [
        (6.59, 0.5, 24.0, 0.8),
        (18.99, 0.5, 24.0, 0.8),
        (30.0, 0.1, 9.0, 1.0),
        (2.0, 0.25, 24.0, 0.6),
        (12.5, 0.25, 3.0, 1.3),
    ]
    t, tc, m, w = (np.array(c) for c in zip(*cases, strict=True))
    vec = aware_interval(t, tc, m, w)
    for i, c in enumerate(cases):
        tu, cost = aware_interval_loop(*c)
        assert vec.period_h[i] == pytest.approx(tu, abs=1e-9) or (np.isinf(tu) and np.isinf(vec.period_h[i]))
        assert vec.cost_h[i] == pytest.approx(cost, rel=1e-9)


def test_grid_bounds_and_never() -> None:
    period, cost = cost_grid(2.0, 0.25, 24.0, 1.0)
    assert period[0] == pytest.approx(1 / 60) and period[-1] == pytest.approx(2.0)
    finite = period[np.isfinite(cost[0])]
    assert finite.min() > 0.25 and finite.max() <= 2.0 - 0.25 + 1e-12
    # A 2-hour Poisson job on a 24-h MTBF with 15-min checkpoints: losing the work is cheaper.
    r = aware_interval(2.0, 0.25, 24.0, 1.0)
    assert r.never[0] and np.isinf(r.tau_h[0])
    assert r.cost_h[0] == pytest.approx(float(truncated_mean(2.0, 24.0, 1.0)))
    assert r.cost_h[0] < np.nanmin(cost[0])


def test_poisson_aware_converges_to_daly() -> None:
    # P(fail) -> 1 (t = 100 M): the aware interval is Daly's higher-order one within one grid step.
    for m, tc in [(24.0, 0.5), (36.0, 0.25), (10.0, 0.1)]:
        r = aware_interval(100 * m, tc, m, 1.0)
        assert abs(r.tau_h[0] - float(daly_interval(m, tc))) <= 1 / 60


def test_weibull_below_one_checkpoints_earlier() -> None:
    t = np.array([4.0, 5.0, 6.0, 8.0, 12.0])
    wb = aware_interval(t, 0.25, 24.0, 0.6)
    po = aware_interval(t, 0.25, 24.0, 1.0)
    assert np.all(wb.tau_h <= po.tau_h)
    assert np.any(wb.tau_h < po.tau_h)
    assert np.all(wb.p_fail > po.p_fail)


def test_never_worse_than_daly_or_young() -> None:
    rng = np.random.default_rng(3)
    s = 400
    t = rng.uniform(1.0, 72.0, s)
    tc = rng.choice([0.1, 0.25, 0.5], s)
    m = rng.uniform(2.0, 500.0, s)
    w = rng.choice([0.6, 0.8, 1.0, 1.4], s)
    classic = np.stack([young_interval(m, tc), daly_interval(m, tc), daly_first_order_interval(m, tc)], axis=1)
    r = aware_interval(t, tc, m, w, extra_tau_h=classic)
    for j in range(3):
        c = expected_cost(t, classic[:, j], tc, m, w)
        assert np.all(r.cost_h <= c + 1e-12)
    # Grid-only (as printed in Algorithm 1): at most a hair above Daly (Daly's tau is off-grid).
    g = aware_interval(t, tc, m, w)
    assert np.all(g.cost_h <= expected_cost(t, classic[:, 1], tc, m, w) * (1 + 1e-3) + 1e-9)


def test_restart_cost_shifts_cost_not_interval() -> None:
    a = aware_interval(20.0, 0.5, 24.0, 0.8)
    b = aware_interval(20.0, 0.5, 24.0, 0.8, restart_h=0.2)
    assert b.tau_h[0] == a.tau_h[0]
    assert b.cost_h[0] == pytest.approx(a.cost_h[0] + 0.2 * a.p_fail[0])


@pytest.mark.parametrize(
    "args,msg",
    [
        ((0.0, 0.5, 24.0, 1.0), "runtime"),
        ((-3.0, 0.5, 24.0, 1.0), "runtime"),
        ((10.0, 0.0, 24.0, 1.0), "checkpoint cost"),
        ((10.0, 0.5, -1.0, 1.0), "MTBF"),
        ((10.0, 0.5, float("nan"), 1.0), "MTBF"),
        ((10.0, 0.5, 24.0, 0.0), "shape"),
        ((10.0, 0.5, 24.0, -0.8), "shape"),
        ((1.0, 1.0, 24.0, 1.0), "shorter than the runtime"),
        ((1.0, 2.0, 24.0, 1.0), "shorter than the runtime"),
        ((10.0, 0.5, 24.0, 1e-6), r"shape 1e-06 is outside the supported range \[0.05, 20\]"),
        ((10.0, 0.5, 24.0, 25.0), "outside the supported range"),
        ((10.0, 1e-12, 24.0, 1.0), r"checkpoint cost .* \(at least one second\)"),
        ((10.0, 0.5, 1e-9, 1.0), r"job MTBF .* \(one minute to 1e6 years\)"),
        ((10.0, 0.5, 1e12, 1.0), "job MTBF"),
        ((9000.0, 0.5, 24.0, 1.0), r"runtime .* \(at most one year\)"),
    ],
)
def test_bad_parameters_one_line_errors(args: tuple, msg: str) -> None:
    with pytest.raises(ValueError, match=msg) as e:
        aware_interval(*args)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=msg):
        expected_cost(args[0], 1.0, *args[1:])


def test_cost_guard() -> None:
    from nodewatch.models.checkpoint.intervals import check_cost

    with pytest.raises(FloatingPointError, match="not finite or exceeds the runtime"):
        check_cost(np.array([0.5, np.nan]), np.array([1.0, 1.0]))
    with pytest.raises(FloatingPointError):
        check_cost(np.array([1.5]), np.array([1.0]))
    assert check_cost(np.array([1.2]), np.array([1.0]), 0.3)[0] == 1.2
    # E_C never exceeds t at the extremes the validation lets through
    c = expected_cost(8766.0, [1 / 3600, 100.0, np.inf], 1 / 3600, 1 / 60, 0.05)
    assert np.all(np.isfinite(c)) and np.all(c <= 8766.0)


def test_bad_tau() -> None:
    with pytest.raises(ValueError, match="tau"):
        expected_cost(10.0, 0.0, 0.5, 24.0)
