"""Syslog rendering per (day, rack): RFC 5424 or RFC 3164 lines, sorted by time, plus the controller log.

Line sources for a compute node: a background mix of :data:`BACKGROUND` templates with Zipf frequencies
(``syslog_lines_per_node_day`` per node, scaled by a per-node factor), slurmd/slurmstepd lines at job
start/end, OOM-killer lines, anomaly-specific lines, precursor bursts (Ghiasvand & Ciorba: syslog
generation rises before failures) at ~1 line/min, a last crash line, shutdown lines before admin
reboots, and the boot sequence (kernel banner ``Linux version …``, ``Startup finished in …``). Nothing is
logged while a node is down. The controller (host ``slurmctl01``, app ``slurmctld``) logs allocations,
completions, ``error: Nodes … not responding, setting DOWN`` and ``Node … now responding``.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime

import numpy as np

from nodewatch.tasks.simulate.events import NodeEvents
from nodewatch.tasks.simulate.hostlist import compress
from nodewatch.tasks.simulate.rng import rng
from nodewatch.tasks.simulate.schedule import Schedule
from nodewatch.tasks.simulate.syslog_templates import BACKGROUND, DAEMON, ERR, EVENT, INFO

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_ZIPF = 1.0 / np.arange(1, len(BACKGROUND) + 1) ** 1.2
_ORDER = np.random.Generator(np.random.PCG64(20260101)).permutation(len(BACKGROUND))
BG_PROBS = np.empty(len(BACKGROUND))
BG_PROBS[_ORDER] = _ZIPF / _ZIPF.sum()
NAMES = ("vasp_std", "lmp_mpi", "gmx_mpi", "python3", "namd2", "cp2k.psmp")


def fmt_line(rfc: str, epoch_s: int, t: float, host: str, app: str, pid: int, fac: int, sev: int, msg: str) -> str:
    """One syslog line in RFC 5424 (``<PRI>1 ISO-TS HOST APP PID - - MSG``) or RFC 3164 (``<PRI>Mmm dd hh:mm:ss HOST APP[PID]: MSG``)."""  # noqa: E501
    day = int(t // 86400)
    return _day_prefix(epoch_s, day)(rfc, t - day * 86400.0, f"{host} {app}", pid, fac * 8 + sev, msg)


@functools.lru_cache(maxsize=64)
def _day_prefix(epoch_s: int, day: int):  # noqa: ANN202 - returns a formatter closure
    d = datetime.fromtimestamp(epoch_s + day * 86400, tz=UTC)
    iso_day = d.strftime("%Y-%m-%d")
    bsd_day = f"{_MONTHS[d.month - 1]} {d.day:2d}"

    def fmt(rfc: str, s: float, host_app: str, pid: int, pri: int, msg: str) -> str:
        us = int(round(s * 1e6))
        sec, us = divmod(us, 1_000_000)
        h, rem = divmod(sec, 3600)
        m, sc = divmod(rem, 60)
        if rfc == "5424":
            procid = pid if pid >= 0 else "-"
            return f"<{pri}>1 {iso_day}T{h:02d}:{m:02d}:{sc:02d}.{us:06d}+00:00 {host_app} {procid} - - {msg}"
        if pid < 0:  # kernel messages carry no PID (rsyslog imklog: "host kernel: msg")
            return f"<{pri}>{bsd_day} {h:02d}:{m:02d}:{sc:02d} {host_app}: {msg}"
        return f"<{pri}>{bsd_day} {h:02d}:{m:02d}:{sc:02d} {host_app}[{pid}]: {msg}"

    return fmt


class _Filler:
    """Random placeholder values for templates, drawn in blocks (one generator per render call)."""

    BLOCK = 4096

    def __init__(self, g: np.random.Generator, node: str, epoch_s: int):
        self.g = g
        self.node = node
        self.epoch_s = epoch_s
        self._buf: list[list[int]] = []
        self._i = 0

    def _row(self) -> list[int]:
        if self._i >= len(self._buf):
            hi = np.array([30000, 65000, 2, 2**48, 150, 254, 254, len(NAMES), 8, 30], dtype=np.int64)
            self._buf = (self.g.integers(0, 2**62, (self.BLOCK, len(hi))) % hi).tolist()
            self._i = 0
        self._i += 1
        return self._buf[self._i - 1]

    def fill(self, tpl: str, t: float, job: int = 0, uid: int = 0, name: str | None = None) -> str:
        """``tpl`` with its placeholders filled."""
        if "{" not in tpl:
            return tpl
        a, b, c, h, us, o3, o4, nm, ch, tc = self._row()
        u = int(uid or 10000 + us)
        date = datetime.fromtimestamp(self.epoch_s + t, tz=UTC).strftime("%a %Y-%m-%d %H:%M:%S +0000") if "{date}" in tpl else ""
        return tpl.format(
            a=a + 1,
            b=b + 1024,
            c=c,
            h=f"{h:012x}",
            u=f"u{u - 10000:04d}",
            uid=u,
            ip=f"10.10.{o3}.{o4 + 1}",
            ch=ch,
            o=o4 + 1,
            tc=30 + tc,
            tc2=31 + tc,
            n=self.node,
            j=job,
            name=name or NAMES[nm],
            date=date,
        )


@functools.lru_cache(maxsize=65536)
def _pid(node: int, app: str) -> int:
    if app == "kernel":
        return -1
    return 1000 + (hash_str(app) * 7919 + node * 104729) % 60000


def hash_str(s: str) -> int:
    """Stable small hash (Python's ``hash`` is salted per process)."""
    h = 2166136261
    for ch in s.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h


def _up(ev: NodeEvents, t: np.ndarray) -> np.ndarray:
    ok = np.ones(len(t), dtype=bool)
    for a, z in ev.down:
        ok &= ~((t >= a) & (t < z))
    return ok


def render_rack(sched: Schedule, events: list[NodeEvents], nodes: np.ndarray, day: int, rfc: str) -> list[str]:
    """Syslog lines of the nodes of one rack for ``day`` (time-sorted)."""
    cfg = sched.cfg
    epoch = cfg.epoch_s
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    g = rng(cfg.seed, "syslog", day, int(nodes[0]))
    recs: list[tuple[float, str]] = []
    jt = sched.jobs.table
    jid_to_row = {int(j): i for i, j in enumerate(jt["job_id"].to_numpy())}
    users = jt["user"].to_numpy()
    states = jt["state"].to_numpy()
    names = jt["name"].to_numpy()
    f = _Filler(g, "", epoch)
    for n, ev in zip(nodes, events, strict=True):
        n = int(n)
        host = sched.topo.names[n]
        f.node = host
        lines: list[tuple[float, str, int, int, str]] = []  # t, app, fac, sev, msg
        factor = float(np.exp(rng(cfg.seed, "heterogeneity", n).normal(0, 0.5)))
        k = g.poisson(cfg.syslog_lines_per_node_day * factor)
        ts = np.sort(g.uniform(t0, t1, k))
        ts = ts[_up(ev, ts)]
        tpl = g.choice(len(BACKGROUND), len(ts), p=BG_PROBS)
        for t, i in zip(ts, tpl, strict=True):
            app, fac, sev, msg = BACKGROUND[i]
            lines.append((t, app, fac, sev, f.fill(msg, t)))
        # jobs
        for s, e, jid in zip(ev.job_start, ev.job_end, ev.job_ids, strict=True):
            row = jid_to_row[int(jid)]
            uid = 10000 + int(users[row])
            if t0 <= s < t1:
                for app, fac, sev, msg in EVENT["job_start"]:
                    lines.append((s + g.uniform(0.05, 2.0), app, fac, sev, f.fill(msg, s, int(jid), uid)))
            if t0 <= e < t1 and states[row] != "NODE_FAIL":
                if states[row] == "OUT_OF_MEMORY":
                    for app, fac, sev, msg in EVENT["oom"]:
                        lines.append((e - g.uniform(0.5, 3.0), app, fac, sev, f.fill(msg, e, int(jid), uid, str(names[row]))))
                for app, fac, sev, msg in EVENT["job_end"]:
                    lines.append((e + g.uniform(0.05, 1.0), app, fac, sev, f.fill(msg, e, int(jid), uid)))
        # anomalies: a line every ~10-40 min while active, OOM at the end of a memory leak
        for a, z, typ, _p in ev.anomalies:
            lo, hi = max(a, t0), min(z, t1)
            if hi <= lo:
                continue
            if typ == "memory_leak":
                if t0 <= z < t1:
                    app, fac, sev, msg = EVENT["memory_leak"][0]
                    lines.append((z, app, fac, sev, f.fill(msg, z)))
                continue
            m = max(1, g.poisson((hi - lo) / 1200.0))
            for t in np.sort(g.uniform(lo, hi, m)):
                app, fac, sev, msg = EVENT[typ][int(g.integers(len(EVENT[typ])))]
                lines.append((t, app, fac, sev, f.fill(msg, t)))
        # precursor bursts (SimConfig.syslog_precursor_lines_per_min; 0 = none)
        for a, z, kind in ev.precursors if ev.syslog_precursors is None else ev.syslog_precursors:
            lo, hi = max(a, t0), min(z, t1)
            if hi <= lo or cfg.syslog_precursor_lines_per_min <= 0:
                continue
            m = g.poisson((hi - lo) / 60.0 * cfg.syslog_precursor_lines_per_min) + 1
            for t in np.sort(g.uniform(lo, hi, m)):
                app, fac, sev, msg = EVENT[kind][int(g.integers(len(EVENT[kind])))]
                lines.append((t, app, fac, sev, f.fill(msg, t)))
        ts_l = np.array([x[0] for x in lines])
        keep = _up(ev, ts_l) if len(lines) else np.zeros(0, dtype=bool)
        lines = [x for x, k_ in zip(lines, keep, strict=True) if k_ and t0 <= x[0] < t1]
        lines += _crash_boot_lines(sched, n, f, g, t0, t1)
        for t, app, fac, sev, msg in lines:
            recs.append((t, fmt_line(rfc, epoch, t, host, app, _pid(n, app), fac, sev, msg)))
    recs.sort(key=lambda x: x[0])
    return [r for _, r in recs]


def _crash_boot_lines(sched: Schedule, n: int, f: _Filler, g: np.random.Generator, t0: float, t1: float) -> list:
    out = []
    fl, rb = sched.node_downs(n)
    for x in fl:
        if t0 <= x.t_fail < t1 and x.cause in ("kernel_panic", "memory_ue", "cpu_mce"):
            i = {"kernel_panic": 0, "memory_ue": 1, "cpu_mce": 2}[x.cause]
            app, fac, sev, msg = EVENT["crash"][i]
            out.append((x.t_fail - 0.5, app, fac, sev, f.fill(msg, x.t_fail)))
    for x in rb:
        for i, (app, fac, sev, msg) in enumerate(EVENT["shutdown"]):
            t = x.t_fail - 5 + i
            if t0 <= t < t1:
                out.append((t, app, fac, sev, f.fill(msg, t)))
    for x in fl + rb:
        tb, tu = x.t_boot, x.t_up
        for i, (app, fac, sev, msg) in enumerate(EVENT["boot"]):
            t = tb + (i / len(EVENT["boot"])) * x.boot_kernel
            if t0 <= t < t1:
                out.append((t, app, fac, sev, f.fill(msg, t)))
        if t0 <= tu < t1:
            us = x.boot_user
            user_s = f"{int(us // 60)}min {us % 60:.3f}s" if us >= 60 else f"{us:.3f}s"
            tot = x.boot_kernel + us
            tot_s = f"{int(tot // 60)}min {tot % 60:.3f}s" if tot >= 60 else f"{tot:.3f}s"
            out.append(
                (
                    tu,
                    "systemd",
                    DAEMON,
                    INFO,
                    f"Startup finished in {x.boot_kernel:.3f}s (kernel) + {user_s} (userspace) = {tot_s}.",
                )
            )
            for i, (app, fac, sev, msg) in enumerate(EVENT["booted"]):
                out.append((tu + 1 + i * 0.01, app, fac, sev, f.fill(msg, tu)))
    return out


def render_controller(sched: Schedule, day: int, rfc: str = "5424") -> list[str]:
    """slurmctld lines of the controller host for ``day`` (time-sorted)."""
    cfg = sched.cfg
    epoch = cfg.epoch_s
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    g = rng(cfg.seed, "controller", day)
    names = sched.topo.names
    recs: list[tuple[float, int, str]] = []
    ping = 100.0
    # node DOWN detection, grouped by ping cycle (-> hostlists like cn[0097-0120])
    fl = sched.failures
    det = np.ceil(fl["t_detect"].to_numpy() / ping) * ping
    cl = sched.connloss
    det_c = np.ceil(cl["detect"].to_numpy() / ping) * ping
    all_det = np.concatenate([det, det_c])
    all_nodes = np.concatenate([fl["node"].to_numpy(), cl["node"].to_numpy()]).astype(int)
    sel = (all_det >= t0) & (all_det < t1)
    for t in np.unique(all_det[sel]):
        hl = compress([names[i] for i in sorted(all_nodes[sel & (all_det == t)])])
        recs.append((t, ERR, f"error: Nodes {hl} not responding, setting DOWN"))
    ups = np.concatenate([fl["t_up"].to_numpy() + 2.0, cl["end"].to_numpy(), sched.reboots["t_up"].to_numpy() + 2.0])
    up_nodes = np.concatenate([fl["node"].to_numpy(), cl["node"].to_numpy(), sched.reboots["node"].to_numpy()]).astype(int)
    for t, n in zip(ups, up_nodes, strict=True):
        if t0 <= t < t1:
            recs.append((t, INFO, f"Node {names[n]} now responding"))
    jt = sched.jobs.table
    for i, r in enumerate(jt.itertuples()):
        nl = sched.jobs.nodes_of(i)
        if t0 <= r.start < t1 and len(nl):
            hl = compress([names[x] for x in nl])
            recs.append((r.start, INFO, f"sched: Allocate JobId={r.job_id} NodeList={hl} #CPUs={128 * len(nl)} Partition=batch"))
        if t0 <= r.end < t1 and len(nl):
            if r.state == "NODE_FAIL":
                recs.append((r.end, ERR, f"Killing JobId={r.job_id} on failed node {names[nl[0]]}"))
            code = {"COMPLETED": 0, "FAILED": r.exit, "TIMEOUT": 0}.get(r.state)
            if r.state == "TIMEOUT":
                recs.append((r.end, INFO, f"Time limit exhausted for JobId={r.job_id}"))
            if code is not None:
                recs.append((r.end + 0.01, INFO, f"_job_complete: JobId={r.job_id} WEXITSTATUS {code}"))
            recs.append((r.end + 0.02, INFO, f"_job_complete: JobId={r.job_id} done"))
    jitter = g.uniform(0.0, 0.999, len(recs))
    recs = [(t + j, s, m) for (t, s, m), j in zip(recs, jitter, strict=True)]
    recs.sort(key=lambda x: x[0])
    return [fmt_line(rfc, epoch, t, "slurmctl01", "slurmctld", 4242, DAEMON, s, m) for t, s, m in recs]
