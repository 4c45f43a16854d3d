"""Orchestration: build the horizon schedule once, then render day x rack tasks in parallel with Dask.

Output layout under ``out/`` (one file per day per batch where it applies; racks are the node batches):

    simulation.json                                   config + days written (``--append`` continues it)
    topology/topology.csv
    telemetry/long/date=YYYY-MM-DD/batch-RRR.parquet  long format (timestamp, node, metric, value)
    telemetry/ldms/date=YYYY-MM-DD/rRR.csv            LDMS store_csv for the ``ldms_racks`` node group
    syslog/date=YYYY-MM-DD/rRR.log                    per-rack syslog (RFC 5424 or 3164 by row)
    syslog/date=YYYY-MM-DD/mgmt.log                   slurmctld on slurmctl01 (RFC 5424)
    jobs/sacct/date=YYYY-MM-DD/sacct.txt              sacct -P of the jobs that ended that day
    jobs/swf/date=YYYY-MM-DD/jobs.swf                 same jobs in SWF
    alerts/nagios/date=YYYY-MM-DD/nagios.log          Nagios log
    alerts/tickets/date=YYYY-MM-DD/tickets.csv        tickets for HARD CRITICAL alerts (false_positive column)
    reservations/date=YYYY-MM-DD/reservations.csv     scontrol show reservation, flattened
    truth/{anomalies,failures,precursors,states}/date=YYYY-MM-DD/part.parquet
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import dask
import numpy as np
import pyarrow.parquet as pq

from tasks.simulate import records, syslog, telemetry, truth
from tasks.simulate.config import SimConfig
from tasks.simulate.schedule import Schedule, build_schedule
from tasks.simulate.writers import write_bytes, write_ldms_csv, write_long_parquet

STATE_FILE = "simulation.json"


def day_str(cfg: SimConfig, day: int) -> str:
    """``YYYY-MM-DD`` of day index ``day``."""
    return (cfg.start + timedelta(days=day)).isoformat()


def render_batch(sched: Schedule, out: Path, day: int, rack: int) -> dict[str, int]:
    """Telemetry + syslog of one rack for one day. Returns counts (values, syslog lines)."""
    cfg = sched.cfg
    nodes = sched.topo.nodes_of_rack(rack)
    ds = day_str(cfg, day)
    events = sched.node_events(nodes)
    vals, present, jobid = telemetry.render(sched, events, nodes, day)
    names = [sched.topo.names[i] for i in nodes]
    times = day * 86400 + np.arange(86400 // cfg.step_s) * cfg.step_s
    if rack in cfg.ldms_racks:
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence(cfg.seed, spawn_key=(99, day, rack))))
        usec = g.integers(0, 5000, present.shape)
        n = write_ldms_csv(out / f"telemetry/ldms/date={ds}/{sched.topo.rack_name(rack)}.csv", names, nodes + 1,
                           cfg.epoch_s, times, vals, present, jobid, usec)
        n *= vals.shape[1]
    else:
        n = write_long_parquet(out / f"telemetry/long/date={ds}/batch-{rack:03d}.parquet", names, cfg.epoch_s, times, vals,
                               present)
    rfc = "5424" if int(sched.topo.row[nodes[0]]) in cfg.syslog_rfc5424_rows else "3164"
    lines = syslog.render_rack(sched, events, nodes, day, rfc)
    write_bytes(out / f"syslog/date={ds}/{sched.topo.rack_name(rack)}.log", ("\n".join(lines) + "\n").encode() if lines else b"")
    return {"values": int(n), "syslog_lines": len(lines)}


def render_global(sched: Schedule, out: Path, day: int) -> dict[str, int]:
    """Per-day files that span all nodes: controller log, jobs, alerts, tickets, reservations, truth."""
    cfg = sched.cfg
    ds = day_str(cfg, day)
    ctl = syslog.render_controller(sched, day)
    write_bytes(out / f"syslog/date={ds}/mgmt.log", ("\n".join(ctl) + "\n").encode() if ctl else b"")
    write_bytes(out / f"jobs/sacct/date={ds}/sacct.txt", records.sacct_text(sched, day).encode())
    write_bytes(out / f"jobs/swf/date={ds}/jobs.swf", records.swf_text(sched, day).encode())
    nag, tick = records.nagios_and_tickets(sched, day)
    write_bytes(out / f"alerts/nagios/date={ds}/nagios.log", nag.encode())
    write_bytes(out / f"alerts/tickets/date={ds}/tickets.csv", tick.encode())
    write_bytes(out / f"reservations/date={ds}/reservations.csv", records.reservations_csv(sched, day).encode())
    for name, fn in (("anomalies", truth.anomalies_table), ("failures", truth.failures_table),
                     ("precursors", truth.precursors_table), ("states", truth.states_table)):
        p = out / f"truth/{name}/date={ds}/part.parquet"
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
        pq.write_table(fn(sched, day), tmp, compression="zstd")
        os.replace(tmp, p)
    return {"controller_lines": len(ctl), "jobs_ended": int(len(records.jobs_ending(sched, day)))}


def load_state(out: Path) -> tuple[SimConfig, list[int]] | None:
    """Config and written days of an existing simulated cluster in ``out`` (None if there is none)."""
    p = out / STATE_FILE
    if not p.exists():
        return None
    d = json.loads(p.read_text())
    return SimConfig.from_json(json.dumps(d["config"])), list(d.get("days_written", []))


def save_state(out: Path, cfg: SimConfig, days: list[int]) -> None:
    """Write ``simulation.json`` atomically."""
    doc = {"config": json.loads(cfg.to_json()), "days_written": sorted(set(days)),
           "dates_written": [day_str(cfg, d) for d in sorted(set(days))]}
    write_bytes(out / STATE_FILE, json.dumps(doc, indent=2).encode())


def simulate(cfg: SimConfig, out: Path, days: list[int],
             progress: Callable[[str, int, int], None] | None = None) -> dict[str, float]:
    """Render ``days`` (day indices after ``cfg.start``) of the cluster into ``out``; returns counts and timings.

    The schedule is built for days ``0 .. max(days)`` so any subset renders identically.
    ``progress(stage, done, total)`` is called as tasks finish.
    """
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    sched = build_schedule(cfg, max(days) + 1)
    t_sched = time.perf_counter() - t_start
    write_bytes(out / "topology/topology.csv", records.topology_csv(sched).encode())
    tasks = []
    for d in days:
        tasks.append(dask.delayed(render_global)(sched, out, d, dask_key_name=f"global-{d}"))
        for r in range(cfg.n_racks):
            tasks.append(dask.delayed(render_batch)(sched, out, d, r, dask_key_name=f"batch-{d}-{r}"))
    total = len(tasks)
    done = [0]
    from dask.callbacks import Callback

    class _Prog(Callback):
        def _posttask(self, key, result, dsk, state, id):  # noqa: A002, ANN001 - dask callback signature
            done[0] += 1
            if progress:
                progress("render", done[0], total)

    if progress:
        progress("render", 0, total)
    with _Prog():
        results = dask.compute(*tasks, scheduler=cfg.scheduler, num_workers=cfg.workers)
    prev = load_state(out)
    written = (prev[1] if prev else []) + list(days)
    save_state(out, cfg, written)
    totals: dict[str, float] = {"schedule_seconds": t_sched, "seconds": time.perf_counter() - t_start}
    for r in results:
        for k, v in r.items():
            totals[k] = totals.get(k, 0) + v
    return totals
