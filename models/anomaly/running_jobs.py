"""Allocations still running at the end of the judged day, inferred from telemetry (pure numpy, no I/O).

The nightly run stages the day's ``sacct`` dump: the jobs that *ended* that day. A job still running at
midnight is not in the staged ``jobs`` table yet, so its nodes look idle to the job-state reference
(:func:`nodewatch.models.anomaly.vicinity.fit_reference`) and every one of them deviates from its idle
history from the job's start to midnight: on the demo (seed 1) these were 14 of the 15 false node
alerts and two false rack alerts of three nights (docs/alerts.md, "Jobs still running at midnight").

Rule (:func:`infer_running`): applied only when the jobs table cannot know the day's running jobs (no job
in it has a null end or ends at or after the end of the day). For each node, a window is *busy-like*
when its window means are much closer to the node's busy reference than to its idle one::

    b(t) = mean_m min(|x - loc_busy| / sc_busy, c)  <  r * mean_m min(|x - loc_idle| / sc_idle, c)     (1)

(robust z of :func:`~nodewatch.models.anomaly.vicinity.conditioned_deviation`, clipped at ``c = 5`` so one
anomalous metric does not decide, averaged over the metrics with data; ``r = 0.5``). Measured on the demo
(seed 1, last window of the night): nodes of jobs not yet in the table 0.24-0.94 (busy) vs 3.5-3.8 (idle),
ratio <= 0.27; CPU hogs on idle nodes (CPU metrics only) 1.5 vs 1.9-2.1, ratio 0.7-0.8: a hog is not
taken for a job. A job still running at midnight
holds the node from its start to the last window, so the inferred allocation is the trailing run of
windows, ending in one of the last ``gap + 1`` windows, that are not covered by a known job and are
busy-like, with at most ``gap`` consecutive windows that are not (2; ``VerdictConfig.infer_gap`` = 3: a
running job's phases can look idle for 30-45 min, docs/verdicts.md). Nodes whose inferred allocation
starts in the same window are one inferred multi-node job (the job vicinity of
:func:`~nodewatch.models.anomaly.verdicts.evidence` then removes what they share); the window before the
start (the job may have started in it), the start window and ``transition_windows`` after it are
transitions, as for a known job. A node of such a job whose load moved off it before midnight has no trailing
run; it joins the job when its busy-like run (at least 4 windows) starts in the job's start window and no known
job covers it later (3, :func:`joiners`); its whole allocation is then judged against the envelope of its idle
and busy references (a transition: its phase is unknown).

What it cannot tell apart: a CPU hog that starts on an idle node and lasts past midnight looks like a
single-node job started by the scheduler (it is found on the night it ends, or once the job table knows
the node was idle).
"""

from __future__ import annotations

import warnings

import numpy as np

from nodewatch.models.anomaly.vicinity import Reference


def busy_like(x: np.ndarray, ref: Reference, clip: float = 5.0, ratio: float = 0.5) -> np.ndarray:
    """(node, time) Eq. 1: the window's mean clipped robust z over metrics against the node's busy
    reference is below ``ratio`` times the one against its idle reference. ``x`` (node, time, metric)
    log-transformed; NaN metrics ignored; a window without data is not busy-like."""
    xa = np.asarray(x, dtype=np.float32)
    d = []
    for s in (0, 1):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.abs(xa - ref.loc[s][:, None, :]) / ref.scale[s][:, None, :]
        d.append(np.minimum(z, clip))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        idle, busy = np.nanmean(d[0], axis=2), np.nanmean(d[1], axis=2)
    return np.where(np.isfinite(idle) & np.isfinite(busy), busy < ratio * idle, False)


