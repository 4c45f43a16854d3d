"""Per-(day, batch) telemetry rendering: job-driven, heterogeneous, physically coupled, vectorised.

Model (docs/simulator.md §Telemetry): every node has piecewise-constant *drivers* (idle baseline, CPU
utilisation, memory share, Ethernet / InfiniBand / disk / Lustre rates, error rates) set by the jobs it
runs, its anomalies and failure precursors. Driver integrals are exact (piecewise-constant rates), so

* counters = linear combination of driver integrals since the last boot + telescoping hash noise
  ``b * (eps_i - eps_first)``: monotonic, reset at every reboot, continuous across midnight, and
  computable for any day without rendering the previous one;
* gauges = functions of per-step driver averages with node heterogeneity and physical couplings:
  power <- utilisation, CPU temperature <- power (first-order thermal lag, tau 3 min, warmed up over the
  previous hour), fans <- temperature, exhaust <- power, plus Gaussian sensor noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter

from nodewatch.tasks.simulate.events import JOB_LEVELS, NodeEvents
from nodewatch.tasks.simulate.metrics import CORES_PER_SOCKET, COUNTERS, MEM_BYTES, METRIC_INDEX, METRICS
from nodewatch.tasks.simulate.rng import rng
from nodewatch.tasks.simulate.schedule import Schedule

DRIVERS = ("idle", "util", "mem", "net", "ib", "disk_r", "disk_w", "lustre", "err_ce", "err_ib", "err_net", "linkdown", "hog")
D = {k: i for i, k in enumerate(DRIVERS)}
WARMUP_S = 3600
THERMAL_TAU_S = 180.0
FAN_T0_C = 28.0
"""Temperature where the fan curve leaves its floor speed ``fan_base``."""
IDLE = {"util": 0.015, "mem": 0.04}

# counter rate (per second) = W[c] @ drivers; the 'idle' column is the always-on baseline.
_W = {
    "net_rx_bytes": {"idle": 2e4, "net": 1.0},
    "net_tx_bytes": {"idle": 1.5e4, "net": 0.8},
    "net_rx_packets": {"idle": 40, "net": 1 / 900},
    "net_tx_packets": {"idle": 35, "net": 1 / 1000},
    "net_errors": {"idle": 1e-6, "err_net": 1.0},
    "ib_rx_bytes": {"idle": 1e3, "ib": 1.0},
    "ib_tx_bytes": {"idle": 1e3, "ib": 0.95},
    "ib_rx_packets": {"idle": 2, "ib": 1 / 2048},
    "ib_tx_packets": {"idle": 2, "ib": 1 / 2100},
    "ib_errors": {"idle": 1e-6, "err_ib": 1.0},
    "ib_link_downed": {"idle": 1e-8, "linkdown": 1.0},
    "disk_read_bytes": {"idle": 5e3, "disk_r": 1.0},
    "disk_write_bytes": {"idle": 2e4, "disk_w": 1.0},
    "disk_read_ops": {"idle": 1, "disk_r": 1 / 16384},
    "disk_write_ops": {"idle": 3, "disk_w": 1 / 32768},
    "lustre_read_bytes": {"idle": 1e3, "lustre": 0.4},
    "lustre_write_bytes": {"idle": 1e3, "lustre": 0.6},
    "lustre_ops": {"idle": 5, "lustre": 1e-5},
    "nfs_ops": {"idle": 2, "util": 20},
    "edac_ce_count": {"idle": 2e-6, "err_ce": 1.0},
    "edac_ue_count": {"idle": 1e-9},
    "ctx_switches": {"idle": 3000, "util": 60000, "hog": 20000},
    "interrupts": {"idle": 5000, "util": 40000, "ib": 1 / 4096},
}
W_COUNTERS = np.array([[_W[c].get(k, 0.0) for k in DRIVERS] for c in COUNTERS])


@dataclass(frozen=True)
class NodeTraits:
    """Per-node heterogeneity (drawn once per node from its own stream)."""

    p_idle: np.ndarray  # W per socket at idle
    p_max: np.ndarray  # W per socket at full load
    r_th: np.ndarray  # degC per W
    fan_base: np.ndarray  # rpm
    fan_gain: np.ndarray  # rpm per degC above FAN_T0_C (PWM curve)
    inlet: np.ndarray  # degC
    bias: np.ndarray  # sensor bias degC
    cscale: np.ndarray  # (B, C) counter scale
    uptime0: np.ndarray  # seconds up before the epoch
    sock_imb: np.ndarray  # socket 0 vs 1 utilisation imbalance
    fan_mult: np.ndarray  # (B, 6) per-fan speed multiplier


def node_traits(seed: int, nodes: np.ndarray, racks: np.ndarray) -> NodeTraits:
    """Heterogeneity parameters for ``nodes`` (deterministic per node)."""
    vals = []
    for n, r in zip(nodes, racks, strict=True):
        g = rng(seed, "heterogeneity", int(n))
        rg = rng(seed, "heterogeneity", 10**6 + int(r))
        vals.append(
            (
                g.uniform(35, 55),
                g.uniform(170, 240),
                g.uniform(0.19, 0.25),
                g.uniform(2800, 3400),
                g.uniform(130, 170),
                rg.uniform(19.0, 24.0) + g.normal(0, 0.4),
                g.normal(0, 0.8),
                g.uniform(0.8, 1.25, len(COUNTERS)),
                g.uniform(2, 60) * 86400.0,
                g.normal(0, 0.04),
                1 + 0.03 * g.standard_normal(6),
            )
        )
    cols = list(zip(*vals, strict=True))
    return NodeTraits(*(np.asarray(c, dtype=float) for c in cols))


def _hash_unit(seed: int, node: int, idx: np.ndarray, c: int) -> np.ndarray:
    """Deterministic uniform [0,1) per (seed, node, counter, global step index) via splitmix64."""
    x = (idx.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64((seed * 1_000_003 + node * 131 + c) & (2**63 - 1))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def driver_pieces(ev: NodeEvents, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints (P+1) and piecewise-constant driver values (P, K) of one node on [lo, hi]."""
    pts = [np.array([lo, hi]), ev.job_start, ev.job_end]
    shape = ev.precursor_shape
    pts += [np.array([a, b]) for a, b, _, _ in ev.anomalies] + [shape.rate_breakpoints(a, b) for a, b, _ in ev.precursors]
    bp = np.unique(np.clip(np.concatenate(pts), lo, hi))
    mid = (bp[:-1] + bp[1:]) / 2
    dv = np.zeros((len(mid), len(DRIVERS)))
    dv[:, D["idle"]] = 1.0
    dv[:, D["util"]] = IDLE["util"]
    dv[:, D["mem"]] = IDLE["mem"]
    if len(ev.job_start):
        j = np.searchsorted(ev.job_start, mid, side="right") - 1
        act = (j >= 0) & (mid < ev.job_end[np.maximum(j, 0)])
        lv = ev.job_levels[np.maximum(j, 0)]
        for i, k in enumerate(JOB_LEVELS):
            dv[act, D[k]] = lv[act, i] if k not in IDLE else np.maximum(lv[act, i], IDLE[k])
    for a, b, typ, p in ev.anomalies:
        m = (mid >= a) & (mid < b)
        if not m.any():
            continue
        if typ == "network_degradation":
            dv[m, D["net"]] *= 0.3
            dv[m, D["ib"]] *= 0.25
            dv[m, D["err_ib"]] += 0.02 + 0.2 * p
            dv[m, D["err_net"]] += 0.005
        elif typ == "disk_slowdown":
            for k in ("disk_r", "disk_w", "lustre"):
                dv[m, D[k]] *= 0.3
        elif typ == "cpu_hog":
            dv[m, D["hog"]] = 0.35 + 0.4 * p
    for a, b, kind in ev.precursors:
        m = (mid >= a) & (mid < b)
        s = shape.rate(mid[m], a)  # precursor strength (and on/off phase), tasks/simulate/precursors.py
        if kind == "edac_burst":
            dv[m, D["err_ce"]] += 0.3 * s
        elif kind == "ib_errors":
            dv[m, D["err_ib"]] += 0.5 * s
            dv[m, D["linkdown"]] += 1 / 1800 * s
        elif kind == "io_errors":
            dv[m, D["disk_w"]] *= np.maximum(1 - 0.5 * s, 0.05)
    return bp, dv


