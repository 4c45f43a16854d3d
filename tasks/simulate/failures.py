"""Node failures: per-node Weibull renewal, frail nodes, rack-correlated events, precursors, connection losses.

Each node's failure process is a renewal process whose up-times (recovery -> next crash) are
Weibull(k = ``failure_weibull_shape``, mean = ``node_mtbf_days``); frail nodes have their scale divided
by ``frail_factor``. Rack events (power/cooling) are a system-wide Poisson process that crashes
``rack_event_fraction`` of one rack within ``rack_event_spread_s`` (Ghiasvand & Ciorba's 10-minute
"time of failure" vicinity). A failure's timeline: crash ``t_fail`` -> slurmctld "not responding, setting
DOWN" at ``t_detect`` -> repair -> boot starts ``t_boot`` (kernel banner) -> ``t_up`` ("Startup finished",
"now responding"). A share of failures has a precursor window ``[t_fail - lead, t_fail)`` with telemetry
drift and a syslog burst. Every draw comes from a per-node stream in fixed-size chunks, so extending the
horizon never changes earlier events.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.rng import rng
from nodewatch.tasks.simulate.topology import Topology

CHUNK = 32
BURN_IN_S = 365 * 86400
PRECURSOR_KIND = {
    "memory_ue": "edac_burst",
    "cpu_mce": "mce_thermal",
    "kernel_panic": "soft_lockup",
    "network_ib": "ib_errors",
    "power_supply": "psu_fluctuation",
    "disk": "io_errors",
    "rack_power": "inlet_heating",
}
_NODE_CAUSES = ("memory_ue", "cpu_mce", "kernel_panic", "network_ib", "power_supply", "disk")
_NODE_CAUSE_P = np.array([0.3, 0.15, 0.2, 0.15, 0.1, 0.1])



def weibull_scale(cfg: SimConfig, frail: bool) -> float:
    """Weibull scale (s) giving mean up-time ``node_mtbf_days`` (divided by ``frail_factor`` for frail nodes)."""
    k = cfg.failure_weibull_shape
    scale = cfg.node_mtbf_days * 86400.0 / math.gamma(1.0 + 1.0 / k)
    return scale / cfg.frail_factor if frail else scale


def frail_nodes(cfg: SimConfig) -> np.ndarray:
    """Indices of the frail nodes (fixed by the seed)."""
    g = rng(cfg.seed, "failures", 10**6)
    k = min(cfg.frail_nodes, cfg.n_nodes)
    return np.sort(g.choice(cfg.n_nodes, size=k, replace=False)) if k else np.zeros(0, dtype=int)


def _lead(cfg: SimConfig, g: np.random.Generator, n: int) -> np.ndarray:
    lead = np.exp(np.log(cfg.precursor_median_s) + cfg.precursor_sigma * g.standard_normal(n))
    return np.clip(lead, cfg.precursor_min_s, cfg.precursor_max_s)


def _boot_times(cfg: SimConfig, g: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    kern = g.uniform(*cfg.boot_kernel_s, n)
    user = g.uniform(*cfg.boot_userspace_s, n)
    return kern, user


def node_renewal_failures(cfg: SimConfig, node: int, frail: bool, t_end: float) -> pd.DataFrame:
    """Independent failures of one node in [epoch, t_end) (seconds since the epoch)."""
    g = rng(cfg.seed, "failures", node)
    scale = weibull_scale(cfg, frail)
    rows = []
    t = -float(BURN_IN_S)
    while t < t_end:
        gaps = g.weibull(cfg.failure_weibull_shape, CHUNK) * scale
        repair = np.exp(np.log(cfg.repair_median_s) + cfg.repair_sigma * g.standard_normal(CHUNK))
        kern, user = _boot_times(cfg, g, CHUNK)
        has_pre = g.random(CHUNK) < cfg.precursor_share
        lead = _lead(cfg, g, CHUNK)
        cause = g.choice(len(_NODE_CAUSES), CHUNK, p=_NODE_CAUSE_P)
        for i in range(CHUNK):
            t_fail = t + gaps[i]
            t_boot = t_fail + max(repair[i], cfg.slurmd_timeout_s + 60.0)
            t_up = t_boot + kern[i] + user[i]
            if t_fail >= 0:
                rows.append((node, t_fail, t_boot, t_up, _NODE_CAUSES[cause[i]], False,
                             t_fail - lead[i] if has_pre[i] else np.nan, kern[i], user[i]))
            t = t_up
            if t >= t_end:
                break
    return pd.DataFrame(rows, columns=["node", "t_fail", "t_boot", "t_up", "cause", "correlated", "precursor_start",
                                       "boot_kernel", "boot_user"])


def rack_events(cfg: SimConfig, topo: Topology, t_end: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rack-correlated failures and the emergency (UNSCHEDULED_RESV) windows that follow them."""
    g = rng(cfg.seed, "rack_events")
    rate = cfg.rack_events_per_year / (365.0 * 86400.0)
    fails, resv = [], []
    t = 0.0
    ev = 0
    while rate > 0:
        t += g.exponential(1.0 / rate)
        if t >= t_end:
            break
        eg = rng(cfg.seed, "rack_events", ev)
        rack = int(eg.integers(cfg.n_racks))
        members = topo.nodes_of_rack(rack)
        hit = members[eg.random(len(members)) < cfg.rack_event_fraction]
        if len(hit) == 0:
            hit = members[:1]
        offs = eg.uniform(0, cfg.rack_event_spread_s, len(hit))
        repair = np.exp(np.log(cfg.repair_median_s * 1.5) + 0.5 * eg.standard_normal(len(hit)))
        kern, user = _boot_times(cfg, eg, len(hit))
        lead = float(_lead(cfg, eg, 1)[0])
        has_pre = bool(eg.random() < cfg.precursor_share)
        ups = []
        for j, n in enumerate(hit):
            t_fail = t + offs[j]
            t_boot = t_fail + max(repair[j], cfg.slurmd_timeout_s + 60.0)
            ups.append(t_boot + kern[j] + user[j])
            fails.append((int(n), t_fail, t_boot, ups[-1], "rack_power", True, t - lead if has_pre else np.nan,
                          kern[j], user[j]))
        resv.append((ev, rack, t, max(ups)))
        ev += 1
    return (
        pd.DataFrame(fails, columns=["node", "t_fail", "t_boot", "t_up", "cause", "correlated", "precursor_start",
                                     "boot_kernel", "boot_user"]),
        pd.DataFrame(resv, columns=["event", "rack", "start", "end"]),
    )


