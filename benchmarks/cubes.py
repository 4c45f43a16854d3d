"""Benchmark: staged telemetry parquet → cubes/telemetry.zarr (issue 7).

In one run:

1. generate staged parquet (vectorised numpy, bounded memory): the full case (default 1000 nodes ×
   7 days × 50 metrics at 1 min ≈ 504M values) and a subset (default 100 nodes × 1 day);
2. full case: build the cube in a child process on a LocalCluster; report values/s and the peak RSS
   of the whole process tree (child + Dask workers), sampled every 0.1 s;
3. subset: time our build (LocalCluster with worker processes and with threads) and a straightforward
   pandas baseline (per node ``groupby("metric").resample(step)`` then ``concat``) on the same files,
   assert equal numbers within float32 tolerance and print ``ratio=`` (baseline time / our time).

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

from schemas.metrics import STAGED_METRICS  # noqa: E402
from tasks.cubes.synth import node_names, write_telemetry_day, write_topology  # noqa: E402
from tasks.store import Store  # noqa: E402

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

    from tasks.cubes.build import build_days, dask_client

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
    from tasks.cubes.build import build_days, dask_client

    shutil.rmtree(st.path("cubes"), ignore_errors=True)
    days = [date.fromisoformat(d) for d in st.staged_dates("telemetry")]
    t0 = time.perf_counter()
    with dask_client(n_workers=workers, processes=processes) as c:
        t1 = time.perf_counter()
        build_days(st, "telemetry", days, c)
        t2 = time.perf_counter()
    return t2 - t1, t1 - t0


def compare(st: Store, base: pd.DataFrame) -> int:
    """Assert that the cube equals the baseline within float32 tolerance; returns windows compared."""
    from tasks.cubes import open_telemetry_cube

    ds = open_telemetry_cube(st)
    base = base[base["count"] > 0]
    t = pd.DatetimeIndex(base["time"]).tz_convert(None).as_unit("ns").values
    ni = pd.Index([str(x) for x in ds.node.values]).get_indexer(base["node"])
    mi = pd.Index([str(x) for x in ds.metric.values]).get_indexer(base["metric"])
    ti = pd.Index(ds.time.values).get_indexer(t)
    assert (ni >= 0).all() and (mi >= 0).all() and (ti >= 0).all()
    sub = ds.isel(time=slice(int(ti.min()), int(ti.max()) + 1)).load()
    ti = ti - int(ti.min())
    cube_cells = int((sub["count"].values > 0).sum())
    assert cube_cells == len(base), f"cube has {cube_cells} windows with data, baseline {len(base)}"
    np.testing.assert_array_equal(sub["count"].values[ni, ti, mi], base["count"].to_numpy())
    for k in ("mean", "min", "max", "std"):
        ours = sub[k].values[ni, ti, mi].astype(np.float64)
        ref = base[k].to_numpy(np.float64)
        scale = np.abs(base["mean"].to_numpy()).max()
        np.testing.assert_allclose(ours, ref.astype(np.float32), rtol=2e-7, atol=scale * 2e-7, err_msg=k)
    return len(base)


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
    timings = {}
    for processes in (False, True):
        build_s, start_s = ours_subset(sub, processes, a.workers)
        n = compare(sub, base)
        mode = "processes" if processes else "threads"
        timings[mode] = build_s
        print(
            f"ours ({mode}, {a.workers} workers): {build_s:.2f} s  ({sub_rows / build_s:,.0f} values/s; "
            f"cluster start {start_s:.1f} s not included); {n:,} windows equal to baseline within float32 tolerance"
        )
    best = min(timings, key=timings.get)
    print(f"ratio_threads={base_s / timings['threads']:.2f} ratio_processes={base_s / timings['processes']:.2f}")
    print(f"ratio={base_s / timings[best]:.2f}  (baseline {base_s:.2f} s / ours {timings[best]:.2f} s with {best})")

    if a.skip_full:
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
    assert res["rows"] == rows, f"rows used {res['rows']} != rows staged {rows}"


if __name__ == "__main__":
    main()
