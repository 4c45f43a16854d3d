"""Backfill of D days × N nodes (default 7 × 256): cube builds on Slurm workers vs one local worker, same bytes.

Defaults (since 28 Nov): the simulator's 57 metrics (``tasks/simulate/metrics.py``) at its 1-min step, i.e.
the rows a backfill day of 256 simulated nodes stages (21.0 M a day; synthetic values, same names and row
count: the scan's cost depends on rows, nodes and metrics, not on the values), and 2 Slurm jobs (one per core
of this 2-core host: 4 one-CPU jobs oversubscribe it, 6.6 s vs 5.7 s in one test).

The backfill's Dask fan-out (``build_days`` of every telemetry day, node batches of 32) is timed three ways
in one run, from copies of one staged store:

1. baseline: one local worker with one thread (``LocalCluster(n_workers=1)``, threads);
2. reference: the default local cluster (2 workers × 2 threads: what one 2-core host gives);
3. Slurm: ``NODEWATCH_DASK=slurm`` with ``--jobs`` single-thread workers as sbatch jobs of the one-host
   cluster of ``infra/local/cluster.sh`` (source its env file first: ``. "$(infra/local/cluster.sh env)"``);
   the workers are other processes, so whole days are tasks (``build_days(day_tasks=None)``: no window
   state crosses processes), consecutive days grouped, one group per worker (``day_groups``, since 28 Nov);
4. ``slurm-untuned``: the same Slurm layout with ``NODEWATCH_TUNE_MALLOC=0`` (worker processes as before
   28 Nov: glibc's mmap threshold fixed by the nanny's ``MALLOC_TRIM_THRESHOLD_``, see
   ``tasks/cubes/cluster.py: tune_malloc``), so the fix is measured against its baseline in the same run;
5. ``slurm-<k>jobs``: the Slurm layout with k one-CPU jobs instead of ``--jobs`` (7 days on 4 jobs: 7 one-day
   tasks, 4 processes time-sliced on the 2 cores, so whole days no longer cap the day phase at 7/4);
   ``slurm-arrow``: the Slurm layout with ``NODEWATCH_ARROW_THREADS=auto`` (pyarrow decodes on every CPU the
   worker may run on, as the in-process baseline does; see ``tasks/cubes/cluster.py: arrow_threads``);
6. with ``--day-per-task``: Slurm again with one day per task (``MAX_DAYS_PER_TASK = 1``: the layout before
   28 Nov, less its one fork per region) to show what grouping days gains, on the same cluster size;
7. ``one-local-scan-names`` / ``slurm-scan-names``: the builds as before 28 Nov 11:00, a pass over the staged
   node/metric names before any day (``read_geometry`` hidden from ``build_days``), where the default now takes
   the existing cube's axes and lets the scans report names off them;
8. ``slurm-finish-on-workers`` (``--score``): each day's ``finish_day`` (summary, alerts, heat map, commit) as a
   task on the Slurm workers (``run_on``) instead of on this host.

``--layouts`` picks and orders them (default: one-local, local, slurm, one-local-scan-names, slurm-scan-names;
``slurm-untuned`` and the others on request).

Each layout first builds one throwaway day per worker (imports, JIT, the heap's first touch) untimed. Every
build's chunks are compared byte for byte with the baseline's. Prints the walls and
``ratio=<baseline / slurm>`` (goal ≥ 1.6). On 2 cores the ceiling of any layout is ~2× over one thread.
Scoring in the backfill (one Dask task per group of node batches with NODEWATCH_DASK=slurm) needs trained models: not timed here.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

START = date(2026, 5, 1)
CUBES_S: list[float] = []
"""Wall of the cube phase of the last timed build (the rest of its wall is the scoring)."""
CPU_S: list[float] = []
"""CPU seconds of this process (all its threads) in the cube phase of the last timed build: the cores an
in-process layout used is CPU_S / CUBES_S (worker processes of the Slurm layouts are not counted here)."""


def stage(root: Path, days: int, nodes: int, metrics: int, freq: str) -> None:
    """Staged telemetry of ``days`` × ``nodes`` × ``metrics`` (synthetic, seeded) plus topology."""
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology

    st = Store(str(root))
    names = node_names(nodes)
    write_topology(st, names, per_rack=16)
    from nodewatch.tasks.simulate.metrics import METRIC_NAMES

    ms = list(METRIC_NAMES[:metrics]) if metrics <= len(METRIC_NAMES) else [f"m{i:02d}" for i in range(metrics)]
    for i in range(days):
        write_telemetry_day(st, START + timedelta(days=i), names, ms, freq=freq, seed=i)


def prepare_models(root: Path, nodes: int) -> str:
    """Cube of the first day, a RUAD model trained on 50 of its nodes (1 epoch), replicated to every node (untimed).

    Scoring cost does not depend on the weight values (as ``benchmarks/nightly.py``); the layouts then rebuild
    every day (a forced backfill: the cube exists) and score every day with this CURRENT run.
    """
    from nodewatch.tasks.anomaly.registry import area, load_models, run_prefix, write_node
    from nodewatch.tasks.anomaly.train import TrainConfig, run_training
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes.build import build_days, dask_client
    from nodewatch.tasks.cubes.synth import node_names

    st = Store(str(root))
    names = node_names(nodes)
    with dask_client(n_workers=2) as c:
        build_days(st, "telemetry", [START], c, node_batch=32)
    tr = run_training(st, START, START, TrainConfig(model="ruad", window=10, epochs=1, node_batch=50, workers=1),
                      nodes=names[:50])
    src = load_models(st, "ruad", tr["run_id"])
    run = tr["run_id"] + "x"
    st.write_bytes(st.fs.open(st.path(run_prefix("ruad", tr["run_id"]), "params.json"), "rb").read(),
                   run_prefix("ruad", run), "params.json")
    for i, n in enumerate(names):
        k = i % len(src.nodes)
        write_node(st, "ruad", run, n, src.estimator, k, {"replicated_from": src.nodes[k]})
    st.set_current(area("ruad"), run)
    return run


def score_all(st: object, days: list, address: str | None, workers: int, finish_on_workers: bool = False) -> None:
    """The backfill's scoring (``flows/nightly.py: _score_days`` without Prefect): two groups of node batches
    per worker and day, ``workers`` groups at a time, each ``run_on(address, score_regions, group)`` (one Dask
    task on the cluster at ``address``, or in this thread); then each day's ``finish_day`` on this host."""
    from concurrent.futures import ThreadPoolExecutor

    import dask

    from nodewatch.tasks.anomaly.score import (
        current_model_run,
        ensure_scores_cube,
        finish_day,
        group_jobs,
        region_jobs,
        score_regions,
    )
    from nodewatch.tasks.cubes.cluster import run_on

    ensure_scores_cube(st)
    run = current_model_run(st, "ruad")
    groups = {d: group_jobs(region_jobs(st, d, "ruad", run), 2 * workers) for d in days}
    from contextlib import ExitStack

    stack = ExitStack()
    ts = None
    if os.environ.get("BENCH_VERBOSE") and address:
        from distributed import Client, get_task_stream

        ts = stack.enter_context(get_task_stream(stack.enter_context(Client(address, set_as_default=False))))
    # as in the flow, the cube client is not the default scheduler of the scoring's own xarray reads
    with stack, dask.config.set(scheduler="threads"), ThreadPoolExecutor(workers) as ex:
        futs = {d: [ex.submit(run_on, address, score_regions, g) for g in gs] for d, gs in groups.items()}
        t_fin = 0.0
        for d, fs in futs.items():
            results = [r for f in fs for r in f.result()]
            t = time.perf_counter()
            run_on(address if finish_on_workers else None, finish_day, st, d, "ruad", run, results, [], "bench")
            t_fin += time.perf_counter() - t
    if ts is not None:
        for rec in ts.data:
            for ss in rec["startstops"]:
                print(f"    task {str(rec['key'])[:30]} on {rec['worker'][-6:]}: {ss['action']} {ss['stop'] - ss['start']:.2f} s")
    if os.environ.get("BENCH_VERBOSE"):
        print(f"    finish_day (this host, serial): {t_fin:.2f} s for {len(days)} day(s)", flush=True)


