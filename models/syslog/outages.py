"""Node outages from syslog alone, the ground-truth rule of Ghiasvand & Ciorba §II-D (Figure 4).

"The proposed node outage detection method first detects the node boot events. Afterward, Syslog entries are
backtracked until the last Syslog entry before the boot event is found. The timestamp of the last Syslog entry
prior to the boot event is considered as the point of the outage. [...] The only exception is when a node fails
and has no further successful boot process. In such cases, comparing the timestamp of the last available Syslog
entry with the current time reveals the missing node outages."

"When a node outage occurs outside of the scheduled maintenance period and no job could be accomplished on that
particular node at the time of the detected outage, the detected outage represents a *regular failure*."

:func:`outages` implements the first paragraph on arrays (the boot markers come from the caller);
:func:`regular_failures` the second; :func:`external_events` sets apart the external causes the paper separates with
other data sources (a rack-wide time-of-failure event).
"""

from __future__ import annotations

import numpy as np


def outages(node: np.ndarray, time_ns: np.ndarray, is_boot: np.ndarray, end_ns: int, silent_ns: int,
            min_lines: int = 10, gap_factor: float = 20.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Outages per node: ``(node, outage time, boot time or -1, kind)`` with kind 0 = boot, 1 = silent.

    A *boot event* is the first boot line after a non-boot line (a boot sequence of several lines is one event).
    Its outage time is the node's last non-boot line before it (a boot as a node's first line has none: skipped,
    since the data starts with it). A node whose last line is more than ``silent_ns`` before ``end_ns`` and is
    not a boot line is *silent until the end*: outage at its last line. Only nodes with at least ``min_lines``
    lines can be silent, and their silence must also exceed ``gap_factor`` times their median gap between lines
    (a node that logs twice a day is not "silent" after 3 h: the paper's logs came from busy nodes).
    """
    node = np.asarray(node, np.int64)
    t = np.asarray(time_ns, np.int64)
    b = np.asarray(is_boot, bool)
    order = np.lexsort((t, node))
    node, t, b = node[order], t[order], b[order]
    n = len(t)
    if n == 0:
        e = np.zeros(0, np.int64)
        return e, e, e, e
    same_prev = np.concatenate([[False], node[1:] == node[:-1]])
    start = b & same_prev & ~np.concatenate([[False], b[:-1]])  # boot line after a non-boot line of the node
    idx = np.flatnonzero(start)
    o_node, o_time, o_boot = node[idx], t[idx - 1], t[idx]
    last = np.concatenate([node[1:] != node[:-1], [True]])
    gap = np.diff(t, prepend=t[0]).astype(np.float64)
    gap[~same_prev] = np.nan
    first = np.flatnonzero(~same_prev)
    n_of = np.diff(np.append(first, n))
    med = np.array([np.nanmedian(gap[a + 1:a + k]) if k >= 2 else np.inf for a, k in zip(first, n_of, strict=True)])
    per_line_med = np.repeat(med, n_of)
    per_line_n = np.repeat(n_of, n_of)
    quiet = (t < end_ns - silent_ns) & (end_ns - t > gap_factor * per_line_med) & (per_line_n >= min_lines)
    li = np.flatnonzero(last & ~b & quiet)
    s_node, s_time = node[li], t[li]
    out_node = np.concatenate([o_node, s_node])
    out_time = np.concatenate([o_time, s_time])
    out_boot = np.concatenate([o_boot, np.full(len(li), -1, np.int64)])
    kind = np.concatenate([np.zeros(len(idx), np.int64), np.ones(len(li), np.int64)])
    o = np.lexsort((out_time, out_node))
    return out_node[o], out_time[o], out_boot[o], kind[o]


def regular_failures(out_node: np.ndarray, out_time: np.ndarray, maint: list[tuple[int, int, int]],
                     completed: list[tuple[int, int]], tol_ns: int) -> np.ndarray:
    """Which outages are regular failures: outside every maintenance window ``(node or -1 for all, start, end)``
    of the node and with no job completed on the node within ``tol_ns`` of the outage (``completed``: (node, end))."""
    ok = np.ones(len(out_node), bool)
    for i, (n, t) in enumerate(zip(np.asarray(out_node).tolist(), np.asarray(out_time).tolist(), strict=True)):
        in_maint = any((mn in (-1, n)) and a <= t <= z for mn, a, z in maint)
        ok[i] = not in_maint and not any(cn == n and abs(ce - t) <= tol_ns for cn, ce in completed)
    return ok


def external_events(node: np.ndarray, time_ns: np.ndarray, group: np.ndarray, group_size: np.ndarray,
                    gap_ns: int = 120_000_000_000, min_nodes: int = 3, min_share: float = 0.25) -> np.ndarray:
    """Which outages have an *external* cause: a whole rack (``group``) going down at once (§II-D, §III-D).

    The paper separates regular failures (internal causes) from failures by external factors (power outages,
    human errors, maintenance) with other data sources; a rack-wide loss of power or cooling shows in the
    product's own data as a *time-of-failure vicinity* event confined to one physical group. Outages of one
    group are chained in time (single linkage: consecutive outages at most ``gap_ns`` apart); a chain holding
    at least ``max(min_nodes, min_share * group_size[g])`` distinct nodes of the group ``g`` is one external
    event and all its outages are external. ``group_size``: nodes per group id (``group`` indexes it).
    Returns a boolean per outage (input order).
    """
    node = np.asarray(node, np.int64)
    t = np.asarray(time_ns, np.int64)
    grp = np.asarray(group, np.int64)
    out = np.zeros(len(t), bool)
    if len(t) == 0:
        return out
    order = np.lexsort((t, grp))
    g_s, t_s, n_s = grp[order], t[order], node[order]
    new_chain = np.concatenate([[True], (g_s[1:] != g_s[:-1]) | (np.diff(t_s) > gap_ns)])
    chain = np.cumsum(new_chain) - 1
    for c in np.unique(chain).tolist():
        m = chain == c
        g = int(g_s[m][0])
        need = max(min_nodes, min_share * float(np.asarray(group_size)[g]))
        if len(np.unique(n_s[m])) >= need:
            out[order[m]] = True
    return out
