"""Usability of a failure predictor at scale: classical rates, FPS sampling probabilities and UC(n).

Frank (thesis, ch. 4, sec. 4.1.2-4.1.4). Notation:

* classical rates of a binary classifier (sec. 4.1.2): ``tpr = TP/(TP+FN)`` (recall),
  ``ppv = TP/(TP+FP)`` (precision), ``fpr = FP/(FP+TN)`` (fall-out), ``fnr = 1 - tpr``, ``tnr = 1 - fpr``;
* eq. 4.1: ``P(E) = #failure / #all`` and ``P(K) = 1 - P(E)``, the probabilities that one prediction
  interval of one node holds a failure (E) or is ok (K); MOGON I: ``P(E) = 0.0000099653``;
* eq. 4.2: the *sample* probabilities ``S(f+) = P(K) fpr``, ``S(t+) = P(E) tpr``,
  ``S(f-) = P(E) fnr``, ``S(t-) = P(K) tnr``;
* eq. 4.4: ``UC(n)``, the probability that at least one of the ``n`` nodes of a job raises a false
  alarm in one prediction interval (an unnecessary checkpoint)::

      UC(n) = sum_{x=1}^{n} C(n, x) S(f+)^x (1 - S(f+))^(n - x) = 1 - (1 - S(f+))^n

  Why the closed form is the same sum: with ``q = 1 - S(f+)`` the binomial theorem gives
  ``sum_{x=0}^{n} C(n,x) S(f+)^x q^(n-x) = (S(f+) + q)^n = 1``; the printed sum starts at ``x = 1``, so
  it is ``1`` minus the ``x = 0`` term ``q^n``. Eq. 4.4 writes the second factor as ``S(t-)``; taken
  literally (``S(t-) = P(K) tnr``, so ``S(f+) + S(t-) = P(K) < 1``) the sum would be
  ``P(K)^n - S(t-)^n``, which does *not* reproduce Table 4.1 (e.g. 0.7897 instead of 0.7978 for
  RWTH at n = 1024); the table is the two-outcome (binomial) experiment whose complement of a false
  alarm is ``1 - S(f+)``, and that is what :func:`uc` computes. It evaluates
  ``-expm1(n log1p(-S(f+)))``: no binomial coefficient is formed (``C(10^6, 5*10^5)`` overflows
  float64), and ``log1p``/``expm1`` keep full relative precision when ``n S(f+)`` is tiny, where
  ``1 - (1 - s)**n`` cancels catastrophically. :func:`uc_binomial_sum` is the literal sum (exact
  rationals), kept to test that claim for small ``n``.

Printed digits in Table 4.1: five of the thesis's rows with an fpr (RWTH, Custom Misc., Baidu, 4NN, 6NN) come
out of the closed form from the printed ``fpr`` to the printed four digits; 1NN (0.00292 -> 0.9498),
2NN (0.00088 -> 0.5945) and RNN voting (0.00004 -> 0.0417) were computed from unrounded rates:
:func:`implied_fpr` recovers them (2.918e-3, 8.811e-4, 4.16e-5), each inside the rounding interval
of the printed ``fpr``. The text's 28.93 % at 8,192 nodes and 49.49 % at 16,384 for the RNN voter
likewise need ``fpr = 4.169e-5`` (exactly 4e-5 gives 27.94 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import comb

import numpy as np

P_E_MOGON = 0.0000099653
"""Frank eq. 4.1: probability of a failure event per 15-s sample on MOGON I (six months)."""

UC_USABLE = 0.05
"""Frank sec. 4.3.1 (Fig. 4.12): below 5 % UC a predictor is "very effective" at that node count."""
UC_STILL_USABLE = 0.30
"""Frank sec. 4.3.1: around 30 % "still usable"."""
UC_UNUSABLE = 0.50
"""Frank sec. 4.1.2 / 4.3.1: above 50 % worse than a coin toss, "unusable"."""

MAX_NODES = 10**9


def _rate(name: str, value: float) -> float:
    v = float(value)
    if not np.isfinite(v) or v < 0.0 or v > 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return v


def _counts(**kw: float) -> dict[str, float]:
    out = {}
    for k, v in kw.items():
        f = float(v)
        if not np.isfinite(f) or f < 0 or f != int(f):
            raise ValueError(f"{k} must be a non-negative whole count, got {v!r}")
        out[k] = f
    return out


@dataclass(frozen=True)
class Rates:
    """Classical rates of a binary failure classifier (Frank sec. 4.1.2); ``nan`` where undefined."""

    tpr: float
    ppv: float
    fpr: float
    fnr: float
    tnr: float

    @property
    def fdr(self) -> float:
        """False discovery rate ``1 - ppv`` (Frank Fig. 4.9)."""
        return 1.0 - self.ppv


def rates(tp: float, fp: float, tn: float, fn: float) -> Rates:
    """tpr, ppv, fpr, fnr, tnr from confusion counts (Frank sec. 4.1.2); a 0/0 rate is ``nan``."""
    c = _counts(tp=tp, fp=fp, tn=tn, fn=fn)
    tp, fp, tn, fn = c["tp"], c["fp"], c["tn"], c["fn"]

    def div(a: float, b: float) -> float:
        return a / b if b > 0 else float("nan")

    tpr = div(tp, tp + fn)
    fpr = div(fp, fp + tn)
    return Rates(tpr=tpr, ppv=div(tp, tp + fp), fpr=fpr, fnr=div(fn, tp + fn), tnr=div(tn, fp + tn))


def event_probability(failures: float, total: float) -> tuple[float, float]:
    """Frank eq. 4.1: ``(P(E), P(K)) = (#failure / #all, #ok / #all)``."""
    c = _counts(failures=failures, total=total)
    if c["total"] <= 0 or c["failures"] > c["total"]:
        raise ValueError(f"need 0 <= failures <= total and total > 0, got {failures!r} of {total!r}")
    pe = c["failures"] / c["total"]
    return pe, (c["total"] - c["failures"]) / c["total"]


@dataclass(frozen=True)
class SampleProbabilities:
    """Frank eq. 4.2: the probabilities of sampling each outcome of one prediction interval."""

    f_pos: float
    t_pos: float
    f_neg: float
    t_neg: float


def sample_probabilities(tpr: float, fpr: float, p_e: float = P_E_MOGON) -> SampleProbabilities:
    """Frank eq. 4.2: ``S(f+) = P(K) fpr``, ``S(t+) = P(E) tpr``, ``S(f-) = P(E) fnr``, ``S(t-) = P(K) tnr``."""
    tpr, fpr, pe = _rate("tpr", tpr), _rate("fpr", fpr), _rate("P(E)", p_e)
    pk = 1.0 - pe
    return SampleProbabilities(f_pos=pk * fpr, t_pos=pe * tpr, f_neg=pe * (1.0 - tpr), t_neg=pk * (1.0 - fpr))


def _nodes(n: np.typing.ArrayLike) -> np.ndarray:
    a = np.asarray(n, dtype=float)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a != np.floor(a)) or np.any(a > MAX_NODES):
        raise ValueError(f"node count must be a whole number in [0, {MAX_NODES:,}], got {n!r}")
    return a


