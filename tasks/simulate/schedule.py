"""The whole-horizon event schedule (small): failures, reboots, maintenance, anomalies, outages, jobs.

Built once per run for [epoch, end of the last rendered day] (events a little beyond, so jobs running
at midnight get their true end), then every (day, batch) is rendered from it independently. All
processes use per-node or per-chunk random streams, so the schedule of day d does not depend on how
many days are requested.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nodewatch.tasks.simulate.anomalies import all_anomalies, misconfig_windows
from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.events import JOB_LEVELS, NodeEvents
from nodewatch.tasks.simulate.failures import (
    PRECURSOR_KIND,
    _lead,
    connection_losses,
    frail_nodes,
    merge_down_intervals,
    node_renewal_failures,
    rack_events,
)
from nodewatch.tasks.simulate.maintenance import admin_reboots, maintenance_windows, user_reservations
from nodewatch.tasks.simulate.precursors import PrecursorShape
from nodewatch.tasks.simulate.rng import rng
from nodewatch.tasks.simulate.topology import Topology, build_topology
from nodewatch.tasks.simulate.workload import KEEP_ENDED_S, Jobs, SchedState, schedule_jobs

EVENT_MARGIN_S = 2 * 86400
_INDEX_LOCK = threading.Lock()


@dataclass
class Schedule:
    """Everything decided before rendering. Times are float seconds since ``cfg.epoch_s``."""

    cfg: SimConfig
    topo: Topology
    t_stop: float
    frail: np.ndarray
    failures: pd.DataFrame  # node t_fail t_detect t_boot t_up cause correlated precursor_start precursor_kind boot_*
    reboots: pd.DataFrame  # admin reboots: node t_fail t_boot t_up boot_*
    connloss: pd.DataFrame  # node start detect end
    maint: pd.DataFrame  # row m start end
    emergency: pd.DataFrame  # event rack start end
    user_resv: pd.DataFrame  # m user first n start end
    anomalies: pd.DataFrame  # node start end type param
    outages: pd.DataFrame  # node start end (collector gaps)
    fp_alerts: pd.DataFrame  # node start end service
    jobs: Jobs
    first_day: int = 0  # jobs are complete for days >= first_day (resumed from a boundary state)
    snapshots: list[SchedState] = field(default_factory=list)  # scheduler state at each later day boundary

    def node_events(self, nodes: np.ndarray) -> list:
        """Per-node event bundles (:class:`~nodewatch.tasks.simulate.events.NodeEvents`) for rendering ``nodes``."""
        self._index()
        jt = self.jobs.table
        levels = jt[list(JOB_LEVELS)].to_numpy()
        ids = jt["job_id"].to_numpy()
        out = []
        shape = PrecursorShape(self.cfg.precursor_shape, self.cfg.precursor_strength, self.cfg.precursor_period_s)
        for n in nodes:
            n = int(n)
            a, b = np.searchsorted(self._pair_node, [n, n + 1])
            pr = self._pairs.iloc[a:b]
            rows = pr["row"].to_numpy()
            lv = levels[rows].copy()
            # deterministic per-(job, node) imbalance of the job's utilisation (+-8%)
            h = ((ids[rows] * 2654435761 + n * 40503) % 1000) / 1000.0
            lv[:, 0] = np.clip(lv[:, 0] * (0.92 + 0.16 * h), 0, 1)
            f = self._fl.get(n)
            r = self._rb.get(n)
            down = []
            boots = []
            prec = []
            if f is not None:
                down += list(zip(f["t_fail"], f["t_up"], strict=True))
                boots += list(f["t_up"])
                for x in f.itertuples():
                    if x.precursor_kind is not None and not pd.isna(x.precursor_start):
                        prec.append((x.precursor_start, x.t_fail, x.precursor_kind))
            if r is not None:
                down += list(zip(r["t_fail"], r["t_up"], strict=True))
                boots += list(r["t_up"])
            og = self._og.get(n)
            outs = list(zip(og["start"], og["end"], strict=True)) if og is not None else []
            an = self._an.get(n, [])
            out.append(
                NodeEvents(
                    pr["start"].to_numpy(),
                    pr["end"].to_numpy(),
                    lv,
                    ids[rows],
                    an,
                    prec,
                    down,
                    np.sort(np.asarray(boots, dtype=float)),
                    outs,
                    shape,
                    self.syslog_precursors(n) if self.cfg.syslog_precursor_share >= 0 else None,
                )
            )
        return out

    def syslog_precursors(self, n: int) -> list[tuple[float, float, str]]:
        """Syslog burst windows ``(start, t_fail, kind)`` of node ``n`` at ``cfg.syslog_precursor_share`` >= 0.

        Each internal-cause failure of the node gets one with that probability (stream ``syslog_precursors``, per
        node, in failure order): the telemetry precursor's window when it has one, else a lead drawn like it.
        External causes (``rack_power``) get none: Ghiasvand & Ciorba's power outages leave no footprint.
        """
        self._index()
        f = self._fl.get(n)
        if f is None:
            return []
        g = rng(self.cfg.seed, "syslog_precursors", n)
        u = g.random(len(f))
        lead = _lead(self.cfg, g, len(f))
        out = []
        for i, x in enumerate(f.itertuples()):
            kind = PRECURSOR_KIND.get(x.cause)
            if x.cause == "rack_power" or kind is None or u[i] >= self.cfg.syslog_precursor_share:
                continue
            a = x.precursor_start if not pd.isna(x.precursor_start) else x.t_fail - lead[i]
            out.append((float(a), float(x.t_fail), kind))
        return out

    def _index(self) -> None:
        """Build per-node lookups once (thread-safe: Dask threads render batches concurrently)."""
        with _INDEX_LOCK:
            if getattr(self, "_ready", False):
                return
            self._pairs = self.node_pairs()
            self._pair_node = self._pairs["node"].to_numpy()
            cols = ["start", "end", "type", "param"]
            self._an = {k: list(v[cols].itertuples(index=False, name=None)) for k, v in self.anomalies.groupby("node")}
            self._fl = {k: v for k, v in self.failures.groupby("node")}
            self._rb = {k: v for k, v in self.reboots.groupby("node")}
            self._og = {k: v for k, v in self.outages.groupby("node")}
            self._downs = (
                {k: list(v.itertuples()) for k, v in self.failures.groupby("node")},
                {k: list(v.itertuples()) for k, v in self.reboots.groupby("node")},
            )
            self._ready = True

    def node_downs(self, n: int) -> tuple[list, list]:
        """(failures, admin reboots) of node ``n`` as lists of namedtuples."""
        self._index()
        return self._downs[0].get(n, []), self._downs[1].get(n, [])

    def node_pairs(self) -> pd.DataFrame:
        """(node, job row, start, end) for every allocated node of every job, sorted by node then start."""
        j = self.jobs
        rows = np.repeat(np.arange(len(j.table)), np.diff(j.offsets))
        df = pd.DataFrame(
            {"node": j.nodes, "row": rows, "start": j.table["start"].to_numpy()[rows], "end": j.table["end"].to_numpy()[rows]}
        )
        return df.sort_values(["node", "start"], kind="stable").reset_index(drop=True)


def _outages(cfg: SimConfig, topo: Topology, t_end: float) -> pd.DataFrame:
    rows = []
    rate = cfg.outage_per_node_day / 86400.0
    for n in range(topo.n):
        if rate <= 0:
            break
        g = rng(cfg.seed, "outages", n)
        t = 0.0
        while True:
            gaps = g.exponential(1.0 / rate, 32)
            durs = np.exp(np.log(cfg.outage_median_s) + 0.9 * g.standard_normal(32))
            stop = False
            for i in range(32):
                t += gaps[i]
                if t >= t_end:
                    stop = True
                    break
                rows.append((n, t, t + durs[i]))
            if stop:
                break
    rrate = cfg.rack_outage_per_rack_year / (365 * 86400.0)
    for r in range(cfg.n_racks):
        if rrate <= 0:
            break
        g = rng(cfg.seed, "rack_outages", r)
        t = 0.0
        while True:
            t += g.exponential(1.0 / rrate)
            if t >= t_end:
                break
            d = float(np.exp(np.log(1800.0) + 0.7 * g.standard_normal()))
            rows += [(int(n), t, t + d) for n in topo.nodes_of_rack(r)]
    return pd.DataFrame(rows, columns=["node", "start", "end"]).sort_values(["node", "start"]).reset_index(drop=True)


def _fp_alerts(cfg: SimConfig, n_nodes: int, t_end: float) -> pd.DataFrame:
    rows = []
    rate = cfg.fp_alerts_per_node_year / (365 * 86400.0)
    services = ("check_load", "check_mem", "check_disk", "check_ib", "check_temp", "check_nfs", "check_slurmd")
    for n in range(n_nodes):
        if rate <= 0:
            break
        g = rng(cfg.seed, "fp_alerts", n)
        t = 0.0
        while True:
            t += g.exponential(1.0 / rate)
            if t >= t_end:
                break
            rows.append((n, t, t + g.uniform(180, 1800), services[int(g.integers(len(services)))]))
    return pd.DataFrame(rows, columns=["node", "start", "end", "service"])


def build_schedule(cfg: SimConfig, n_days: int, begin: SchedState | None = None) -> Schedule:
    """Schedule for days ``0 .. n_days-1`` after ``cfg.start`` (events generated a little beyond).

    With ``begin`` (the scheduler state at the start of day ``begin.t / 86400``) only the jobs from that day on
    are scheduled (plus the running and recently ended ones it holds): the cost no longer grows with the
    number of days already simulated. Event tables (failures, anomalies, ...) are cheap per-node renewal
    processes and are always drawn from the epoch, so their event ids stay stable.
    """
    topo = build_topology(cfg)
    t_stop = n_days * 86400.0
    t_ev = t_stop + EVENT_MARGIN_S
    frail = frail_nodes(cfg)
    frail_set = set(frail.tolist())
    parts = [node_renewal_failures(cfg, n, n in frail_set, t_ev) for n in range(cfg.n_nodes)]
    rack_f, emergency = rack_events(cfg, topo, t_ev)
    fails = merge_down_intervals(pd.concat([*parts, rack_f], ignore_index=True))
    fails = fails[fails["t_fail"] < t_ev].reset_index(drop=True)
    fails["t_detect"] = fails["t_fail"] + cfg.slurmd_timeout_s
    fails["precursor_kind"] = np.where(fails["precursor_start"].notna(), fails["cause"].map(PRECURSOR_KIND), None)
    maint = maintenance_windows(cfg, t_ev)
    reboots = admin_reboots(cfg, topo, maint)
    # drop admin reboots of nodes that are down at that moment
    down_by_node: dict[int, list[tuple[float, float]]] = {n: [] for n in range(cfg.n_nodes)}
    for r in fails.itertuples():
        down_by_node[r.node].append((r.t_fail, r.t_up))
    keep = [not any(a <= r.t_fail < b for a, b in down_by_node[r.node]) for r in reboots.itertuples()]
    reboots = reboots[np.asarray(keep, dtype=bool)].reset_index(drop=True) if len(reboots) else reboots
    for r in reboots.itertuples():
        down_by_node[r.node].append((r.t_fail, r.t_up))
    cl = []
    for n in range(cfg.n_nodes):
        for a, b in connection_losses(cfg, n, t_ev):
            if not any(x < b and a < y for x, y in down_by_node[n]):
                cl.append((n, a, a + cfg.slurmd_timeout_s, b))
    connloss = pd.DataFrame(cl, columns=["node", "start", "detect", "end"])
    anomalies = all_anomalies(cfg, topo, t_ev)
    # stable ids: per-node sequence numbers never change when the horizon grows (new events come later)
    anomalies["event_id"] = anomalies["node"].astype(np.int64) * 1_000_000 + anomalies.groupby("node").cumcount()
    fails["event_id"] = fails["node"].astype(np.int64) * 1_000_000 + fails.groupby("node").cumcount()
    outages = _outages(cfg, topo, t_ev)
    fp = _fp_alerts(cfg, cfg.n_nodes, t_ev)
    # scheduler inputs (intervals and kill times that end before the resume point cannot matter any more)
    # (reservation jobs are re-drawn from their reservation's start, so keep a margin for them)
    t0 = begin.t - KEEP_ENDED_S - cfg.user_resv_hours * 3600.0 if begin is not None else -np.inf
    down = [[(a, b) for a, b in v if b >= t0] for v in (down_by_node[n] for n in range(cfg.n_nodes))]
    for c in connloss.itertuples():
        if c.end >= t0:
            down[c.node].append((c.start, c.end))
    for e in emergency.itertuples():
        if e.end >= t0:
            for n in topo.nodes_of_rack(e.rack):
                down[n].append((e.start, e.end))
    kill: list[list[float]] = [[] for _ in range(cfg.n_nodes)]
    for r in fails.itertuples():
        if r.t_detect >= t0:
            kill[r.node].append(r.t_detect)
    for c in connloss.itertuples():
        if c.detect >= t0:
            kill[c.node].append(c.detect)
    planned: list[list[tuple[float, float]]] = [[] for _ in range(cfg.n_nodes)]
    for w in maint.itertuples():
        if w.end >= t0:
            for n in np.flatnonzero(topo.row == w.row):
                planned[n].append((w.start, w.end))
    for a, b in misconfig_windows(cfg, t_ev):
        if b >= t0:
            for n in topo.nodes_of_rack(cfg.misconfigured_rack):
                planned[n].append((a, b))
    uresv = user_reservations(cfg, t_ev)
    for r in uresv.itertuples():
        if r.end >= t0:
            for n in range(r.first, r.first + r.n):
                planned[n].append((r.start, r.end))
    resv_jobs = uresv[uresv["end"] >= begin.t - KEEP_ENDED_S] if begin is not None else uresv
    jobs, snaps = schedule_jobs(cfg, t_stop, down, kill, planned, resv_jobs, begin, misconfig_windows(cfg, t_ev))
    first_day = int(round(begin.t / 86400.0)) if begin is not None else 0
    return Schedule(
        cfg,
        topo,
        t_stop,
        frail,
        fails,
        reboots,
        connloss,
        maint,
        emergency,
        uresv,
        anomalies,
        outages,
        fp,
        jobs,
        first_day,
        snaps,
    )