def build(root: Path, warm: Path, days: int, where: str, workers: int, score: bool = False) -> float:
    """Wall seconds of building every day of the telemetry cube in ``root`` on ``where``.

    Before timing, the first days of ``warm`` (a throwaway copy; one day per worker) are built on the same cluster,
    so imports, JIT compilation and the first touch of a worker's heap are not in the figure (paid once per worker).
    """
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes import build as build_mod
    from nodewatch.tasks.cubes.build import build_days
    from nodewatch.tasks.cubes.cluster import dask_client

    st = Store(str(root))
    finish_on_workers = where == "slurm-finish-on-workers"
    ds = [START + timedelta(days=i) for i in range(days)]

    def timed(c) -> float:
        n = max(1, len(c.scheduler_info(n_workers=-1)["workers"]))
        build_days(Store(str(warm)), "telemetry", ds[:n], c, node_batch=32)  # a day per worker: every worker warm
        at = None if where in ("one-local", "local") else c.scheduler.address
        if score:
            score_all(Store(str(warm)), ds[:1], at, workers, finish_on_workers)
        t, cpu = time.perf_counter(), time.process_time()
        build_days(st, "telemetry", ds, c, node_batch=32)
        CUBES_S[:] = [time.perf_counter() - t]
        CPU_S[:] = [time.process_time() - cpu]
        if score:
            t_cubes = CUBES_S[0]
            score_all(st, ds, at, workers, finish_on_workers)
            print(f"  {where}: cubes {t_cubes:.2f} s, scoring {time.perf_counter() - t - t_cubes:.2f} s", flush=True)
        return time.perf_counter() - t

    if where.endswith("-scan-names"):  # as before: no cube axes seen, so a pass over the names first
        old_rg, build_mod.read_geometry = build_mod.read_geometry, lambda *a, **k: None
        try:
            return build(root, warm, days, where.removesuffix("-scan-names"), workers, score)
        finally:
            build_mod.read_geometry = old_rg
    if where == "slurm-finish-on-workers":
        with dask_client("slurm", n_workers=workers) as c:
            return timed(c)
    env = {"slurm-untuned": ("NODEWATCH_TUNE_MALLOC", "0"),  # the workers as before 28 Nov
           "slurm-arrow": ("NODEWATCH_ARROW_THREADS", "auto")}  # opt-in: pyarrow's pool of the worker's CPUs
    if where in env:  # read by the workers (the env file of the jobs)
        key, value = env[where]
        old_env = os.environ.get(key)
        os.environ[key] = value
        try:
            with dask_client("slurm", n_workers=workers) as c:
                return timed(c)
        finally:
            if old_env is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old_env
    if where == "slurm-day-per-task":
        old, build_mod.MAX_DAYS_PER_TASK = build_mod.MAX_DAYS_PER_TASK, 1
        try:
            with dask_client("slurm", n_workers=workers) as c:
                return timed(c)
        finally:
            build_mod.MAX_DAYS_PER_TASK = old
    if m := re.fullmatch(r"slurm-(\d+)jobs", where):  # another number of one-CPU Slurm jobs than --jobs
        with dask_client("slurm", n_workers=int(m.group(1))) as c:
            return timed(c)
    if where == "one-local":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as cl, \
                Client(cl) as c:
            return timed(c)
    if where == "local":
        workers = 2  # the flow's default: a 2-thread pool for the scoring groups
    with dask_client(where, n_workers=workers) as c:  # the cluster is up (workers joined) before timing
        return timed(c)


