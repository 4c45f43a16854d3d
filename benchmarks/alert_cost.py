"""Cost of the node verdicts for ~1,000 nodes x 1 day (issue 15 goal: <= 2 min on 2 cores, vicinity step included).

Arrays: the demo configuration's 64-node cluster of ``benchmarks/alert_quality.py`` (simulated and aggregated
once, ``--cache`` re-uses it), tiled ``--copies`` times (default 16 = 1,024 nodes, 64 racks of 16, each copy
with 1% multiplicative noise and its own node names, racks and jobs), 21 history days + the judged night.
Timed: :func:`nodewatch.tasks.anomaly.verdicts.judge_day` as the nightly step runs it (job grid, own-history
reference, 7 held-back days of evidence and the budget calibration, the night's evidence with the job, rack and
architecture vicinities, inferred running jobs, verdicts), in this process (numpy's threads on the 2 cores).
Baseline measured in the same run: the plain per-node robust z of ``../shared/DESIGN.md``
(``own_history_baseline``) on the same arrays. Prints ``ratio=`` verdicts seconds / baseline seconds.

Run: ``nice .venv/bin/python benchmarks/alert_cost.py [--copies 16 --cache /tmp/alertq-cache]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def tiled(data: dict[str, object], copies: int, history: int, seed: int = 0) -> dict[str, object]:
    """The 64-node arrays tiled ``copies`` times: window means (node, time, metric) of history and night,
    node names, racks, architectures and jobs of every copy renamed."""
    agg, jobs, topo = data["agg"], data["jobs"], data["topo"]
    rng = np.random.default_rng(seed)
    base_nodes = topo["node"].tolist()
    nodes, racks, archs, frames = [], [], [], []
    hist0 = np.concatenate([a["mean"] for a in agg[:history]], axis=1)
    night0 = agg[history]["mean"]
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
            "archs": np.array(archs, dtype=object), "jobs": pd.concat(frames, ignore_index=True)}


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
    a = ap.parse_args()
    data = prepare(a.seed, 64, a.history, 3, False, a.cache)  # the alert_quality cache (3 nights); night 1 judged
    t = tiled(data, a.copies, a.history)
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
    res = judge_day(t["hist"], ht, t["night"], nt, t["nodes"], list(METRIC_NAMES), t["racks"], t["archs"], known, WINDOW)
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


if __name__ == "__main__":
    main()
