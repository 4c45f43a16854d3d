"""Interference model of co-allocated pairs (Frank, ch. 2, §2.3.1, Tables 2.1 and 2.2) and the terrible-twins rule.

Definitions (all from the transcribed Table 2.1, :mod:`nodewatch.models.coalloc.frank_tables`):

* slowdown of application ``P`` co-allocated with ``Q`` at ``n`` ranks:
  ``s_{P|Q}(n) = t^{COA}_{P|Q}(n) / t^{STD}_P(n)`` (runtime ratio; ``s < 2`` means fewer core hours, §2.2);
* core hours (§2.2.5, ``T_cores = t · c``): STD ``t · n / 3600``, COA ``t · (n / 2) / 3600`` per application;
* cumulative core hours of a pair (Table 2.2): ``T_{P+Q} = T_P + T_Q``;
* saving of a pair: ``1 - T^{COA}_{P+Q} / T^{STD}_{P+Q}`` (Fig. 2.7).

Generalisation to unseen rank counts (our model, not the thesis's): per ordered pair, a log-linear fit
``ln s_{P|Q}(n) = a + b · log2(n / 512)`` by least squares over the four measured rank counts; the STD
runtime of each application the same way (``ln t^{STD}_P(n) = a + b · log2(n / 512)``). Outside the
measured range [512, 4096] the rank count is clamped (no extrapolation). :attr:`InterferenceModel.fit_error_`
gives the in-sample and leave-one-rank-out relative errors.

Terrible twins (§2.2.4, [26]): the thesis's heuristic forbids two instances of the same application on
shared nodes (``no_twins``). :func:`derived_forbidden_pairs` derives a rule from the data instead: a pair
is forbidden when its saving is below ``min_saving`` (default 10 %, the level of Fig. 2.7) at any measured
rank count. At 10 % it forbids exactly the five pairs Fig. 2.7 names (milc+ghost, milc+snap, ghost+ghost,
ghost+snap, snap+snap).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nodewatch.models.coalloc.frank_tables import APPS, COLUMNS, PAIRS, RANKS, TABLE_2_1

POLICIES: tuple[str, ...] = ("exclusive", "naive", "no_twins", "measured")
"""Allocation policies: exclusive (STD), naive COA (all pairs), no-twins COA (thesis), measured (derived rule)."""

_R = np.asarray(RANKS, dtype=float)
_X = np.log2(_R / RANKS[0])


def _col(name: str) -> int:
    return COLUMNS.index(name)


def std_runtime(app: str, ranks: int) -> float:
    """Measured STD runtime (s) of ``app`` at a measured rank count (Table 2.1)."""
    return TABLE_2_1[app]["runtime"][ranks][_col("STD")]


def coa_runtime(app: str, partner: str, ranks: int) -> float:
    """Measured COA runtime (s) of ``app`` next to ``partner`` at a measured rank count (Table 2.1)."""
    return TABLE_2_1[app]["runtime"][ranks][_col(partner)]


def measured_slowdown() -> np.ndarray:
    """``s[p, q, r]`` = slowdown of ``APPS[p]`` next to ``APPS[q]`` at ``RANKS[r]`` (Table 2.1 COA / STD)."""
    out = np.empty((len(APPS), len(APPS), len(RANKS)))
    for i, p in enumerate(APPS):
        for j, q in enumerate(APPS):
            for k, n in enumerate(RANKS):
                out[i, j, k] = coa_runtime(p, q, n) / std_runtime(p, n)
    return out


def core_hours(runtime_s: float | np.ndarray, physical_cores: float | np.ndarray) -> float | np.ndarray:
    """``T = t · c`` in core hours (§2.2.5) for a runtime in seconds on ``physical_cores`` cores."""
    return np.asarray(runtime_s) * np.asarray(physical_cores) / 3600.0


def pair_core_hours(p: str, q: str, ranks: int) -> tuple[float, float, float]:
    """(STD, PCK, COA) cumulative core hours of the pair ``p+q`` recomputed from Table 2.1 runtimes (Table 2.2).

    STD uses ``ranks`` cores per application, PCK and COA ``ranks / 2``; ``T_{P+Q} = T_P + T_Q``.
    """
    rt = TABLE_2_1
    std = core_hours(rt[p]["runtime"][ranks][_col("STD")] + rt[q]["runtime"][ranks][_col("STD")], ranks)
    pck = core_hours(rt[p]["runtime"][ranks][_col("PCK")] + rt[q]["runtime"][ranks][_col("PCK")], ranks / 2)
    coa = core_hours(rt[p]["runtime"][ranks][_col(q)] + rt[q]["runtime"][ranks][_col(p)], ranks / 2)
    return float(std), float(pck), float(coa)


def measured_savings() -> dict[tuple[str, str], np.ndarray]:
    """Saving ``1 - T^{COA}_{P+Q} / T^{STD}_{P+Q}`` of each unordered pair at each measured rank count (Fig. 2.7)."""
    out = {}
    for p, q in PAIRS:
        vals = [pair_core_hours(p, q, n) for n in RANKS]
        out[(p, q)] = np.array([1.0 - c / s for s, _k, c in vals])
    return out


def derived_forbidden_pairs(min_saving: float = 0.10) -> set[tuple[str, str]]:
    """Pairs (unordered, in :data:`PAIRS` order) whose measured saving is below ``min_saving`` at any rank count."""
    return {pq for pq, s in measured_savings().items() if float(s.min()) < min_saving}


def allowed_matrix(policy: str, min_saving: float = 0.10) -> np.ndarray:
    """``allowed[p, q]``: may ``APPS[p]`` share nodes with ``APPS[q]`` under ``policy`` (see :data:`POLICIES`)."""
    a = len(APPS)
    if policy == "exclusive":
        return np.zeros((a, a), dtype=bool)
    if policy == "naive":
        return np.ones((a, a), dtype=bool)
    if policy == "no_twins":
        return ~np.eye(a, dtype=bool)
    if policy == "measured":
        out = np.ones((a, a), dtype=bool)
        for p, q in derived_forbidden_pairs(min_saving):
            i, j = APPS.index(p), APPS.index(q)
            out[i, j] = out[j, i] = False
        return out
    raise ValueError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")


def _loglinear(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``ln y = a + b x``; returns ``(a, b)``."""
    b, a = np.polyfit(x, np.log(y), 1)
    return float(a), float(b)


