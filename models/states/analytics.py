"""Analytics over SaNSA node-state timelines (Agarwal et al., Sec. III). Pure numpy/scipy.

* :func:`state_time` / :func:`percent_time` — percent of time per state per node, group, system (Table II);
* :func:`transition_probabilities` — state transition probabilities (Sec. III-C, Figs. 9-10);
* :func:`time_between` — time between starts of DOWN / CONNECTION_LOSS across a system (Table III);
* :func:`gaussian_log_density`, :func:`choose_epsilon`, :func:`gaussian_anomalies` — multivariate
  Gaussian anomaly detection over per-node state percentages with ε chosen so that roughly five nodes
  are anomalous (Sec. III-A);
* :func:`group_daily_fraction`, :func:`underutilised_groups` — rack-level under-utilisation (Sec. III-B, Fig. 8);
* :func:`correlated_failures` — failures of many nodes at (nearly) the same instant, by rack (Sec. III-E).

Timelines are the arrays of :class:`nodewatch.models.states.timeline.Timeline` (node, start, end, state codes 1..8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_STATES = 8
NS_PER_H = 3600 * 1_000_000_000


def state_time(node: np.ndarray, start: np.ndarray, end: np.ndarray, state: np.ndarray, n_nodes: int) -> np.ndarray:
    """Time (ns, float) each node spends in each state: ``(n_nodes, 8)``; column ``j`` is state code ``j+1``.

    Paper Sec. III-C (Table II inputs): sums of interval lengths per (node, state).
    """
    dur = (np.asarray(end, np.int64) - np.asarray(start, np.int64)).astype(np.float64)
    key = np.asarray(node, np.int64) * N_STATES + (np.asarray(state, np.int64) - 1)
    return np.bincount(key, weights=dur, minlength=n_nodes * N_STATES).reshape(n_nodes, N_STATES)


def percent_time(times: np.ndarray, groups: np.ndarray | None = None, n_groups: int | None = None) -> np.ndarray:
    """Percent of time per state (Table II): per row of ``times``, or summed per group first.

    Args:
        times: ``(n_nodes, 8)`` output of :func:`state_time`.
        groups: optional group index per node (rack); ``None`` gives per-node percentages.
        n_groups: number of groups (default ``groups.max() + 1``); a single group gives the system row.
    """
    t = np.asarray(times, np.float64)
    if groups is not None:
        g = np.asarray(groups, np.int64)
        k = int(n_groups if n_groups is not None else (g.max() + 1 if g.size else 0))
        t = np.stack([np.bincount(g, weights=t[:, j], minlength=k) for j in range(t.shape[1])], axis=1)
    tot = t.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, 100.0 * t / tot, np.nan)


def state_runs(node: np.ndarray, start: np.ndarray, end: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, ...]:
    """Merge consecutive intervals of the same node and state (evidence changes are not transitions)."""
    node, start, end, state = (np.asarray(x) for x in (node, start, end, state))
    o = np.lexsort((start, node))
    node, start, end, state = node[o], start[o], end[o], state[o]
    new = np.ones(node.size, bool)
    new[1:] = (node[1:] != node[:-1]) | (state[1:] != state[:-1]) | (start[1:] != end[:-1])
    idx = np.nonzero(new)[0]
    last = np.append(idx[1:], node.size) - 1
    return node[idx], start[idx], end[last], state[idx]


def transition_probabilities(
    node: np.ndarray, start: np.ndarray, end: np.ndarray, state: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Row-stochastic matrix ``P[i, j]`` = P(next state j+1 | state i+1) and the transition counts (Sec. III-C).

    Transitions are changes of state between consecutive runs of one node, pooled over all nodes
    ("we combined all nodes of Grizzly into a single model"). Rows without transitions are NaN.
    """
    n, s, e, st = state_runs(node, start, end, state)
    same = np.zeros(n.size, bool)
    same[1:] = (n[1:] == n[:-1]) & (s[1:] == e[:-1])
    frm = st[:-1][same[1:]].astype(np.int64) - 1
    to = st[1:][same[1:]].astype(np.int64) - 1
    counts = np.bincount(frm * N_STATES + to, minlength=N_STATES * N_STATES).reshape(N_STATES, N_STATES).astype(float)
    tot = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(tot > 0, counts / tot, np.nan)
    return p, counts


