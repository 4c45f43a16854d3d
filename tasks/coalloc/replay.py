"""Run replays: every (algorithm, policy, seed) setup of a queue, the §2.2.5 metrics per run and a summary with CIs.

A setup is one of Fig. 2.8's six (``backfill``/``firstfit`` × ``exclusive``/``naive``/``no_twins``), plus the
``measured`` policy (pairs allowed by the rule derived from Table 2.2, ``derived_forbidden_pairs``).

Seeds draw new synthetic queues (§2.2.4) or, for a real trace, are not used (one run per setup).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nodewatch.models.coalloc.engine import ALGORITHMS, replay
from nodewatch.models.coalloc.interference import POLICIES, InterferenceModel, allowed_matrix
from nodewatch.models.coalloc.metrics import efficiencies, mean_ci
from nodewatch.models.coalloc.workload import Jobs, synthetic_queue

METRICS = ("e_util", "e_comp", "e_sched", "makespan_s", "wait_mean_s", "jobs_finished", "finished_mean_ranks")
"""Metrics summarised over seeds (mean and 95 % CI)."""

FIG_2_8 = {("backfill", "no_twins"): {"e_comp": 1.13, "e_sched": 0.98},
           ("firstfit", "no_twins"): {"e_comp": 1.19, "e_sched": 1.09},
           ("backfill", "naive"): {"e_comp": 1.01}, ("firstfit", "naive"): {"e_comp": 1.06}}
"""The thesis's batch results (§2.3.2, Fig. 2.8) quoted in its text; exclusive is the 100 % reference."""


@dataclass(frozen=True)
class Machine:
    """The replayed machine and accounting window."""

    nodes: int
    cores_per_node: int
    horizon_s: float | None = None
    """Count only jobs finished within this many seconds (the thesis's 1 h batch runs); ``None`` = whole queue."""


def check_choices(algorithms: Sequence[str], policies: Sequence[str]) -> None:
    """Raise ``ValueError`` naming an unknown algorithm or policy."""
    for a in algorithms:
        if a not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {a!r}: use one of {', '.join(ALGORITHMS)}")
    for p in policies:
        if p not in POLICIES:
            raise ValueError(f"unknown policy {p!r}: use one of {', '.join(POLICIES)}")


def run_setups(queues: Callable[[int], Jobs], seeds: Sequence[int], algorithms: Sequence[str], policies: Sequence[str],
               machine: Machine, min_saving: float = 0.10,
               progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """One row of metrics per (seed, algorithm, policy); ``queues(seed)`` gives the jobs of a seed."""
    check_choices(algorithms, policies)
    model = InterferenceModel().fit()
    rows = []
    for seed in seeds:
        jobs = queues(seed)
        slow = model.slowdown_matrix(jobs.app, jobs.ranks)
        for alg in algorithms:
            for pol in policies:
                s = replay(jobs.submit, jobs.work, jobs.est, jobs.nodes, jobs.app, slow, allowed_matrix(pol, min_saving),
                           alg, machine.nodes, machine.cores_per_node)
                m = efficiencies(jobs.submit, s.start, s.end, s.core_s, jobs.work, jobs.nodes, machine.cores_per_node,
                                 machine.nodes, machine.horizon_s)
                fin = np.isfinite(s.end)
                if machine.horizon_s is not None:
                    fin &= s.end <= jobs.submit.min() + machine.horizon_s
                shared = float(s.shared_s[fin].sum() / max((s.end - s.start)[fin].sum(), 1e-12))
                ranks = float(jobs.ranks[fin].mean()) if fin.any() else float("nan")  # Fig. 2.9: sizes each algorithm runs
                rows.append({"seed": int(seed), "algorithm": alg, "policy": pol, **m, "shared_time_frac": shared,
                             "finished_mean_ranks": ranks})
                if progress is not None:
                    progress(f"seed {seed} {alg} {pol}")
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and 95 % Student-t CI over seeds of :data:`METRICS` per (algorithm, policy), thesis values beside."""
    out = []
    for (alg, pol), g in runs.groupby(["algorithm", "policy"], sort=False):
        row: dict[str, object] = {"algorithm": alg, "policy": pol, "seeds": int(g["seed"].nunique())}
        for m in METRICS:
            mean, lo, hi = mean_ci(g[m].to_numpy(float))
            row[m] = mean
            row[f"{m}_lo"] = lo
            row[f"{m}_hi"] = hi
        for k, v in FIG_2_8.get((alg, pol), {}).items():
            row[f"thesis_{k}"] = v
        out.append(row)
    return pd.DataFrame(out)


def synthetic(n_jobs: int, cores_per_node: int) -> Callable[[int], Jobs]:
    """Queue factory of the §2.2.4 synthetic queue."""
    return lambda seed: synthetic_queue(n_jobs, seed, cores_per_node)