@dataclass(frozen=True)
class FitError:
    """Relative errors of the log-linear fits (``|pred / measured - 1|``)."""

    slowdown_in_sample_max: float
    slowdown_in_sample_mean: float
    slowdown_loo_max: float
    """Leave-one-rank-out: each rank count predicted from the other three (interior ones interpolated)."""
    slowdown_loo_mean: float
    std_in_sample_max: float
    std_loo_mean: float


class InterferenceModel:
    """Log-linear-in-ranks model of STD runtimes and COA slowdowns fitted to Table 2.1.

    ``fit`` learns ``slow_coef_[p, q] = (a, b)`` and ``std_coef_[p] = (a, b)`` and returns ``self``;
    ``slowdown`` / ``std_runtime`` predict at any rank count (clamped to [512, 4096]).
    """

    def __init__(self) -> None:
        self.slow_coef_: np.ndarray | None = None
        self.std_coef_: np.ndarray | None = None
        self.fit_error_: FitError | None = None

    def fit(self) -> InterferenceModel:
        """Fit every ordered pair and every application; also measure the fit errors."""
        s = measured_slowdown()
        a = len(APPS)
        self.slow_coef_ = np.empty((a, a, 2))
        ins, loo = [], []
        for i in range(a):
            for j in range(a):
                self.slow_coef_[i, j] = _loglinear(_X, s[i, j])
                pred = np.exp(self.slow_coef_[i, j, 0] + self.slow_coef_[i, j, 1] * _X)
                ins.extend(np.abs(pred / s[i, j] - 1))
                for k in range(len(RANKS)):
                    m = np.arange(len(RANKS)) != k
                    c0, c1 = _loglinear(_X[m], s[i, j, m])
                    loo.append(abs(np.exp(c0 + c1 * _X[k]) / s[i, j, k] - 1))
        t = np.array([[std_runtime(p, n) for n in RANKS] for p in APPS])
        self.std_coef_ = np.array([_loglinear(_X, t[i]) for i in range(a)])
        std_ins, std_loo = [], []
        for i in range(a):
            pred = np.exp(self.std_coef_[i, 0] + self.std_coef_[i, 1] * _X)
            std_ins.extend(np.abs(pred / t[i] - 1))
            for k in range(len(RANKS)):
                m = np.arange(len(RANKS)) != k
                c0, c1 = _loglinear(_X[m], t[i, m])
                std_loo.append(abs(np.exp(c0 + c1 * _X[k]) / t[i, k] - 1))
        self.fit_error_ = FitError(
            slowdown_in_sample_max=float(np.max(ins)), slowdown_in_sample_mean=float(np.mean(ins)),
            slowdown_loo_max=float(np.max(loo)), slowdown_loo_mean=float(np.mean(loo)),
            std_in_sample_max=float(np.max(std_ins)), std_loo_mean=float(np.mean(std_loo)),
        )
        return self

    def _check(self) -> None:
        if self.slow_coef_ is None or self.std_coef_ is None:
            raise RuntimeError("InterferenceModel is not fitted: call fit() first")

    @staticmethod
    def _x(ranks: np.ndarray | float) -> np.ndarray:
        r = np.clip(np.asarray(ranks, dtype=float), RANKS[0], RANKS[-1])
        return np.log2(r / RANKS[0])

    def slowdown(self, p: np.ndarray | int, q: np.ndarray | int, ranks: np.ndarray | float) -> np.ndarray:
        """Predicted slowdown of application index ``p`` next to ``q`` at ``ranks`` (clamped to [512, 4096])."""
        self._check()
        c = self.slow_coef_[np.asarray(p), np.asarray(q)]  # type: ignore[index]
        return np.exp(c[..., 0] + c[..., 1] * self._x(ranks))

    def std_runtime(self, p: np.ndarray | int, ranks: np.ndarray | float) -> np.ndarray:
        """Predicted STD runtime (s) of application index ``p`` at ``ranks`` (clamped to [512, 4096])."""
        self._check()
        c = self.std_coef_[np.asarray(p)]  # type: ignore[index]
        return np.exp(c[..., 0] + c[..., 1] * self._x(ranks))

    def slowdown_matrix(self, app: np.ndarray, ranks: np.ndarray) -> np.ndarray:
        """``S[j, b]``: slowdown of job ``j`` (class ``app[j]``, ``ranks[j]``) next to a partner of class ``b``.

        At the measured rank counts the measured slowdowns are used exactly; elsewhere the fit.
        """
        self._check()
        app = np.asarray(app, dtype=np.int64)
        ranks = np.asarray(ranks, dtype=float)
        a = len(APPS)
        out = np.empty((app.size, a))
        for b in range(a):
            out[:, b] = self.slowdown(app, np.full(app.size, b), ranks)
        meas = measured_slowdown()
        for k, n in enumerate(RANKS):
            hit = ranks == n
            if hit.any():
                out[hit] = meas[app[hit], :, k]
        return out
