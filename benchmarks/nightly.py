"""Benchmark of nightly scoring and the nightly flow (issue: nightly scoring, goals in the issue text).

Measured in one run:

1. **Scoring N nodes x 1 day** (default N = 1000, 50 metrics, 15-min cube, RUAD W=10): the batched
   scorer (:func:`nodewatch.tasks.anomaly.score.score_day`, node batches = cube node chunks, 2 threads) vs the
   straightforward baseline, a per-node loop (load one node's model, score its day, write it)
   timed on ``--baseline-nodes`` nodes and extrapolated to N. Goal: <= 120 s on 2 cores. ``ratio=``
   is baseline / batched.
2. **Orchestration overhead**: the same scoring through the nightly flow's Prefect wiring
   (prepare task, cached score tasks -- two per worker, each a group of node batches -- on a thread
   pool, finish task; cache refreshed so every batch really runs) vs the plain function, as a share
   of the time inside the flow (goal <= 10%); best of ``--repeat`` interleaved runs. The fixed cost
   of a flow run (empty flow: create, start, heartbeat thread, finish) and of one task run are
   measured separately; the one-off ephemeral API start-up of the process is printed too.
3. With ``--full``: the whole nightly flow for N simulated nodes (simulate day 0 and 1, ingest +
   cubes + train on day 0 untimed, then ``nightly(day 1)`` timed: ingest -> validate -> cubes ->
   score -> checkpoint tables -> states -> report). Goal <= 15 min. Its orchestration share is the
   flow and task runs the API recorded during the night times the unit costs of an empty flow run
   and an empty task run measured in the same process (an estimate from measured parts: the work
   inside a night's tasks cannot be re-run without Prefect).

Models: one RUAD batch is trained for real on 50 nodes (1 epoch) and its per-node states are written
for all N nodes (scoring cost does not depend on the weight values). Run with ``nice``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="nodewatch-bench-prefect-"))
import nodewatch.flows  # noqa: E402,F401 - Prefect defaults before prefect is imported

D0 = date(2026, 4, 1)
D1 = D0 + timedelta(days=1)


def setup(root: Path, n_nodes: int, n_metrics: int) -> tuple[object, str]:
    """Synthetic cube of n_nodes x 2 days, RUAD trained on 50 nodes and replicated to all nodes."""
    from nodewatch.tasks.anomaly.registry import area, load_models, run_prefix, write_node
    from nodewatch.tasks.anomaly.train import TrainConfig, run_training
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes.build import build_days, dask_client
    from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology

    st = Store(str(root / "store"))
    nodes = node_names(n_nodes)
    metrics = [f"metric_{i:02d}" for i in range(n_metrics)]
    write_topology(st, nodes)
    for d in (D0, D1):
        write_telemetry_day(st, d, nodes, metrics, freq="5min", seed=1)
    with dask_client(n_workers=2) as c:
        build_days(st, "telemetry", [D0, D1], c)
    tr = run_training(st, D0, D0, TrainConfig(model="ruad", window=10, epochs=1, node_batch=50, workers=1),
                      nodes=nodes[:50])
    src = load_models(st, "ruad", tr["run_id"])
    run = tr["run_id"] + "x"
    st.write_bytes(st.fs.open(st.path(run_prefix("ruad", tr["run_id"]), "params.json"), "rb").read(),
                   run_prefix("ruad", run), "params.json")
    for i, n in enumerate(nodes):
        k = i % len(src.nodes)
        write_node(st, "ruad", run, n, src.estimator, k, {"replicated_from": src.nodes[k]})
    st.set_current(area("ruad"), run)
    return st, run


def baseline_per_node(st: object, run: str, nodes: list[str]) -> float:
    """Straightforward per-node loop: load one model, score one node's day, write its region rows."""
    import numpy as np

    from nodewatch.tasks.anomaly.node_scoring import score_nodes
    from nodewatch.tasks.anomaly.registry import load_models
    from nodewatch.tasks.cubes import open_telemetry_cube

    ds = open_telemetry_cube(st)  # type: ignore[arg-type]
    t0 = np.datetime64(D1.isoformat(), "ns")
    hist = t0 - 9 * np.timedelta64(15, "m")
    start = time.perf_counter()
    for n in nodes:
        m = load_models(st, "ruad", run, nodes=[n])  # type: ignore[arg-type]
        sub = ds.sel(node=[n], time=slice(hist, t0 + np.timedelta64(1, "D") - np.timedelta64(1, "ns")))
        s, c = score_nodes(m, sub)
        np.asarray(s.values), np.asarray(c.values)
    return time.perf_counter() - start


