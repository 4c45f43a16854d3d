"""Prediction-aware checkpointing: Aupy, Robert, Vivien & Zaidouni (JPDC 2014) on Frank's eq. 3.1/3.8.

A failure predictor of recall ``r`` (share of failures that come with a warning early enough to
write one proactive checkpoint of cost ``C_p``) and precision ``p`` (share of warnings that are
followed by a failure). Warnings that are false arrive at rate ``r (1 - p) / (p M)`` for a job of
MTBF ``M`` (true warnings arrive at ``r / M``, so ``p`` is their share of all warnings).

**First order (Aupy et al., sec. 3-4).** Waste per unit time with period ``T``, trusting every
warning: ``C/T + (1 - r) T / (2M) + r C_p / (p M)`` (+ ``(D+R)/M``), minimised by
``T = sqrt(2 M C / (1 - r))`` (:func:`aupy_period`). A warning at phase ``phi`` of the period saves
``phi`` of lost work with probability ``p`` and costs ``C_p``: trusting pays iff ``p phi > C_p``, so
the optimal rule ignores warnings in the first ``beta = C_p / p`` of every period and trusts the
rest (:func:`trust_threshold`). With that rule the waste is
``(C - r C_p^2 / (2 p^2 M)) / T + (1 - r) T / (2M) + r C_p / (p M)``, minimised at
``T = sqrt((2 M C - r C_p^2 / p^2) / (1 - r))`` (:func:`aupy_period` with ``refined=True``).

**Exact per-job cost (extends Frank eq. 3.1 / 3.8).** One job of runtime ``t`` with periodic
checkpoints (period ``t_u = tau + t_c``) and its first failure at ``t_f`` (Weibull, eq. 3.9-3.10)
as in eq. 3.1; in addition (i) with probability ``r`` the failure is predicted, and when the job
trusts the warning (phase ``phi = t_f mod t_u >= beta``) it loses ``C_p`` instead of ``phi``;
(ii) false warnings arrive as a Poisson process of rate ``lambda_f = r (1 - p) / (p M)`` while the
job runs (``[0, min(t, t_f))``); each trusted one costs ``C_p`` (the periodic schedule is kept: a
proactive checkpoint is an extra one). Hence, with ``F`` the failure CDF (eq. 3.13), ``mu(x)`` the
truncated first moment (eq. 3.11-3.12), ``G(x) = int_0^x (1 - F) = x (1 - F(x)) + mu(x)`` and the
trusted stretches ``[a_i, b_i] = [min(i t_u + beta, b_i), min((i + 1) t_u, t)]``, ``i = 0..floor(t/t_u)``::

    E_P = E_C (eq. 3.8) - r sum_i [mu(b_i) - mu(a_i) - (i t_u + C_p)(F(b_i) - F(a_i))]
                        + lambda_f C_p sum_i [G(b_i) - G(a_i)]

(:func:`expected_cost_with_predictor`). :func:`simulate_cost_with_predictor` is the Monte-Carlo of the
same process (eq. 3.1 with sampled warnings), used to check this algebra within its 99 % CI.

**Job-level rates from a node-level predictor (Frank eq. 4.1-4.4).** A job on ``n`` nodes whose
nodes are predicted every interval: its false-alarm probability per interval is ``UC(n)``, its
failure probability ``1 - (1 - P(E))^n``, so its precision is ``p_job = S_t / (S_t + UC(n))`` with
``S_t = 1 - (1 - P(E) tpr)^n`` (:func:`job_level_rates`): a predictor whose UC is high at the job's
size has a low job precision and does not pay (:func:`predictor_pays`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from nodewatch.models.checkpoint.intervals import (
    _eq38_terms,
    expected_cost,
    failure_cdf,
    truncated_mean,
    validate_job,
)
from nodewatch.models.checkpoint.mc import MIN_FAILURES, MonteCarloCost, sample_failure_times
from nodewatch.models.predict.uc import uc_from_rates

POLICIES = ("threshold", "trust", "ignore")
"""``threshold``: Aupy's optimal rule (ignore warnings in the first ``C_p / p`` of a period);
``trust``: act on every warning; ``ignore``: no predictor (eq. 3.8 unchanged)."""


@dataclass(frozen=True)
class Predictor:
    """Recall ``r`` and precision ``p`` of a failure predictor and the cost ``C_p`` of a proactive checkpoint (hours)."""

    recall: float
    precision: float
    proactive_cost_h: float

    def __post_init__(self) -> None:
        """Check ``0 <= r < 1``, ``0 < p <= 1`` and ``C_p > 0``."""
        r, p, cp = float(self.recall), float(self.precision), float(self.proactive_cost_h)
        if not np.isfinite(r) or not 0.0 <= r < 1.0:
            raise ValueError(f"recall must be in [0, 1), got {self.recall!r}")
        if not np.isfinite(p) or not 0.0 < p <= 1.0:
            raise ValueError(f"precision must be in (0, 1], got {self.precision!r}")
        if not np.isfinite(cp) or cp <= 0.0:
            raise ValueError(f"proactive checkpoint cost must be a positive number of hours, got {self.proactive_cost_h!r}")


def trust_threshold(pred: Predictor, policy: str = "threshold") -> float:
    """Phase ``beta`` from which warnings are trusted: ``C_p / p`` (Aupy et al.), 0 (trust) or inf (ignore)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if policy == "trust":
        return 0.0
    if policy == "ignore" or pred.recall == 0.0:
        return float("inf")
    return pred.proactive_cost_h / pred.precision


