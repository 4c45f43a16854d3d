"""Job, alert, ticket, reservation and topology records in their real formats.

* ``sacct -P``: ``|``-separated, real header names and field formats (``2026-01-01T08:00:00``,
  ``[D-]HH:MM:SS``, hostlists, ``CANCELLED by <uid>``, ``.batch`` / ``.extern`` steps).
* SWF (Standard Workload Format, Parallel Workloads Archive v2.2): 18 fields, ``;`` header.
* Nagios log: ``[epoch] SERVICE ALERT: host;service;STATE;SOFT|HARD;attempt;output`` and
  ``[epoch] HOST ALERT: host;DOWN|UP;HARD;1;output`` (labels à la RUAD: CRITICAL minus false positives).
* tickets CSV (Jira-like export, :data:`TICKET_COLUMNS`) marking which CRITICAL alerts were false positives.
* reservations CSV (flattened ``scontrol show reservation``), topology CSV.
"""

from __future__ import annotations

import csv
import io

import numpy as np

from nodewatch.tasks.simulate.hostlist import compress
from nodewatch.tasks.simulate.rng import rng
from nodewatch.tasks.simulate.schedule import Schedule
from nodewatch.tasks.simulate.writers import iso, slurm_duration

SACCT_FIELDS = [
    "JobID",
    "JobIDRaw",
    "JobName",
    "Partition",
    "Account",
    "User",
    "UID",
    "Group",
    "GID",
    "Cluster",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "ElapsedRaw",
    "Timelimit",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "NNodes",
    "NCPUS",
    "ReqCPUS",
    "ReqMem",
    "ReqTRES",
    "AllocTRES",
    "NodeList",
    "Reservation",
    "QOS",
    "WorkDir",
]  # noqa: E501
CPUS_PER_NODE = 128
SERVICES = {
    "memory_leak": "check_mem",
    "cpu_hog": "check_load",
    "thermal_fan_failure": "check_temp",
    "network_degradation": "check_ib",
    "disk_slowdown": "check_disk_io",
    "misconfiguration": "check_slurmd",
}
CRIT_TEXT = {
    "check_mem": "CRITICAL - Memory usage {p}% (used {g} GB of 256 GB)",
    "check_load": "CRITICAL - load average: {l}, {l}, {l}",
    "check_temp": "CRITICAL - CPU temperature {t} C (threshold 90 C)",
    "check_ib": "CRITICAL - ib0 SymbolErrorCounter increased by {e} in 5 min",
    "check_disk_io": "CRITICAL - iowait {p}% on nvme0n1",
    "check_slurmd": "CRITICAL - slurmd: Node configuration differs from hardware",
    "check_disk": "CRITICAL - Socket timeout after 10 seconds",
    "check_nfs": "CRITICAL - Socket timeout after 10 seconds",
}
OK_TEXT = "OK - {svc} back to normal"
WARN_TEXT = {
    "check_mem": "WARNING - Memory usage {p}% (used {g} GB of 256 GB)",
    "check_load": "WARNING - load average: {l}, {l}, {l}",
    "check_temp": "WARNING - CPU temperature {t} C (threshold 80 C)",
    "check_ib": "WARNING - ib0 SymbolErrorCounter increased by {e} in 5 min",
    "check_disk_io": "WARNING - iowait {p}% on nvme0n1",
    "check_slurmd": "WARNING - slurmd: slow response (4.2 s)",
    "check_disk": "WARNING - /tmp usage {p}%",
    "check_nfs": "WARNING - NFS server responded in 3.1 s",
}
WARN_ONLY_SERVICES = ("check_load", "check_mem", "check_disk", "check_temp", "check_nfs")
TICKET_COLUMNS = ["ticket_id", "node", "service", "alert_time", "false_positive", "opened", "closed", "resolution", "summary"]
"""Tickets CSV header (Jira-like export); ``alert_time`` is the HARD CRITICAL line's time, times are UTC ``...Z``."""


