"""Jobs: a workload model fitted to a real SWF trace and a causal Slurm-like scheduler.

Arrivals are a renewal process with Weibull inter-arrival times in "operational time", warped by
the fitted hour-of-day profile; sizes, runtimes and time limits come from the fitted distributions
(:data:`nodewatch.tasks.simulate.config.THUNDER_FIT`). The scheduler is first-fit over a FIFO queue with
backfilling (a job that waited longer than ``STARVATION_S`` stops backfilling until it starts),
exclusive nodes, honours MAINT reservations (no job may overlap an admin window or the misconfigured
rack's window: Slurm would not start it) and never starts on a down node. Jobs whose nodes crash or
lose contact end ``NODE_FAIL`` when slurmctld marks the node DOWN. Everything is causal: simulating a
longer horizon never changes earlier jobs.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.rng import rng

CHUNK = 256
STARVATION_S = 4 * 3600.0
SCAN_LIMIT = 64
KEEP_ENDED_S = 86400.0
"""Jobs that ended this long before a day boundary stay in its :class:`SchedState` (rendering context)."""
FIRST_JOB_ID = 100001


@dataclass
class Jobs:
    """Scheduled jobs (one row per job) and their node lists in CSR form (``offsets``, ``nodes``)."""

    table: pd.DataFrame
    offsets: np.ndarray
    nodes: np.ndarray

    def nodes_of(self, i: int) -> np.ndarray:
        """Node indices of job row ``i``."""
        return self.nodes[self.offsets[i] : self.offsets[i + 1]]


@dataclass
class SchedState:
    """The scheduler at a day boundary ``t`` (seconds since the epoch): enough to continue without replaying the past.

    ``jobs`` holds the main-queue jobs that are pending (``start`` NaN) or started with ``end >= t - KEEP_ENDED_S``
    (running ones keep the nodes busy until their end), with their node lists in ``alloc``; ``pending`` the queue
    order (global rows = ``job_id - FIRST_JOB_ID``); ``next_row`` the first job submitted at or after ``t``, in
    arrival chunk ``next_row // CHUNK`` whose operational start time is ``chunk_tau0``; ``pointer`` the round-robin
    node pointer.
    """

    t: float
    pointer: int
    next_row: int
    chunk_tau0: float
    pending: list[int]
    jobs: pd.DataFrame
    alloc: list[np.ndarray]


def _warp(cfg: SimConfig, tau: np.ndarray) -> np.ndarray:
    """Map operational time to wall time so arrivals follow the fitted hour-of-day profile."""
    prof = np.asarray(cfg.workload["hour_profile"], dtype=float)
    prof = prof / prof.mean()
    cum = np.concatenate([[0.0], np.cumsum(prof) * 3600.0])  # operational seconds at each hour edge
    day, rem = np.divmod(tau, 86400.0)
    return day * 86400.0 + np.interp(rem, cum, np.arange(25) * 3600.0)


def arrivals_chunk(cfg: SimConfig, c: int, tau0: float) -> tuple[pd.DataFrame, float]:
    """Jobs ``c*CHUNK .. (c+1)*CHUNK-1``: attributes drawn from stream ``jobs/c``; returns them and the last op-time."""
    w = cfg.workload
    g = rng(cfg.seed, "jobs", c)
    # the trace's arrival rate belongs to its machine size: rescale to n_nodes
    scale = w["interarrival_weibull_scale_s"] * w["max_nodes"] / (cfg.n_nodes * cfg.load_scale)
    gaps = g.weibull(w["interarrival_weibull_shape"], CHUNK) * scale
    tau = tau0 + np.cumsum(gaps)
    submit = _warp(cfg, tau)
    sizes = np.asarray(w["node_sizes"])
    p = np.asarray(w["node_size_probs"], dtype=float)
    si = g.choice(len(sizes), CHUNK, p=p / p.sum())
    nn = np.minimum(sizes[si], max(1, cfg.n_nodes // 4))
    mu = np.asarray(w["size_log_runtime_means"])[si]
    sd = np.asarray(w["size_log_runtime_sigmas"])[si]
    runtime = np.clip(np.exp(mu + sd * g.standard_normal(CHUNK)), 5.0, cfg.max_timelimit_s)
    z = g.standard_normal(CHUNK)
    lim = runtime * np.exp(np.abs(w["log_limit_over_runtime_mean"] + w["log_limit_over_runtime_sigma"] * z))
    timelimit = np.clip(np.ceil(lim / 300.0) * 300.0, 600.0, cfg.max_timelimit_s)
    runtime = np.minimum(runtime, timelimit)
    shares = np.asarray(w["status_share_completed_failed_cancelled"], dtype=float)
    extra = np.array([cfg.timeout_share, cfg.oom_share, cfg.cancel_share])
    base = shares * (1 - extra.sum()) / shares.sum()
    outcome_p = np.concatenate([base, extra])  # COMPLETED FAILED CANCELLED TIMEOUT OUT_OF_MEMORY CANCELLED(extra)
    outcome = g.choice(6, CHUNK, p=outcome_p / outcome_p.sum())
    u = g.random(CHUNK)
    state = np.array(["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "CANCELLED"])[outcome]
    runtime = np.where(state == "TIMEOUT", timelimit, runtime)
    runtime = np.where(state == "OUT_OF_MEMORY", np.maximum(5.0, runtime * (0.2 + 0.8 * u)), runtime)
    runtime = np.where(state == "FAILED", np.maximum(5.0, runtime * (0.05 + 0.95 * u)), runtime)
    pending_cancel = (state == "CANCELLED") & (u < 0.3)
    cancel_after = g.exponential(3600.0, CHUNK)
    runtime = np.where((state == "CANCELLED") & ~pending_cancel, np.maximum(5.0, runtime * u), runtime)
    zipf = 1.0 / np.arange(1, cfg.n_users + 1) ** 1.1
    user = g.choice(cfg.n_users, CHUNK, p=zipf / zipf.sum())
    exitc = np.where(state == "FAILED", g.choice([1, 2, 127, 139], CHUNK, p=[0.7, 0.1, 0.1, 0.1]), 0)
    df = pd.DataFrame(
        {
            "job_id": 100001 + c * CHUNK + np.arange(CHUNK),
            "submit": np.round(submit),
            "nnodes": nn.astype(int),
            "runtime": np.round(runtime),
            "timelimit": timelimit,
            "state": state,
            "pending_cancel": pending_cancel,
            "cancel_at": np.round(submit + 60 + cancel_after),
            "user": user.astype(int),
            "exit": exitc.astype(int),
            "util": g.beta(6, 2, CHUNK),
            "mem": g.beta(2, 3, CHUNK),
            "net": np.exp(g.normal(np.log(2e6), 1.0, CHUNK)),
            "ib": np.exp(g.normal(np.log(5e7), 1.2, CHUNK)),
            "disk_r": np.exp(g.normal(np.log(2e5), 1.0, CHUNK)),
            "disk_w": np.exp(g.normal(np.log(5e5), 1.0, CHUNK)),
            "lustre": np.exp(g.normal(np.log(3e6), 1.3, CHUNK)),
            "ckpt_period": g.choice([1800, 3600, 7200, 0], CHUNK).astype(float),
            "name": g.choice(
                [
                    "vasp_std",
                    "lmp_mpi",
                    "gmx_mpi",
                    "wrf.exe",
                    "namd2",
                    "python",
                    "run.sh",
                    "cp2k.psmp",
                    "nek5000",
                    "openfoam",
                    "bash",
                    "pw.x",
                ],
                CHUNK,
            ),
        }
    )
    return df, float(tau[-1])


def _padded(per_node: list[list[tuple[float, float]]]) -> tuple[np.ndarray, np.ndarray]:
    k = max(1, max((len(x) for x in per_node), default=1))
    s = np.full((len(per_node), k), np.inf)
    e = np.full((len(per_node), k), np.inf)
    for i, lst in enumerate(per_node):
        for j, (a, b) in enumerate(sorted(lst)):
            s[i, j], e[i, j] = a, b
    return s, e


def schedule_jobs(
    cfg: SimConfig,
    t_stop: float,
    down: list[list[tuple[float, float]]],
    kill: list[list[float]],
    planned: list[list[tuple[float, float]]],
    resv: pd.DataFrame | None = None,
    begin: SchedState | None = None,
    hold: list[tuple[float, float]] | None = None,
) -> tuple[Jobs, list[SchedState]]:
    """Run the scheduler until ``t_stop`` (seconds since epoch), from the epoch or from the boundary state ``begin``.

    Returns the jobs and the scheduler state at every day boundary after the start, up to ``t_stop``. Resuming
    from a boundary state gives exactly the jobs of an uninterrupted run (same heap order: global rows).

    Args:
        down: per node, intervals when the node cannot start jobs (crash..up, reboots, emergency resv).
        kill: per node, times at which slurmctld sets the node DOWN (jobs on it end NODE_FAIL then).
        planned: per node, intervals known in advance (MAINT and user reservations, misconfigured rack).
        resv: user reservations (:func:`nodewatch.tasks.simulate.maintenance.user_reservations`); their jobs come
            from :func:`reservation_jobs`.
    """
    n = cfg.n_nodes
    ds, de = _padded(down)
    ps, pe = _padded(planned)
    kk = max(1, max((len(x) for x in kill), default=1))
    km = np.full((n, kk), np.inf)
    for i, lst in enumerate(kill):
        km[i, : len(lst)] = sorted(lst)
    planned_starts = np.unique(ps[np.isfinite(ps)])

    t_begin = begin.t if begin is not None else 0.0
    busy = np.zeros(n, dtype=bool)
    pointer = begin.pointer if begin is not None else 0
    heap: list[tuple[float, int, int]] = []  # (time, kind, local job row); kind 0=end,1=arrive,2=tick
    c = begin.next_row // CHUNK if begin is not None else 0
    tau = begin.chunk_tau0 if begin is not None else 0.0
    jobs_all: list[pd.DataFrame] = []
    chunk_tau0: dict[int, float] = {}
    # pre-draw arrivals up to t_stop
    while True:
        chunk_tau0[c] = tau
        df, tau = arrivals_chunk(cfg, c, tau)
        jobs_all.append(df)
        c += 1
        if df["submit"].iloc[-1] >= t_stop:
            break
    J = pd.concat(jobs_all, ignore_index=True)
    first_row = min(chunk_tau0) * CHUNK
    arrival_submit = J["submit"].to_numpy()
    J = J[(J["submit"] < t_stop) & (J["submit"] >= t_begin)]
    n_old = 0
    if begin is not None and len(begin.jobs):
        old = begin.jobs[list(J.columns)]
        n_old = len(old)
        J = pd.concat([old, J], ignore_index=True)
    J = J.reset_index(drop=True)
    grow = (J["job_id"].to_numpy() - FIRST_JOB_ID).astype(np.int64)  # global rows: heap ties break as in one long run
    submit = J["submit"].to_numpy()
    start = np.full(len(J), np.nan)
    end = np.full(len(J), np.nan)
    final_state = J["state"].to_numpy().astype(object).copy()
    alloc = [np.zeros(0, dtype=int)] * len(J)
    pending: list[int] = []
    if begin is not None:
        local = {int(g_): i for i, g_ in enumerate(grow[:n_old])}
        bj = begin.jobs
        start[:n_old] = bj["start"].to_numpy()
        end[:n_old] = bj["end"].to_numpy()
        final_state[:n_old] = bj["state"].to_numpy()
        for i in range(n_old):
            alloc[i] = begin.alloc[i]
            if np.isfinite(start[i]) and end[i] >= t_begin and len(alloc[i]):
                busy[alloc[i]] = True
                heapq.heappush(heap, (end[i], 0, i))
        pending = [local[g_] for g_ in begin.pending]
    for i in range(n_old, len(J)):
        heapq.heappush(heap, (submit[i], 1, i))
    for t in np.unique(np.concatenate([de[np.isfinite(de)], pe[np.isfinite(pe)]])):
        if t_begin <= t < t_stop:
            heapq.heappush(heap, (float(t), 2, -1))
    nnodes = J["nnodes"].to_numpy()
    tl = J["timelimit"].to_numpy()
    runtime = J["runtime"].to_numpy()
    pend_cancel = J["pending_cancel"].to_numpy()
    cancel_at = J["cancel_at"].to_numpy()
    snapshots: list[SchedState] = []
    next_b = (np.floor(t_begin / 86400.0) + 1) * 86400.0

    def snapshot(b: float) -> None:
        started = np.isfinite(start)
        keep = (started & (end >= b - KEEP_ENDED_S)) | np.isin(np.arange(len(J)), pending)
        rows = np.flatnonzero(keep)
        js = J.iloc[rows].copy()
        js["start"], js["end"], js["state"] = start[rows], end[rows], final_state[rows]
        nxt = first_row + int(np.searchsorted(arrival_submit, b, side="left"))
        snapshots.append(
            SchedState(
                b,
                pointer,
                nxt,
                chunk_tau0[nxt // CHUNK],
                [int(grow[j]) for j in pending],
                js.reset_index(drop=True),
                [alloc[i] for i in rows],
            )
        )

    def schedule_pass(t: float) -> None:
        nonlocal pointer
        if not pending:
            return
        blocked = ((ds <= t) & (de > t)).any(1) | ((ps <= t) & (pe > t)).any(1)
        avail = ~busy & ~blocked
        if not avail.any():
            return
        nxt = np.searchsorted(planned_starts, t, side="right")
        near_maint = nxt < len(planned_starts) and planned_starts[nxt] < t + cfg.max_timelimit_s
        free_count = int(avail.sum())
        scanned = 0
        started = []
        for qi, j in enumerate(pending):
            if pend_cancel[j] and cancel_at[j] <= t:
                start[j] = end[j] = cancel_at[j]
                started.append(qi)
                continue
            if scanned >= SCAN_LIMIT or free_count == 0:
                break
            scanned += 1
            k = nnodes[j]
            if near_maint:
                cand = avail & ~((ps < t + tl[j]) & (pe > t)).any(1)
                if cand.sum() < k:
                    if qi == 0 and t - submit[j] > STARVATION_S:
                        break
                    continue
            else:
                if free_count < k:
                    if qi == 0 and t - submit[j] > STARVATION_S:
                        break
                    continue
                cand = avail
            idx = np.flatnonzero(cand)
            first = np.searchsorted(idx, pointer)
            pick = np.concatenate([idx[first:], idx[:first]])[:k]
            pointer = int(pick[-1]) + 1
            busy[pick] = True
            avail[pick] = False
            free_count -= k
            start[j] = t
            t_end = t + runtime[j]
            if pend_cancel[j]:
                t_end = min(t_end, max(cancel_at[j], t + 5.0))
            kt = km[pick]
            hit = kt[(kt >= t) & (kt < t_end)]
            if hit.size:
                t_end = float(hit.min())
                final_state[j] = "NODE_FAIL"
            end[j] = t_end
            alloc[j] = np.sort(pick)
            heapq.heappush(heap, (t_end, 0, j))
            started.append(qi)
        for qi in reversed(started):
            pending.pop(qi)

    while heap:
        t, kind, j = heapq.heappop(heap)
        while next_b <= min(t, t_stop):
            snapshot(next_b)
            next_b += 86400.0
        if t >= t_stop:
            break
        if kind == 0:
            busy[alloc[j]] = False
        elif kind == 1:
            pending.append(j)
        # process all events at the same time before scheduling
        while heap and heap[0][0] == t:
            _, k2, j2 = heapq.heappop(heap)
            if k2 == 0:
                busy[alloc[j2]] = False
            elif k2 == 1:
                pending.append(j2)
        schedule_pass(t)
    while next_b <= t_stop:
        snapshot(next_b)
        next_b += 86400.0
    for j in pending:  # cancelled while pending before the horizon
        if pend_cancel[j] and cancel_at[j] < t_stop:
            start[j] = end[j] = cancel_at[j]
    J["start"] = start
    J["end"] = end
    J["state"] = final_state
    J["reservation"] = ""
    keep = np.isfinite(start)
    J = J[keep].reset_index(drop=True)
    kept_alloc = [alloc[i] for i in np.flatnonzero(keep)]
    if resv is not None and len(resv):
        RJ, ralloc = reservation_jobs(cfg, resv, t_stop, ds, de, km, hold)
        if len(RJ):
            J = pd.concat([J, RJ[J.columns]], ignore_index=True)
            kept_alloc += ralloc
    offsets = np.concatenate([[0], np.cumsum([len(a) for a in kept_alloc])]).astype(np.int64)
    nodes = np.concatenate(kept_alloc) if kept_alloc else np.zeros(0, dtype=int)
    J["alloc_n"] = np.diff(offsets)
    return Jobs(J, offsets, nodes.astype(np.int64)), snapshots


def reservation_jobs(
    cfg: SimConfig,
    resv: pd.DataFrame,
    t_stop: float,
    ds: np.ndarray,
    de: np.ndarray,
    km: np.ndarray,
    hold: list[tuple[float, float]] | None = None,
) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """Jobs of the reservation's project inside each user reservation: back-to-back runs on the nodes that are up,
    separated by idle gaps (SaNSA's RESERVED_IDLE); NODE_FAIL when one of their nodes goes DOWN.

    ``hold``: windows of the misconfigured rack (Slurm starts nothing there; jobs end before a window opens).
    """
    hold_nodes: set[int] = set()
    if hold:
        from nodewatch.tasks.simulate.topology import build_topology

        hold_nodes = set(build_topology(cfg).nodes_of_rack(cfg.misconfigured_rack).tolist())
    rows: list[dict] = []
    allocs: list[np.ndarray] = []
    for r in resv.itertuples():
        g = rng(cfg.seed, "jobs", 10**7 + int(r.m))
        nodes = np.arange(r.first, r.first + r.n)
        t = r.start + g.exponential(1800.0)
        k = 0
        while t < min(r.end, t_stop) and k < 500:
            up = ~((ds[nodes] <= t) & (de[nodes] > t)).any(1)
            for a, b in hold or []:
                if a <= t < b:
                    up &= ~np.isin(nodes, list(hold_nodes))
            dur = float(np.clip(np.exp(g.normal(np.log(7200.0), 0.6)), 300.0, max(300.0, r.end - t)))
            gap = float(g.exponential(2700.0))
            levels = (
                g.beta(6, 2),
                g.beta(2, 3),
                np.exp(g.normal(np.log(2e6), 1.0)),
                np.exp(g.normal(np.log(5e7), 1.2)),
                np.exp(g.normal(np.log(2e5), 1.0)),
                np.exp(g.normal(np.log(5e5), 1.0)),
                np.exp(g.normal(np.log(3e6), 1.3)),
            )
            pick = nodes[up]
            if len(pick):
                end = min(t + dur, r.end)
                if hold and np.isin(pick, list(hold_nodes)).any():
                    end = min([end] + [a for a, _ in hold if a > t])
                kt = km[pick]
                hit = kt[(kt >= t) & (kt < end)]
                state = "COMPLETED"
                if hit.size:
                    end, state = float(hit.min()), "NODE_FAIL"
                rows.append(
                    {
                        "job_id": 900000 + int(r.m) * 1000 + k,
                        "submit": round(t) - 60.0,
                        "nnodes": len(pick),
                        "runtime": round(end - t),
                        "timelimit": float(np.ceil((r.end - t) / 300.0) * 300.0),
                        "state": state,
                        "pending_cancel": False,
                        "cancel_at": np.nan,
                        "user": int(r.user),
                        "exit": 0,
                        "util": levels[0],
                        "mem": levels[1],
                        "net": levels[2],
                        "ib": levels[3],
                        "disk_r": levels[4],
                        "disk_w": levels[5],
                        "lustre": levels[6],
                        "ckpt_period": 0.0,
                        "name": "campaign.sh",
                        "start": float(round(t)),
                        "end": float(round(end)),
                        "reservation": f"resv_u{int(r.user):04d}_{int(r.m):03d}",
                    }
                )
                allocs.append(pick.astype(np.int64))
                t = end + gap
            else:
                t = t + gap
            k += 1
    return pd.DataFrame(rows), allocs
