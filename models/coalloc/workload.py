"""The synthetic batch queue of Frank ch. 2, §2.2.4, and the rule that maps real jobs to the five classes.

§2.2.4: "a queue of 4,096 jobs by randomly selecting jobs from the set of the five NERSC Trinity mini
MPI applications to create a uniform distribution. Each job randomly got a runtime repetition factor
c ∈ {1, 2} [...] The rank sizes n for the jobs have also been randomly and uniformly selected from
n ∈ {512, 1024, 2048, 4096}". All jobs are queued at time 0; a job's exclusive runtime is ``c`` times
the STD runtime of Table 2.1 at its rank count, and backfill sees that runtime (the thesis: "the unit c
also gives Backfill the required runtime information"). Nodes = ranks / 32 (MOGON II).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nodewatch.models.coalloc.frank_tables import APPS, CORES_PER_NODE, RANKS
from nodewatch.models.coalloc.interference import std_runtime

RUNTIME_ORDER: tuple[str, ...] = tuple(sorted(APPS, key=lambda a: std_runtime(a, RANKS[0])))
"""Classes by STD runtime at 512 ranks (amg, ghost, milc, gtc, snap): the order of the runtime rule."""


@dataclass(frozen=True)
class Jobs:
    """Jobs to replay, sorted by submit time (= priority)."""

    submit: np.ndarray
    work: np.ndarray
    """Exclusive (STD) runtime, s."""
    est: np.ndarray
    """Runtime estimate backfill sees (>= work), s."""
    nodes: np.ndarray
    ranks: np.ndarray
    app: np.ndarray
    """Class index into ``APPS``."""

    def __len__(self) -> int:
        return int(self.submit.size)


def synthetic_queue(n_jobs: int = 4096, seed: int = 0, cores_per_node: int = CORES_PER_NODE) -> Jobs:
    """The §2.2.4 queue: uniform class, uniform ranks in {512..4096}, repetition c in {1, 2}, all at t = 0."""
    if n_jobs < 0:
        raise ValueError(f"n_jobs must be >= 0, got {n_jobs}")
    rng = np.random.default_rng(seed)
    app = rng.integers(0, len(APPS), n_jobs)
    ranks = rng.choice(np.asarray(RANKS), n_jobs)
    reps = rng.integers(1, 3, n_jobs)
    t = np.array([[std_runtime(a, n) for n in RANKS] for a in APPS])
    work = reps * t[app, np.searchsorted(np.asarray(RANKS), ranks)]
    nodes = -(-ranks // cores_per_node)
    return Jobs(np.zeros(n_jobs), work, work.copy(), nodes.astype(np.int64), ranks.astype(np.int64), app.astype(np.int64))


def classes_by_runtime(runtime_s: np.ndarray) -> np.ndarray:
    """The runtime rule for real traces: runtime quintiles of the trace -> classes in :data:`RUNTIME_ORDER`.

    The shortest fifth of the jobs becomes AMG (the shortest application of Table 2.1), the next GHOST,
    MILC, GTC and the longest fifth SNAP, so a trace gets the thesis's uniform class mix and jobs of a
    class have similar runtimes. Ties at a quintile edge go to the lower class.
    """
    r = np.asarray(runtime_s, dtype=float)
    if r.size == 0:
        return np.zeros(0, dtype=np.int64)
    edges = np.quantile(r, [0.2, 0.4, 0.6, 0.8])
    q = np.searchsorted(edges, r, side="left")
    order = np.array([APPS.index(a) for a in RUNTIME_ORDER])
    return order[q].astype(np.int64)


def classes_random(n_jobs: int, seed: int) -> np.ndarray:
    """The random rule for real traces: each job's class drawn uniformly (seeded), independent of size and runtime.

    With it a trace gives one replay per seed, so its results get confidence intervals over class mixes.
    """
    return np.random.default_rng(seed).integers(0, len(APPS), n_jobs).astype(np.int64)
