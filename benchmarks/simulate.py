"""Benchmark: 1000 nodes x 1 day x 57 metrics at 1 min (~82M values) plus syslog/jobs/alerts/truth.

Goal (issue 5): <= 60 s on 2 cores, peak RSS <= 2 GB. There is no earlier simulator to compare with,
so the reference is the goal itself: ``ratio = goal_seconds / measured_seconds`` (> 1 means faster than
the goal). Run with ``nice .venv/bin/python benchmarks/simulate.py [--nodes N] [--scheduler threads]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 60.0
GOAL_RSS_MB = 2048.0


def main() -> None:
    """Run one simulated day and print values/s, seconds, peak RSS and ratio."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scheduler", default="threads")
    ap.add_argument("--keep", default=None, help="keep the output in this directory")
    ap.add_argument("--no-next-day", action="store_true", help="skip timing the next day (--append path)")
    a = ap.parse_args()
    from nodewatch.tasks.simulate.cluster import simulate
    from nodewatch.tasks.simulate.config import SimConfig

    out = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="nw-sim-bench-"))
    cfg = SimConfig(n_nodes=a.nodes, workers=a.workers, scheduler=a.scheduler)
    t = time.perf_counter()
    res = simulate(cfg, out, [0])
    secs = time.perf_counter() - t
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20
    load = os.getloadavg()[0]
    print(f"nodes={a.nodes} metrics=57 step=60s scheduler={a.scheduler} workers={a.workers} loadavg_1min={load:.1f}")
    print(
        f"values={int(res['values']):,} syslog_lines={int(res['syslog_lines'] + res['controller_lines']):,} "
        f"jobs_ended={int(res['jobs_ended']):,} output_MB={size:.0f}"
    )
    print(f"schedule_seconds={res['schedule_seconds']:.2f} seconds={secs:.2f} values_per_s={res['values'] / secs:,.0f}")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"cpu_seconds={ru.ru_utime + ru.ru_stime:.1f} (wall time is inflated when other processes share the cores)")
    print(f"peak_rss_MB={rss:.0f} (goal <= {GOAL_RSS_MB:.0f})")
    print(f"ratio={GOAL_SECONDS / secs:.2f}")
    if not a.no_next_day:  # the --append path: day 1 from the state saved at midnight, not replayed from day 0
        t = time.perf_counter()
        nxt = simulate(cfg, out, [1])
        print(
            f"next_day: days_scheduled={int(nxt['days_scheduled'])} schedule_seconds={nxt['schedule_seconds']:.2f} "
            f"seconds={time.perf_counter() - t:.2f}"
        )
    if not a.keep:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
