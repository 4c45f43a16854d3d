"""Benchmark: vectorised Algorithm 1 (nodewatch.models.checkpoint.intervals.aware_interval) vs a per-grid-point loop.

Frank ch. 3, sec. 3.3.2 / 3.4: the thesis's single-threaded reference computes >= 400 aware intervals/s.
Goals: ratio >= 100x against the straightforward loop over the same eq. 3.8 (identical intervals within
one grid step, costs within 1e-6 relative) and >= 10,000 intervals/s for a table of >= 1000 shapes on
one core.

    nice .venv/bin/python benchmarks/checkpoint_intervals.py [--loop-shapes 64] [--table-shapes 1024]
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"  # one core

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from nodewatch.models.checkpoint.intervals import (  # noqa: E402
    GRID_STEP_H,
    aware_interval,
    aware_interval_loop,
    daly_first_order_interval,
    daly_interval,
    young_interval,
)


def _shapes(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Job shapes like the default table: runtimes 1-72 h, tc in {0.1, 0.25, 0.5} h, job MTBF 2-2000 h."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(1.0, 72.0, n)
    tc = rng.choice([0.1, 0.25, 0.5], n)
    m = np.exp(rng.uniform(np.log(2.0), np.log(2000.0), n))
    w = rng.choice([0.7, 0.8, 1.0], n)
    return t, tc, m, w


def main() -> None:
    """Run both implementations in one process and print figures and ``ratio=``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--loop-shapes", type=int, default=64)
    ap.add_argument("--table-shapes", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    t, tc, m, w = _shapes(a.loop_shapes, seed=1)
    loop_s = vec_s = loop_cpu = vec_cpu = np.inf
    for _ in range(a.repeats):  # interleaved, best of each: the machine is shared
        t0, c0 = time.perf_counter(), time.process_time()
        loop = [aware_interval_loop(*args) for args in zip(t, tc, m, w, strict=True)]
        loop_s, loop_cpu = min(loop_s, time.perf_counter() - t0), min(loop_cpu, time.process_time() - c0)
        for _ in range(5):
            t0, c0 = time.perf_counter(), time.process_time()
            vec = aware_interval(t, tc, m, w)
            vec_s, vec_cpu = min(vec_s, time.perf_counter() - t0), min(vec_cpu, time.process_time() - c0)
    lp = np.array([x[0] for x in loop])
    lc = np.array([x[1] for x in loop])
    same_never = np.isinf(lp) == np.isinf(vec.period_h)
    fin = np.isfinite(lp) & np.isfinite(vec.period_h)
    max_steps = float(np.max(np.abs(lp[fin] - vec.period_h[fin])) / GRID_STEP_H) if fin.any() else 0.0
    rel = float(np.max(np.abs(lc - vec.cost_h) / np.abs(lc)))
    ok = bool(same_never.all() and max_steps <= 1.0 + 1e-9 and rel <= 1e-6)
    print(f"load average (1 min): {os.getloadavg()[0]:.1f}")
    print(
        f"loop baseline: {a.loop_shapes} shapes in {loop_s:.3f} s wall, {loop_cpu:.3f} s CPU "
        f"= {a.loop_shapes / loop_cpu:.1f} intervals per CPU-second"
    )
    print(
        f"vectorised, same shapes: {vec_s:.4f} s wall, {vec_cpu:.4f} s CPU "
        f"= {a.loop_shapes / vec_cpu:.1f} intervals per CPU-second"
    )
    print(f"wall-clock ratio={loop_s / vec_s:.1f} (noisy on a shared machine; ratio below is CPU time)")
    print(
        f"agreement: never-flags equal={bool(same_never.all())}, max |period diff|={max_steps:.3f} grid steps, "
        f"max rel cost diff={rel:.2e} -> {'OK' if ok else 'MISMATCH'}"
    )

    t, tc, m, w = _shapes(a.table_shapes, seed=2)
    best = best_cpu = np.inf
    for _ in range(a.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        aware_interval(t, tc, m, w)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    print(
        f"table: {a.table_shapes} shapes in {best:.3f} s wall = {a.table_shapes / best:,.0f} intervals/s; "
        f"{best_cpu:.3f} s CPU = {a.table_shapes / best_cpu:,.0f} intervals per CPU-second "
        f"(goal >= 10,000/s; thesis reference 400/s)"
    )
    # the product path: what compute_table does per (shape, cost, model) cell -- Algorithm 1 plus the
    # Young/Daly candidates (extra_tau_h) and their eq. 3.8 costs
    best = best_cpu = np.inf
    for _ in range(a.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        classic = np.stack([young_interval(m, tc), daly_first_order_interval(m, tc), daly_interval(m, tc)], axis=1)
        aware_interval(t, tc, m, w, extra_tau_h=classic)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    print(
        f"product path (aware_interval + Young/Daly candidates, extra_tau_h): {a.table_shapes} shapes in {best:.3f} s "
        f"wall = {a.table_shapes / best:,.0f} intervals/s; {best_cpu:.3f} s CPU = "
        f"{a.table_shapes / best_cpu:,.0f} intervals per CPU-second"
    )
    # the whole product call: nodewatch.tasks.checkpoint.compute.compute_table on >= 1000 shapes (1-8192 nodes x
    # 1-72 h), one checkpoint cost, one failure model: classical intervals + costs, Algorithm 1 with the
    # candidates, makespans, savings, the xarray Dataset
    from nodewatch.models.checkpoint.failures import FailureModel
    from nodewatch.tasks.checkpoint.compute import CkptCost, compute_table, default_shape_grid

    runtimes = np.linspace(1.0, 72.0, -(-a.table_shapes // 14))
    grid = default_shape_grid(runtimes_h=runtimes)
    fm = FailureModel("w08", mtbf_node_h=5 * 8766.0, shape=0.8)
    best = best_cpu = np.inf
    cells = 0
    for _ in range(a.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        ds = compute_table(grid, [CkptCost.fixed(0.25)], [fm])
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
        cells = int(ds.checkpointable.values.sum())
    print(
        f"product compute_table: {len(grid)} shapes ({cells} checkpointable cells) in {best:.3f} s wall = "
        f"{cells / best:,.0f} intervals/s; {best_cpu:.3f} s CPU = {cells / best_cpu:,.0f} intervals per CPU-second"
    )
    print(f"ratio={loop_cpu / vec_cpu:.1f}")


if __name__ == "__main__":
    main()
