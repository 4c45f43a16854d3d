"""Batch-replay metrics of Frank ch. 2, §2.2.5 (Accounting, batch scheduling), and confidence intervals over seeds.

* ``T_cores`` -- core hours the machine offers: ``N · C · span`` (``span`` = the horizon, or first submit
  to last end when the whole queue is replayed);
* ``T_comp = Σ_i t_i · c_i`` -- core hours used by the finished jobs (``c_i`` = all cores of its nodes
  while alone, half of them while co-allocated);
* ``T_comp^STD`` -- core hours the same finished jobs need under exclusive STD allocation (``work · nodes · C``);
* utilisation efficiency ``E_util = T_comp / T_cores``;
* computational efficiency ``E_comp = T_comp^STD / T_comp``;
* scheduling efficiency ``E_sched = E_util · E_comp = T_comp^STD / T_cores``.
"""

from __future__ import annotations

import math

import numpy as np


def efficiencies(submit: np.ndarray, start: np.ndarray, end: np.ndarray, core_s: np.ndarray, work: np.ndarray,
                 nodes: np.ndarray, cores: int, n_nodes: int, horizon: float | None = None) -> dict[str, float]:
    """Makespan, waiting time and the three efficiencies (§2.2.5) of one replay.

    With ``horizon`` (seconds after the first submit) only jobs finished by then count, and
    ``T_cores = N · C · horizon`` (the thesis's one-hour batch runs); otherwise every job counts.
    """
    submit = np.asarray(submit, float)
    t0 = float(submit.min()) if submit.size else 0.0
    fin = np.isfinite(end)
    if horizon is not None:
        fin &= end <= t0 + horizon
    t_comp = float(core_s[fin].sum()) / 3600.0
    t_std = float((np.asarray(work, float)[fin] * np.asarray(nodes, float)[fin] * cores).sum()) / 3600.0
    span = float(horizon) if horizon is not None else (float(end[fin].max()) - t0 if fin.any() else 0.0)
    t_cores = n_nodes * cores * span / 3600.0
    started = np.isfinite(start)
    if horizon is not None:
        started &= start <= t0 + horizon
    wait = (start - submit)[started]
    return {
        "jobs": int(submit.size),
        "jobs_finished": int(fin.sum()),
        "makespan_s": float(end[fin].max()) - t0 if fin.any() else math.nan,
        "wait_mean_s": float(wait.mean()) if wait.size else math.nan,
        "wait_p95_s": float(np.percentile(wait, 95)) if wait.size else math.nan,
        "t_cores_h": t_cores,
        "t_comp_h": t_comp,
        "t_comp_std_h": t_std,
        "e_util": t_comp / t_cores if t_cores > 0 else math.nan,
        "e_comp": t_std / t_comp if t_comp > 0 else math.nan,
        "e_sched": t_std / t_cores if t_cores > 0 else math.nan,
    }


def mean_ci(values: np.ndarray | list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval ``(mean, lo, hi)``; one value gives ``lo = hi = nan``."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    m = float(v.mean())
    if v.size < 2:
        return m, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return m, m - half, m + half