def main() -> None:
    """Stage once, build three ways, compare bytes, print the walls and ``ratio=``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--metrics", type=int, default=57, help="first M of the simulator's metric names")
    ap.add_argument("--freq", default="1min")
    ap.add_argument("--jobs", type=int, default=2, help="Slurm worker jobs (one thread each)")
    ap.add_argument("--day-per-task", action="store_true", help="also time Slurm with one day per task")
    ap.add_argument("--score", action="store_true", help="time the backfill's scoring too (RUAD, CURRENT run)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the layouts this many times, interleaved; the medians are compared")
    ap.add_argument("--layouts", default="one-local,local,slurm,one-local-scan-names,slurm-scan-names",
                    help="comma-separated: one-local, local, slurm, slurm-untuned, slurm-<k>jobs, slurm-arrow, "
                         "slurm-day-per-task, "
                         "one-local-scan-names, slurm-scan-names, slurm-finish-on-workers")
    args = ap.parse_args()
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes.repo import chunk_bytes

    base = Path(tempfile.mkdtemp(prefix="nodewatch-bench-backfill-"))
    try:
        t = time.perf_counter()
        stage(base / "staged", args.days, args.nodes, args.metrics, args.freq)
        print(f"staged {args.days} days x {args.nodes} nodes x {args.metrics} metrics ({args.freq}) in "
              f"{time.perf_counter() - t:.1f} s; load {os.getloadavg()[0]:.2f}", flush=True)
        if args.score:
            import torch

            torch.set_num_threads(1)  # the baseline is one thread; Dask's nanny gives workers OMP_NUM_THREADS=1
            t = time.perf_counter()
            prepare_models(base / "staged", args.nodes)
            print(f"cube of day 1 + RUAD trained on 50 nodes, replicated to {args.nodes}: {time.perf_counter() - t:.1f} s "
                  "(untimed)", flush=True)
        runs: dict[str, list[tuple[float, float]]] = {}
        cores: list[float] = []  # CPU seconds / wall of the baseline's cube phase, per run
        chunks: dict[str, dict[str, bytes]] = {}
        layouts = [w for w in args.layouts.split(",") if w]
        if "one-local" not in layouts:
            layouts.insert(0, "one-local")  # the baseline of every ratio and of the byte comparison
        if args.day_per_task and "slurm-day-per-task" not in layouts:
            layouts.append("slurm-day-per-task")
        if not os.environ.get("SLURM_CONF") and not shutil.which("sbatch"):
            print("slurm: no SLURM_CONF/sbatch (source the env of infra/local/cluster.sh): skipped")
            layouts = [w for w in layouts if not w.startswith("slurm")]
        for rep in range(args.repeat):
            for where in layouts:
                root, warm = base / where, base / f"{where}-warm"
                shutil.copytree(base / "staged", root)
                shutil.copytree(base / "staged", warm)
                k = re.fullmatch(r"slurm-(\d+)jobs", where)
                jobs = int(k.group(1)) if k else args.jobs if where.startswith("slurm") else 1
                wall = build(root, warm, args.days, where, jobs, args.score)
                runs.setdefault(where, []).append((wall, CUBES_S[0]))
                if where == "one-local":
                    cores.append(CPU_S[0] / CUBES_S[0])
                if rep == 0:
                    chunks[where] = chunk_bytes(Store(str(root)), "telemetry.zarr")
                    if args.score:
                        chunks[where].update({f"scores/{k}": v for k, v in chunk_bytes(Store(str(root)), "scores.zarr").items()})
                shutil.rmtree(root)
                shutil.rmtree(warm)
                print(f"{where:18s} {wall:7.2f} s, cubes {CUBES_S[0]:.2f} s  (run {rep + 1}, load {os.getloadavg()[0]:.2f})",
                      flush=True)
        walls = {w: statistics.median(x[0] for x in r) for w, r in runs.items()}
        cubes = {w: statistics.median(x[1] for x in r) for w, r in runs.items()}
        for w in walls:
            print(f"median {w:18s} {walls[w]:7.2f} s, cubes {cubes[w]:.2f} s ({len(runs[w])} runs)")
        same = all(chunks[w] == chunks["one-local"] for w in chunks)
        print(f"chunks identical across layouts: {same} ({len(chunks['one-local'])} chunks)")
        if "slurm" in walls:
            print(f"cube phase: ratio_cubes={cubes['one-local'] / cubes['slurm']:.2f}")
            if "local" in walls:
                print(f"slurm vs local 2x2 threads: {walls['local'] / walls['slurm']:.2f}x")
            if "slurm-untuned" in walls:
                print(f"slurm, workers' malloc tuned vs untuned (before 28 Nov): {walls['slurm-untuned'] / walls['slurm']:.2f}x")
            if "slurm-arrow" in walls:
                print(f"slurm, NODEWATCH_ARROW_THREADS=auto vs the nanny's one thread: "
                      f"{walls['slurm'] / walls['slurm-arrow']:.2f}x "
                      f"(ratio with it: {walls['one-local'] / walls['slurm-arrow']:.2f})")
            for w in walls:
                if re.fullmatch(r"slurm-\d+jobs", w):
                    print(f"{w}: ratio_{w.replace('-', '_')}={walls['one-local'] / walls[w]:.2f} "
                          f"(cube phase {cubes['one-local'] / cubes[w]:.2f})")
            if "slurm-day-per-task" in walls:
                print(f"slurm, days grouped vs one day per task: {walls['slurm-day-per-task'] / walls['slurm']:.2f}x")
            if "slurm-scan-names" in walls:
                print(f"slurm, axes from the cube vs a pass over the names first: "
                      f"{walls['slurm-scan-names'] / walls['slurm']:.2f}x (cube phase "
                      f"{cubes['slurm-scan-names']:.2f} -> {cubes['slurm']:.2f} s)")
                if "one-local-scan-names" in walls:
                    print(f"ratio before (names scanned first, both layouts)="
                          f"{walls['one-local-scan-names'] / walls['slurm-scan-names']:.2f}")
            if "slurm-finish-on-workers" in walls:
                print(f"finish_day on the workers vs on this host: {walls['slurm'] / walls['slurm-finish-on-workers']:.2f}x "
                      f"(ratio with it: {walls['one-local'] / walls['slurm-finish-on-workers']:.2f})")
            used = statistics.median(cores)
            n_cpu = os.cpu_count() or 1
            print(f"baseline (one local worker, in-process) used {used:.2f} cores in its cube phase (median; pyarrow's "
                  f"decode pool is not limited to the one Dask thread): ceiling of any layout on {n_cpu} cores "
                  f"~{n_cpu / used:.2f}")
            print(f"ratio={walls['one-local'] / walls['slurm']:.2f}")
        if not same:
            raise SystemExit("chunks differ between layouts")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
