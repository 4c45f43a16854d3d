"""Admin maintenance (ADMIN_RESV): per-row windows every ``maint_period_days`` with node reboots inside.

Rows are staggered so that at most one row is in maintenance at a time. Slurm MAINT reservations
(``reservations.csv``) announce the windows; the scheduler never starts a job that would overlap one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.rng import rng
from nodewatch.tasks.simulate.topology import Topology


def n_rows(cfg: SimConfig) -> int:
    """Number of rows of racks."""
    return -(-cfg.n_racks // cfg.racks_per_row)


def maintenance_windows(cfg: SimConfig, t_end: float) -> pd.DataFrame:
    """Windows (row, index, start, end) in seconds since the epoch that start before ``t_end``."""
    rows = n_rows(cfg)
    out = []
    if cfg.maint_period_days <= 0 or cfg.maint_hours <= 0:
        return pd.DataFrame(out, columns=["row", "m", "start", "end"])
    step = max(1, cfg.maint_period_days // rows)
    for r in range(rows):
        m = 0
        while True:
            day = 3 + r * step + m * cfg.maint_period_days
            start = day * 86400.0 + cfg.maint_start_hour * 3600.0
            if start >= t_end:
                break
            out.append((r, m, start, start + cfg.maint_hours * 3600.0))
            m += 1
    return pd.DataFrame(out, columns=["row", "m", "start", "end"]).sort_values("start", kind="stable").reset_index(drop=True)


def admin_reboots(cfg: SimConfig, topo: Topology, windows: pd.DataFrame) -> pd.DataFrame:
    """Reboots inside maintenance windows: (node, t_fail=shutdown, t_boot, t_up, boot_kernel, boot_user)."""
    recs = []
    for w in windows.itertuples():
        g = rng(cfg.seed, "maintenance", w.row, w.m)
        nodes = np.flatnonzero(topo.row == w.row)
        pick = nodes[g.random(len(nodes)) < cfg.maint_reboot_share]
        span = (w.end - w.start) * 0.8
        t_down = w.start + g.uniform(0.05, 0.7, len(pick)) * span
        down = g.uniform(60, 1800, len(pick))
        kern = g.uniform(*cfg.boot_kernel_s, len(pick))
        user = g.uniform(*cfg.boot_userspace_s, len(pick))
        for j, n in enumerate(pick):
            t_boot = t_down[j] + down[j]
            recs.append((int(n), t_down[j], t_boot, t_boot + kern[j] + user[j], kern[j], user[j]))
    return pd.DataFrame(recs, columns=["node", "t_fail", "t_boot", "t_up", "boot_kernel", "boot_user"])


def user_reservations(cfg: SimConfig, t_end: float) -> pd.DataFrame:
    """User reservations (index m, user, first node, n nodes, start, end) starting before ``t_end``."""
    out = []
    if cfg.user_resv_period_days <= 0 or cfg.user_resv_nodes <= 0 or cfg.user_resv_hours <= 0:
        return pd.DataFrame(out, columns=["m", "user", "first", "n", "start", "end"])
    n = min(cfg.user_resv_nodes, cfg.n_nodes)
    m = 0
    while True:
        g = rng(cfg.seed, "maintenance", 10**6 + m)
        start = (1.0 + m * cfg.user_resv_period_days) * 86400.0 + float(g.uniform(6, 12)) * 3600.0
        if start >= t_end:
            break
        first = int(g.integers(0, cfg.n_nodes - n + 1))
        out.append((m, int(g.integers(cfg.n_users)), first, n, start, start + cfg.user_resv_hours * 3600.0))
        m += 1
    return pd.DataFrame(out, columns=["m", "user", "first", "n", "start", "end"])