def _state_exit(state: str, exitc: int, user_uid: int) -> tuple[str, str]:
    if state == "COMPLETED":
        return "COMPLETED", "0:0"
    if state == "FAILED":
        return "FAILED", f"{exitc}:0"
    if state == "CANCELLED":
        return f"CANCELLED by {user_uid}", "0:15"
    if state == "TIMEOUT":
        return "TIMEOUT", "0:0"
    if state == "OUT_OF_MEMORY":
        return "OUT_OF_MEMORY", "0:125"
    return "NODE_FAIL", "0:0"


def jobs_ending(sched: Schedule, day: int) -> np.ndarray:
    """Row indices of jobs whose End falls on ``day`` (what a daily ``sacct -S day -E day+1 -s CD,F,...`` dump holds)."""
    e = sched.jobs.table["end"].to_numpy()
    return np.flatnonzero((e >= day * 86400.0) & (e < (day + 1) * 86400.0))


def sacct_text(sched: Schedule, day: int) -> str:
    """``sacct -P`` dump of the jobs ending on ``day`` with .batch/.extern steps."""
    cfg = sched.cfg
    ep = cfg.epoch_s
    names = sched.topo.names
    jt = sched.jobs.table
    out = ["|".join(SACCT_FIELDS)]
    for i in jobs_ending(sched, day):
        r = jt.iloc[i]
        uid = 10000 + int(r.user)
        user = f"u{int(r.user):04d}"
        nl = sched.jobs.nodes_of(i)
        hl = compress([names[x] for x in nl]) if len(nl) else "None assigned"
        state, exitc = _state_exit(r.state, int(r.exit), uid)
        nn = len(nl) if len(nl) else int(r.nnodes)
        el = max(0.0, r.end - r.start)
        ncpu = CPUS_PER_NODE * nn if len(nl) else 0
        mem = f"{240 * nn}G" if nn else "0"
        req_tres = f"billing={CPUS_PER_NODE * int(r.nnodes)},cpu={CPUS_PER_NODE * int(r.nnodes)},mem={240 * int(r.nnodes)}G,node={int(r.nnodes)}"  # noqa: E501
        alloc_tres = f"billing={ncpu},cpu={ncpu},mem={mem},node={nn}" if len(nl) else ""
        jid = str(int(r.job_id))
        base = {
            "JobID": jid,
            "JobIDRaw": jid,
            "JobName": r["name"],
            "Partition": "batch",
            "Account": f"proj{int(r.user) % 37:03d}",
            "User": user,
            "UID": str(uid),
            "Group": "users",
            "GID": "100",
            "Cluster": "nodewatch",
            "Submit": iso(ep, r.submit),
            "Eligible": iso(ep, r.submit),
            "Start": iso(ep, r.start),
            "End": iso(ep, r.end),
            "Elapsed": slurm_duration(el),
            "ElapsedRaw": str(int(round(el))),
            "Timelimit": slurm_duration(r.timelimit),
            "State": state,
            "ExitCode": exitc,
            "DerivedExitCode": "0:0",
            "NNodes": str(nn),
            "NCPUS": str(ncpu),
            "ReqCPUS": str(CPUS_PER_NODE * int(r.nnodes)),
            "ReqMem": f"{240 * int(r.nnodes)}G",
            "ReqTRES": req_tres,
            "AllocTRES": alloc_tres,
            "NodeList": hl,
            "Reservation": r.reservation,
            "QOS": "normal",
            "WorkDir": f"/home/{user}/run{int(r.job_id) % 97}",
        }
        out.append("|".join(base[f] for f in SACCT_FIELDS))
        if not len(nl):
            continue
        step_state = {"COMPLETED": "COMPLETED", "FAILED": "FAILED", "OUT_OF_MEMORY": "OUT_OF_MEMORY"}.get(r.state, "CANCELLED")
        for step, nodes_s, st in ((".batch", [names[nl[0]]], step_state), (".extern", [names[x] for x in nl], "COMPLETED")):
            d = dict(base)
            d.update(
                {
                    "JobID": jid + step,
                    "JobIDRaw": jid + step,
                    "JobName": step[1:],
                    "Partition": "",
                    "User": "",
                    "UID": "",
                    "Group": "",
                    "GID": "",
                    "Timelimit": "",
                    "QOS": "",
                    "WorkDir": "",
                    "ReqTRES": "",
                    "ReqMem": "",
                    "NNodes": str(len(nodes_s)),
                    "NCPUS": str(CPUS_PER_NODE * len(nodes_s)),
                    "AllocTRES": f"cpu={CPUS_PER_NODE * len(nodes_s)},mem={240 * len(nodes_s)}G,node={len(nodes_s)}",
                    "NodeList": compress(nodes_s),
                    "State": st,
                    "ExitCode": exitc if step == ".batch" else "0:0",
                    "Account": base["Account"],
                }
            )
            out.append("|".join(d[f] for f in SACCT_FIELDS))
    return "\n".join(out) + "\n"