@dataclass(frozen=True)
class Between:
    """Summary of times between consecutive event starts (hours)."""

    n_events: int
    mean_h: float
    median_h: float
    gaps_h: np.ndarray


def time_between(starts: np.ndarray, distinct: bool = True) -> Between:
    """Time between consecutive starts of a state across all nodes of a system (Table III, Sec. III-D).

    ``distinct=True`` treats starts at the same instant (e.g. a whole rack going DOWN together) as one
    system event; NaN mean/median when fewer than two events.
    """
    s = np.sort(np.asarray(starts, np.int64))
    if distinct:
        s = np.unique(s)
    gaps = np.diff(s) / NS_PER_H
    if gaps.size == 0:
        return Between(int(s.size), float("nan"), float("nan"), gaps)
    return Between(int(s.size), float(gaps.mean()), float(np.median(gaps)), gaps)


def state_starts(
    node: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    state: np.ndarray,
    code: int,
    shadowed_after: tuple[int, ...] = (),
) -> np.ndarray:
    """Start times of runs of state ``code`` (an episode starts when a node enters the state).

    ``shadowed_after``: overlay codes (ADMIN_RESV, UNSCHEDULED_RESV). A run that directly follows a
    run of one of them on the same node is not a start: the node entered the state under the overlay,
    which shadows events during administrative windows (paper Sec. II-C), so its end uncovering an
    episode that began before or inside it adds no event (as for ``failure_events``).
    """
    n, s, e, st = state_runs(node, start, end, state)
    hit = st == code
    if shadowed_after:
        after = np.zeros(n.size, bool)
        after[1:] = (n[1:] == n[:-1]) & (s[1:] == e[:-1]) & np.isin(st[:-1], shadowed_after)
        hit &= ~after
    return s[hit]


def gaussian_log_density(x: np.ndarray, min_var: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """log p(x_i) under a multivariate Gaussian fitted to the rows of ``x`` (Sec. III-A).

    Features with (near) zero variance carry no information and are dropped (their covariance would be
    singular); the returned mask says which features were kept. The covariance is the MLE (1/m).
    """
    from scipy.stats import multivariate_normal

    x = np.asarray(x, np.float64)
    keep = x.var(axis=0) > min_var
    if not keep.any():
        return np.zeros(x.shape[0]), keep
    xk = x[:, keep]
    mu = xk.mean(axis=0)
    cov = np.atleast_2d(np.cov(xk, rowvar=False, bias=True))
    return multivariate_normal(mean=mu, cov=cov, allow_singular=True).logpdf(xk).reshape(-1), keep


def choose_epsilon(log_p: np.ndarray, target: int = 5) -> float:
    """ε as a power of ten such that the number of nodes with p < ε is closest to ``target`` (Sec. III-A).

    The paper picks ε "so that the number of anomalous nodes is roughly 5" (ε = 10^-61 on Grizzly).
    Ties go to the smaller ε (fewer anomalies). Returns log10(ε).
    """
    l10 = np.asarray(log_p, np.float64) / np.log(10.0)
    if l10.size == 0:
        return float("nan")
    lo, hi = int(np.floor(l10.min())), int(np.ceil(l10.max())) + 1
    ks = np.arange(lo, hi + 1)
    counts = (l10[None, :] < ks[:, None]).sum(axis=1)
    best = np.argmin(np.abs(counts - target) * (len(ks) + 1) + np.arange(len(ks)))
    return float(ks[best])


@dataclass(frozen=True)
class Anomalies:
    """Result of the Gaussian detector: log10 p per node, log10 ε and the anomalous node indices (most anomalous first)."""

    log10_p: np.ndarray
    log10_eps: float
    anomalous: np.ndarray
    features_used: np.ndarray


def gaussian_anomalies(pct: np.ndarray, target: int = 5, log10_eps: float | None = None) -> Anomalies:
    """Sec. III-A: Gaussian over per-node state percentages; nodes with p < ε are anomalous."""
    lp, keep = gaussian_log_density(pct)
    l10 = lp / np.log(10.0)
    eps = choose_epsilon(lp, target) if log10_eps is None else float(log10_eps)
    idx = np.nonzero(l10 < eps)[0]
    idx = idx[np.argsort(l10[idx], kind="stable")]
    return Anomalies(l10, eps, idx, keep)


def group_daily_fraction(node_day_fraction: np.ndarray, groups: np.ndarray, n_groups: int | None = None) -> np.ndarray:
    """Mean over each group's nodes of a per-node daily fraction (e.g. JOB_RUNNING): ``(n_groups, n_days)`` (Fig. 8)."""
    g = np.asarray(groups, np.int64)
    k = int(n_groups if n_groups is not None else g.max() + 1)
    f = np.asarray(node_day_fraction, np.float64)
    sums = np.stack([np.bincount(g, weights=f[:, d], minlength=k) for d in range(f.shape[1])], axis=1)
    cnt = np.bincount(g, minlength=k)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, sums / cnt, np.nan)


