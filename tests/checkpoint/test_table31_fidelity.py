"""Table 3.1 readings (docs/checkpoint.md, "Fidelity to Table 3.1") on a committed trace head.

``trace_savings`` is checked against a straightforward re-implementation written here from the thesis
text (eq. 3.8 with an explicit sum for eq. 3.7, Algorithm 1 as a loop over the one-minute grid, Daly's
2006 formula, eq. 3.14), for every reading the CLI offers, and the default reading's values are pinned.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.special import gamma, gammainc

from nodewatch.tasks.checkpoint.savings import read_trace, trace_jobs, trace_savings

HEAD = Path(__file__).resolve().parents[1] / "fixtures" / "jobs" / "KTH-SP2-1996-2.1-cln-head.swf"
MACHINE = 100  # KTH SP2 nodes


def _cdf(x: float, m: float, w: float) -> float:
    lam = m / gamma(1 + 1 / w)
    return 1.0 - math.exp(-((max(x, 0.0) / lam) ** w))


def _eq38(t: float, tau: float, tc: float, m: float, w: float) -> float:
    """E_C of eq. 3.8 for one job; the last interval of eq. 3.7 ends at t (eq. 3.6c integrates over [0, t])."""
    lam = m / gamma(1 + 1 / w)
    mu = m * gammainc(1 + 1 / w, (t / lam) ** w)
    if math.isinf(tau):
        return mu
    tu = tau + tc
    n = math.floor(t / tu + 1e-9)
    n_f = sum(i * (_cdf(min((i + 1) * tu, t), m, w) - _cdf(i * tu, m, w)) for i in range(n + 1))
    return mu - tau * n_f + n * tc * (1 - _cdf(t, m, w))


def _daly(m: float, tc: float) -> float:
    r = tc / (2 * m)
    return math.sqrt(2 * tc * m) * (1 + math.sqrt(r) / 3 + r / 9) - tc if tc < 2 * m else m


def _aware(t: float, tc: float, m: float, w: float, extra: list[float]) -> float:
    """Algorithm 1: t_u = 1/60, 2/60, ... <= t - t_c (t_u > t_c), plus 'never' and the classical intervals."""
    best_tau, best = math.inf, _eq38(t, math.inf, tc, m, w)
    cands = [k / 60 - tc for k in range(1, int((t - tc) * 60 + 1e-9) + 1) if k / 60 > tc + 1e-12] + extra
    for tau in cands:
        c = _eq38(t, tau, tc, m, w)
        if c < best - 1e-12:
            best_tau, best = tau, c
    return best_tau


def _independent(jobs, m_sys: float, tc: float, w: float, checkpointable: str, weight: str) -> float:  # noqa: ANN001
    tot_d = tot_a = 0.0
    for n, t in zip(jobs.nodes, jobs.runtime_h, strict=True):
        m = m_sys * MACHINE / n  # eq. 3.14
        tau_d = _daly(m, tc)
        if not tc + tau_d < t:
            continue
        young, daly1 = math.sqrt(2 * m * tc), math.sqrt(2 * m * tc) + tc
        tau_a = _aware(t, tc, m, w, [young, daly1, tau_d])
        if checkpointable == "aware" and not tc + tau_a < t:  # never (inf) or too long: left out
            continue
        k = n if weight == "node-hours" else 1
        tot_d += k * _eq38(t, tau_d, tc, m, w)
        tot_a += k * _eq38(t, tau_a, tc, m, w)
    return 100 * (tot_d - tot_a) / tot_d


@pytest.mark.parametrize("runtime", ["requested", "elapsed"])
@pytest.mark.parametrize("checkpointable", ["daly", "aware"])
@pytest.mark.parametrize("weight", ["jobs", "node-hours"])
def test_readings_match_independent_implementation(runtime: str, checkpointable: str, weight: str) -> None:
    jobs, skipped = trace_jobs(read_trace(HEAD), runtime)
    assert len(jobs) == 40 and skipped == {}
    for w in (0.8, 1.0):  # Table 3.1 rows a) and b)
        res = trace_savings(jobs, MACHINE, shape=w, checkpointable=checkpointable, weight=weight)
        assert len(res) == 6
        for _, r in res.iterrows():
            exp = _independent(jobs, r.mtbf_machine_h, r.ckpt_cost_h, w, checkpointable, weight)
            assert r.saving_vs_daly_pct == pytest.approx(exp, abs=1e-6), (w, r.mtbf_machine_h, r.ckpt_cost_h)


def test_default_reading_pinned() -> None:
    """Row a) at the thesis's settings (w = 0.8, MTBF 36/24 h, t_c 0.5/0.25/0.1 h) on the KTH head."""
    res = trace_savings(trace_jobs(read_trace(HEAD))[0], MACHINE)
    assert res["jobs"].tolist() == [1, 2, 5, 2, 4, 5]
    np.testing.assert_allclose(res["saving_vs_daly_pct"], [12.099, 10.968, 8.762, 6.814, 7.996, 5.396], atol=1e-3)
