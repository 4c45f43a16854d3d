"""Orchestration: build the horizon schedule once, then render day x rack tasks in parallel with Dask.

Output layout under ``out/`` (one file per day per batch where it applies; racks are the node batches):

    simulation.json                                   config + days written (``--append`` continues it)
    state/date=YYYY-MM-DD/{scheduler.json,jobs.parquet,counters.npy}
                                                      state at 00:00 of that day (scheduler queue, running
                                                      jobs, arrival cursor, counter bases): the next day is
                                                      generated from it alone
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
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nodewatch.tasks.simulate import records, syslog, telemetry, truth
from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.schedule import Schedule, build_schedule
from nodewatch.tasks.simulate.workload import SchedState
from nodewatch.tasks.simulate.writers import write_bytes, write_ldms_csv, write_long_parquet

STATE_FILE = "simulation.json"
BOUNDARY_DIR = "state"


def day_str(cfg: SimConfig, day: int) -> str:
    """``YYYY-MM-DD`` of day index ``day``."""
    return (cfg.start + timedelta(days=day)).isoformat()


def rack_base(
    sched: Schedule, nodes: np.ndarray, day: int, events: list | None = None, base: np.ndarray | None = None
) -> np.ndarray:
    """Counter base (driver integrals since the last boot) of ``nodes`` at 00:00 of ``day``.

    Without ``base`` it is chained from the epoch (a full run's schedule only); with it, from ``sched.first_day``.
    """
    events = events if events is not None else sched.node_events(nodes)
    b = telemetry.initial_base(sched, events, nodes) if base is None else base
    for d in range(sched.first_day if base is not None else 0, day):
        b = telemetry.step_base(sched, events, nodes, d, b)
    return b


def render_batch(
    sched: Schedule, out: Path, day: int, rack: int, base: np.ndarray | None = None, events: list | None = None
) -> tuple[dict[str, int], np.ndarray]:
    """Telemetry + syslog of one rack for one day. Returns counts (values, syslog lines) and the next counter base.

    ``base``: the rack's counter base at 00:00 of ``day`` (default: chained from the epoch, see :func:`rack_base`).
    """
    cfg = sched.cfg
    nodes = sched.topo.nodes_of_rack(rack)
    ds = day_str(cfg, day)
    events = events if events is not None else sched.node_events(nodes)
    if base is None:
        base = rack_base(sched, nodes, day, events)
    vals, present, jobid, nxt = telemetry.render(sched, events, nodes, day, base)
    names = [sched.topo.names[i] for i in nodes]
    times = day * 86400 + np.arange(86400 // cfg.step_s) * cfg.step_s
    if rack in cfg.ldms_racks:
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence(cfg.seed, spawn_key=(99, day, rack))))
        usec = g.integers(0, 5000, present.shape)
        n = write_ldms_csv(
            out / f"telemetry/ldms/date={ds}/{sched.topo.rack_name(rack)}.csv",
            names,
            nodes + 1,
            cfg.epoch_s,
            times,
            vals,
            present,
            jobid,
            usec,
        )
        n *= vals.shape[1]
    else:
        n = write_long_parquet(
            out / f"telemetry/long/date={ds}/batch-{rack:03d}.parquet", names, cfg.epoch_s, times, vals, present
        )
    rfc = "5424" if int(sched.topo.row[nodes[0]]) in cfg.syslog_rfc5424_rows else "3164"
    lines = syslog.render_rack(sched, events, nodes, day, rfc)
    write_bytes(out / f"syslog/date={ds}/{sched.topo.rack_name(rack)}.log", ("\n".join(lines) + "\n").encode() if lines else b"")
    return {"values": int(n), "syslog_lines": len(lines)}, nxt


def render_rack_days(
    sched: Schedule, out: Path, rack: int, days: set[int], last: int, base: np.ndarray | None
) -> tuple[dict[str, int], dict[int, np.ndarray]]:
    """Render ``days`` of one rack in order from ``sched.first_day`` to ``last``, stepping the counter base through
    the days not rendered. Returns counts and the base at every midnight ``first_day+1 .. last+1``."""
    nodes = sched.topo.nodes_of_rack(rack)
    events = sched.node_events(nodes)
    b = telemetry.initial_base(sched, events, nodes) if base is None else base
    bases: dict[int, np.ndarray] = {}
    totals: dict[str, int] = {}
    for d in range(sched.first_day, last + 1):
        if d in days:
            counts, b = render_batch(sched, out, d, rack, b, events)
            for k, v in counts.items():
                totals[k] = totals.get(k, 0) + v
        else:
            b = telemetry.step_base(sched, events, nodes, d, b)
        bases[d + 1] = b
    return totals, bases


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
    for name, fn in (
        ("anomalies", truth.anomalies_table),
        ("failures", truth.failures_table),
        ("precursors", truth.precursors_table),
        ("states", truth.states_table),
    ):
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
    doc = {
        "config": json.loads(cfg.to_json()),
        "days_written": sorted(set(days)),
        "dates_written": [day_str(cfg, d) for d in sorted(set(days))],
    }
    write_bytes(out / STATE_FILE, json.dumps(doc, indent=2).encode())


def _boundary_dir(out: Path, cfg: SimConfig, day: int) -> Path:
    return out / BOUNDARY_DIR / f"date={day_str(cfg, day)}"


def save_boundary(out: Path, cfg: SimConfig, day: int, snap: SchedState, base: np.ndarray) -> None:
    """Persist the state at 00:00 of ``day``: scheduler (JSON + jobs parquet) and counter bases (npy), atomically."""
    d = _boundary_dir(out, cfg, day)
    d.mkdir(parents=True, exist_ok=True)
    jobs = pa.Table.from_pandas(snap.jobs, preserve_index=False)
    jobs = jobs.append_column("alloc", pa.array([a.astype(np.int64) for a in snap.alloc], pa.list_(pa.int64())))
    tmp = d / f".jobs.parquet.tmp{os.getpid()}"
    pq.write_table(jobs, tmp, compression="zstd")
    os.replace(tmp, d / "jobs.parquet")
    tmp = d / f".counters.npy.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        np.save(fh, base)
    os.replace(tmp, d / "counters.npy")
    doc = {
        "t": snap.t,
        "pointer": snap.pointer,
        "next_row": snap.next_row,
        "chunk_tau0": snap.chunk_tau0.hex(),
        "pending": snap.pending,
    }
    write_bytes(d / "scheduler.json", json.dumps(doc).encode())  # written last: marks the state complete


def load_boundary(out: Path, cfg: SimConfig, day: int) -> tuple[SchedState, np.ndarray] | None:
    """State at 00:00 of ``day`` saved by :func:`save_boundary` (None if absent)."""
    d = _boundary_dir(out, cfg, day)
    if not (d / "scheduler.json").exists():
        return None
    doc = json.loads((d / "scheduler.json").read_text())
    t = pq.read_table(d / "jobs.parquet")
    alloc = [np.asarray(a, dtype=np.int64) for a in t.column("alloc").to_pylist()]
    jobs: pd.DataFrame = t.drop_columns(["alloc"]).to_pandas()
    base = np.load(d / "counters.npy")
    snap = SchedState(
        float(doc["t"]),
        int(doc["pointer"]),
        int(doc["next_row"]),
        float.fromhex(doc["chunk_tau0"]),
        [int(x) for x in doc["pending"]],
        jobs,
        alloc,
    )
    return snap, base


def resume_point(out: Path, cfg: SimConfig, first: int) -> int:
    """Latest day ``<= first`` with a saved boundary state (0: start from the epoch)."""
    for d in range(first, 0, -1):
        if (_boundary_dir(out, cfg, d) / "scheduler.json").exists():
            return d
    return 0


def simulate(
    cfg: SimConfig, out: Path, days: list[int], progress: Callable[[str, int, int], None] | None = None
) -> dict[str, float]:
    """Render ``days`` (day indices after ``cfg.start``) of the cluster into ``out``; returns counts and timings.

    The run starts from the latest boundary state saved in ``out`` at or before ``min(days)`` (else from the
    epoch), so generating the next day of a long simulation costs one day, and any subset of days renders
    byte-identically to a full run. The state at every midnight reached is saved under ``out/state/``.
    ``progress(stage, done, total)`` is called as tasks finish.
    """
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    todo = sorted(set(days))
    last = todo[-1]
    first = resume_point(out, cfg, todo[0])
    loaded = load_boundary(out, cfg, first) if first else None
    begin, base0 = loaded if loaded is not None else (None, None)
    sched = build_schedule(cfg, last + 1, begin)
    t_sched = time.perf_counter() - t_start
    write_bytes(out / "topology/topology.csv", records.topology_csv(sched).encode())
    tasks = []
    for d in todo:
        tasks.append(dask.delayed(render_global)(sched, out, d, dask_key_name=f"global-{d}"))
    for r in range(cfg.n_racks):
        rb = base0[sched.topo.nodes_of_rack(r)] if base0 is not None else None
        tasks.append(dask.delayed(render_rack_days)(sched, out, r, set(todo), last, rb, dask_key_name=f"rack-{r}"))
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
    rack_results = results[len(todo) :]
    for snap in sched.snapshots:
        d = int(round(snap.t / 86400.0))
        base = np.zeros((cfg.n_nodes, len(telemetry.DRIVERS)))
        for r, (_, bases) in enumerate(rack_results):
            base[sched.topo.nodes_of_rack(r)] = bases[d]
        save_boundary(out, cfg, d, snap, base)
    prev = load_state(out)
    written = (prev[1] if prev else []) + list(todo)
    save_state(out, cfg, written)
    totals: dict[str, float] = {
        "schedule_seconds": t_sched,
        "seconds": time.perf_counter() - t_start,
        "days_scheduled": last + 1 - first,
    }
    for r in results[: len(todo)]:
        for k, v in r.items():
            totals[k] = totals.get(k, 0) + v
    for r, _ in rack_results:
        for k, v in r.items():
            totals[k] = totals.get(k, 0) + v
    return totals
