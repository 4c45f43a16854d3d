"""Per-node anomalies (ground truth): alternating renewal of normal and anomalous periods, plus the misconfigured rack.

For one node, anomaly durations are lognormal (median ``anomaly_median_s``, sigma ``anomaly_sigma``,
mean D) and the gaps between them exponential with mean G = D (1 - s) / s, so the long-run share of
node-time inside anomalies is s = ``anomaly_share`` (renewal-reward theorem). Types 1–5 are drawn with
``anomaly_type_weights``; ``misconfiguration`` is a rack-level window (SaNSA §III-B: a rack whose Slurm
configuration was not propagated receives no jobs and shows a cooling problem).

Each anomaly also gets a ``fault_class``: the FINJ fault (Netti et al.) it stands for, drawn among the
classes whose measured signature matches its type (``fault_classes.py``), from its own random stream.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nodewatch.tasks.simulate.config import ANOMALY_TYPES, SimConfig
from nodewatch.tasks.simulate.fault_classes import assign, class_rng
from nodewatch.tasks.simulate.rng import rng
from nodewatch.tasks.simulate.topology import Topology

CHUNK = 32
BURN_IN_S = 30 * 86400
COLUMNS = ["node", "start", "end", "type", "param"]
"""Columns of :func:`node_anomalies` rows; :func:`all_anomalies` adds ``fault_class``."""


def node_anomalies(cfg: SimConfig, node: int, t_end: float) -> list[tuple]:
    """Anomaly intervals (node, start, end, type, param) of one node overlapping [0, t_end)."""
    s = cfg.anomaly_share
    if s <= 0:
        return []
    g = rng(cfg.seed, "anomalies", node)
    mean_d = cfg.anomaly_median_s * math.exp(cfg.anomaly_sigma**2 / 2)
    mean_gap = mean_d * (1 - s) / s
    w = np.asarray(cfg.anomaly_type_weights, dtype=float)
    w = w / w.sum()
    out = []
    t = -float(BURN_IN_S) + g.exponential(mean_gap)
    while t < t_end:
        durs = np.exp(np.log(cfg.anomaly_median_s) + cfg.anomaly_sigma * g.standard_normal(CHUNK))
        gaps = g.exponential(mean_gap, CHUNK)
        types = g.choice(5, CHUNK, p=w)
        params = g.random(CHUNK)
        for i in range(CHUNK):
            if t + durs[i] > 0:
                out.append((node, t, t + durs[i], ANOMALY_TYPES[types[i]], float(params[i])))
            t = t + durs[i] + gaps[i]
            if t >= t_end:
                break
    return out


def misconfig_windows(cfg: SimConfig, t_end: float) -> list[tuple[float, float]]:
    """(start, end) of the misconfigured-rack windows starting before ``t_end``."""
    if cfg.misconfigured_rack < 0 or cfg.misconfig_days <= 0:
        return []
    out = []
    m = 0
    while True:
        start = (cfg.misconfig_start_day + m * cfg.misconfig_period_days) * 86400.0 + 7.5 * 3600
        if start >= t_end:
            return out
        out.append((start, start + cfg.misconfig_days * 86400.0))
        m += 1


def all_anomalies(cfg: SimConfig, topo: Topology, t_end: float) -> pd.DataFrame:
    """Every anomaly interval of every node, sorted by (node, start)."""
    rows: list[tuple] = []
    for n in range(topo.n):
        rows += node_anomalies(cfg, n, t_end)
    for a, b in misconfig_windows(cfg, t_end):
        for n in topo.nodes_of_rack(cfg.misconfigured_rack):
            rows.append((int(n), a, b, "misconfiguration", 0.0))
    df = pd.DataFrame(rows, columns=COLUMNS)
    df = df.sort_values(["node", "start"], kind="stable").reset_index(drop=True)
    classes: list[str] = []
    for n, part in df.groupby("node", sort=False):
        classes += assign(part["type"].tolist(), class_rng(cfg.seed, int(n)))
    df["fault_class"] = pd.Series(classes, index=df.index, dtype=object) if len(df) else pd.Series([], dtype=object)
    return df