@dataclass(frozen=True)
class Underuse:
    """Per group: ratio of its daily fraction to the mean of all other groups, and flagged runs of days."""

    ratio: np.ndarray  # (n_groups, n_days)
    flagged: list[tuple[int, int, int, float]]  # (group, first day, last day inclusive, mean ratio)


def underutilised_groups(group_day: np.ndarray, threshold: float = 0.6, min_days: int = 3) -> Underuse:
    """Racks receiving much less JOB_RUNNING time than the others (Sec. III-B, rack 13 at about half).

    A run of at least ``min_days`` consecutive days with ratio < ``threshold`` against the mean of the
    other groups is flagged.
    """
    x = np.asarray(group_day, np.float64)
    k = x.shape[0]
    tot = np.nansum(x, axis=0)
    others = (tot[None, :] - np.nan_to_num(x)) / max(k - 1, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(others > 0, x / others, np.nan)
    low = ratio < threshold
    flagged: list[tuple[int, int, int, float]] = []
    for g in range(k):
        d = np.diff(np.concatenate([[0], low[g].astype(np.int8), [0]]))
        starts, ends = np.nonzero(d == 1)[0], np.nonzero(d == -1)[0]
        for s, e in zip(starts, ends, strict=True):
            if e - s >= min_days:
                flagged.append((g, int(s), int(e - 1), float(np.nanmean(ratio[g, s:e]))))
    return Underuse(ratio, flagged)


@dataclass(frozen=True)
class CorrelatedEvent:
    """Failures of several nodes starting within a short window (Sec. III-E)."""

    start: int
    end: int
    nodes: np.ndarray
    groups: dict[int, int]  # group -> number of failed nodes in it


def correlated_failures(
    node: np.ndarray, start: np.ndarray, end: np.ndarray, groups: np.ndarray, window_ns: int, min_nodes: int = 3
) -> list[CorrelatedEvent]:
    """Cluster failure starts that lie within ``window_ns`` of the previous one (single linkage in time).

    ``groups`` gives the group (rack) of each event. Clusters with at least ``min_nodes`` distinct nodes
    are correlated failures; each lists the failed nodes per group, as in the paper's whole-rack and
    three-rack events.
    """
    node, start, end = (np.asarray(x, np.int64) for x in (node, start, end))
    g = np.asarray(groups, np.int64)
    if node.size == 0:
        return []
    o = np.argsort(start, kind="stable")
    node, start, end, g = node[o], start[o], end[o], g[o]
    new = np.ones(node.size, bool)
    new[1:] = np.diff(start) > window_ns
    cid = np.cumsum(new) - 1
    out: list[CorrelatedEvent] = []
    sizes = np.bincount(cid)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for c in np.nonzero(sizes >= min_nodes)[0]:
        m = slice(bounds[c], bounds[c + 1])
        nodes, first = np.unique(node[m], return_index=True)
        if nodes.size >= min_nodes:
            gs, cnt = np.unique(g[m][first], return_counts=True)
            out.append(
                CorrelatedEvent(
                    int(start[m].min()), int(end[m].max()), nodes, {int(a): int(b) for a, b in zip(gs, cnt, strict=True)}
                )
            )
    return out