def trailing_run(like: np.ndarray, known: np.ndarray, gap: int = 1) -> np.ndarray:
    """(node,) first window of the trailing inferred allocation (Eq. 2), -1 for none.

    Walking back from the last window: a window covered by a known job ends the run; a ``like`` window
    extends it; more than ``gap`` consecutive windows that are not ``like`` end it. The run must have a
    ``like`` window among the last ``gap + 1`` windows (a job running at midnight is busy at the end).
    """
    lk, kn = np.asarray(like, dtype=bool), np.asarray(known, dtype=bool)
    n, t = lk.shape
    start = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        miss, first = 0, -1
        for w in range(t - 1, -1, -1):
            if kn[i, w]:
                break
            if lk[i, w]:
                first, miss = w, 0
            else:
                if first < 0 and w < t - 1 - gap:
                    break
                miss += 1
                if miss > gap:
                    break
        start[i] = first
    return start


def infer_running(x: np.ndarray, ref: Reference, busy: np.ndarray, transition: np.ndarray, job: np.ndarray,
                  transition_windows: int = 1, clip: float = 5.0, gap: int = 1) -> tuple[np.ndarray, np.ndarray,
                                                                                          np.ndarray, list[int]]:
    """Day arrays with the inferred running allocations added (module docstring).

    ``busy``, ``transition`` (node, time) bool and ``job`` (node, time) int (-1 none) of the known jobs are
    not modified; returns new ``busy``, ``transition``, ``job`` and the start window of each inferred
    multi-node job, whose indices follow the largest known one (``job.max() + 1`` ...).
    """
    b, tr, jb = np.array(busy, dtype=bool), np.array(transition, dtype=bool), np.array(job, dtype=np.int32)
    like = busy_like(x, ref, clip)
    start = trailing_run(like, b, gap)
    join = joiners(like, b, start)
    t = b.shape[1]
    starts: list[int] = []
    nxt = int(jb.max()) + 1 if jb.size else 0
    for s in sorted(set(start[start >= 0].tolist())):
        idx = np.flatnonzero(start == s)
        late = np.flatnonzero(join == s) if len(idx) >= 2 else np.zeros(0, dtype=np.int64)
        both = np.concatenate([idx, late])
        b[both, s:] = True
        if s > 0:  # the job started in window s - 1 (partly busy, not busy-like) or s
            tr[both, s - 1:min(s + 1 + transition_windows, t)] = True
        tr[late, s:] = True  # Eq. 3: a joiner's phase is unknown: judged against the idle-busy envelope
        if len(idx) >= 2:
            jb[both, s:] = nxt
            starts.append(s)
            nxt += 1
    return b, tr, jb, starts


def joiners(like: np.ndarray, known: np.ndarray, start: np.ndarray, min_run: int = 4) -> np.ndarray:
    """(node,) start window of a node that joins an inferred multi-node allocation (Eq. 3), -1 for none.

    Nodes of one job start together, and a job that ended that day is in the staged table: a node without a
    trailing run, or whose trailing run starts later, whose busy-like run of at least ``min_run`` windows
    starts in the very window where two or more nodes' trailing runs (Eq. 2) start, with no known job from
    there to the end of the day, is a node of that job that looked idle for a while before midnight (the
    job's load moved off it). Measured on seed 3, night 1: cn0061 of a 16-node job started 01:49, busy-like
    01:45-18:30 and from 20:00, not in 18:45-19:45; the other 15 nodes busy-like from 01:45 to midnight.
    """
    lk, kn = np.asarray(like, dtype=bool), np.asarray(known, dtype=bool)
    st = np.asarray(start)
    vals, counts = np.unique(st[st >= 0], return_counts=True)
    group_starts = set(vals[counts >= 2].tolist())
    out = np.full(lk.shape[0], -1, dtype=np.int64)
    for i in np.flatnonzero(~np.isin(st, list(group_starts))):
        for s in sorted(group_starts):
            if (0 <= st[i] <= s) or kn[i, s:].any() or not lk[i, s:s + min_run].all() or (s > 0 and lk[i, s - 1]):
                continue
            out[i] = s
            break
    return out
