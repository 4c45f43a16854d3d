"""Failure models for checkpoint intervals: censored MLE fits and the job MTBF of Frank eq. 3.14.

Frank (ch. 3, sec. 3.3.3 and 3.4) models the time to the first failure of a job with a Weibull
distribution of mean ``M`` and shape ``w`` (``w = 1``: Poisson/exponential), and scales the MTBF of
the whole machine to a job on ``N_job`` of its ``N_machine`` nodes with eq. 3.14::

    MTBF_job = MTBF_machine * N_machine / N_job

Here failure inter-arrival times of a system (or node group) are fitted by maximum likelihood with
the time from the last failure to the end of the observation window as a right-censored observation.
All times are hours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats
from scipy.special import gamma


# --------------------------------------------------------------------------- eq. 3.14
def job_mtbf(mtbf_machine_h: np.typing.ArrayLike, n_machine: np.typing.ArrayLike, n_job: np.typing.ArrayLike) -> np.ndarray:
    """MTBF of a job on ``n_job`` of the machine's ``n_machine`` nodes (Frank, eq. 3.14)."""
    m = np.asarray(mtbf_machine_h, float)
    nm = np.asarray(n_machine, float)
    nj = np.asarray(n_job, float)
    if np.any(~np.isfinite(m)) or np.any(m <= 0):
        raise ValueError(f"machine MTBF must be > 0 hours, got {m.ravel()[0]!r}")
    if np.any(nm < 1) or np.any(nj < 1):
        raise ValueError("node counts must be >= 1")
    if np.any(nj > nm):
        raise ValueError(f"a job cannot use more nodes ({int(nj.max())}) than the machine has ({int(nm.min())})")
    return m * nm / nj


@dataclass(frozen=True)
class FailureModel:
    """A failure model for the tables: per-node MTBF ``M_machine * N_machine`` and Weibull shape.

    ``job_mtbf(n)`` is eq. 3.14 written with the per-node MTBF (``M_machine * N_machine``), so it does
    not need the machine size; ``name`` labels the table's ``failure_model`` coordinate.
    """

    name: str
    mtbf_node_h: float
    shape: float = 1.0
    source: str = "parameters"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mtbf_node_h) and self.mtbf_node_h > 0):
            raise ValueError(f"node MTBF must be > 0 hours, got {self.mtbf_node_h!r}")
        if not (math.isfinite(self.shape) and self.shape > 0):
            raise ValueError(f"Weibull shape must be > 0, got {self.shape!r}")
        from nodewatch.models.checkpoint.intervals import SHAPE_RANGE

        if not SHAPE_RANGE[0] <= self.shape <= SHAPE_RANGE[1]:
            raise ValueError(
                f"Weibull shape {self.shape:g} is outside the supported range [{SHAPE_RANGE[0]:g}, {SHAPE_RANGE[1]:g}]"
            )

    def job_mtbf(self, n_job: np.typing.ArrayLike) -> np.ndarray:
        """MTBF of a job on ``n_job`` nodes (Frank, eq. 3.14)."""
        n = np.asarray(n_job, float)
        if np.any(n < 1):
            raise ValueError("node counts must be >= 1")
        return self.mtbf_node_h / n


# --------------------------------------------------------------------------- fits
@dataclass(frozen=True)
class Fit:
    """One censored MLE fit of failure inter-arrival times (hours).

    ``mtbf_ci_h``/``shape_ci`` are 95% intervals (exponential: chi-square; Weibull: Wald on the log
    parameters from the observed information). ``ks_stat``/``ks_p`` compare the uncensored gaps with
    the fitted CDF (p-value approximate: parameters were estimated from the same data).
    """

    dist: str
    shape: float
    scale_h: float
    mtbf_h: float
    mtbf_ci_h: tuple[float, float]
    shape_ci: tuple[float, float]
    loglik: float
    aic: float
    ks_stat: float
    ks_p: float
    n_failures: int
    n_censored: int


