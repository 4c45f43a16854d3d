"""Ground-truth sidecar tables: anomalies, failures, precursor windows and the SaNSA state timeline.

States (SaNSA §II-B) with priorities high -> low: UNSCHEDULED_RESV, ADMIN_RESV, BOOTING, DOWN,
CONNECTION_LOSS, JOB_RUNNING, RESERVED_IDLE, IDLE. Per day the state table tiles [00:00, 24:00) of every
node exactly (intervals clipped to the day). Event tables list every event overlapping the day unclipped,
with a stable ``event_id`` (deduplicate on it when concatenating days).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from nodewatch.tasks.simulate.schedule import Schedule

STATES = ("IDLE", "RESERVED_IDLE", "JOB_RUNNING", "CONNECTION_LOSS", "DOWN", "BOOTING", "ADMIN_RESV", "UNSCHEDULED_RESV")
"""Index = priority (higher wins)."""


def _ts(epoch_s: int, t: np.ndarray) -> pa.Array:
    return pa.array(((epoch_s + np.asarray(t, dtype=float)) * 1e9).astype(np.int64), pa.timestamp("ns", tz="UTC"))


def states_table(sched: Schedule, day: int) -> pa.Table:
    """(node, start, end, state) intervals of every node for ``day``, clipped to the day."""
    cfg = sched.cfg
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    n = cfg.n_nodes
    spans: list[list[tuple[float, float, int]]] = [[] for _ in range(n)]
    P = {s: i for i, s in enumerate(STATES)}
    pr = sched.node_pairs()
    for x in pr.itertuples():
        if x.start < t1 and x.end > t0:
            spans[x.node].append((x.start, x.end, P["JOB_RUNNING"]))
    for x in sched.connloss.itertuples():
        spans[x.node].append((x.detect, x.end, P["CONNECTION_LOSS"]))
    for df in (sched.failures, sched.reboots):
        for x in df.itertuples():
            spans[x.node].append((x.t_fail, x.t_boot, P["DOWN"]))
            spans[x.node].append((x.t_boot, x.t_up, P["BOOTING"]))
    for m in sched.maint.itertuples():
        for i in np.flatnonzero(sched.topo.row == m.row):
            spans[i].append((m.start, m.end, P["ADMIN_RESV"]))
    for e in sched.emergency.itertuples():
        for i in sched.topo.nodes_of_rack(e.rack):
            spans[i].append((e.start, e.end, P["UNSCHEDULED_RESV"]))
    for r in sched.user_resv.itertuples():
        for i in range(r.first, r.first + r.n):
            spans[i].append((r.start, r.end, P["RESERVED_IDLE"]))
    nodes, starts, ends, states = [], [], [], []
    for i in range(n):
        sp = [(max(a, t0), min(b, t1), p) for a, b, p in spans[i] if a < t1 and b > t0]
        bp = np.unique(np.array([t0, t1] + [a for a, _, _ in sp] + [b for _, b, _ in sp]))
        mid = (bp[:-1] + bp[1:]) / 2
        st = np.zeros(len(mid), dtype=int)
        for a, b, p in sp:
            m = (mid >= a) & (mid < b)
            st[m] = np.maximum(st[m], p)
        # merge equal neighbours
        change = np.concatenate([[True], st[1:] != st[:-1]])
        idx = np.flatnonzero(change)
        s_ = bp[idx]
        e_ = np.concatenate([bp[idx[1:]], [t1]])
        nodes += [sched.topo.names[i]] * len(idx)
        starts.append(s_)
        ends.append(e_)
        states += [STATES[k] for k in st[idx]]
    return pa.table({"node": pa.array(nodes, pa.string()), "start": _ts(cfg.epoch_s, np.concatenate(starts)),
                     "end": _ts(cfg.epoch_s, np.concatenate(ends)), "state": pa.array(states, pa.string())})


def _overlap(df: pd.DataFrame, a: str, b: str, t0: float, t1: float) -> pd.DataFrame:
    return df[(df[a] < t1) & (df[b] > t0)]


def anomalies_table(sched: Schedule, day: int) -> pa.Table:
    """Anomaly intervals overlapping ``day``: event_id, node, start, end, type, fault_class (the FINJ fault it
    stands for, ``fault_classes.py``; empty for types without one)."""
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    df = sched.anomalies
    df = _overlap(df, "start", "end", t0, t1)
    ep = sched.cfg.epoch_s
    return pa.table({"event_id": pa.array(df["event_id"].to_numpy(np.int64)),
                     "node": pa.array([sched.topo.names[i] for i in df["node"]], pa.string()),
                     "start": _ts(ep, df["start"]), "end": _ts(ep, df["end"]), "type": pa.array(df["type"].tolist(), pa.string()),  # noqa: E501
                     "fault_class": pa.array([str(c) for c in df.get("fault_class", pd.Series([""] * len(df)))], pa.string())})


def failures_table(sched: Schedule, day: int) -> pa.Table:
    """Failures whose down interval [t_fail, t_up) overlaps ``day``: crash, detect, boot, up times and cause."""
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    df = sched.failures
    df = _overlap(df, "t_fail", "t_up", t0, t1)
    ep = sched.cfg.epoch_s
    frail = set(sched.frail.tolist())
    return pa.table({
        "event_id": pa.array(df["event_id"].to_numpy(np.int64)),
        "node": pa.array([sched.topo.names[i] for i in df["node"]], pa.string()),
        "start": _ts(ep, df["t_fail"]), "detected": _ts(ep, df["t_detect"]), "boot": _ts(ep, df["t_boot"]),
        "end": _ts(ep, df["t_up"]), "cause": pa.array(df["cause"].tolist(), pa.string()),
        "rack_correlated": pa.array(df["correlated"].astype(bool).tolist()),
        "frail_node": pa.array([int(i) in frail for i in df["node"]]),
        "has_precursor": pa.array(df["precursor_start"].notna().tolist()),
    })


def precursors_table(sched: Schedule, day: int) -> pa.Table:
    """Precursor windows [start, failure) overlapping ``day`` with their kind and the failure's event_id."""
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    df = sched.failures
    df = df[df["precursor_start"].notna()]
    df = _overlap(df, "precursor_start", "t_fail", t0, t1)
    ep = sched.cfg.epoch_s
    return pa.table({"event_id": pa.array(df["event_id"].to_numpy(np.int64)),
                     "node": pa.array([sched.topo.names[i] for i in df["node"]], pa.string()),
                     "start": _ts(ep, df["precursor_start"]), "end": _ts(ep, df["t_fail"]),
                     "kind": pa.array(df["precursor_kind"].tolist(), pa.string()),
                     "cause": pa.array(df["cause"].tolist(), pa.string())})