def uc(s_fpos: np.typing.ArrayLike, n: np.typing.ArrayLike) -> np.ndarray | float:
    """Frank eq. 4.4: ``UC(n) = 1 - (1 - S(f+))^n``, evaluated as ``-expm1(n log1p(-S(f+)))``.

    Broadcasts over ``s_fpos`` and ``n``; stable for ``n`` up to :data:`MAX_NODES` and tiny ``S(f+)``.
    """
    s = np.asarray(s_fpos, dtype=float)
    if s.size == 0 or not np.all(np.isfinite(s)) or np.any((s < 0) | (s > 1)):
        raise ValueError(f"S(f+) must be a probability in [0, 1], got {s_fpos!r}")
    nn = _nodes(n)
    with np.errstate(divide="ignore"):
        out = -np.expm1(nn * np.log1p(-s))
    out = np.where(nn == 0, 0.0, out)
    return float(out) if out.ndim == 0 else out


def uc_from_rates(fpr: np.typing.ArrayLike, n: np.typing.ArrayLike, p_e: float = P_E_MOGON) -> np.ndarray | float:
    """UC(n) (eq. 4.4) of a predictor with false positive rate ``fpr`` at event probability ``P(E)`` (eq. 4.1-4.2)."""
    f = np.asarray(fpr, dtype=float)
    if f.size == 0 or not np.all(np.isfinite(f)) or np.any((f < 0) | (f > 1)):
        raise ValueError(f"fpr must be a probability in [0, 1], got {fpr!r}")
    pe = _rate("P(E)", p_e)
    return uc((1.0 - pe) * f, n)


def uc_binomial_sum(s_fpos: float | Fraction, n: int) -> Fraction:
    """The literal sum of eq. 4.4 in exact rationals (for checking :func:`uc`; O(n) big-integer terms)."""
    s = Fraction(s_fpos)
    if not 0 <= s <= 1:
        raise ValueError(f"S(f+) must be in [0, 1], got {s_fpos!r}")
    if int(n) != n or n < 0 or n > 5000:
        raise ValueError(f"n must be a whole number in [0, 5000] for the exact sum, got {n!r}")
    q = 1 - s
    return sum((comb(n, x) * s**x * q ** (n - x) for x in range(1, n + 1)), Fraction(0))


def implied_fpr(uc_value: float, n: int, p_e: float = P_E_MOGON) -> float:
    """The ``fpr`` whose UC(n) (eq. 4.4 with eq. 4.2) is ``uc_value``: ``S(f+) = -expm1(log1p(-UC)/n)``, ``fpr = S(f+)/P(K)``."""
    u = _rate("UC", uc_value)
    if u >= 1.0:
        raise ValueError("UC = 1 has no finite implied fpr")
    nn = float(_nodes(n))
    if nn < 1:
        raise ValueError("n must be at least 1")
    return float(-np.expm1(np.log1p(-u) / nn)) / (1.0 - _rate("P(E)", p_e))


def largest_usable_nodes(fpr: float, limit: float = UC_USABLE, p_e: float = P_E_MOGON, powers_of_two: bool = False) -> int:
    """Largest node count ``n`` with ``UC(n) < limit`` (Frank's 5 % criterion, Fig. 4.12).

    ``powers_of_two=True`` restricts to the allocation sizes of Fig. 4.12. Returns :data:`MAX_NODES`
    when ``fpr = 0`` (never a false alarm) and 0 when even one node reaches ``limit``.
    """
    f = _rate("fpr", fpr)
    lim = _rate("limit", limit)
    s = (1.0 - _rate("P(E)", p_e)) * f
    if s == 0.0:
        return MAX_NODES
    if lim <= 0.0:
        return 0
    # UC(n) < lim  <=>  n log1p(-s) > log1p(-lim)  <=>  n < log1p(-lim) / log1p(-s)
    bound = np.log1p(-lim) / np.log1p(-s) if s < 1.0 else 0.0
    n = int(np.ceil(bound)) - 1 if bound > 0 else 0
    n = max(0, min(n, MAX_NODES))
    while n > 0 and float(uc(s, n)) >= lim:  # guard the float boundary
        n -= 1
    while n < MAX_NODES and float(uc(s, n + 1)) < lim:
        n += 1
    if powers_of_two:
        return 0 if n < 1 else 1 << (n.bit_length() - 1)
    return n
