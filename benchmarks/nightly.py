"""Benchmark of nightly scoring and the nightly flow (issue: nightly scoring, goals in the issue text).

Measured in one run:

1. **Scoring N nodes x 1 day** (default N = 1000, 50 metrics, 15-min cube, RUAD W=10): the batched
   scorer (:func:`tasks.score.score_day`, node batches = cube node chunks, 2 threads) vs the
   straightforward baseline, a per-node loop (load one node's model, score its day, write it)
   timed on ``--baseline-nodes`` nodes and extrapolated to N. Goal: <= 120 s on 2 cores. ``ratio=``
   is baseline / batched.
2. **Orchestration overhead**: the same scoring through the nightly flow's Prefect wiring
   (prepare task, one cached task per node batch on a thread pool, finish task; cache refreshed so
   every batch really runs) vs the plain function, as a share of the flow's wall time (goal <= 10%).
   The one-off ephemeral API start-up of the process is printed separately.
3. With ``--full``: the whole nightly flow for N simulated nodes (simulate day 0 and 1, ingest +
   cubes + train on day 0 untimed, then ``nightly(day 1)`` timed: ingest -> validate -> cubes ->
   score -> checkpoint tables -> states -> report). Goal <= 15 min.

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
import flows  # noqa: E402,F401 - Prefect defaults before prefect is imported

D0 = date(2026, 4, 1)
D1 = D0 + timedelta(days=1)


def setup(root: Path, n_nodes: int, n_metrics: int) -> tuple[object, str]:
    """Synthetic cube of n_nodes x 2 days, RUAD trained on 50 nodes and replicated to all nodes."""
    from tasks.cubes.build import build_days, dask_client
    from tasks.cubes.synth import node_names, write_telemetry_day, write_topology
    from tasks.model_registry import area, load_models, run_prefix, write_node
    from tasks.store import Store
    from tasks.train import TrainConfig, run_training

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

    from tasks.cubes import open_telemetry_cube
    from tasks.model_registry import load_models
    from tasks.node_scoring import score_nodes

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
    args = ap.parse_args()
    if args.only_full:
        full_nightly(Path(tempfile.mkdtemp(prefix="nodewatch-bench-nightly-")), args.nodes, args.full_step)
        return

    import torch

    torch.set_num_threads(1)
    from tasks.score import score_day, telemetry_geometry

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

    from flows.nightly import _score_days
    from tasks.runs import RunRecorder

    @flow(name="bench_score")
    def bench_score() -> float:
        rec = RunRecorder(st, "bench_score", {})  # type: ignore[arg-type]
        t0 = time.perf_counter()
        _score_days(st, [D1], "ruad", run, True, rec, args.workers)  # type: ignore[arg-type]
        return time.perf_counter() - t0

    t = time.perf_counter()
    bench_score()  # first call: ephemeral API start-up + a full scoring pass
    first = time.perf_counter() - t
    t = time.perf_counter()
    inner = bench_score()
    flow_wall = time.perf_counter() - t
    t = time.perf_counter()
    score_day(st, D1, "ruad", run, workers=args.workers)  # type: ignore[arg-type]
    plain = time.perf_counter() - t
    share = max(flow_wall - plain, 0.0) / flow_wall
    print(f"prefect flow (scoring step, warm API): {flow_wall:.1f} s wall ({inner:.1f} s inside the flow); "
          f"plain functions: {plain:.1f} s; first flow call incl. ephemeral API start-up: {first:.1f} s")
    print(f"orchestration overhead share: {100 * share:.1f}% (goal <= 10%)")

    if args.full:
        full_nightly(root, args.nodes, args.full_step)


def full_nightly(root: Path, n_nodes: int, step_s: int = 60) -> None:
    """Simulate 2 days of ``n_nodes`` nodes, prepare day 0 (untimed), time ``nightly`` on day 1."""
    from flows.demo import bootstrap
    from flows.nightly import nightly

    inbox, store = root / "full-inbox", root / "full-store"
    t = time.perf_counter()
    boot = bootstrap(str(inbox), str(store), 1, 1, 10, {"n_nodes": n_nodes, "nodes_per_rack": 48, "racks_per_row": 7,
                                                        "step_s": step_s})
    print(f"full: bootstrap (simulate+ingest+cubes+train day 0, untimed): {time.perf_counter() - t:.0f} s "
          f"{ {k: round(v) for k, v in boot['timings'].items()} }")
    t = time.perf_counter()
    m = nightly(demo=True, inbox=str(inbox), store=str(store))
    wall = time.perf_counter() - t
    sim = m["timings"].get("simulate", 0.0)
    print(f"full nightly for {n_nodes} nodes ({step_s} s telemetry sampling): {wall:.0f} s wall, "
          f"of which simulating the day {sim:.0f} s; "
          f"without simulation {wall - sim:.0f} s (goal <= 900 s); steps "
          f"{ {k: round(v) for k, v in m['timings'].items()} }")


if __name__ == "__main__":
    main()