def false_alarm_rate(pred: Predictor, mtbf_h: float) -> float:
    """Rate of false warnings per hour, ``r (1 - p) / (p M)``."""
    return pred.recall * (1.0 - pred.precision) / (pred.precision * float(mtbf_h))


def aupy_period(
    mtbf_h: np.typing.ArrayLike, ckpt_cost_h: np.typing.ArrayLike, pred: Predictor, refined: bool = False
) -> np.ndarray:
    """Aupy et al.'s period ``T = sqrt(2 M C / (1 - r))``; ``refined``: ``sqrt((2 M C - r C_p^2/p^2) / (1 - r))``.

    ``T`` is the full period (compute + checkpoint) of the first-order analysis; the refined value is
    floored at ``C`` + one second when ``C_p`` is so large that the bracket goes negative.
    """
    m = np.asarray(mtbf_h, float)
    c = np.asarray(ckpt_cost_h, float)
    if np.any(~np.isfinite(m) | (m <= 0)) or np.any(~np.isfinite(c) | (c <= 0)):
        raise ValueError("MTBF and checkpoint cost must be positive finite hours")
    num = 2.0 * m * c
    if refined:
        num = num - pred.recall * (pred.proactive_cost_h / pred.precision) ** 2
    return np.maximum(np.sqrt(np.maximum(num, 0.0) / (1.0 - pred.recall)), c + 1.0 / 3600.0)


def first_order_waste(
    period_h: np.typing.ArrayLike, mtbf_h: float, ckpt_cost_h: float, pred: Predictor | None, policy: str = "threshold"
) -> np.ndarray:
    """Aupy et al.'s first-order waste (fraction of time lost) at period ``T``; ``pred=None`` is Young's ``C/T + T/(2M)``."""
    t = np.asarray(period_h, float)
    m, c = float(mtbf_h), float(ckpt_cost_h)
    if pred is None or policy == "ignore":
        return c / t + t / (2.0 * m)
    r, p, cp = pred.recall, pred.precision, pred.proactive_cost_h
    beta = np.minimum(trust_threshold(pred, policy), t)
    # per warning at phase phi ~ U[0, T): ignore -> p phi lost, trust -> C_p; warnings at rate r/(p M)
    per_warning = (p * beta**2 / 2.0 + cp * (t - beta)) / t
    return c / t + (1.0 - r) * t / (2.0 * m) + r / (p * m) * per_warning


