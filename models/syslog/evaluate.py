"""Scoring a detector against known failures like Ghiasvand & Ciorba's Table V, with lead times.

Alarms: the flagged windows of a node, consecutive windows merged into one *alarm episode* (the paper counts
detections, not windows). A failure at ``t_fail`` is *detected with lead* ``L`` when an episode of its node has a
flagged window ending in ``[t_fail - horizon, t_fail - L]`` (the signal is known ``L`` before the failure).
An episode is a true alarm when its node fails within ``[episode start, episode end + horizon]``.
Precision = true episodes / episodes; recall(L) = failures detected with lead >= L / failures.
Recall *at the failure moment* (the paper's §II-E/Figure 5 reading: the observation moment is the outage point and
SG covers the window before it): the share of failures whose node is flagged in the last window ending at or
before ``t_fail``.
"""

from __future__ import annotations

import numpy as np


def alarm_episodes(flags: np.ndarray) -> list[tuple[int, int, int]]:
    """``(node, first window, last window)`` of each run of consecutive True in ``flags`` (nodes x windows)."""
    f = np.asarray(flags, bool)
    pad = np.zeros((f.shape[0], 1), bool)
    d = np.diff(np.concatenate([pad, f, pad], axis=1).astype(np.int8), axis=1)
    starts = np.argwhere(d == 1)
    ends = np.argwhere(d == -1)
    return [(int(a[0]), int(a[1]), int(b[1]) - 1) for a, b in zip(starts, ends, strict=True)]


def table_v_scores(flags: np.ndarray, window_end_ns: np.ndarray, fail_node: np.ndarray, fail_ns: np.ndarray,
                   horizon_ns: int, leads_ns: tuple[int, ...] = (0,), window_ns: int | None = None) -> dict[str, float]:
    """Precision, recall at each lead, episode and failure counts, median lead (module doc).

    ``window_ns``: length of the SG window behind each ``window_end_ns`` (default: the step between window ends, i.e.
    non-overlapping windows); an episode whose first window already contains the failure is a true (late) alarm.
    """
    eps = alarm_episodes(flags)
    fail_node = np.asarray(fail_node, np.int64)
    fail_ns = np.asarray(fail_ns, np.int64)
    by_node: dict[int, np.ndarray] = {}
    for n in np.unique(fail_node).tolist():
        by_node[n] = np.sort(fail_ns[fail_node == n])
    true_eps = 0
    for n, a, b in eps:
        f = by_node.get(n)
        if f is None:
            continue
        step = window_end_ns[1] - window_end_ns[0] if len(window_end_ns) > 1 else 0
        step = step if window_ns is None else window_ns
        lo, hi = window_end_ns[a] - step, window_end_ns[b] + horizon_ns
        if np.any((f >= lo) & (f <= hi)):
            true_eps += 1
    out: dict[str, float] = {"episodes": float(len(eps)), "true_episodes": float(true_eps), "failures": float(len(fail_ns)),
                             "precision": true_eps / len(eps) if eps else float("nan")}
    best_lead = np.full(len(fail_ns), -1, np.int64)
    for i, (n, t) in enumerate(zip(fail_node.tolist(), fail_ns.tolist(), strict=True)):
        if n >= flags.shape[0]:
            continue
        w = np.flatnonzero(flags[n] & (window_end_ns >= t - horizon_ns) & (window_end_ns <= t))
        if len(w):
            best_lead[i] = t - int(window_end_ns[w[0]])
    at = np.searchsorted(window_end_ns, fail_ns, side="right") - 1
    ok = (at >= 0) & (fail_node < flags.shape[0])
    moment = np.zeros(len(fail_ns), bool)
    moment[ok] = flags[fail_node[ok], at[ok]]
    out["recall@moment"] = float(np.mean(moment)) if len(fail_ns) else float("nan")
    for L in leads_ns:
        out[f"recall@{L // 60_000_000_000}min"] = float(np.mean(best_lead >= L)) if len(fail_ns) else float("nan")
    hit = best_lead[best_lead >= 0]
    out["median_lead_min"] = float(np.median(hit) / 60e9) if len(hit) else float("nan")
    return out
