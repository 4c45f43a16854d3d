"""Monte-Carlo of eq. 3.1 against the analytic eq. 3.8 (Frank ch. 3)."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.checkpoint.intervals import aware_interval, expected_cost, failure_cdf, truncated_mean
from nodewatch.models.checkpoint.mc import simulate_cost


@pytest.mark.parametrize("w", [0.8, 1.0])
@pytest.mark.parametrize("t", [6.59, 18.99, 116.54])
def test_model_inside_monte_carlo_ci(w: float, t: float) -> None:
    tau = np.array([0.3, 1.0, 2.5, 4.3, 7.7, np.inf])
    mc = simulate_cost(t, tau, 0.5, 24.0, w, failures=20_000, seed=11, confidence=0.999)
    ec = expected_cost(t, tau, 0.5, 24.0, w)
    assert mc.failures >= 10_000
    assert np.all((ec >= mc.lo_h) & (ec <= mc.hi_h)), (ec, mc.mean_h, mc.stderr_h)


def _printed_eq_3_7_cost(t: float, tau: float, tc: float, m: float, w: float) -> float:
    """Eq. 3.8 with eq. 3.7 exactly as printed: the last term uses P((n+1) t_u), past the job's end."""
    tu = tau + tc
    n = int(np.floor(t / tu))
    i = np.arange(0, n + 1)
    n_f = float(np.sum(i * (failure_cdf((i + 1) * tu, m, w) - failure_cdf(i * tu, m, w))))
    return float(truncated_mean(t, m, w)) - tau * n_f + n * tc * (1 - float(failure_cdf(t, m, w)))


def test_monte_carlo_is_reproducible_and_detects_wrong_model() -> None:
    a = simulate_cost(22.51, 2.0, 0.5, 24.0, 0.8, failures=200_000, seed=5, confidence=0.999)
    b = simulate_cost(22.51, 2.0, 0.5, 24.0, 0.8, failures=200_000, seed=5, confidence=0.999)
    assert a.mean_h[0] == b.mean_h[0]
    # t = 22.51 h, t_u = 2.5 h: n = 9 and the last interval [22.5, 22.51] is cut short, so the printed
    # P((n+1) t_u) = P(25) differs from the clipped P(t). The model (clipped) is inside the 99.9 % CI of
    # the simulation of eq. 3.1; the printed variant is far outside it.
    ec = float(expected_cost(22.51, 2.0, 0.5, 24.0, 0.8))
    printed = _printed_eq_3_7_cost(22.51, 2.0, 0.5, 24.0, 0.8)
    assert ec == pytest.approx(3.232, abs=1e-3) and printed == pytest.approx(2.679, abs=1e-3)
    assert a.lo_h[0] <= ec <= a.hi_h[0], (ec, a.lo_h[0], a.hi_h[0])
    assert not (a.lo_h[0] <= printed <= a.hi_h[0])
    # also at the thesis's F = 10,000, for several seeds (printed variant ~36 standard errors off)
    for seed in (0, 1, 2):
        mc = simulate_cost(22.51, 2.0, 0.5, 24.0, 0.8, failures=10_000, seed=seed, confidence=0.999)
        assert mc.lo_h[0] <= ec <= mc.hi_h[0] and not (mc.lo_h[0] <= printed <= mc.hi_h[0])


def test_at_least_10000_failures() -> None:
    with pytest.raises(ValueError, match="at least 10,000 simulated failures"):
        simulate_cost(10.0, 1.0, 0.5, 24.0, failures=9_999)
    few = simulate_cost(10.0, 1.0, 0.5, 24.0, failures=500, allow_few_failures=True)  # simulator unit test only
    assert few.failures == 500


def test_restart_cost_in_simulation() -> None:
    mc = simulate_cost(18.99, 4.25, 0.5, 24.0, 0.8, failures=20_000, seed=2, restart_h=0.3, confidence=0.999)
    ec = float(expected_cost(18.99, 4.25, 0.5, 24.0, 0.8, restart_h=0.3))
    assert mc.lo_h[0] <= ec <= mc.hi_h[0]


def test_aware_interval_is_cheapest_in_simulation() -> None:
    r = aware_interval(22.51, 0.5, 24.0, 0.8)
    mc = simulate_cost(22.51, np.array([r.tau_h[0], 1.0, 10.0]), 0.5, 24.0, 0.8, failures=20_000, seed=3)
    assert mc.mean_h[0] < mc.mean_h[1] and mc.mean_h[0] < mc.mean_h[2]


def test_mc_bad_input() -> None:
    # F >= 10,000 as in the thesis; the override is for tests of the simulator itself
    with pytest.raises(ValueError, match="at least 10,000 simulated failures"):
        simulate_cost(10.0, 1.0, 0.5, 24.0, failures=2000)
    with pytest.raises(ValueError, match="at least 2 "):
        simulate_cost(10.0, 1.0, 0.5, 24.0, failures=1, allow_few_failures=True)
    few = simulate_cost(10.0, 1.0, 0.5, 24.0, failures=50, allow_few_failures=True)
    assert few.failures == 50 and np.isfinite(few.mean_h).all()
    with pytest.raises(ValueError, match="tau"):
        simulate_cost(10.0, -1.0, 0.5, 24.0)
