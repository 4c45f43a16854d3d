"""Monte-Carlo estimate of the checkpoint cost ``S_hat`` of Frank's eq. 3.1.

For F sampled failure times ``t_f`` (Weibull with mean ``M`` and shape ``w``, eq. 3.9-3.10)::

    S_hat = 1/F sum_f  t_c floor(min(t, t_f) / (tau + t_c))      (3.1a)
                     + t_f mod (tau + t_c)   if t_f < t            (3.1b)

(plus an optional restart cost ``R`` for every failed run). The thesis uses F = 10,000 (sec. 3.4),
and :func:`simulate_cost` refuses fewer (:data:`MIN_FAILURES`); this module returns the mean with a
normal-approximation confidence interval so tests can check that the analytic eq. 3.8
(:func:`nodewatch.models.checkpoint.intervals.expected_cost`) lies inside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from nodewatch.models.checkpoint.intervals import validate_job, weibull_scale

MIN_FAILURES = 10_000
"""Fewest simulated failures :func:`simulate_cost` accepts: the thesis's F = 10,000 (Frank, sec. 3.4)."""


@dataclass(frozen=True)
class MonteCarloCost:
    """Mean simulated cost (hours), its standard error and a two-sided confidence interval."""

    mean_h: np.ndarray
    stderr_h: np.ndarray
    lo_h: np.ndarray
    hi_h: np.ndarray
    failures: int


def sample_failure_times(mtbf_h: float, shape: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` failure times from the Weibull of Frank eq. 3.9 with mean ``mtbf_h`` (eq. 3.10)."""
    return float(weibull_scale(mtbf_h, shape)) * rng.weibull(shape, size=n)


def simulate_cost(
    runtime_h: float,
    tau_h: np.typing.ArrayLike,
    ckpt_cost_h: float,
    mtbf_h: float,
    shape: float = 1.0,
    failures: int = 10_000,
    seed: int = 0,
    restart_h: float = 0.0,
    confidence: float = 0.99,
    allow_few_failures: bool = False,
) -> MonteCarloCost:
    """Simulate eq. 3.1 (Frank, sec. 3.2) for one job and one or more intervals ``tau_h``.

    The same ``failures`` failure times are used for every interval (common random numbers), so
    differences between intervals are estimated with little noise. ``tau_h = inf`` is "never".
    ``failures`` must be at least :data:`MIN_FAILURES` (the thesis's F = 10,000);
    ``allow_few_failures=True`` lifts that to 2 and exists only for unit tests of the simulator
    itself, never for validating a model.
    """
    lowest = 2 if allow_few_failures else MIN_FAILURES
    if failures < lowest:
        raise ValueError(f"need at least {lowest:,} simulated failures (Frank sec. 3.4: F = 10,000), got {failures:,}")
    t, tc, m, w = (float(a) for a in validate_job(runtime_h, ckpt_cost_h, mtbf_h, shape))
    tau = np.atleast_1d(np.asarray(tau_h, float))
    if np.any(np.isnan(tau)) or np.any(tau <= 0):
        raise ValueError("checkpoint interval tau must be > 0 hours (use inf for never)")
    rng = np.random.default_rng(seed)
    tf = sample_failure_times(m, w, failures, rng)[None, :]
    tu = (tau + tc)[:, None]
    failed = tf < t
    n_ckpt = np.where(np.isfinite(tu), np.floor(np.minimum(t, tf) / tu), 0.0)
    lost = np.where(np.isfinite(tu), np.mod(tf, np.where(np.isfinite(tu), tu, 1.0)), tf)
    cost = tc * n_ckpt + np.where(failed, lost + restart_h, 0.0)
    mean = cost.mean(axis=1)
    se = cost.std(axis=1, ddof=1) / np.sqrt(failures)
    z = float(norm.ppf(0.5 + confidence / 2.0))
    return MonteCarloCost(mean_h=mean, stderr_h=se, lo_h=mean - z * se, hi_h=mean + z * se, failures=failures)
