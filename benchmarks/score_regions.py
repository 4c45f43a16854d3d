"""Scoring a day's node batches in groups: axes, cube and node list read once per group (now) vs once per batch.

The nightly scores a day in a few groups of node batches (``tasks/anomaly/score.py: score_regions``). Before
29 Nov every batch re-read the cubes' axes (the telemetry and scores cubes' geometry), re-opened the telemetry
cube (an xarray index over every coordinate) and re-listed the model run's node files; on an object store each
is a chain of requests, ~0.6 s of a ~1.3-s batch on the one-host cluster's S3 endpoint (profiled). Now a group
shares them (``score_region(job, shared)``).

For each store (local disk; and ``s3://$NODEWATCH_LOCAL_BUCKET/bench-<id>`` when ``AWS_ENDPOINT_URL`` is set,
i.e. after ``. "$(infra/local/cluster.sh env)"``): bootstrap ``--nodes`` simulated nodes (one history day, RUAD,
untimed, as ``benchmarks/scaleout_nightly_s3.py``), then time the day's batches as one group both ways,
interleaved, ``--repeat`` times (medians), one thread. Checks that both give the same region arrays. Prints
``ratio=<before / now>`` of the last store (S3 if present).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid


def main() -> None:
    """Bootstrap each store, time both ways, compare arrays, print ``ratio=``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import numpy as np
    import torch

    from nodewatch.flows.demo import DEMO_DEFAULTS, bootstrap
    from nodewatch.tasks.anomaly.registry import area
    from nodewatch.tasks.anomaly.score import ensure_scores_cube, load_region_arrays, region_jobs, score_region
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.simulate.config import SimConfig

    torch.set_num_threads(1)
    sim = {"n_nodes": a.nodes, "nodes_per_rack": 32, "racks_per_row": 4, "step_s": 60}
    day = SimConfig(**{**DEMO_DEFAULTS, **sim}).start
    urls = [tempfile.mkdtemp(prefix="nodewatch-bench-score-") + "/store"]
    if os.environ.get("AWS_ENDPOINT_URL"):
        urls.append(f"s3://{os.environ.get('NODEWATCH_LOCAL_BUCKET', 'nodewatch')}/bench-{uuid.uuid4().hex[:8]}")
    ratio = None
    for url in urls:
        where = "s3" if url.startswith("s3://") else "local"
        t = time.perf_counter()
        bootstrap(tempfile.mkdtemp(prefix="nodewatch-bench-inbox-"), url, 1, 1, 10, sim)
        st = Store(url)
        ensure_scores_cube(st)
        jobs = region_jobs(st, day, "ruad", st.current(area("ruad")))
        print(f"{where}: bootstrap {a.nodes} nodes (untimed) {time.perf_counter() - t:.0f} s; {len(jobs)} batches",
              flush=True)
        walls: dict[str, list[float]] = {"before": [], "now": []}
        arrays: dict[str, list] = {}
        for rep in range(a.repeat + 1):  # the first round warms both (imports, the model files' first read)
            for how in ("before", "now"):
                shared: dict | None = {} if how == "now" else None
                t = time.perf_counter()
                out = [score_region(j, shared) for j in jobs]
                if rep:
                    walls[how].append(time.perf_counter() - t)
                arrays[how] = [load_region_arrays(st, r["arrays"]) for r in out]
        same = all(np.array_equal(x[k], y[k], equal_nan=True) for x, y in zip(arrays["before"], arrays["now"], strict=True)
                   for k in x)
        m = {k: statistics.median(v) for k, v in walls.items()}
        ratio = m["before"] / m["now"]
        print(f"{where}: {len(jobs)} batches as one group: per batch {m['before']:.2f} s, per group {m['now']:.2f} s "
              f"(medians of {a.repeat}; load {os.getloadavg()[0]:.1f}); same arrays: {same}; ratio_{where}={ratio:.2f}",
              flush=True)
        if not same:
            raise SystemExit("the two ways disagree")
        st.fs.rm(st.path(), recursive=True)
    print(f"ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
