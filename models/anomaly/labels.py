"""Node anomaly labels aligned to the feature grid (Molan et al., "RUAD", Section 3.1).

A 15-minute step ``[t, t + step)`` of a node is labelled anomalous (*node anomaly* = 1) if it
overlaps any anomaly interval ``[start, end)`` of that node. Intervals come from the simulator's
ground truth or, on a real cluster, from critical alerts minus the ones a ticket marks as false
positives (:func:`critical_minus_false_positives`), as the paper built its labels from Nagios
critical states minus Jira-documented false positives.
"""

from __future__ import annotations

import numpy as np


def labels_from_intervals(
    node_index: np.ndarray, start: np.ndarray, end: np.ndarray, n_nodes: int, times: np.ndarray, step: np.timedelta64
) -> np.ndarray:
    """Boolean ``[node, time]``: True where step ``[times[j], times[j] + step)`` overlaps an interval of that node.

    ``node_index[i]`` is the row of interval i in the node axis; ``start``/``end`` are datetime64[ns]
    (``end`` exclusive; an interval with ``end <= start`` covers the single instant ``start``).
    """
    times = np.asarray(times, dtype="datetime64[ns]")
    start = np.asarray(start, dtype="datetime64[ns]")
    end = np.asarray(end, dtype="datetime64[ns]")
    end = np.where(end > start, end, start + np.timedelta64(1, "ns"))
    node_index = np.asarray(node_index, dtype=np.int64)
    if len(times) > 1 and not (np.diff(times) > np.timedelta64(0, "ns")).all():
        raise ValueError("times must be strictly increasing")
    out = np.zeros((n_nodes, len(times)), dtype=bool)
    step_end = times + step
    for k, s, e in zip(node_index, start, end, strict=True):
        if not 0 <= k < n_nodes:
            raise ValueError(f"node index {k} outside [0, {n_nodes})")
        lo = np.searchsorted(step_end, s, side="right")  # first step ending after s
        hi = np.searchsorted(times, e, side="left")  # steps starting before e
        out[k, lo:hi] = True
    return out


def subtract_intervals(
    start: np.ndarray, end: np.ndarray, cut_start: np.ndarray, cut_end: np.ndarray
) -> list[tuple[np.datetime64, np.datetime64]]:
    """Parts of the union of ``[start, end)`` not covered by any ``[cut_start, cut_end)`` (one node)."""
    pieces: list[tuple[np.datetime64, np.datetime64]] = []
    cuts = sorted(zip(np.asarray(cut_start, "datetime64[ns]"), np.asarray(cut_end, "datetime64[ns]"), strict=True))
    for s, e in sorted(zip(np.asarray(start, "datetime64[ns]"), np.asarray(end, "datetime64[ns]"), strict=True)):
        cur = s
        for cs, ce in cuts:
            if ce <= cur or cs >= e:
                continue
            if cs > cur:
                pieces.append((cur, cs))
            cur = max(cur, ce)
            if cur >= e:
                break
        if cur < e:
            pieces.append((cur, e))
    return pieces


def critical_minus_false_positives(alerts: dict[str, np.ndarray], false_positives: dict[str, np.ndarray]) -> dict[str, list]:
    """Node-anomaly intervals from alerts (Section 3.1): keep ``severity == 'critical'`` alerts and cut
    out the intervals of tickets that mark a false positive on the same node.

    Both inputs are column dicts: alerts ``node, start, end, severity``; false positives ``node, start, end``.
    Returns columns ``node, start, end``.
    """
    sev = np.asarray(alerts["severity"]).astype(str)
    crit = np.char.lower(sev) == "critical"
    a_node = np.asarray(alerts["node"]).astype(str)[crit]
    a_s = np.asarray(alerts["start"], "datetime64[ns]")[crit]
    a_e = np.asarray(alerts["end"], "datetime64[ns]")[crit]
    f_node = np.asarray(false_positives["node"]).astype(str)
    f_s = np.asarray(false_positives["start"], "datetime64[ns]")
    f_e = np.asarray(false_positives["end"], "datetime64[ns]")
    out: dict[str, list] = {"node": [], "start": [], "end": []}
    for node in sorted(set(a_node)):
        m, fm = a_node == node, f_node == node
        for s, e in subtract_intervals(a_s[m], a_e[m], f_s[fm], f_e[fm]):
            out["node"].append(node)
            out["start"].append(s)
            out["end"].append(e)
    return out
