"""Checkpoint-interval math: Young, Daly and Frank's failure-probability-aware interval.

All times are in hours. Notation follows Frank (thesis, ch. 3): ``t`` is the runtime of the job as
eq. 3.1-3.8 use it, i.e. its wall-clock time *including* the checkpoints it writes (sec. 3.2:
``t = t_b + n t_c`` with ``t_b`` the base runtime); like the thesis's Algorithm 1 and its experiments
(Fig. 3.4-3.7, Table 3.1) the solver takes ``t`` as given and compares intervals at that ``t``
(``floor(t / t_u)`` checkpoints fit in it; the job's useful compute is ``t - n t_c``). ``t_c`` is the
cost of one checkpoint, ``tau`` the compute time between two checkpoints and
``t_u = tau + t_c`` one full period; ``M`` is the MTBF *of the job* (eq. 3.14, see
:func:`nodewatch.models.checkpoint.failures.job_mtbf`) and ``w`` the Weibull shape (``w = 1`` is Poisson, eq. 3.9-3.10).

The aware expected cost is eq. 3.8::

    E_C = mu^t - tau * n_f + floor(t / t_u) * t_c * (1 - P(t))          (3.8a + 3.8b)

with ``mu^t`` the first right-truncated moment (eq. 3.11-3.12), ``P`` the failure CDF (eq. 3.13) and
``n_f`` the expected number of completed checkpoints of a job that fails before ``t`` (eq. 3.7).
Eq. 3.7 splits the integral of eq. 3.6c, which runs over ``[0, t]``, into the pieces where
``floor(x / t_u)`` is constant; the last piece is the shorter interval ``[n t_u, t]``
(``n = floor(t / t_u)``), so its upper CDF value is ``P(t)``, not ``P((n+1) t_u)``. Summing by parts::

    n_f = sum_{i=0}^{n} i [P(min((i+1) t_u, t)) - P(i t_u)] = n P(t) - sum_{i=1}^{n} P(i t_u)

which is what this module evaluates (and what the Monte-Carlo of eq. 3.1 in
:mod:`nodewatch.models.checkpoint.mc` converges to). An optional restart cost ``R`` (Assumption 2: part of the
re-queued job) adds ``R * P(t)``; it does not move the optimum.

Algorithm 1 scans ``t_u`` on a one-minute grid ``1/60, 2/60, ..., t - t_c`` hours. All grid points
are multiples of the step, so ``P`` is evaluated once per grid point and shape, and the sums
``sum_i P(i t_u)`` for every ``t_u`` are one sparse "sum over multiples" matrix product: the solver is
vectorised over the grid and over many job shapes at once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import gamma, gammainc

GRID_STEP_H = 1.0 / 60.0
"""Resolution of Algorithm 1's search grid: one minute (Frank, sec. 3.3.2)."""

_EPS = 1e-9

HOURS_PER_YEAR = 8766.0
SHAPE_RANGE: tuple[float, float] = (0.05, 20.0)
"""Accepted Weibull shapes: ``gamma(1 + 1/w)`` overflows float64 below ``w ~ 0.0058`` and shapes outside
[0.05, 20] are not failure processes any fitted HPC trace shows (LANL: 0.6-0.9; thesis: 0.8)."""
MIN_CKPT_COST_H = 1.0 / 3600.0
"""Smallest checkpoint cost accepted: one second."""
MTBF_RANGE_H: tuple[float, float] = (1.0 / 60.0, 1e6 * HOURS_PER_YEAR)
"""Accepted job MTBF: one minute to a million years."""
MAX_RUNTIME_H = HOURS_PER_YEAR
"""Longest runtime accepted: one year."""


# --------------------------------------------------------------------------- validation
def _positive(name: str, value: np.typing.ArrayLike) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        bad = float(a[~(np.isfinite(a) & (a > 0))].ravel()[0])
        raise ValueError(f"{name} must be a positive finite number of hours, got {bad!r}")
    return a


def _shape(value: np.typing.ArrayLike) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        bad = float(a[~(np.isfinite(a) & (a > 0))].ravel()[0])
        raise ValueError(f"Weibull shape must be > 0, got {bad!r}")
    lo, hi = SHAPE_RANGE
    if np.any((a < lo) | (a > hi)):
        bad = float(a[(a < lo) | (a > hi)].ravel()[0])
        raise ValueError(f"Weibull shape {bad:g} is outside the supported range [{lo:g}, {hi:g}]")
    return a


