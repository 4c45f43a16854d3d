"""Job-peer evidence: a node against the other members of its job at the same time (pure numpy).

Two channels (Ghiasvand & Ciorba's resource-allocation vicinity):

* :func:`job_peer_z` (moved here from :mod:`~nodewatch.models.anomaly.verdicts`): the |robust z| of every
  metric's residual after the job-shared part, which the verdicts count up to ``cfg.job_peer_z_cap`` times the
  node's own-history residual and only where a second metric agrees.
* the **job-peer drop** channel of job-driven metrics (``VerdictConfig.io_peer_metrics``, default
  ``disk_write_bytes``): a failing disk halves the *job's* write rate on one node (the simulator's
  ``io_errors`` precursor), inside the spread of the node's own history over all jobs, but 5-6 robust sigma
  below its job peers (docs/verdicts.md). Judged on its own, without the own-history cap:

  - **Eq. J1** (residual against the job): ``r_it = x_it - med_{m in J(t)} x_mt`` for a member ``i`` of job
    ``J`` in window ``t`` (``x`` the log-transformed window mean), where at least ``min_members`` members
    have a value and no job start/stop in ``t``; a member in a start/stop window is neither judged nor a peer.
  - **Eq. J2** (robust scale, one-sided): ``s = max(1.4826 MAD(r), floor)`` over every judged member-window
    of the day, and the job's own ``s_J = 1.4826 median |r|`` over its judged member-windows;
    ``z_it = max(-r_it / max(s, s_J), 0)`` (only a drop is evidence; NaN = not judged). ``s_J``: the members of
    some jobs write steadily different amounts (a 16-node job on a clean dev cluster: log rates 12.03-12.43, the
    day's pooled ``s`` 0.06), and a member steadily below such a job's median is no failing disk.
  - **Eq. J3** (the channel's own threshold): the node-day score is the ``k``-of-``n`` persistent score of
    ``z`` (:func:`~nodewatch.models.anomaly.verdicts.persistent_score`), its threshold the censored Gumbel
    return level (:func:`~nodewatch.models.anomaly.verdicts.budget_thresholds`) of the held-back node-days'
    **positive** scores, pooled (about half of the judged node-days score 0, at or above their job's median in
    2 of every 3 windows: a point mass that says nothing of the tail; ``P(alert) <= P(alert | score > 0)``), for
    the channel's share of the alert budget, ``beta_J = beta / (C + 1)`` with ``C`` the other channels (one more
    channel of the union bound, Eq. B1), never below the persistence-aware union level
    ``T_P = Phi^-1(1 - (beta_J / (W binom(n, k)))^(1 / k))`` (``W`` windows per day: with independent N(0, 1)
    windows, ``P(some k of n windows >= T) <= W binom(n, k) P(z >= T)^k``).
  - In the verdicts the channel is mapped onto the node's scale, ``z T_node / T_J``, and joins the metric's
    fused column (:func:`in_node_units`): it crosses a node threshold exactly where it crosses its own.
"""

from __future__ import annotations

import warnings
from math import comb
from statistics import NormalDist
from typing import Any

import numpy as np

from nodewatch.models.anomaly.vicinity import MAD_TO_SIGMA, _nanmedian