def swf_text(sched: Schedule, day: int) -> str:
    """SWF v2.2 trace of the jobs ending on ``day`` (times relative to UnixStartTime = the epoch)."""
    cfg = sched.cfg
    head = [
        "; Version: 2.2",
        "; Computer: nodewatch simulated cluster",
        "; Installation: nodewatch simulator (tasks/simulate)",
        f"; UnixStartTime: {cfg.epoch_s}",
        "; TimeZoneString: UTC",
        f"; MaxNodes: {cfg.n_nodes}",
        f"; MaxProcs: {cfg.n_nodes * CPUS_PER_NODE}",
        "; MaxPartitions: 1",
        "; Partition: 1 batch",
        ";",
    ]
    jt = sched.jobs.table
    rows = []
    status = {"COMPLETED": 1, "FAILED": 0, "CANCELLED": 5, "TIMEOUT": 0, "OUT_OF_MEMORY": 0, "NODE_FAIL": 0}
    for i in sorted(jobs_ending(sched, day), key=lambda i: jt["submit"].iat[i]):
        r = jt.iloc[i]
        nn = int(r.alloc_n) if r.alloc_n else -1
        procs = nn * CPUS_PER_NODE if nn > 0 else -1
        run = int(round(r.end - r.start)) if nn > 0 else 0
        f = [
            int(r.job_id),
            int(r.submit),
            int(r.start - r.submit),
            run,
            procs,
            -1,
            -1,
            int(r.nnodes) * CPUS_PER_NODE,
            int(r.timelimit),
            -1,
            status[r.state],
            1 + int(r.user),
            1 + int(r.user) % 37,
            -1,
            1,
            1,
            -1,
            -1,
        ]
        rows.append(" ".join(f"{x:>8d}" for x in f))
    return "\n".join(head + rows) + "\n"