def _in_range(name: str, a: np.ndarray, lo: float, hi: float, what: str) -> None:
    if np.any((a < lo) | (a > hi)):
        bad = float(a[(a < lo) | (a > hi)].ravel()[0])
        raise ValueError(f"{name} {bad:.3g} h is outside the supported range ({what})")


def check_cost(cost_h: np.ndarray, runtime_h: np.ndarray, restart_h: np.typing.ArrayLike = 0.0) -> np.ndarray:
    """Guard on eq. 3.8's result: finite and not above what is possible (``0 <= E_C <= t + R``).

    Both cases of eq. 3.3 are at most ``t`` (``C_ok = n t_c <= t``; ``C_fail <= t_f <= t``), so a value
    outside ``[0, t + R]`` (beyond rounding) is a numerical failure, raised as one line.
    """
    c = np.asarray(cost_h, float)
    lim = np.asarray(runtime_h, float) + np.asarray(restart_h, float)
    bad = ~np.isfinite(c) | (c < -1e-9 * lim) | (c > lim * (1 + 1e-9))
    if np.any(bad):
        i = int(np.argmax(np.broadcast_to(bad, c.shape).ravel()))
        raise FloatingPointError(
            f"expected cost {c.ravel()[i]!r} h is not finite or exceeds the runtime "
            f"{np.broadcast_to(lim, c.shape).ravel()[i]:g} h: parameters out of numerical range"
        )
    return c


def _nonnegative(name: str, value: np.typing.ArrayLike) -> np.ndarray:
    a = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name} must be >= 0 hours, got {float(a[~(np.isfinite(a) & (a >= 0))].ravel()[0])!r}")
    return a


