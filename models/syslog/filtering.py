"""Filtering of frequent and periodic templates (Ghiasvand & Ciorba §III-E, "filtered syslog", Table V).

The paper filters "frequent log entries" before computing SG and gains precision (62% -> 87%) for a small loss of
recall; on anonymised logs the frequent entries are found "based on their hash key and time-stamp". Here a
template is dropped for a night when either

* **frequent**: it holds more than ``share`` of all lines of the night, or
* **common**: it was logged by at least ``node_share`` of the nodes that logged that night (cron, systemd units,
  Slurm job start/end: every node says them, so they describe the workload rather than the node), or
* **periodic**: on the nodes where it occurs at least ``min_count`` times, the median coefficient of variation
  (std / mean) of its inter-arrival times is below ``max_cv`` (cron sessions, heartbeats, health checks
  arrive like clockwork; a Poisson stream has CV 1).

Both only use the template id and time stamps, so they apply unchanged to anonymised logs.
"""

from __future__ import annotations

import numpy as np


def filtered_templates(template_id: np.ndarray, node_idx: np.ndarray, time_ns: np.ndarray, share: float = 0.05,
                       max_cv: float = 0.5, min_count: int = 4, node_share: float = 0.5) -> dict[int, str]:
    """Templates to drop with the reason (``"frequent"``, ``"common"``, ``"periodic"``); template -1 (overflow) is
    never dropped."""
    tid = np.asarray(template_id, np.int64)
    n = len(tid)
    out: dict[int, str] = {}
    if n == 0:
        return out
    ids, counts = np.unique(tid, return_counts=True)
    for i, c in zip(ids.tolist(), counts.tolist(), strict=True):
        if i >= 0 and c > share * n:
            out[i] = "frequent"
    nodes = np.asarray(node_idx, np.int64)
    n_nodes = len(np.unique(nodes))
    pairs = np.unique(np.stack([tid, nodes], axis=1), axis=0)
    pid, pcount = np.unique(pairs[:, 0], return_counts=True)
    for i, c in zip(pid.tolist(), pcount.tolist(), strict=True):
        if i >= 0 and i not in out and c >= node_share * n_nodes and n_nodes >= 4:
            out[i] = "common"
    # periodicity per (template, node): sort by template, node, time; inter-arrival CV per group
    order = np.lexsort((np.asarray(time_ns, np.int64), np.asarray(node_idx, np.int64), tid))
    t, nd, tm = tid[order], np.asarray(node_idx, np.int64)[order], np.asarray(time_ns, np.int64)[order]
    same = (t[1:] == t[:-1]) & (nd[1:] == nd[:-1])
    gap = np.diff(tm).astype(np.float64)
    grp_start = np.concatenate([[True], ~same])
    gid = np.cumsum(grp_start) - 1
    g_of_gap = gid[1:][same]
    gaps = gap[same]
    ng = int(gid[-1]) + 1
    cnt = np.bincount(g_of_gap, minlength=ng)
    s1 = np.bincount(g_of_gap, weights=gaps, minlength=ng)
    s2 = np.bincount(g_of_gap, weights=gaps * gaps, minlength=ng)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = s1 / cnt
        cv = np.sqrt(np.maximum(s2 / cnt - mean * mean, 0.0)) / mean
    g_tpl = t[grp_start]
    ok = (cnt + 1 >= min_count) & np.isfinite(cv)
    for i in np.unique(g_tpl[ok]).tolist():
        if i < 0 or i in out:
            continue
        if float(np.median(cv[ok & (g_tpl == i)])) < max_cv:
            out[int(i)] = "periodic"
    return out