def job_peer_z(d: np.ndarray, peer: list[tuple[np.ndarray, np.ndarray]], transition: np.ndarray,
               cfg: Any) -> np.ndarray:
    """(node, time, metric) |robust z| of each node against its job's peers at the same time (job vicinity,
    Ghiasvand & Ciorba's resource-allocation vicinity), NaN where not judged.

    ``d`` holds the deviations from the nodes' own references with the job-shared part (the job median)
    already removed, so ``d`` of a job member is its distance to the job's peers. Scale per metric: the pooled
    within-job tail width of the day, ``q_p(|d|) / Phi^-1((1 + p) / 2)`` over every member-window of every
    judged job, ``p = cfg.job_peer_tail_q`` (0.9: for a normal metric this is sigma; a metric whose peers
    usually agree exactly, an integer gauge, gets the width of its usual jumps, as in
    :func:`~nodewatch.models.anomaly.vicinity.fit_reference`; a low ``p`` because a day holds few jobs and the
    anomalous member-windows themselves, up to a few percent, must not set the scale: at ``p = 0.999`` a
    CPU hog inside a job set the cpu-idle scale of its own day). Judged only where the job has at least
    ``cfg.job_peer_min`` members in the window, the peers agree (their ``1.4826 x MAD`` at most
    ``cfg.job_peer_agree`` times that scale) and the window is no job start/stop on the node.
    """
    zq = NormalDist().inv_cdf((1 + cfg.job_peer_tail_q) / 2)
    n_m = d.shape[2]
    vals = [np.abs(np.where(on[:, :, None], d[rows], np.nan)).reshape(-1, n_m) for rows, on in peer]
    allv = np.concatenate(vals, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        scale = np.nan_to_num(np.nanquantile(allv, cfg.job_peer_tail_q, axis=0) / zq, nan=0.0)
    scale = np.maximum(scale, cfg.scale_floor).astype(np.float32)
    out = np.full(d.shape, np.nan, dtype=np.float32)
    tr = np.asarray(transition, dtype=bool)
    for rows, on in peer:
        sub = np.where(on[:, :, None], d[rows], np.nan)
        n = on.sum(axis=0)
        spread = MAD_TO_SIGMA * _nanmedian(np.abs(sub), axis=0)
        ok = (n >= cfg.job_peer_min)[:, None] & (spread <= cfg.job_peer_agree * scale[None])
        q = np.abs(sub) / scale[None, None]
        keep = ok[None] & on[:, :, None] & ~tr[rows][:, :, None]
        out[rows] = np.where(keep, q, out[rows])
    return out


def peer_drop_z(x: np.ndarray, job: np.ndarray, transition: np.ndarray, min_members: int = 4,
                floor: float = 0.02, first_inferred: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Eq. J1/J2: the one-sided job-peer drop ``max(-r / max(s, s_J), 0)`` of every channel of ``x`` (node, time,
    channel; log units, NaN = no data) and the day's pooled scales ``s`` (channel,).

    ``job`` (node, time): job index (-1 none); ``transition`` (node, time): a job start/stop in the window (not
    judged, no peer). Job indices ``>= first_inferred`` are inferred from telemetry, not known allocations:
    not judged. NaN where not judged (fewer than ``min_members`` members with a value, not in a job, start/stop).
    """
    if min_members < 2:
        raise ValueError(f"a job-peer median needs min_members >= 2, got {min_members}")
    a = np.asarray(x, dtype=np.float64)
    jb = np.asarray(job)
    ok_t = ~np.asarray(transition, dtype=bool)
    r = np.full(a.shape, np.nan)
    own = np.zeros(a.shape)  # the job's own scale on its members' judged windows
    for j in np.unique(jb[jb >= 0]):
        if first_inferred is not None and j >= first_inferred:
            continue
        rows = np.flatnonzero((jb == j).any(axis=1))
        if len(rows) < min_members:
            continue
        on = ((jb[rows] == j) & ok_t[rows])[:, :, None] & np.isfinite(a[rows])
        sub = np.where(on, a[rows], np.nan)
        n = on.sum(axis=0)
        med = _nanmedian(sub, axis=0)
        judged = on & (n >= min_members)[None]
        rj = np.where(judged, sub - med[None], np.nan)
        r[rows] = np.where(judged, rj, r[rows])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sj = MAD_TO_SIGMA * np.nanmedian(np.abs(rj.reshape(-1, a.shape[2])), axis=0)
        own[rows] = np.where(judged, np.nan_to_num(sj, nan=0.0)[None, None], own[rows])
    flat = r.reshape(-1, a.shape[2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centre = np.nanmedian(flat, axis=0)
        mad = np.nanmedian(np.abs(flat - centre[None]), axis=0)
    s = np.maximum(np.nan_to_num(MAD_TO_SIGMA * mad, nan=0.0), floor)
    with np.errstate(invalid="ignore"):
        z = np.where(np.isfinite(r), np.maximum(-r / np.maximum(s[None, None], own), 0.0), np.nan)
    return z, s


def persistence_floor(budget_per_1000: float, windows: int, k: int, n: int) -> float:
    """Eq. J3's lower bound ``T_P = Phi^-1(1 - (beta / (W binom(n, k)))^(1 / k))``, ``beta = budget / 1000``:
    with independent N(0, 1) windows a node-day has a ``k``-of-``n`` run at or above ``T_P`` with probability
    at most ``beta``. (k = 1, n = 1: the one-sided union bound over ``W`` windows.)"""
    if not 0 < budget_per_1000 < 1000 or windows < 1 or not 1 <= k <= n:
        raise ValueError(f"need a budget in (0, 1000), windows >= 1 and 1 <= k <= n, got {budget_per_1000}, "
                         f"{windows}, {k}, {n}")
    p = (budget_per_1000 / 1000.0 / (windows * comb(n, k))) ** (1.0 / k)
    return float(NormalDist().inv_cdf(1 - p))


def in_node_units(z: np.ndarray, node_thr: np.ndarray, channel_thr: float) -> np.ndarray:
    """(node, time, channel) the channel on the node's threshold scale, ``z T_node / T_J`` (NaN -> 0)."""
    if not channel_thr > 0:
        raise ValueError(f"the channel threshold must be > 0, got {channel_thr}")
    t = np.asarray(node_thr, dtype=np.float64)[:, None, None]
    return np.nan_to_num(np.asarray(z, dtype=np.float64), nan=0.0) * t / float(channel_thr)



def peer_top(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(node, time) the largest job-peer drop over the channels of ``z`` (node, time, channel), NaN where none is
    judged, and (node,) whether the node has a judged window that day."""
    a = np.asarray(z, dtype=np.float64)
    have = np.isfinite(a).any(axis=2)
    top = np.where(have, np.nan_to_num(a, nan=-np.inf).max(axis=2, initial=-np.inf), np.nan)
    return top, have.any(axis=1)