def integrate(bp: np.ndarray, dv: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Exact integrals of the piecewise-constant drivers from ``bp[0]`` to each time in ``t`` -> (len(t), K)."""
    cum = np.vstack([np.zeros((1, dv.shape[1])), np.cumsum(dv * np.diff(bp)[:, None], axis=0)])
    i = np.clip(np.searchsorted(bp, t, side="right") - 1, 0, len(dv) - 1)
    return cum[i] + dv[i] * (t - bp[i])[:, None]


def _ramp(t: np.ndarray, a: float, b: float) -> np.ndarray:
    """0 before a, rising linearly to 1 at b, 0 after b."""
    return np.where((t >= a) & (t < b), (t - a) / max(b - a, 1.0), 0.0)


def _day_integrals(ev: NodeEvents, tg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Driver pieces on the day's grid ``tg`` (warm-up hour .. next midnight) and their integrals at every grid time.

    The pieces always start at ``tg[0]``, whatever happened before, so a day's integrals are the same numbers
    whether the day is rendered in a long run or alone from a saved boundary state.
    """
    bp, dv = driver_pieces(ev, float(tg[0]), float(tg[-1]))
    return bp, dv, integrate(bp, dv, tg)


def _last_boot(first_boot: float, ev: NodeEvents, t: float) -> float:
    b = ev.boots[ev.boots <= t]
    return float(b.max()) if len(b) else first_boot


def _next_base(
    ev: NodeEvents, first_boot: float, bp: np.ndarray, dv: np.ndarray, Ig: np.ndarray, base: np.ndarray, t0: float, Wn: int
) -> np.ndarray:
    """Driver integrals since the last boot at the next midnight, from those at ``t0`` (this midnight)."""
    lb = _last_boot(first_boot, ev, t0 + 86400.0)
    if lb > t0:
        return Ig[-1] - integrate(bp, dv, np.array([lb]))[0]
    return base + (Ig[-1] - Ig[Wn])


def _grid(step: int, day: int) -> tuple[np.ndarray, int, int]:
    T = 86400 // step
    Wn = WARMUP_S // step
    return day * 86400.0 + (np.arange(-Wn, T + 1) * step).astype(float), Wn, T


def initial_base(sched: Schedule, events: list[NodeEvents], nodes: np.ndarray) -> np.ndarray:
    """(B, K) driver integrals from each node's last boot before the epoch up to the epoch (the day-0 counter base)."""
    traits = node_traits(sched.cfg.seed, nodes, sched.topo.rack[nodes])
    out = np.zeros((len(nodes), len(DRIVERS)))
    for b, ev in enumerate(events):
        lb = _last_boot(-float(traits.uptime0[b]), ev, 0.0)
        if lb < 0:
            bp, dv = driver_pieces(ev, lb, 0.0)
            out[b] = integrate(bp, dv, np.array([0.0]))[0]
    return out


def step_base(sched: Schedule, events: list[NodeEvents], nodes: np.ndarray, day: int, base: np.ndarray) -> np.ndarray:
    """Counter base at the end of ``day`` without rendering it (same numbers as :func:`render` returns)."""
    traits = node_traits(sched.cfg.seed, nodes, sched.topo.rack[nodes])
    tg, Wn, _ = _grid(sched.cfg.step_s, day)
    out = np.empty_like(base)
    for b, ev in enumerate(events):
        bp, dv, Ig = _day_integrals(ev, tg)
        out[b] = _next_base(ev, -float(traits.uptime0[b]), bp, dv, Ig, base[b], day * 86400.0, Wn)
    return out


def render(
    sched: Schedule, events: list[NodeEvents], nodes: np.ndarray, day: int, base: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Telemetry of ``nodes`` for ``day``.

    ``base`` (B, K) holds each node's driver integrals from its last boot up to this midnight (:func:`initial_base`
    for day 0, then what the previous day returned). Returns values (B, M, T) float64, present mask (B, T),
    job id (B, T; 0 = none) and the base at the next midnight.
    """
    cfg = sched.cfg
    step = cfg.step_s
    tg, Wn, T = _grid(step, day)
    t0 = day * 86400.0
    B = len(nodes)
    traits = node_traits(cfg.seed, nodes, sched.topo.rack[nodes])
    g = rng(cfg.seed, "telemetry", day, int(nodes[0]))
    K = len(DRIVERS)
    drv = np.zeros((B, len(tg) - 1, K))
    counters = np.zeros((B, len(COUNTERS), T))
    present = np.ones((B, T), dtype=bool)
    jobid = np.zeros((B, T), dtype=np.int64)
    next_base = np.empty_like(base)
    ts = tg[Wn : Wn + T]
    gidx = np.rint(ts / step).astype(np.int64) + 10**9
    for b, (n, ev) in enumerate(zip(nodes, events, strict=True)):
        first_boot = -traits.uptime0[b]
        bp, dv, Ig = _day_integrals(ev, tg)
        drv[b] = np.diff(Ig, axis=0) / step
        next_base[b] = _next_base(ev, first_boot, bp, dv, Ig, base[b], t0, Wn)
        allboots = np.concatenate([[first_boot], ev.boots])
        bi = np.searchsorted(allboots, ts, side="right") - 1
        bref = allboots[np.maximum(bi, 0)]
        inday = bref > t0  # rebooted during the day: integrate from that boot
        Is = base[b] + (Ig[Wn : Wn + T] - Ig[Wn])
        if inday.any():
            Is[inday] = Ig[Wn : Wn + T][inday] - integrate(bp, dv, bref[inday])
        since = Is @ (W_COUNTERS * traits.cscale[b][:, None]).T  # (T, C)
        # telescoping noise: eps at this step minus eps at the first step after the boot
        first_idx = np.rint(np.ceil(bref / step)).astype(np.int64) + 10**9
        for c in range(len(COUNTERS)):
            amp = W_COUNTERS[c, 0] * traits.cscale[b][c] * step * 0.5
            eps = _hash_unit(cfg.seed, int(n), gidx, c) - _hash_unit(cfg.seed, int(n), first_idx, c)
            counters[b, c] = np.floor(np.maximum(since[:, c] + amp * eps, 0.0))
        for a, z in ev.down:
            present[b, (ts >= a) & (ts < z)] = False
        for a, z in ev.outages:
            present[b, (ts >= a) & (ts < z)] = False
        if len(ev.job_start):
            j = np.searchsorted(ev.job_start, ts, side="right") - 1
            act = (j >= 0) & (ts < ev.job_end[np.maximum(j, 0)])
            jobid[b] = np.where(act, ev.job_ids[np.maximum(j, 0)], 0)
    gauges = _gauges(cfg.seed, sched, traits, events, nodes, drv, tg[:-1] + step, Wn, T, g)
    vals = np.empty((B, len(METRICS), T))
    for name, arr in gauges.items():
        vals[:, METRIC_INDEX[name]] = arr
    for c, name in enumerate(COUNTERS):
        vals[:, METRIC_INDEX[name]] = counters[:, c]
    for m in METRICS:
        i = METRIC_INDEX[m.name]
        np.clip(vals[:, i], m.lo, m.hi, out=vals[:, i])
    return vals, present, jobid, next_base


def _gauges(
    seed: int,
    sched: Schedule,
    tr: NodeTraits,
    events: list[NodeEvents],
    nodes: np.ndarray,
    drv: np.ndarray,
    te: np.ndarray,
    Wn: int,
    T: int,
    g: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Gauges from per-step driver averages (B, Tw, K); ``te`` the step end times incl. warm-up."""
    B, Tw, _ = drv.shape
    util = np.minimum(drv[..., D["util"]] + drv[..., D["hog"]], 1.0)
    mem = drv[..., D["mem"]]
    io = np.clip((drv[..., D["disk_r"]] + drv[..., D["disk_w"]] + drv[..., D["lustre"]]) / 5e7, 0, 1)
    # anomaly / precursor overlays on the step grid
    leak = np.zeros((B, Tw))
    fan_fail = np.zeros((B, Tw))
    fan_idx = np.zeros(B, dtype=int)
    slow = np.zeros((B, Tw))
    misconf = np.zeros((B, Tw))
    mce = np.zeros((B, Tw))
    inlet_heat = np.zeros((B, Tw))
    psu = np.zeros((B, Tw))
    lockup = np.zeros((B, Tw))
    for b, ev in enumerate(events):
        for a, z, typ, p in ev.anomalies:
            m = (te >= a) & (te < z)
            if not m.any():
                continue
            if typ == "memory_leak":
                leak[b] = np.maximum(leak[b], _ramp(te, a, z))
            elif typ == "thermal_fan_failure":
                fan_fail[b, m] = 1.0
                fan_idx[b] = int(p * 6) % 6
            elif typ == "disk_slowdown":
                slow[b, m] = 1.0
            elif typ == "misconfiguration":
                misconf[b, m] = 1.0
        for a, z, kind in ev.precursors:
            r = ev.precursor_shape.gauge(te, a, z)
            if kind == "mce_thermal":
                mce[b] = np.maximum(mce[b], r)
            elif kind == "inlet_heating":
                inlet_heat[b] = np.maximum(inlet_heat[b], r)
            elif kind == "psu_fluctuation":
                psu[b] = np.maximum(psu[b], r)
            elif kind == "soft_lockup":
                lockup[b] = np.maximum(lockup[b], r)
    nz = g.standard_normal
    out: dict[str, np.ndarray] = {}
    s_imb = np.stack([1 + tr.sock_imb[:, None], 1 - tr.sock_imb[:, None]])
    sock_util = np.clip(util[None] * s_imb + 0.01 * nz((2, B, Tw)), 0, 1)
    iow = np.clip(0.002 + 0.05 * io + 0.25 * slow + 0.01 * np.abs(nz((B, Tw))), 0, 0.9)
    throttle = 1 - 0.35 * fan_fail - 0.2 * mce
    for s in (0, 1):
        u = sock_util[s]
        user = 100 * u * 0.93
        sys_ = 100 * (0.004 + 0.05 * u + 0.3 * lockup) + 0.2 * np.abs(nz((B, Tw)))
        iw = 100 * iow
        tot = user + sys_ + iw
        scale = np.where(tot > 100, 100 / np.maximum(tot, 1e-9), 1.0)
        user, sys_, iw = user * scale, sys_ * scale, iw * scale
        out[f"cpu{s}_user"] = user
        out[f"cpu{s}_sys"] = sys_
        out[f"cpu{s}_iowait"] = iw
        out[f"cpu{s}_idle"] = np.maximum(100 - user - sys_ - iw, 0)
        out[f"cpu{s}_load"] = CORES_PER_SOCKET * u * (1 + 0.03 * nz((B, Tw))) + 8 * iow + 20 * lockup
        out[f"cpu{s}_freq"] = (2000 + 900 * (1 - u) * 0.5 + 700 * u) * throttle + 15 * nz((B, Tw))
    used_frac = np.clip(0.03 + 0.9 * mem + leak * (0.97 - 0.9 * mem), 0, 0.985)
    cached = np.clip(0.05 + 0.25 * io + 0.05 * (1 - mem), 0, 0.4) * (1 - used_frac)
    buffers = 0.01 * (1 - used_frac)
    out["mem_used"] = MEM_BYTES * used_frac * (1 + 0.002 * nz((B, Tw)))
    out["mem_cached"] = MEM_BYTES * cached
    out["mem_buffers"] = MEM_BYTES * buffers
    out["mem_free"] = np.maximum(MEM_BYTES - out["mem_used"] - out["mem_cached"] - out["mem_buffers"], 0)
    out["swap_used"] = 2**20 * 50 + 2**30 * 8 * np.clip((leak - 0.8) * 5, 0, 1)
    p_sock = tr.p_idle.reshape(1, B, 1) + (tr.p_max - tr.p_idle).reshape(1, B, 1) * sock_util
    p_sock = p_sock * (1 + 0.02 * nz((2, B, Tw)))
    out["power_cpu"] = p_sock.sum(0)
    out["power_mem"] = 12 + 55 * mem * (0.5 + 0.5 * util) + 1.5 * nz((B, Tw))
    inlet = (
        tr.inlet[:, None]
        + 0.6 * np.sin(2 * np.pi * (te[None] / 86400.0 - 0.35))
        + 6 * misconf
        + 12 * inlet_heat
        + 0.15 * nz((B, Tw))
    )
    # thermal lag: first-order filter, warmed up over WARMUP_S
    a = np.exp(-sched.cfg.step_s / THERMAL_TAU_S)
    temps = []
    for s in (0, 1):
        target = inlet + tr.r_th[:, None] * p_sock[s] + 18 * fan_fail + 14 * mce
        zi = a * target[:, :1]
        lagged, _ = lfilter([1 - a], [1, -a], target, axis=1, zi=zi)
        temps.append(lagged + tr.bias[:, None] + 0.3 * nz((B, Tw)))
    out["temp_cpu0"], out["temp_cpu1"] = temps
    tmax = np.maximum(temps[0], temps[1])
    # BMC fan curve: PWM duty rises linearly from FAN_T0_C (fans follow temperature over the whole range)
    fan = tr.fan_base[:, None] + tr.fan_gain[:, None] * np.clip(tmax - FAN_T0_C, 0, 70)
    fans = np.clip(fan[None] * tr.fan_mult.T[:, :, None] + 40 * nz((6, B, Tw)), 0, 19000)
    for f in range(6):
        dead = fan_fail * (fan_idx[:, None] == f)
        fans[f] = fans[f] * (1 - dead) + dead * np.abs(150 * nz((B, Tw)))
        out[f"fan{f}_rpm"] = fans[f]
    fan_power = 6 * 12 * (fans.mean(0) / 10000) ** 3
    out["power_node"] = out["power_cpu"] + out["power_mem"] + 95 + fan_power + 40 * psu * nz((B, Tw)) * 3 + 4 * nz((B, Tw))
    out["temp_exhaust"] = inlet + out["power_node"] / 55 + 0.3 * nz((B, Tw))
    out["temp_dimm"] = inlet + 8 + 0.2 * out["power_mem"] + 0.3 * nz((B, Tw))
    out["temp_inlet"] = inlet
    out["disk_util"] = np.clip(100 * (0.01 + 0.6 * io + 0.6 * slow) + 0.5 * np.abs(nz((B, Tw))), 0, 100)
    out["procs_running"] = np.round(np.maximum(1 + 2 * CORES_PER_SOCKET * util * (1 + 0.05 * nz((B, Tw))), 0))
    out["procs_blocked"] = np.round(np.maximum(20 * iow + 30 * lockup + 0.3 * np.abs(nz((B, Tw))), 0))
    return {k: v[:, Wn : Wn + T] for k, v in out.items()}