def _stretches(t: np.ndarray, tu: np.ndarray, n: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Trusted stretches ``[a_i, b_i]`` of every period ``i = 0..n`` (masked beyond ``n``) and ``i t_u``."""
    n_max = int(np.max(n)) if n.size else 0
    i = np.arange(0, n_max + 1, dtype=float)
    start = tu[..., None] * i
    b = np.minimum(start + tu[..., None], t[..., None])
    a = np.minimum(start + beta, b)
    live = i <= n[..., None]
    return np.where(live, a, 0.0), np.where(live, b, 0.0), start


def expected_cost_with_predictor(
    runtime_h: float,
    tau_h: np.typing.ArrayLike,
    ckpt_cost_h: float,
    mtbf_h: float,
    pred: Predictor,
    shape: float = 1.0,
    restart_h: float = 0.0,
    policy: str = "threshold",
) -> np.ndarray:
    """``E_P``: expected checkpoint + lost-work + proactive cost of one job (module docstring; hours)."""
    base = np.asarray(expected_cost(runtime_h, tau_h, ckpt_cost_h, mtbf_h, shape, restart_h), float)
    beta = trust_threshold(pred, policy)
    if not np.isfinite(beta):
        return base
    t, tc, tau, _r, n, _pt, _mu, _nf = _eq38_terms(runtime_h, tau_h, ckpt_cost_h, mtbf_h, shape, restart_h)
    tu = np.where(np.isfinite(tau), tau + tc, t)  # "never": one stretch over the whole run
    n = np.where(np.isfinite(tau), n, 0.0)
    a, b, start = _stretches(t, tu, n, beta)
    m, w = float(mtbf_h), float(shape)
    fa, fb = failure_cdf(a, m, w), failure_cdf(b, m, w)
    ma, mb = truncated_mean(a, m, w), truncated_mean(b, m, w)
    saved = ((mb - ma) - (start + pred.proactive_cost_h) * (fb - fa)).sum(axis=-1)
    exposure = ((b * (1.0 - fb) + mb) - (a * (1.0 - fa) + ma)).sum(axis=-1)
    cost = base - pred.recall * saved + false_alarm_rate(pred, m) * pred.proactive_cost_h * exposure
    # false warnings can make the cost exceed t (eq. 3.8's bound), so only finiteness is checked
    if not np.all(np.isfinite(cost)) or np.any(cost < -1e-9 * t):
        raise FloatingPointError("prediction-aware expected cost is not finite: parameters out of numerical range")
    return cost


def simulate_cost_with_predictor(
    runtime_h: float,
    tau_h: float,
    ckpt_cost_h: float,
    mtbf_h: float,
    pred: Predictor,
    shape: float = 1.0,
    failures: int = MIN_FAILURES,
    seed: int = 0,
    restart_h: float = 0.0,
    policy: str = "threshold",
    confidence: float = 0.99,
) -> MonteCarloCost:
    """Monte-Carlo of eq. 3.1 with predicted failures and sampled false warnings (module docstring, process (i)-(ii))."""
    if failures < MIN_FAILURES:
        raise ValueError(f"need at least {MIN_FAILURES:,} simulated failures (Frank sec. 3.4), got {failures:,}")
    t, tc, m, w = (float(x) for x in validate_job(runtime_h, ckpt_cost_h, mtbf_h, shape))
    tau = float(tau_h)
    if not tau > 0:
        raise ValueError("checkpoint interval tau must be > 0 hours (use inf for never)")
    rng = np.random.default_rng(seed)
    tf = sample_failure_times(m, w, failures, rng)
    tu = tau + tc if np.isfinite(tau) else np.inf
    failed = tf < t
    n_ckpt = np.floor(np.minimum(t, tf) / tu) if np.isfinite(tu) else np.zeros(failures)
    phi = np.mod(tf, tu) if np.isfinite(tu) else tf
    beta = trust_threshold(pred, policy)
    predicted = rng.random(failures) < pred.recall
    trusted = predicted & (phi >= beta)
    lost = np.where(trusted, pred.proactive_cost_h, phi)
    cost = tc * n_ckpt + np.where(failed, lost + restart_h, 0.0)
    # false warnings: Poisson(lambda_f * run) per job, uniform times on [0, min(t, t_f))
    run = np.minimum(t, tf)
    k = rng.poisson(false_alarm_rate(pred, m) * run)
    if k.sum() > 0 and np.isfinite(beta):
        owner = np.repeat(np.arange(failures), k)
        times = rng.random(owner.size) * run[owner]
        ph = np.mod(times, tu) if np.isfinite(tu) else times
        cost += pred.proactive_cost_h * np.bincount(owner, weights=(ph >= beta).astype(float), minlength=failures)
    mean = float(cost.mean())
    se = float(cost.std(ddof=1) / np.sqrt(failures))
    z = float(norm.ppf(0.5 + confidence / 2.0))
    one = np.atleast_1d
    return MonteCarloCost(mean_h=one(mean), stderr_h=one(se), lo_h=one(mean - z * se), hi_h=one(mean + z * se), failures=failures)


@dataclass(frozen=True)
class JobRates:
    """Job-level recall, precision and MTBF of a node-level predictor on ``n`` nodes (eq. 4.1-4.4)."""

    recall: float
    precision: float
    mtbf_h: float
    uc: float


def job_level_rates(tpr: float, fpr: float, p_e: float, nodes: int, interval_h: float) -> JobRates:
    """Recall, precision and MTBF of a job on ``nodes`` nodes predicted every ``interval_h`` (Frank eq. 4.1-4.4).

    ``UC(n)`` (eq. 4.4) is the per-interval probability of at least one false alarm; the job fails in
    an interval with probability ``1 - (1 - P(E))^n`` and is warned of it with ``1 - (1 - P(E) tpr)^n``.
    """
    if not (np.isfinite(interval_h) and interval_h > 0):
        raise ValueError("prediction interval must be a positive number of hours")
    u = float(uc_from_rates(fpr, nodes, p_e))
    fail = float(-np.expm1(nodes * np.log1p(-p_e)))
    warned = float(-np.expm1(nodes * np.log1p(-p_e * tpr)))
    if fail <= 0:
        raise ValueError("P(E) must be > 0 for a job MTBF")
    precision = warned / (warned + u) if warned + u > 0 else 0.0
    return JobRates(recall=float(tpr), precision=precision, mtbf_h=interval_h / fail, uc=u)


@dataclass(frozen=True)
class PredictorVerdict:
    """Cost of one job shape with Daly's interval and no predictor vs. Aupy's period with the predictor."""

    daly_cost_h: float
    predictor_cost_h: float
    predictor_tau_h: float
    saving: float
    pays: bool
    reason: str


def predictor_pays(
    runtime_h: float, ckpt_cost_h: float, mtbf_h: float, daly_tau_h: float, pred: Predictor, shape: float = 1.0
) -> PredictorVerdict:
    """Compare eq. 3.8 at Daly's interval with :func:`expected_cost_with_predictor` at the best of Aupy's periods.

    The with-predictor interval is the cheapest (by the exact cost) of Aupy's ``sqrt(2 M C / (1 - r))``,
    the refined period (when ``2 M C > r C_p^2 / p^2``) and Daly's interval itself (with the ``C_p / p``
    trust rule a low-precision predictor ignores almost every warning, and Daly's interval is best).

    ``saving`` is the relative cost reduction over Daly (negative when the predictor costs more); the
    predictor *pays* when its cost is below both Daly's and eq. 3.8 without predictor at the same interval
    (a saving that only comes from a better interval is not the predictor's); ``reason`` says why it
    does not pay (low precision: false warnings cost more than the work saved).
    """
    daly = float(expected_cost(runtime_h, daly_tau_h, ckpt_cost_h, mtbf_h, shape))
    # candidates: Aupy's trust-all period, the refined one (when its bracket is positive), Daly's interval
    cands = [float(aupy_period(mtbf_h, ckpt_cost_h, pred)) - ckpt_cost_h, float(daly_tau_h)]
    if 2.0 * mtbf_h * ckpt_cost_h > pred.recall * (pred.proactive_cost_h / pred.precision) ** 2:
        cands.append(float(aupy_period(mtbf_h, ckpt_cost_h, pred, refined=True)) - ckpt_cost_h)
    cands = [max(c, 1.0 / 3600.0) for c in cands if c < runtime_h - ckpt_cost_h] or [float(daly_tau_h)]
    costs = np.asarray(expected_cost_with_predictor(runtime_h, np.asarray(cands), ckpt_cost_h, mtbf_h, pred, shape), float)
    k = int(np.argmin(costs))
    tau, cost = cands[k], float(costs[k])
    saving = (daly - cost) / daly if daly > 0 else 0.0
    # credit the predictor only with what it saves over no predictor at the same interval
    plain = float(expected_cost(runtime_h, tau, ckpt_cost_h, mtbf_h, shape))
    gain = (min(daly, plain) - cost) / daly if daly > 0 else 0.0
    if gain > 1e-9:
        reason = "pays"
    elif pred.recall == 0:
        reason = "recall 0: no failure is warned of"
    elif false_alarm_rate(pred, mtbf_h) * pred.proactive_cost_h > pred.recall / mtbf_h * pred.proactive_cost_h:
        reason = f"precision {pred.precision:.3g}: false warnings outnumber true ones"
    else:
        reason = "proactive checkpoints cost more than the work they save"
    return PredictorVerdict(daly, cost, tau, saving, gain > 1e-9, reason)