def nagios_and_tickets(sched: Schedule, day: int) -> tuple[str, str]:
    """Nagios log lines of ``day`` and the tickets CSV for the HARD CRITICAL alerts raised that day."""
    cfg = sched.cfg
    ep = cfg.epoch_s
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    names = sched.topo.names
    lines: list[tuple[float, str]] = [(t0, "LOG ROTATION: DAILY"), (t0, "LOG VERSION: 2.0")]
    tickets: list[list[str]] = []
    # host alerts from failures
    for x in sched.failures.itertuples():
        if t0 <= x.t_detect < t1:
            lines.append((x.t_detect, f"HOST ALERT: {names[x.node]};DOWN;HARD;1;PING CRITICAL - Packet loss = 100%"))
        if t0 <= x.t_up + 60 < t1:
            lines.append((x.t_up + 60, f"HOST ALERT: {names[x.node]};UP;HARD;1;PING OK - Packet loss = 0%, RTA = 0.21 ms"))
    episodes: list[tuple[int, float, float, str, bool, str]] = []
    for a in sched.anomalies.itertuples():
        g = rng(cfg.seed, "alerts", int(a.event_id))
        if g.random() < cfg.alert_detect_prob:
            onset = a.start + (a.end - a.start) * (0.6 if a.type == "memory_leak" else 0.1)
            episodes.append((int(a.node), onset, a.end, SERVICES[a.type], False, a.type))
    for x in sched.fp_alerts.itertuples():
        episodes.append((int(x.node), x.start, x.end, x.service, True, "check timeout"))
    for node, start, end, svc, fp, why in episodes:
        host = names[node]
        g = rng(cfg.seed, "alerts", node, int(start) % 10**9)
        fill = dict(
            p=int(g.integers(91, 100)),
            g=int(g.integers(235, 255)),
            l=f"{g.uniform(70, 140):.2f}",
            t=int(g.integers(91, 99)),
            e=int(g.integers(50, 5000)),
        )
        text = CRIT_TEXT.get(svc, "CRITICAL - check failed").format(**fill)
        warned = g.random() < cfg.alert_warning_share
        lead = g.uniform(300, 1800)
        if warned:  # WARNING SOFT 1-2, HARD 3, then the HARD problem state turns CRITICAL at once
            wtext = WARN_TEXT.get(svc, "WARNING - check degraded").format(**{**fill, "p": fill["p"] - 10, "t": fill["t"] - 12})
            for att, st in ((1, "SOFT"), (2, "SOFT"), (3, "HARD")):
                ts = start - lead + 60 * (att - 1)
                if t0 <= ts < t1:
                    lines.append((ts, f"SERVICE ALERT: {host};{svc};WARNING;{st};{att};{wtext}"))
        else:
            for att in (1, 2):
                ts = start + 60 * (att - 1)
                if t0 <= ts < t1:
                    lines.append((ts, f"SERVICE ALERT: {host};{svc};CRITICAL;SOFT;{att};{text}"))
        hard = start + 120
        if t0 <= hard < t1:
            lines.append((hard, f"SERVICE ALERT: {host};{svc};CRITICAL;HARD;3;{text}"))
            key = f"HPC-{(int(hard) // 60) % 10**6:06d}{node % 100:02d}"
            created = hard + g.uniform(300, 7200)
            resolution = "False Positive" if fp else "Fixed"
            summary = f"{host} {svc} CRITICAL" + (f" ({why}, not reproducible)" if fp else f" ({why.replace('_', ' ')})")
            tickets.append(
                [
                    key,
                    host,
                    svc,
                    iso(ep, hard) + "Z",
                    "true" if fp else "false",
                    iso(ep, created) + "Z",
                    iso(ep, max(end, created) + 600) + "Z",
                    resolution,
                    summary,
                ]
            )
        if end > hard and t0 <= end < t1:
            lines.append((end, f"SERVICE ALERT: {host};{svc};OK;HARD;3;{OK_TEXT.format(svc=svc)}"))
    lines += _warning_only(sched, day)
    lines.sort(key=lambda x: x[0])
    nag = "".join(f"[{ep + int(t)}] {m}\n" for t, m in lines)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TICKET_COLUMNS)
    w.writerows(tickets)
    return nag, buf.getvalue()


def _warning_only(sched: Schedule, day: int) -> list[tuple[float, str]]:
    """WARNING episodes that never turn CRITICAL, drawn per start day (episodes of the day before end today).

    Half recover while still SOFT (``WARNING;SOFT;1`` then ``OK;SOFT;2``, a flapping check); the others go
    ``WARNING;HARD;3`` and recover with ``OK;HARD;3`` 10-90 min later.
    """
    cfg = sched.cfg
    names = sched.topo.names
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    out: list[tuple[float, str]] = []
    for d in (day - 1, day):
        if d < 0 or cfg.warning_only_per_node_year <= 0:
            continue
        g = rng(cfg.seed, "alerts", 10**9, d)
        k = int(g.poisson(cfg.n_nodes * cfg.warning_only_per_node_year / 365.0))
        nodes = g.integers(0, cfg.n_nodes, k)
        starts = d * 86400.0 + g.uniform(0, 86400, k)
        svcs = g.integers(0, len(WARN_ONLY_SERVICES), k)
        soft = g.random(k) < 0.5
        durs = g.uniform(600, 5400, k)
        vals = g.integers(80, 90, k)
        for n, s, si, sf, du, v in zip(nodes, starts, svcs, soft, durs, vals, strict=True):
            svc = WARN_ONLY_SERVICES[int(si)]
            host = names[int(n)]
            text = WARN_TEXT[svc].format(p=int(v), g=int(v) * 2, l=f"{v * 0.9:.2f}", t=int(v) - 8, e=int(v))
            ev = [(s, f"SERVICE ALERT: {host};{svc};WARNING;SOFT;1;{text}")]
            if sf:
                ev.append((s + 60, f"SERVICE ALERT: {host};{svc};OK;SOFT;2;{OK_TEXT.format(svc=svc)}"))
            else:
                ev += [
                    (s + 60, f"SERVICE ALERT: {host};{svc};WARNING;SOFT;2;{text}"),
                    (s + 120, f"SERVICE ALERT: {host};{svc};WARNING;HARD;3;{text}"),
                    (s + 120 + du, f"SERVICE ALERT: {host};{svc};OK;HARD;3;{OK_TEXT.format(svc=svc)}"),
                ]
            out += [(t, m) for t, m in ev if t0 <= t < t1]
    return out