def validate_job(
    runtime_h: np.typing.ArrayLike,
    ckpt_cost_h: np.typing.ArrayLike,
    mtbf_h: np.typing.ArrayLike,
    shape: np.typing.ArrayLike = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Check and broadcast job parameters (Frank, sec. 3.3.1 vector ``s = (t_c, tau, M, t, t_f)``).

    ``t`` is the job's runtime as in eq. 3.1-3.8: its wall-clock time *including* the checkpoints it
    writes (Frank sec. 3.2, ``t = t_b + n t_c``). Raises one-line ``ValueError`` for non-positive
    runtime/checkpoint cost/MTBF, ``t_c >= t`` (a job that cannot complete a single checkpoint) and
    absurd magnitudes: shape outside :data:`SHAPE_RANGE`, checkpoint cost under one second, job MTBF
    outside one minute .. 1e6 years, runtime over one year.
    """
    t = _positive("runtime", runtime_h)
    tc = _positive("checkpoint cost", ckpt_cost_h)
    m = _positive("MTBF", mtbf_h)
    w = _shape(shape)
    _in_range("runtime", t, 0.0, MAX_RUNTIME_H, "at most one year")
    _in_range("checkpoint cost", tc, MIN_CKPT_COST_H, np.inf, "at least one second")
    _in_range("job MTBF", m, *MTBF_RANGE_H, "one minute to 1e6 years")
    t, tc, m, w = np.broadcast_arrays(t, tc, m, w)
    if np.any(tc >= t):
        i = int(np.argmax((tc >= t).ravel()))
        raise ValueError(f"checkpoint cost {tc.ravel()[i]:g} h must be shorter than the runtime {t.ravel()[i]:g} h")
    return t.astype(float), tc.astype(float), m.astype(float), w.astype(float)


# --------------------------------------------------------------------------- failure distribution
def weibull_scale(mtbf_h: np.typing.ArrayLike, shape: np.typing.ArrayLike) -> np.ndarray:
    """Weibull scale ``lambda_w = M / Gamma(1 + 1/w)`` so that the mean is ``M`` (Frank, eq. 3.10)."""
    return np.asarray(mtbf_h, float) / gamma(1.0 + 1.0 / np.asarray(shape, float))


def failure_cdf(x_h: np.typing.ArrayLike, mtbf_h: np.typing.ArrayLike, shape: np.typing.ArrayLike) -> np.ndarray:
    """``P(x)``: probability of a failure before ``x`` (Frank, eq. 3.13; ``shape = 1`` is Poisson)."""
    x = np.asarray(x_h, float)
    lam = weibull_scale(mtbf_h, shape)
    return -np.expm1(-np.power(np.maximum(x, 0.0) / lam, shape))


def truncated_mean(t_h: np.typing.ArrayLike, mtbf_h: np.typing.ArrayLike, shape: np.typing.ArrayLike) -> np.ndarray:
    """First right-truncated moment ``mu^t = int_0^t x p(x) dx`` (Frank, eq. 3.11-3.12).

    ``mu^t = M * gammainc(1 + 1/w, (t / lambda_w)^w)`` with scipy's regularised lower incomplete
    gamma; for ``w = 1`` this equals the Poisson form ``M (1 - (t/M + 1) exp(-t/M))``.
    """
    w = np.asarray(shape, float)
    lam = weibull_scale(mtbf_h, w)
    return np.asarray(mtbf_h, float) * gammainc(1.0 + 1.0 / w, np.power(np.asarray(t_h, float) / lam, w))


# --------------------------------------------------------------------------- classical intervals
def young_interval(mtbf_h: np.typing.ArrayLike, ckpt_cost_h: np.typing.ArrayLike) -> np.ndarray:
    """Young's compute time between checkpoints ``tau = sqrt(2 M t_c)`` (Frank, sec. 3.1; Young 1974)."""
    return np.sqrt(2.0 * _positive("MTBF", mtbf_h) * _positive("checkpoint cost", ckpt_cost_h))


def daly_first_order_interval(mtbf_h: np.typing.ArrayLike, ckpt_cost_h: np.typing.ArrayLike) -> np.ndarray:
    """Daly's interval as quoted by Frank, ``tau = sqrt(2 M t_c) + t_c`` (Frank, sec. 3.1)."""
    tc = _positive("checkpoint cost", ckpt_cost_h)
    return np.sqrt(2.0 * _positive("MTBF", mtbf_h) * tc) + tc


def daly_interval(mtbf_h: np.typing.ArrayLike, ckpt_cost_h: np.typing.ArrayLike) -> np.ndarray:
    """Daly's (2006) higher-order estimate used in Frank's comparisons (sec. 3.4, ref. [32]).

    ``tau = sqrt(2 t_c M) [1 + 1/3 sqrt(t_c/(2M)) + 1/9 (t_c/(2M))] - t_c`` for ``t_c < 2M``,
    else ``tau = M``.
    """
    m = _positive("MTBF", mtbf_h)
    tc = _positive("checkpoint cost", ckpt_cost_h)
    r = tc / (2.0 * m)
    tau = np.sqrt(2.0 * tc * m) * (1.0 + np.sqrt(r) / 3.0 + r / 9.0) - tc
    return np.where(tc < 2.0 * m, tau, m)


# --------------------------------------------------------------------------- eq. 3.8 at any interval
def _eq38_terms(
    runtime_h: np.typing.ArrayLike,
    tau_h: np.typing.ArrayLike,
    ckpt_cost_h: np.typing.ArrayLike,
    mtbf_h: np.typing.ArrayLike,
    shape: np.typing.ArrayLike,
    restart_h: np.typing.ArrayLike,
) -> tuple[np.ndarray, ...]:
    """Broadcast inputs and the pieces of eq. 3.8: ``(t, tc, tau, r, n, P(t), mu^t, n_f)``."""
    t, tc, m, w = validate_job(runtime_h, ckpt_cost_h, mtbf_h, shape)
    tau = np.asarray(tau_h, float)
    if np.any(np.isnan(tau)) or np.any(tau <= 0):
        raise ValueError("checkpoint interval tau must be > 0 hours (use inf for never)")
    r = _nonnegative("restart cost", restart_h)
    t, tc, m, w, tau, r = np.broadcast_arrays(t, tc, m, w, tau, r)
    tu = tau + tc
    n = np.where(np.isfinite(tu), np.floor(t / tu * (1 + _EPS)), 0.0)
    n_max = int(n.max()) if n.size else 0
    pt = failure_cdf(t, m, w)
    # sum_{i=1}^{n} P(i t_u), chunked over elements so memory stays bounded for tiny intervals
    flat = [a.ravel() for a in (tu, n, m, w)]
    s = np.zeros(n.size)
    if n_max > 0:
        step = max(1, 4_000_000 // n_max)
        i = np.arange(1, n_max + 1, dtype=float)
        for lo in range(0, n.size, step):
            sl = slice(lo, lo + step)
            tu_, n_, m_, w_ = (a[sl] for a in flat)
            x = np.where(i[None, :] <= n_[:, None], np.where(np.isfinite(tu_), tu_, 0.0)[:, None] * i[None, :], 0.0)
            p = failure_cdf(x, m_[:, None], w_[:, None])
            s[sl] = p.sum(axis=1)
    s = s.reshape(n.shape)
    n_f = n * pt - s  # eq. 3.7 with the last interval clipped at t
    mu = truncated_mean(t, m, w)
    return t, tc, tau, r, n, pt, mu, n_f


def expected_cost(
    runtime_h: np.typing.ArrayLike,
    tau_h: np.typing.ArrayLike,
    ckpt_cost_h: np.typing.ArrayLike,
    mtbf_h: np.typing.ArrayLike,
    shape: np.typing.ArrayLike = 1.0,
    restart_h: np.typing.ArrayLike = 0.0,
) -> np.ndarray:
    """Expected checkpoint + lost-work cost ``E_C`` of eq. 3.8 (Frank) for any ``tau`` (broadcasts).

    ``runtime_h`` is eq. 3.8's ``t`` (wall clock including checkpoints). ``tau = inf`` means "never
    checkpoint" (cost ``mu^t``). ``restart_h`` adds ``R * P(t)``. The result is checked by
    :func:`check_cost`.
    """
    t, tc, tau, r, n, pt, mu, n_f = _eq38_terms(runtime_h, tau_h, ckpt_cost_h, mtbf_h, shape, restart_h)
    tau_term = np.where(np.isfinite(tau), np.where(np.isfinite(tau), tau, 0.0) * n_f, 0.0)
    return check_cost(mu - tau_term + n * tc * (1.0 - pt) + r * pt, t, r)


def expected_makespan(
    runtime_h: np.typing.ArrayLike,
    tau_h: np.typing.ArrayLike,
    ckpt_cost_h: np.typing.ArrayLike,
    mtbf_h: np.typing.ArrayLike,
    shape: np.typing.ArrayLike = 1.0,
    restart_h: np.typing.ArrayLike = 0.0,
) -> np.ndarray:
    """Expected wall time to finish a job of runtime ``t`` (including its checkpoints, eq. 3.8's ``t``).

    A run that does not fail takes ``t``. A run failing at ``t_f < t`` has its work up to the last
    checkpoint ``floor(t_f / t_u) t_u`` saved; the re-queued rest (a new job, Assumption 2) is the
    remaining ``t - floor(t_f / t_u) t_u``, so the total is ``t + (t_f mod t_u)`` plus the restart ``R``
    (the rest is assumed not to fail again, as in the thesis). Hence, with eq. 3.6-3.7::

        E[makespan] = t + mu^t - t_u n_f + R P(t)  =  t + E_C - t_c (n_f + n (1 - P(t)))

    i.e. ``t`` plus ``E_C`` minus the expected checkpoint time, which ``t`` already contains.
    ``tau = inf`` ("never") gives ``t + mu^t + R P(t)``.
    """
    t, tc, tau, r, n, pt, mu, n_f = _eq38_terms(runtime_h, tau_h, ckpt_cost_h, mtbf_h, shape, restart_h)
    tu_term = np.where(np.isfinite(tau), np.where(np.isfinite(tau), tau + tc, 0.0) * n_f, 0.0)
    return t + check_cost(mu - tu_term + r * pt, t, r)


# --------------------------------------------------------------------------- Algorithm 1, vectorised
@functools.lru_cache(maxsize=128)
def _multiples_matrix(g: int) -> sp.csr_matrix:
    """CSR ``A`` (g x g) with ``A[k-1, m-1] = 1`` iff ``m`` is a multiple of ``k`` (1-based)."""
    k = np.arange(1, g + 1)
    counts = g // k
    rows = np.repeat(k - 1, counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    i = np.arange(rows.size) - starts + 1  # 1..counts[k] within each row
    cols = rows + 1
    cols = cols * i - 1
    data = np.ones(rows.size)
    return sp.csr_matrix((data, (rows, cols)), shape=(g, g))


@dataclass(frozen=True)
class AwareIntervals:
    """Result of Algorithm 1 for S job shapes (all arrays of length S, hours).

    ``tau_h``/``period_h`` are ``inf`` and ``never`` is True where not checkpointing is cheapest.
    """

    tau_h: np.ndarray
    period_h: np.ndarray
    cost_h: np.ndarray
    never: np.ndarray
    p_fail: np.ndarray
    never_cost_h: np.ndarray


def cost_grid(
    runtime_h: np.typing.ArrayLike,
    ckpt_cost_h: np.typing.ArrayLike,
    mtbf_h: np.typing.ArrayLike,
    shape: np.typing.ArrayLike = 1.0,
    restart_h: np.typing.ArrayLike = 0.0,
    step_h: float = GRID_STEP_H,
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 3.8 on Algorithm 1's grid for S shapes: ``(periods (G,), costs (S, G))`` (Frank, sec. 3.3.2).

    Grid points outside ``t_c < t_u <= t - t_c`` of a shape are ``inf``.
    """
    period, cost_gs = _cost_grid_gs(runtime_h, ckpt_cost_h, mtbf_h, shape, restart_h, step_h)
    return period, np.ascontiguousarray(cost_gs.T)


def _cost_grid_gs(
    runtime_h: np.typing.ArrayLike,
    ckpt_cost_h: np.typing.ArrayLike,
    mtbf_h: np.typing.ArrayLike,
    shape: np.typing.ArrayLike,
    restart_h: np.typing.ArrayLike,
    step_h: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 3.8 on the grid, laid out (G, S) so the sparse product and reductions are contiguous."""
    t, tc, m, w = (a.ravel() for a in validate_job(runtime_h, ckpt_cost_h, mtbf_h, shape))
    r = np.broadcast_to(_nonnegative("restart cost", restart_h), t.shape).ravel().astype(float)
    if not step_h > 0:
        raise ValueError(f"grid step must be > 0 hours, got {step_h!r}")
    t_steps = t / step_h  # runtime in grid steps (not necessarily integer)
    g = int(np.floor(t_steps.max() * (1 + _EPS)))
    if g < 1:
        raise ValueError(f"runtime {t.max():g} h is shorter than one grid step ({step_h:g} h)")
    k = np.arange(1, g + 1, dtype=float)
    period = k * step_h
    # P(k * step) for every grid point and shape (eq. 3.13), via exp(w (log x - log lambda))
    z = np.multiply.outer(np.log(period), w)
    z -= w * np.log(weibull_scale(m, w))
    np.exp(z, out=z)
    np.negative(z, out=z)
    np.expm1(z, out=z)
    np.negative(z, out=z)
    z[k[:, None] > t_steps[None, :] * (1 + _EPS)] = 0.0  # only failures before t count in eq. 3.7
    sums = _multiples_matrix(g) @ z  # sum_{i>=1, i*k <= t} P(i * k * step), shape (G, S)
    pt = failure_cdf(t, m, w)
    mu = truncated_mean(t, m, w)
    # E_C = mu - tau (n P(t) - sums) + n t_c (1 - P(t)) + R P(t)
    #     = mu + R P(t) + tau * sums + n (t_c - t_u P(t))            with tau = t_u - t_c
    # in-place on two (G, S) buffers: fresh large temporaries cost more than the arithmetic
    n = np.multiply.outer(1.0 / k, t_steps * (1 + _EPS))
    np.floor(n, out=n)
    buf = np.multiply.outer(period, pt)
    np.subtract(tc[None, :], buf, out=buf)
    n *= buf
    np.subtract.outer(period, tc, out=buf)
    sums *= buf
    sums += n
    sums += (mu + r * pt)[None, :]
    k_lo = np.floor(tc / step_h * (1 + _EPS)) + 1  # first k with t_u > t_c
    k_hi = np.floor((t - tc) / step_h * (1 + _EPS))  # last k with t_u <= t - t_c
    invalid = np.less.outer(k, k_lo)
    invalid |= np.greater.outer(k, k_hi)
    sums[invalid] = np.inf
    return period, sums


def aware_interval(
    runtime_h: np.typing.ArrayLike,
    ckpt_cost_h: np.typing.ArrayLike,
    mtbf_h: np.typing.ArrayLike,
    shape: np.typing.ArrayLike = 1.0,
    restart_h: np.typing.ArrayLike = 0.0,
    step_h: float = GRID_STEP_H,
    extra_tau_h: np.typing.ArrayLike | None = None,
    batch: int | None = None,
) -> AwareIntervals:
    """Algorithm 1 (Frank, sec. 3.3.2): the ``t_u`` on the one-minute grid minimising eq. 3.8.

    Vectorised over S shapes (inputs broadcast to one shape vector), processed in batches of
    ``batch`` shapes sorted by runtime (default 16-32) to bound memory and grid padding.
    "Never checkpoint" (``tau = inf``, cost ``mu^t + R P(t)``) is a
    candidate and wins if strictly cheaper (or if the best period exceeds the runtime, which takes no
    checkpoint and costs the same); ties on the grid go to the shortest period, as in
    Algorithm 1's strict ``<``. ``extra_tau_h`` (shape (S, E)) adds candidate intervals, e.g. Young's
    and Daly's, so the result is never more expensive than they are under eq. 3.8.
    """
    t, tc, m, w = (a.ravel() for a in validate_job(runtime_h, ckpt_cost_h, mtbf_h, shape))
    r = np.broadcast_to(_nonnegative("restart cost", restart_h), t.shape).ravel().astype(float)
    s = t.size
    if batch is None:  # small batches of similar runtimes: each batch's grid is close to its own runtimes
        batch = int(np.clip(s // 16, 16, 32))
    out_tu = np.empty(s)
    out_cost = np.empty(s)
    order = np.argsort(t, kind="stable")  # batch similar runtimes together: less padding of the grid
    for lo in range(0, s, batch):
        idx = order[lo : lo + batch]
        period, cost = _cost_grid_gs(t[idx], tc[idx], m[idx], w[idx], r[idx], step_h)
        j = np.argmin(cost, axis=0)
        out_cost[idx] = cost[j, np.arange(idx.size)]
        out_tu[idx] = period[j]
    if extra_tau_h is not None:
        extra = np.asarray(extra_tau_h, float).reshape(s, -1)
        extra_cost = expected_cost(t[:, None], extra, tc[:, None], m[:, None], w[:, None], r[:, None])
        je = np.argmin(extra_cost, axis=1)
        ce = extra_cost[np.arange(s), je]
        better = ce < out_cost
        out_cost = np.where(better, ce, out_cost)
        out_tu = np.where(better, extra[np.arange(s), je] + tc, out_tu)
    pt = failure_cdf(t, m, w)
    never_cost = truncated_mean(t, m, w) + r * pt
    # a period longer than the job means no checkpoint is taken: that is "never" (same cost)
    never = (never_cost < out_cost) | (out_tu > t * (1 + _EPS))
    out_cost = check_cost(np.where(never, never_cost, out_cost), t, r)
    out_tu = np.where(never, np.inf, out_tu)
    return AwareIntervals(tau_h=out_tu - tc, period_h=out_tu, cost_h=out_cost, never=never, p_fail=pt, never_cost_h=never_cost)


def aware_interval_loop(
    runtime_h: float,
    ckpt_cost_h: float,
    mtbf_h: float,
    shape: float = 1.0,
    restart_h: float = 0.0,
    step_h: float = GRID_STEP_H,
) -> tuple[float, float]:
    """Algorithm 1 written literally (Frank, sec. 3.3.2): a Python loop over the grid, eq. 3.8 per point.

    The baseline of ``benchmarks/checkpoint_intervals.py`` and a cross-check in the tests; returns
    ``(period_h, cost_h)`` with ``period_h = inf`` for "never checkpoint".
    """
    t, tc, m, w = (float(a) for a in validate_job(runtime_h, ckpt_cost_h, mtbf_h, shape))
    lam = float(weibull_scale(m, w))
    pt = 1.0 - np.exp(-((t / lam) ** w))
    mu = float(truncated_mean(t, m, w))
    c_min, u_min = np.inf, np.inf
    k = 1
    while k * step_h <= (t - tc) * (1 + _EPS):
        tu = k * step_h
        tau = tu - tc
        if tau > _EPS:
            n = int(np.floor(t / tu * (1 + _EPS)))
            n_f = 0.0
            for i in range(1, n + 1):  # eq. 3.7, last interval clipped at t
                p_hi = 1.0 - np.exp(-((min((i + 1) * tu, t) / lam) ** w))
                p_lo = 1.0 - np.exp(-((i * tu / lam) ** w))
                n_f += i * (p_hi - p_lo)
            c = mu - tau * n_f + n * tc * (1.0 - pt) + restart_h * pt
            if c < c_min:
                c_min, u_min = c, tu
        k += 1
    never = mu + restart_h * pt
    if never < c_min:
        return np.inf, never
    return u_min, c_min
