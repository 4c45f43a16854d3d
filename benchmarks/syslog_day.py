"""Benchmark: one night of syslog analytics for 1000 nodes x 1 day (simulator default volume) <= 60 s on 2 cores.

Goal (issue 17): templated, anonymised and scored in <= 60 s. The simulator renders the day (all racks plus the
controller log, not timed) and the real ingest pipeline stages it (not timed); then
:func:`nodewatch.tasks.syslog.detect.analyse_day` with the anonymised export runs on the store (timed: templates +
catalogue commit, filtering, SG, vicinity detector, outages, anonymised export and its encrypted mapping).
There is no earlier implementation to compare with: ``ratio=`` is goal seconds / measured seconds (> 1 = faster
than the goal), as in benchmarks/simulate.py.

    nice .venv/bin/python benchmarks/syslog_day.py [--nodes 1000] [--extra-windows '']   # '' = the 30-min window alone
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GOAL_SECONDS = 60.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--extra-windows", default=None, help="'min:min_sg,...' ('' = none; default: SyslogSettings)")
    a = ap.parse_args()
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.ingest.pipeline import ingest_files
    from nodewatch.tasks.ingest.registry import sources
    from nodewatch.tasks.simulate.config import SimConfig
    from nodewatch.tasks.simulate.schedule import build_schedule
    from nodewatch.tasks.simulate.syslog import render_controller, render_rack
    from nodewatch.tasks.syslog.detect import analyse_day
    from nodewatch.tasks.syslog.settings import SyslogSettings

    os.environ.setdefault("NODEWATCH_SYSLOG_SECRET", "benchmark-secret-not-for-production-use")
    sim = SimConfig(n_nodes=a.nodes, start=date(2026, 1, 1), seed=1)
    with tempfile.TemporaryDirectory(prefix="nw-syslog-day-") as tmp:
        t0 = time.perf_counter()
        sched = build_schedule(sim, 1)
        topo = sched.topo
        files = []
        for r in sorted(set(topo.rack.tolist())):
            nodes = topo.nodes_of_rack(r)
            p = Path(tmp) / f"r{r:02d}.log"
            p.write_text("\n".join(render_rack(sched, sched.node_events(nodes), nodes, 0, "5424")) + "\n")
            files.append(p)
        p = Path(tmp) / "mgmt.log"
        p.write_text("\n".join(render_controller(sched, 0)) + "\n")
        files.append(p)
        render_s = time.perf_counter() - t0
        store = Store(str(Path(tmp) / "store"))
        rec = RunRecorder(store, "bench", {})
        t0 = time.perf_counter()
        res = ingest_files(store, sources()["syslog"], files, rec, data_docs=False)
        rec.finish()
        ingest_s = time.perf_counter() - t0
        w0, c0 = time.perf_counter(), time.process_time()
        cfg = SyslogSettings()
        if a.extra_windows is not None:
            cfg = SyslogSettings(extra_windows=[(int(x.split(":")[0]), float(x.split(":")[1]))
                                                for x in a.extra_windows.split(",") if x.strip()])
        out = analyse_day(store, date(2026, 1, 1), "20260102T000000.000000Z-bench1", cfg, export=True)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(f"{a.nodes} nodes x 1 day: {res.counts.staged:,} staged lines (render {render_s:.0f} s, ingest {ingest_s:.0f} s, "
          f"not timed)")
    print(f"SG windows (bins of {cfg.step_min} min, min_sg): {cfg.windows()}")
    print(f"templated + filtered + scored + outages + anonymised export: {wall:.1f} s wall, {cpu:.1f} CPU s; {out.counts}")
    print(f"ratio={GOAL_SECONDS / wall:.2f}")


if __name__ == "__main__":
    main()
