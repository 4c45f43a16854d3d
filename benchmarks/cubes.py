"""Benchmark: staged telemetry parquet → cubes/telemetry.zarr (issue 7).

In one run:

1. generate staged parquet (vectorised numpy, bounded memory): the full case (default 1000 nodes ×
   7 days × 50 metrics at 1 min ≈ 504M values) and a subset (default 100 nodes × 1 day);
2. full case: build the cube in a child process on a LocalCluster; report values/s and the peak RSS
   of the whole process tree (child + Dask workers), sampled every 0.1 s;
3. subset: time our build (LocalCluster with worker processes and with threads) and a straightforward
   pandas baseline (per node ``groupby("metric").resample(step)`` then ``concat``) on the same files,
   compare every window value by value (``rtol`` 2e-7 of the float32-rounded baseline value, plus a
   tiny ``atol`` near 0) and print ``ratio=`` (baseline time / our time) excluding and including the
   Dask cluster start-up;
4. print one ``GOAL <name>: PASS|FAIL|NOT MEASURED`` line per goal (identical numbers, ratio >= 3,
   peak RSS <= 4 GiB); the exit status is 1 if any goal fails.

Usage: ``nice .venv/bin/python benchmarks/cubes.py`` (``--nodes 50 --days 1`` for a quick run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import threading
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nodewatch.schemas.metrics import STAGED_METRICS  # noqa: E402
from nodewatch.tasks.core.store import Store  # noqa: E402
from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology  # noqa: E402

DAY0 = date(2026, 1, 5)


def generate(
    root: Path, n_nodes: int, n_days: int, n_metrics: int, freq: str, seed: int, reuse: bool = False
) -> tuple[Store, int, float]:
    """Stage synthetic telemetry; returns (store, rows, seconds). ``reuse`` keeps data of an identical earlier run."""
    stamp = root / "generated.json"
    params = {"nodes": n_nodes, "days": n_days, "metrics": n_metrics, "freq": freq, "seed": seed}
    if reuse and stamp.exists() and (root / "staged").exists() and json.loads(stamp.read_text())["params"] == params:
        st = Store(str(root))
        shutil.rmtree(root / "cubes", ignore_errors=True)
        return st, json.loads(stamp.read_text())["rows"], 0.0
    if root.exists():
        shutil.rmtree(root)
    st = Store(str(root))
    nodes = node_names(n_nodes)
    metrics = list(STAGED_METRICS[:n_metrics])
    write_topology(st, nodes)
    t0 = time.perf_counter()
    rows = sum(write_telemetry_day(st, DAY0 + timedelta(days=i), nodes, metrics, freq=freq, seed=seed) for i in range(n_days))
    stamp.write_text(json.dumps({"params": params, "rows": rows}))
    return st, rows, time.perf_counter() - t0


def _tree_rss(pid: int) -> int:
    import psutil

    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for q in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += q.memory_info().rss
    return total


def run_child_build(store: Store, n_days: int, processes: bool, workers: int) -> dict:
    """Build in a child process; returns its JSON result plus the sampled peak RSS of the process tree."""
    cmd = [
        sys.executable,
        __file__,
        "--phase",
        "build",
        "--store",
        store.url,
        "--n-days",
        str(n_days),
        "--workers",
        str(workers),
    ] + ([] if processes else ["--threads"])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.1)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    done.set()
    th.join()
    if proc.returncode != 0:
        raise SystemExit(f"child build failed:\n{err[-4000:]}")
    res = json.loads(out.strip().splitlines()[-1])
    res["peak_rss_bytes"] = peak[0]
    return res


def phase_build(url: str, n_days: int, processes: bool, workers: int) -> None:
    """Child process body: build all days, print one JSON line."""
    import resource

    from nodewatch.tasks.cubes.build import build_days, dask_client

    st = Store(url)
    days = [DAY0 + timedelta(days=i) for i in range(n_days)]
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    with dask_client(n_workers=workers, processes=processes) as c:
        t1 = time.perf_counter()
        res = build_days(st, "telemetry", days, c)
        t2 = time.perf_counter()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    rows = sum(r.report.get("rows_used", 0) for r in res)
    print(
        json.dumps(
            {
                "rows": rows,
                "build_s": t2 - t1,
                "cluster_start_s": t1 - t0,
                "days": len(res),
                "cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),  # threads: all work is in this process
                "scan_task_s": sum(r.report.get("scan_task_s", 0) for r in res),
                "write_task_s": sum(r.report.get("write_task_s", 0) for r in res),
                "setup": res[0].report.get("build_setup", {}),
            }
        )
    )


def pandas_baseline(st: Store, step: str) -> tuple[pd.DataFrame, float]:
    """Per node: groupby(metric).resample(step) of mean/min/max/std(ddof=0)/count, then concat."""
    t0 = time.perf_counter()
    files = st.staged_files("telemetry")
    df = pd.concat([pd.read_parquet(f, columns=["time", "node", "metric", "value"]) for f in files], ignore_index=True)
    parts = []
    for node, g in df.groupby("node", sort=True):
        r = g.set_index("time").groupby("metric")["value"].resample(step)
        agg = pd.DataFrame({"mean": r.mean(), "min": r.min(), "max": r.max(), "std": r.std(ddof=0), "count": r.count()})
        agg["node"] = node
        parts.append(agg)
    out = pd.concat(parts).reset_index()
    return out, time.perf_counter() - t0


def ours_subset(st: Store, processes: bool, workers: int) -> tuple[float, float]:
    """Build the subset cube from scratch; returns (build seconds, cluster start seconds)."""
    from nodewatch.tasks.cubes.build import build_days, dask_client

    shutil.rmtree(st.path("cubes"), ignore_errors=True)
    days = [date.fromisoformat(d) for d in st.staged_dates("telemetry")]
    t0 = time.perf_counter()
    with dask_client(n_workers=workers, processes=processes) as c:
        t1 = time.perf_counter()
        build_days(st, "telemetry", days, c)
        t2 = time.perf_counter()
    return t2 - t1, t1 - t0


RTOL = 2e-7
"""Relative tolerance against the float32-rounded baseline value (float32 has a 2**-24 ≈ 6e-8 half-ulp)."""
ATOL = 1e-6
"""Absolute tolerance for values near 0 (metric values are O(1)..O(1e5); 1e-6 is below their resolution)."""
STD_CANCEL = 4 * float(np.sqrt(np.finfo(np.float64).eps))
"""Extra absolute tolerance of ``std`` per unit of ``|mean|``: a float64 variance of a near-constant window
carries ~eps64 * mean**2 of rounding error in either implementation, i.e. ~sqrt(eps64) * |mean| in std."""


def close(ours: np.ndarray, ref: np.ndarray, atol: np.ndarray | float = ATOL) -> np.ndarray:
    """Per-value check: ``|ours - f32(ref)| <= RTOL * |f32(ref)| + atol`` (True where close)."""
    ref32 = ref.astype(np.float32).astype(np.float64)
    return np.abs(ours - ref32) <= RTOL * np.abs(ref32) + atol


def compare(st: Store, base: pd.DataFrame) -> tuple[int, list[str]]:
    """Compare the cube with the baseline value by value; returns (windows compared, failure messages)."""
    from nodewatch.tasks.cubes import open_telemetry_cube

    ds = open_telemetry_cube(st)
    base = base[base["count"] > 0]
    t = pd.DatetimeIndex(base["time"]).tz_convert(None).as_unit("ns").values
    ni = pd.Index([str(x) for x in ds.node.values]).get_indexer(base["node"])
    mi = pd.Index([str(x) for x in ds.metric.values]).get_indexer(base["metric"])
    ti = pd.Index(ds.time.values).get_indexer(t)
    assert (ni >= 0).all() and (mi >= 0).all() and (ti >= 0).all()
    sub = ds.isel(time=slice(int(ti.min()), int(ti.max()) + 1)).load()
    ti = ti - int(ti.min())
    fails = []
    cube_cells = int((sub["count"].values > 0).sum())
    if cube_cells != len(base):
        fails.append(f"cube has {cube_cells} windows with data, baseline {len(base)}")
    n_bad = int((sub["count"].values[ni, ti, mi] != base["count"].to_numpy()).sum())
    if n_bad:
        fails.append(f"count: {n_bad} windows differ")
    mean_abs = np.abs(base["mean"].to_numpy(np.float64))
    for k in ("mean", "min", "max", "std"):
        ours = sub[k].values[ni, ti, mi].astype(np.float64)
        ref = base[k].to_numpy(np.float64)
        ok = close(ours, ref, ATOL + STD_CANCEL * mean_abs if k == "std" else ATOL)
        ref32 = ref.astype(np.float32).astype(np.float64)
        worst = float(np.max(np.abs(ours - ref32) / np.maximum(np.abs(ref32), ATOL), initial=0.0))
        print(
            f"  {k}: {int(ok.sum()):,}/{len(ok):,} within rtol={RTOL:g} of float32(baseline) (+ atol); "
            f"max relative difference {worst:.2e}"
        )
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            fails.append(f"{k}: {int((~ok).sum())} windows outside tolerance, e.g. ours {ours[i]!r} vs baseline {ref[i]!r}")
    return len(base), fails


def goal(name: str, ok: bool | None, detail: str) -> bool:
    """Print one explicit goal line; ``ok=None`` means not measured in this run."""
    verdict = "NOT MEASURED" if ok is None else ("PASS" if ok else "FAIL")
    print(f"GOAL {name}: {verdict} ({detail})")
    return ok is not False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", default="all", choices=["all", "build"])
    ap.add_argument("--store")
    ap.add_argument("--n-days", type=int, default=7)
    ap.add_argument("--threads", action="store_true")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--metrics", type=int, default=50)
    ap.add_argument("--freq", default="1min")
    ap.add_argument("--subset-nodes", type=int, default=100)
    ap.add_argument("--subset-days", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workdir", default="/tmp/nodewatch-bench-cubes")
    ap.add_argument("--skip-full", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse", action="store_true", help="reuse staged data generated by an identical earlier run")
    a = ap.parse_args()
    if a.phase == "build":
        phase_build(a.store, a.n_days, not a.threads, a.workers)
        return
    work = Path(a.workdir)
    print(f"cores={len(__import__('os').sched_getaffinity(0))} workers={a.workers}")

    # ---- subset: ours (processes / threads) vs pandas baseline, identical numbers
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")
    sub, sub_rows, gen_s = generate(work / "subset", a.subset_nodes, a.subset_days, a.metrics, a.freq, a.seed, a.reuse)
    print(
        f"subset: {a.subset_nodes} nodes x {a.subset_days} days x {a.metrics} metrics = {sub_rows:,} values "
        f"(generated in {gen_s:.1f} s)"
    )
    base, base_s = pandas_baseline(sub, "15min")
    print(f"baseline pandas groupby/resample: {base_s:.2f} s  ({sub_rows / base_s:,.0f} values/s)")
    timings, starts, fails = {}, {}, []
    for processes in (False, True):
        build_s, start_s = ours_subset(sub, processes, a.workers)
        mode = "processes" if processes else "threads"
        print(
            f"ours ({mode}, {a.workers} workers): {build_s:.2f} s  ({sub_rows / build_s:,.0f} values/s), "
            f"cluster start {start_s:.1f} s"
        )
        n, f = compare(sub, base)
        fails += [f"{mode}: {x}" for x in f]
        print(f"  {n:,} windows compared, {'all equal within tolerance' if not f else f'{len(f)} failure(s)'}")
        timings[mode], starts[mode] = build_s, start_s
    best = min(timings, key=timings.get)
    for mode in ("threads", "processes"):
        print(
            f"ratio_{mode}={base_s / timings[mode]:.2f} (start-up excluded) "
            f"ratio_{mode}_with_startup={base_s / (timings[mode] + starts[mode]):.2f} (start-up included)"
        )
    ratio = base_s / timings[best]
    ratio_su = base_s / (timings[best] + starts[best])
    print(
        f"ratio={ratio:.2f} ratio_with_startup={ratio_su:.2f}  (baseline {base_s:.2f} s / ours {timings[best]:.2f} s "
        f"+ {starts[best]:.1f} s cluster start, with {best})"
    )
    ok = goal("identical numbers (float32 tolerance)", not fails, "; ".join(fails) or "every window of both modes")
    ok &= goal("ratio >= 3, cluster start-up excluded", ratio >= 3, f"{ratio:.2f} with {best}")
    ok &= goal("ratio >= 3, cluster start-up included", ratio_su >= 3, f"{ratio_su:.2f} with {best}")

    if a.skip_full:
        goal("peak RSS <= 4 GiB", None, "full case skipped (--skip-full)")
        if not ok:
            raise SystemExit(1)
        return
    # ---- full case
    full, rows, gen_s = generate(work / "full", a.nodes, a.days, a.metrics, a.freq, a.seed, a.reuse)
    size = sum(p.stat().st_size for p in (work / "full" / "staged").rglob("*.parquet"))
    print(
        f"full: {a.nodes} nodes x {a.days} days x {a.metrics} metrics at {a.freq} = {rows:,} values, "
        f"{size / 2**30:.2f} GiB staged parquet (generated in {gen_s:.0f} s)"
    )
    res = run_child_build(full, a.days, processes=(best == "processes"), workers=a.workers)
    print(
        f"full build ({best}): {res['build_s']:.1f} s, {res['rows'] / res['build_s']:,.0f} values/s, "
        f"peak RSS {res['peak_rss_bytes'] / 2**30:.2f} GiB (process tree; goal <= 4 GiB), "
        f"cluster start {res['cluster_start_s']:.1f} s"
    )
    if best == "threads":
        print(
            f"full build CPU time {res['cpu_s']:.1f} s ({res['rows'] / res['cpu_s']:,.0f} values per CPU-second); "
            f"task time: scans {res['scan_task_s']:.1f} s, merge+write {res['write_task_s']:.1f} s, "
            f"axes pre-scan {res['setup'].get('axes_scan_s', 0):.1f} s, "
            f"cube create {res['setup'].get('ensure_cube_s', 0):.1f} s"
        )
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())}")
    cube = sum(p.stat().st_size for p in (work / "full" / "cubes" / "telemetry.zarr").rglob("*") if p.is_file())
    print(f"cube size on disk {cube / 2**20:.1f} MiB")
    peak = res["peak_rss_bytes"] / 2**30
    ok &= goal("peak RSS <= 4 GiB", peak <= 4.0, f"{peak:.2f} GiB, process tree of the full build")
    ok &= goal("all staged rows used", res["rows"] == rows, f"rows used {res['rows']:,}, staged {rows:,}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