def merge_down_intervals(df: pd.DataFrame) -> pd.DataFrame:
    """Drop crashes that happen while the node is already down (first crash wins), per node."""
    df = df.sort_values(["node", "t_fail"], kind="stable").reset_index(drop=True)
    keep = np.ones(len(df), dtype=bool)
    node = df["node"].to_numpy()
    tf = df["t_fail"].to_numpy()
    tu = df["t_up"].to_numpy()
    last_node, last_up = -1, -np.inf
    for i in range(len(df)):
        if node[i] != last_node:
            last_node, last_up = node[i], -np.inf
        if tf[i] < last_up:
            keep[i] = False
            continue
        last_up = tu[i]
    return df[keep].reset_index(drop=True)


def connection_losses(cfg: SimConfig, node: int, t_end: float) -> np.ndarray:
    """(start, end) pairs of CONNECTION_LOSS episodes of one node in [0, t_end): Poisson starts, lognormal lengths."""
    rate = cfg.connloss_per_node_year / (365.0 * 86400.0)
    if rate <= 0:
        return np.zeros((0, 2))
    g = rng(cfg.seed, "connloss", node)
    out = []
    t = 0.0
    while True:
        gaps = g.exponential(1.0 / rate, CHUNK)
        durs = np.exp(np.log(cfg.connloss_median_s) + 0.8 * g.standard_normal(CHUNK))
        for i in range(CHUNK):
            t += gaps[i]
            if t >= t_end:
                return np.array(out).reshape(-1, 2)
            out.append((t, t + max(durs[i], cfg.slurmd_timeout_s + 30.0)))
