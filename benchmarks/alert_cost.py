"""Cost of the node verdicts for ~1,000 nodes x 1 day (issue 15 goal: <= 2 min on 2 cores, vicinity step included).

Arrays: the demo configuration's 64-node cluster of ``benchmarks/alert_quality.py`` (simulated and aggregated
once, ``--cache`` re-uses it), tiled ``--copies`` times (default 16 = 1,024 nodes, 64 racks of 16, each copy
with 1% multiplicative noise and its own node names, racks and jobs), 21 history days + the judged night.
Timed: :func:`nodewatch.tasks.anomaly.verdicts.judge_day` as the nightly step runs it (job grid, own-history
reference, 7 held-back days of evidence and the budget calibration, the night's evidence with the job, rack and
architecture vicinities, inferred running jobs, verdicts), in this process (numpy's threads on the 2 cores).
Baseline measured in the same run: the plain per-node robust z of ``../shared/DESIGN.md``
(``own_history_baseline``) on the same arrays. Prints ``ratio=`` verdicts seconds / baseline seconds.

``--store DIR`` adds the whole nightly step: the tiled arrays are written (not timed) as a real telemetry cube
(``cubes/telemetry.zarr``, Icechunk, one commit per day through ``tasks/cubes/writer``: window mean/min/max/std/
count, 15-min windows), the staged jobs (allocation rows, ended by the night's midnight) and the staged
topology; then a fresh process runs :func:`nodewatch.tasks.anomaly.verdicts.run_verdicts` for the night (read
the cube slice, jobs and topology; judge; write ``reports/<day>/verdicts.parquet``, ``verdicts.md`` and the
heat map) and reports its wall time, CPU time and peak resident memory (``ru_maxrss`` of that process).

Run: ``nice .venv/bin/python benchmarks/alert_cost.py [--copies 16 --cache /tmp/alertq-cache --store /tmp/x]``
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def tiled(data: dict[str, object], copies: int, history: int, seed: int = 0,
          std_idx: tuple[int, ...] = ()) -> dict[str, object]:
    """The 64-node arrays tiled ``copies`` times: window means (node, time, metric) of history and night,
    node names, racks, architectures and jobs of every copy renamed; ``hist_std`` / ``night_std`` the window std
    of the metrics ``std_idx`` (the sustained channels of the verdicts), None without."""
    agg, jobs, topo = data["agg"], data["jobs"], data["topo"]
    rng = np.random.default_rng(seed)
    base_nodes = topo["node"].tolist()
    nodes, racks, archs, frames = [], [], [], []
    hist0 = np.concatenate([a["mean"] for a in agg[:history]], axis=1)
    night0 = agg[history]["mean"]
    sd = [np.concatenate([a["std"][..., list(std_idx)] for a in agg[:history]], axis=1), agg[history]["std"][..., list(std_idx)]]
    sd = [np.tile(x, (copies, 1, 1)).astype(np.float32) for x in sd] if std_idx else [None, None]
    hist = np.empty((copies * hist0.shape[0],) + hist0.shape[1:], dtype=np.float32)
    night = np.empty((copies * night0.shape[0],) + night0.shape[1:], dtype=np.float32)
    n0 = len(base_nodes)
    for c in range(copies):
        ren = {n: f"c{c:02d}{n}" for n in base_nodes}
        nodes += [ren[n] for n in base_nodes]
        racks += [f"c{c:02d}{r}" for r in topo["rack"]]
        archs += list(topo["architecture"])
        hist[c * n0:(c + 1) * n0] = hist0 * (1 + 0.01 * rng.standard_normal(hist0.shape))
        night[c * n0:(c + 1) * n0] = night0 * (1 + 0.01 * rng.standard_normal(night0.shape))
        frames.append(jobs.assign(job_id=[f"{c}-{j}" for j in jobs["job_id"]],
                                  node_list=[[ren[x] for x in nl if x in ren] for nl in jobs["node_list"]]))
    return {"hist": hist, "night": night, "nodes": nodes, "racks": np.array(racks, dtype=object),
            "archs": np.array(archs, dtype=object), "jobs": pd.concat(frames, ignore_index=True),
            "hist_std": sd[0], "night_std": sd[1]}


def build_store(root: Path, t: dict[str, object], days: list[object], history: int) -> None:
    """Write the tiled arrays of ``history + 1`` days as a telemetry cube, plus staged jobs and topology (not timed)."""
    import pyarrow as pa

    from nodewatch.schemas.cubes import TELEMETRY, spec_for
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes import repo
    from nodewatch.tasks.cubes.layout import regions_of
    from nodewatch.tasks.cubes.writer import ensure_cube, write_region
    from nodewatch.tasks.simulate.metrics import METRIC_NAMES

    store = Store(str(root))
    nodes, racks, archs = list(t["nodes"]), list(t["racks"]), list(t["archs"])
    store.write_parquet(pa.table({"node": nodes, "rack": racks, "row": [""] * len(nodes), "architecture": archs}),
                        store.staged_key("topology", "1970-01-01", "bench"))
    jobs = t["jobs"]
    end = pd.to_datetime(jobs["end_time"], utc=True)
    staged = jobs[end < pd.Timestamp(days[history + 1])].reset_index(drop=True)  # as staged by the judged night
    store.write_parquet(pa.table({
        "job_id": staged["job_id"].astype(str).tolist(), "step": pa.array([None] * len(staged), pa.string()),
        "start_time": pa.array(pd.to_datetime(staged["start_time"], utc=True), pa.timestamp("ns", tz="UTC")),
        "end_time": pa.array(pd.to_datetime(staged["end_time"], utc=True), pa.timestamp("ns", tz="UTC")),
        "node_list": [list(x) for x in staged["node_list"]]}),
        store.staged_key("jobs", days[history].date().isoformat(), "bench"))
    spec = spec_for(TELEMETRY, "15min")
    metrics = list(METRIC_NAMES)
    cube_days = [d.date() for d in days[: history + 1]]
    geo = ensure_cube(store, spec, cube_days, set(nodes), {n: {"rack": r, "row": ""} for n, r in zip(nodes, racks, strict=True)},
                      set(metrics), 50)
    norder = np.array([nodes.index(n) for n in geo.nodes])
    morder = np.array([metrics.index(m) for m in geo.metrics])
    full = np.concatenate([t["hist"], t["night"]], axis=1)[norder][:, :, morder]
    for k, day in enumerate(cube_days):
        sl_t = slice(96 * k, 96 * (k + 1))
        with repo.transaction(store, spec.key, f"bench {day}") as session:
            for region in regions_of([day], len(geo.nodes), geo.node_chunk):
                sl = region.node_slice(geo.node_chunk, len(geo.nodes))
                mean = np.ascontiguousarray(full[sl, sl_t], dtype=np.float32)
                write_region(store, spec, geo, region, {"mean": mean, "min": mean, "max": mean,
                                                        "std": np.zeros_like(mean),
                                                        "count": np.where(np.isfinite(mean), 3, 0).astype(np.int32)},
                             session.store)


def judge_store(root: Path, day: str) -> None:
    """The timed child process: :func:`run_verdicts` on the store, one JSON line with wall, CPU and peak RSS."""
    import json
    import resource
    from datetime import date

    from nodewatch.tasks.anomaly.verdicts import run_verdicts
    from nodewatch.tasks.core.store import Store

    t0, c0 = time.perf_counter(), time.process_time()
    out = run_verdicts(Store(str(root)), date.fromisoformat(day))
    print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "node_alerts": out["node_alerts"], "group_alerts": out["group_alerts"],
                      "heatmap": bool(out.get("heatmap")) and not str(out["heatmap"]).startswith("not written")}))


def main() -> None:
    """Time the verdicts and the baseline on the tiled arrays, print the figures and ``ratio=``."""
    import os

    from alert_quality import WINDOW, prepare

    from nodewatch.models.anomaly.vicinity import own_history_baseline
    from nodewatch.tasks.anomaly.verdicts import judge_day
    from nodewatch.tasks.simulate.metrics import METRIC_NAMES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--history", type=int, default=21)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--store", type=Path, default=None, help="also run the whole nightly step on a cube written here")
    ap.add_argument("--infer-gap", type=int, default=None,
                    help="VerdictConfig.infer_gap for the timed judge_day (default: VerdictConfig's; 1 = 24c5b08)")
    ap.add_argument("--no-sustained", action="store_true",
                    help="without the sustained window-std channel (VerdictConfig.sustained_k=0: the c011c5e path)")
    ap.add_argument("--no-io-peer", action="store_true",
                    help="without the job-peer drop channel of disk_write_bytes (VerdictConfig.io_peer=False: 4c97556)")
    ap.add_argument("--judge-store", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--day", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.judge_store is not None:
        judge_store(a.judge_store, a.day)
        return
    data = prepare(a.seed, 64, a.history, 3, False, a.cache)  # the alert_quality cache (3 nights); night 1 judged
    from nodewatch.models.anomaly.verdicts import VerdictConfig
    from nodewatch.tasks.anomaly.verdicts import sustained_index

    vcfg = VerdictConfig() if a.infer_gap is None else VerdictConfig(infer_gap=a.infer_gap)
    if a.no_sustained:
        vcfg = VerdictConfig(infer_gap=vcfg.infer_gap, sustained_k=0)
    if a.no_io_peer:
        vcfg = replace(vcfg, io_peer=False)
    t = tiled(data, a.copies, a.history, std_idx=tuple(sustained_index(list(METRIC_NAMES), vcfg)))
    days = data["days"]
    ht = np.array([np.datetime64(days[i].tz_localize(None)) + np.timedelta64(15 * j, "m")
                   for i in range(a.history) for j in range(96)], dtype="datetime64[ns]")
    nt = np.array([np.datetime64(days[a.history].tz_localize(None)) + np.timedelta64(15 * j, "m") for j in range(96)],
                  dtype="datetime64[ns]")
    jobs = t["jobs"]
    known = jobs[pd.to_datetime(jobs["end_time"], utc=True) < days[a.history + 1]]  # as staged at night
    load = os.getloadavg()
    t0 = time.perf_counter()
    c0 = time.process_time()
    res = judge_day(t["hist"], ht, t["night"], nt, t["nodes"], list(METRIC_NAMES), t["racks"], t["archs"], known, WINDOW,
                    vcfg, hist_std=t["hist_std"], night_std=t["night_std"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    base = own_history_baseline(t["hist"], t["night"])
    bwall = time.perf_counter() - t0
    n = len(t["nodes"])
    print(f"{n} nodes x 1 day ({t['hist'].shape[1]} history windows, {t['hist'].shape[2]} metrics, {len(known)} jobs): "
          f"verdicts {wall:.1f} s wall, {cpu:.1f} s CPU ({len(res['rows'])} alerts, {res['inferred_running']} nodes with "
          f"an inferred running job); robust-z baseline {bwall:.1f} s ({int(base.any(axis=1).sum())} nodes flagged); "
          f"load average at start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"goal <= 120 s: {wall <= 120}")
    print(f"ratio={wall / bwall:.2f}")
    if a.store is not None:
        import json
        import subprocess

        if a.store.exists() and any(a.store.iterdir()):
            raise SystemExit(f"--store {a.store} is not empty: give a new directory")
        t0 = time.perf_counter()
        build_store(a.store, t, days, a.history)
        print(f"store written in {time.perf_counter() - t0:.0f} s (setup, not timed)", flush=True)
        del t, res, base
        load = os.getloadavg()
        day = days[a.history].date().isoformat()
        p = subprocess.run([sys.executable, __file__, "--judge-store", str(a.store), "--day", day],
                           capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise SystemExit(f"run_verdicts failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"whole step (read cube slice + jobs + topology, judge, write table + page + heat map), {n} nodes x 1 day: "
              f"{r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak RSS {r['peak_rss_mb']:.0f} MB "
              f"({r['node_alerts']} node / {r['group_alerts']} group alerts, heat map {r['heatmap']}); "
              f"load average at start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        print(f"whole step goal <= 120 s: {r['wall_s'] <= 120}")


if __name__ == "__main__":
    main()