def _check_gaps(gaps_h: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(gaps_h, float).ravel()
    c = np.asarray(censored, bool).ravel()
    if x.shape != c.shape:
        raise ValueError("gaps and censored flags must have the same length")
    if np.any(~np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("inter-arrival times must be positive and finite (merge or offset simultaneous failures)")
    if int((~c).sum()) < 2:
        raise ValueError(f"need at least 2 observed failure gaps to fit, got {int((~c).sum())}")
    return x, c


def _ks(x: np.ndarray, cdf) -> tuple[float, float]:  # noqa: ANN001
    r = stats.kstest(x, cdf)
    return float(r.statistic), float(r.pvalue)


def fit_exponential(gaps_h: np.typing.ArrayLike, censored: np.typing.ArrayLike, level: float = 0.95) -> Fit:
    """Censored MLE of the exponential (Poisson failures, Frank eq. 3.13 with ``w = 1``).

    ``MTBF = total time / number of failures``; the CI is the chi-square interval for time-censored data
    (``2T / chi2(2d+2)`` to ``2T / chi2(2d)``).
    """
    x, c = _check_gaps(np.asarray(gaps_h), np.asarray(censored))
    d = int((~c).sum())
    total = float(x.sum())
    mtbf = total / d
    a = 1.0 - level
    lo = 2 * total / stats.chi2.ppf(1 - a / 2, 2 * d + 2)
    hi = 2 * total / stats.chi2.ppf(a / 2, 2 * d)
    ll = -d * math.log(mtbf) - total / mtbf
    ks = _ks(x[~c], stats.expon(scale=mtbf).cdf)
    return Fit("exponential", 1.0, mtbf, mtbf, (float(lo), float(hi)), (1.0, 1.0), ll, 2 * 1 - 2 * ll, *ks, d, int(c.sum()))


def _weibull_loglik(k: float, lam: float, x: np.ndarray, c: np.ndarray) -> float:
    z = x / lam
    obs = ~c
    return float(np.sum(np.log(k / lam) + (k - 1) * np.log(z[obs])) - np.sum(z**k))


def fit_weibull(gaps_h: np.typing.ArrayLike, censored: np.typing.ArrayLike, level: float = 0.95) -> Fit:
    """Censored MLE of the Weibull of Frank eq. 3.9 (shape ``w``, scale ``lambda_w``, mean by eq. 3.10).

    The shape solves the profile score ``1/k + mean(log x_obs) - sum x^k log x / sum x^k = 0``
    (scale then ``(sum x^k / d)^(1/k)``); CIs are Wald intervals on ``log k``/``log lambda`` from a
    numerical observed-information matrix, with the MTBF interval by the delta method.
    """
    x, c = _check_gaps(np.asarray(gaps_h), np.asarray(censored))
    obs = ~c
    d = int(obs.sum())
    s = float(np.median(x))
    xs = x / s  # scale-free for numerical stability
    lx = np.log(xs)
    mean_lx_obs = float(lx[obs].mean())

    def score(logk: float) -> float:
        k = math.exp(logk)
        wk = xs**k
        return 1.0 / k + mean_lx_obs - float(np.sum(wk * lx) / np.sum(wk))

    lo, hi = math.log(0.02), math.log(50.0)
    if score(lo) * score(hi) > 0:
        raise ValueError("Weibull shape MLE outside [0.02, 50]: the gaps are degenerate (all equal or too few)")
    k = math.exp(optimize.brentq(score, lo, hi, xtol=1e-12))
    lam_s = float((np.sum(xs**k) / d) ** (1.0 / k))
    lam = lam_s * s
    ll = _weibull_loglik(k, lam, x, c)

    def nll(p: np.ndarray) -> float:
        return -_weibull_loglik(math.exp(p[0]), math.exp(p[1]) * s, x, c)

    p0 = np.array([math.log(k), math.log(lam_s)])
    h = 1e-4
    hess = np.empty((2, 2))
    for i in range(2):
        for j in range(2):
            e_i = np.eye(2)[i] * h
            e_j = np.eye(2)[j] * h
            hess[i, j] = (nll(p0 + e_i + e_j) - nll(p0 + e_i - e_j) - nll(p0 - e_i + e_j) + nll(p0 - e_i - e_j)) / (4 * h * h)
    cov = np.linalg.inv(hess)
    z = float(stats.norm.ppf(0.5 + level / 2))
    se_logk = math.sqrt(max(cov[0, 0], 0.0))
    mtbf = lam * float(gamma(1 + 1 / k))
    # d log(MTBF) / d(log k, log lam): log MTBF = log lam + log Gamma(1 + 1/k)
    from scipy.special import digamma

    grad = np.array([-digamma(1 + 1 / k) / k, 1.0])
    se_logm = math.sqrt(max(float(grad @ cov @ grad), 0.0))
    ks = _ks(x[obs], stats.weibull_min(k, scale=lam).cdf)
    return Fit(
        "weibull",
        k,
        lam,
        mtbf,
        (mtbf * math.exp(-z * se_logm), mtbf * math.exp(z * se_logm)),
        (k * math.exp(-z * se_logk), k * math.exp(z * se_logk)),
        ll,
        2 * 2 - 2 * ll,
        *ks,
        d,
        int(c.sum()),
    )


def interarrival_times(
    times_h: np.typing.ArrayLike, window_end_h: float, resolution_h: float = 1.0 / 60.0
) -> tuple[np.ndarray, np.ndarray]:
    """Gaps between sorted failure times plus the right-censored gap to the window end.

    Zero gaps (failures recorded in the same clock tick, e.g. LANL's minute resolution) become
    ``resolution_h / 2`` so the Weibull likelihood stays finite. The time from the window start to
    the first failure is not a full inter-arrival time and is not used.
    """
    t = np.sort(np.asarray(times_h, float))
    if t.size and window_end_h < t[-1]:
        raise ValueError("window end is before the last failure")
    gaps = np.diff(t)
    gaps = np.where(gaps <= 0, resolution_h / 2, gaps)
    tail = window_end_h - t[-1] if t.size else 0.0
    if tail > 0:
        return np.append(gaps, tail), np.append(np.zeros(gaps.size, bool), True)
    return gaps, np.zeros(gaps.size, bool)