def main() -> None:
    """Run the measurements and print them (with ``ratio=``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--metrics", type=int, default=50)
    ap.add_argument("--baseline-nodes", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="also time the whole nightly flow on simulated nodes")
    ap.add_argument("--only-full", action="store_true", help="only the whole nightly flow (part 3)")
    ap.add_argument("--full-step", type=int, default=60, help="simulated telemetry sampling step in seconds for --full")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of the overhead measurements (best of)")
    args = ap.parse_args()
    if args.only_full:
        full_nightly(Path(tempfile.mkdtemp(prefix="nodewatch-bench-nightly-")), args.nodes, args.full_step)
        return

    import torch

    torch.set_num_threads(1)
    from nodewatch.tasks.anomaly.score import score_day, telemetry_geometry

    root = Path(tempfile.mkdtemp(prefix="nodewatch-bench-nightly-"))
    t = time.perf_counter()
    st, run = setup(root, args.nodes, args.metrics)
    print(f"setup (untimed): {time.perf_counter() - t:.1f} s, store {root}")
    _, geo = telemetry_geometry(st)  # type: ignore[arg-type]
    print(f"cube: {len(geo.nodes)} nodes x {len(geo.metrics)} metrics, node chunk {geo.node_chunk}, "
          f"{-(-len(geo.nodes) // geo.node_chunk)} batches")

    t, c = time.perf_counter(), time.process_time()
    out = score_day(st, D1, "ruad", run, workers=args.workers)  # type: ignore[arg-type]
    batched, batched_cpu = time.perf_counter() - t, time.process_time() - c
    assert out["scored"] == args.nodes and not out["failed_batches"], out
    k = min(args.baseline_nodes, args.nodes)
    c = time.process_time()
    base_k = baseline_per_node(st, run, list(geo.nodes[:k]))
    base_cpu = time.process_time() - c
    base = base_k * args.nodes / k
    print(f"scoring {args.nodes} nodes x 1 day (batched, {args.workers} threads): {batched:.1f} s "
          f"({args.nodes / batched:.1f} nodes/s; goal <= 120 s); process CPU {batched_cpu:.1f} s; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"baseline per-node loop: {base_k:.1f} s for {k} nodes -> {base:.1f} s extrapolated to {args.nodes}; "
          f"process CPU {base_cpu:.1f} s -> {base_cpu * args.nodes / k:.1f} s extrapolated")
    print(f"ratio={base / batched:.2f}")

    # orchestration overhead: the nightly flow's Prefect wiring of the same scoring
    from prefect import flow

    from nodewatch.flows.nightly import _score_days
    from nodewatch.tasks.core.runs import RunRecorder

    @flow(name="bench_score")
    def bench_score() -> float:
        rec = RunRecorder(st, "bench_score", {})  # type: ignore[arg-type]
        t0 = time.perf_counter()
        _score_days(st, [D1], "ruad", run, True, rec, args.workers)  # type: ignore[arg-type]
        return time.perf_counter() - t0

    t = time.perf_counter()
    bench_score()  # first call: ephemeral API start-up + a full scoring pass
    first = time.perf_counter() - t
    flow_walls, inners, plains = [], [], []
    for _ in range(args.repeat):  # interleaved, best of each: the machine is shared
        t = time.perf_counter()
        inners.append(bench_score())
        flow_walls.append(time.perf_counter() - t)
        t = time.perf_counter()
        score_day(st, D1, "ruad", run, workers=args.workers)  # type: ignore[arg-type]
        plains.append(time.perf_counter() - t)
    fixed_s, task_cost = unit_costs(args.repeat)
    flow_wall, inner, plain = min(flow_walls), min(inners), min(plains)
    step_share = max(inner - plain, 0.0) / inner
    print(f"prefect wiring of the scoring step (prepare task, {args.workers * 2} score tasks on a thread pool, finish "
          f"task; warm API, best of {args.repeat}): {inner:.2f} s inside the flow vs plain functions {plain:.2f} s; "
          f"first flow call incl. ephemeral API start-up: {first:.1f} s")
    print(f"orchestration overhead share of the scoring step: {100 * step_share:.1f}% (goal <= 10%)")
    print(f"fixed cost of a flow run (create, start, heartbeat thread, finish; empty flow, best of {args.repeat}): "
          f"{fixed_s:.2f} s; one empty task run: {task_cost * 1000:.0f} ms; the scoring step run as a flow of its own: "
          f"{flow_wall:.2f} s wall = {100 * max(flow_wall - plain, 0.0) / flow_wall:.1f}% over plain")

    if args.full:
        full_nightly(root, args.nodes, args.full_step, (fixed_s, task_cost))


def unit_costs(repeat: int) -> tuple[float, float]:
    """Fixed cost of one flow run and of one task run on the (warm) API: empty flow/task, best of ``repeat``."""
    from prefect import flow, task

    @task(name="bench-empty-task")
    def empty_task() -> None:
        return None

    @flow(name="bench_empty")
    def empty_flow(n_tasks: int) -> list[float]:
        out = []
        for _ in range(n_tasks):
            t0 = time.perf_counter()
            empty_task()
            out.append(time.perf_counter() - t0)
        return out

    empty_flow(1)  # warm-up (ephemeral API start-up)
    fixed, per_task = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        pt = empty_flow(10)
        fixed.append(time.perf_counter() - t - sum(pt))
        per_task += pt
    return min(fixed), float(sorted(per_task)[len(per_task) // 2])


def runs_since(t0: float) -> tuple[int, int]:
    """(flow runs, task runs) the API recorded since unix time ``t0`` (this process owns its API)."""
    from datetime import UTC, datetime

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterStartTime, TaskRunFilter, TaskRunFilterStartTime

    after = datetime.fromtimestamp(t0, UTC)
    with get_client(sync_client=True) as c:
        n_flows = c.count_flow_runs(flow_run_filter=FlowRunFilter(start_time=FlowRunFilterStartTime(after_=after)))
        body = {"task_runs": TaskRunFilter(start_time=TaskRunFilterStartTime(after_=after)).model_dump(mode="json")}
        n_tasks = c.request("POST", "/task_runs/count", json=body).json()
    return int(n_flows), int(n_tasks)


def full_nightly(root: Path, n_nodes: int, step_s: int = 60, costs: tuple[float, float] | None = None) -> None:
    """Simulate 2 days of ``n_nodes`` nodes, prepare day 0 (untimed), time ``nightly`` on day 1."""
    from nodewatch.flows.demo import bootstrap
    from nodewatch.flows.nightly import nightly

    inbox, store = root / "full-inbox", root / "full-store"
    t = time.perf_counter()
    boot = bootstrap(str(inbox), str(store), 1, 1, 10, {"n_nodes": n_nodes, "nodes_per_rack": 48, "racks_per_row": 7,
                                                        "step_s": step_s})
    print(f"full: bootstrap (simulate+ingest+cubes+train day 0, untimed): {time.perf_counter() - t:.0f} s "
          f"{ {k: round(v) for k, v in boot['timings'].items()} }")
    if costs is None:
        costs = unit_costs(3)
    t, t_unix = time.perf_counter(), time.time()
    m = nightly(demo=True, inbox=str(inbox), store=str(store))
    wall = time.perf_counter() - t
    n_flows, n_tasks = runs_since(t_unix - 1)
    overhead = n_flows * costs[0] + n_tasks * costs[1]
    sim = m["timings"].get("simulate", 0.0)
    print(f"full nightly for {n_nodes} nodes ({step_s} s telemetry sampling): {wall:.0f} s wall, "
          f"of which simulating the day {sim:.0f} s; "
          f"without simulation {wall - sim:.0f} s (goal <= 900 s); steps "
          f"{ {k: round(v) for k, v in m['timings'].items()} }")
    print(f"orchestration of the whole night: {n_flows} flow run(s) x {costs[0]:.2f} s + {n_tasks} task runs x "
          f"{costs[1] * 1000:.0f} ms (unit costs measured on empty flows/tasks) = {overhead:.1f} s = "
          f"{100 * overhead / wall:.1f}% of the night's wall time (goal <= 10%)")


if __name__ == "__main__":
    main()
