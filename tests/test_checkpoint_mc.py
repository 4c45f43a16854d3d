"""Monte-Carlo of eq. 3.1 against the analytic eq. 3.8 (Frank ch. 3)."""

from __future__ import annotations

import numpy as np
import pytest

from models.checkpoint import aware_interval, expected_cost
from models.checkpoint_mc import simulate_cost


@pytest.mark.parametrize("w", [0.8, 1.0])
@pytest.mark.parametrize("t", [6.59, 18.99, 116.54])
def test_model_inside_monte_carlo_ci(w: float, t: float) -> None:
    tau = np.array([0.3, 1.0, 2.5, 4.3, 7.7, np.inf])
    mc = simulate_cost(t, tau, 0.5, 24.0, w, failures=20_000, seed=11, confidence=0.999)
    ec = expected_cost(t, tau, 0.5, 24.0, w)
    assert mc.failures >= 10_000
    assert np.all((ec >= mc.lo_h) & (ec <= mc.hi_h)), (ec, mc.mean_h, mc.stderr_h)


def test_monte_carlo_is_reproducible_and_detects_wrong_model() -> None:
    a = simulate_cost(18.99, 4.25, 0.5, 24.0, 0.8, seed=5)
    b = simulate_cost(18.99, 4.25, 0.5, 24.0, 0.8, seed=5)
    assert a.mean_h[0] == b.mean_h[0]
    # Integrating the last interval to (n+1) t_u (the literal printed sum) overstates n_f; MC rejects
    # a cost that is 5% off.
    ec = float(expected_cost(18.99, 4.25, 0.5, 24.0, 0.8))
    assert not (a.lo_h[0] <= ec * 1.05 <= a.hi_h[0])


def test_restart_cost_in_simulation() -> None:
    mc = simulate_cost(18.99, 4.25, 0.5, 24.0, 0.8, failures=20_000, seed=2, restart_h=0.3, confidence=0.999)
    ec = float(expected_cost(18.99, 4.25, 0.5, 24.0, 0.8, restart_h=0.3))
    assert mc.lo_h[0] <= ec <= mc.hi_h[0]


def test_aware_interval_is_cheapest_in_simulation() -> None:
    r = aware_interval(22.51, 0.5, 24.0, 0.8)
    mc = simulate_cost(22.51, np.array([r.tau_h[0], 1.0, 10.0]), 0.5, 24.0, 0.8, failures=20_000, seed=3)
    assert mc.mean_h[0] < mc.mean_h[1] and mc.mean_h[0] < mc.mean_h[2]


def test_mc_bad_input() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        simulate_cost(10.0, 1.0, 0.5, 24.0, failures=1)
    with pytest.raises(ValueError, match="tau"):
        simulate_cost(10.0, -1.0, 0.5, 24.0)