def reservations_csv(sched: Schedule, day: int) -> str:
    """Reservations active on ``day`` (admin MAINT windows per row, emergency rack windows)."""
    cfg = sched.cfg
    ep = cfg.epoch_s
    t0, t1 = day * 86400.0, (day + 1) * 86400.0
    topo = sched.topo
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["ReservationName", "StartTime", "EndTime", "Duration", "Nodes", "NodeCnt", "Flags", "Users", "Accounts", "State"])
    for m in sched.maint.itertuples():
        if m.start < t1 and m.end > t0:
            nodes = [topo.names[i] for i in np.flatnonzero(topo.row == m.row)]
            w.writerow(
                [
                    f"maint_row{m.row}_{m.m:03d}",
                    iso(ep, m.start),
                    iso(ep, m.end),
                    slurm_duration(m.end - m.start),
                    compress(nodes),
                    len(nodes),
                    "MAINT,IGNORE_JOBS,SPEC_NODES",
                    "root",
                    "(null)",
                    "INACTIVE",
                ]
            )
    for r in sched.user_resv.itertuples():
        if r.start < t1 and r.end > t0:
            nodes = [topo.names[i] for i in range(r.first, r.first + r.n)]
            name = f"resv_u{int(r.user):04d}_{int(r.m):03d}"
            w.writerow(
                [
                    name,
                    iso(ep, r.start),
                    iso(ep, r.end),
                    slurm_duration(r.end - r.start),
                    compress(nodes),
                    len(nodes),
                    "SPEC_NODES",
                    f"u{int(r.user):04d}",
                    f"proj{int(r.user) % 37:03d}",
                    "INACTIVE",
                ]
            )
    for e in sched.emergency.itertuples():
        if e.start < t1 and e.end > t0:
            nodes = [topo.names[i] for i in topo.nodes_of_rack(e.rack)]
            w.writerow(
                [
                    f"emergency_{topo.rack_name(e.rack)}_{e.event:03d}",
                    iso(ep, e.start),
                    iso(ep, e.end),
                    slurm_duration(e.end - e.start),
                    compress(nodes),
                    len(nodes),
                    "MAINT,IGNORE_JOBS,SPEC_NODES,UNSCHEDULED",
                    "root",
                    "(null)",
                    "INACTIVE",
                ]
            )
    return buf.getvalue()


def topology_csv(sched: Schedule) -> str:
    """``node,rack,row,chassis,position,architecture``."""
    t = sched.topo
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["node", "rack", "row", "chassis", "position", "architecture"])
    for i in range(t.n):
        w.writerow(
            [
                t.names[i],
                t.rack_name(int(t.rack[i])),
                f"row{int(t.row[i])}",
                f"{t.rack_name(int(t.rack[i]))}c{int(t.chassis[i]):02d}",  # noqa: E501
                int(t.position[i]),
                t.arch[i],
            ]
        )
    return buf.getvalue()
