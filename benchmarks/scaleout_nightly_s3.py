"""The nightly for N simulated nodes (default 256) with the store on S3, against a local-disk store, same run.

Needs the S3 endpoint of ``infra/local/cluster.sh`` (``cluster.sh up s3``, then ``. "$(infra/local/cluster.sh
env)"``: endpoint, bucket, credentials). For each store (local disk first, then ``s3://<bucket>/bench-<id>``):
bootstrap one simulated history day and train (untimed), then time ``nightly(demo=True)`` of the next day.
Prints the walls and per-step times of both, and ``ratio=<s3 / local>`` (the price of the object store;
lower is better). The S3 prefix is deleted at the end.

With ``PREFECT_API_URL`` set (a server started by ``nodewatch server start --database postgresql+asyncpg://…``)
the runs are recorded there; the Prefect orchestration share of each timed nightly is estimated as in
``benchmarks/nightly.py``: flow and task runs the API recorded during the nightly × the unit costs of an
empty flow run and an empty task run measured against the same server in the same run. CPU seconds of
this process (and its children) are printed beside every wall, with the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and its waited-for children so far."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def run(store: str, inbox: Path, n_nodes: int, step_s: int,
        costs: tuple[float, float] | None) -> tuple[float, dict[str, float], str]:
    """Bootstrap (untimed) then the timed demo nightly on ``store``; returns (wall, step timings, status)."""
    from nodewatch.flows.demo import bootstrap
    from nodewatch.flows.nightly import nightly

    t, c = time.perf_counter(), cpu_s()
    bootstrap(str(inbox), store, 1, 1, 10, {"n_nodes": n_nodes, "nodes_per_rack": 32, "racks_per_row": 4, "step_s": step_s})
    print(f"{store}: bootstrap (untimed) {time.perf_counter() - t:.0f} s wall, {cpu_s() - c:.0f} s CPU (this process); "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    t, c, t_unix = time.perf_counter(), cpu_s(), time.time()
    m = nightly(demo=True, inbox=str(inbox), store=store)
    wall = time.perf_counter() - t
    print(f"{store}: nightly {wall:.1f} s wall, {cpu_s() - c:.0f} s CPU (this process; Slurm workers not included); "
          f"load {os.getloadavg()[0]:.1f}; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB",
          flush=True)
    if costs is not None:
        from nightly import runs_since  # benchmarks/nightly.py

        n_flows, n_tasks = runs_since(t_unix - 1)
        over = n_flows * costs[0] + n_tasks * costs[1]
        print(f"{store}: Prefect orchestration {n_flows} flow run(s) x {costs[0]:.2f} s + {n_tasks} task runs x "
              f"{costs[1] * 1000:.0f} ms = {over:.1f} s = {100 * over / wall:.1f}% of the nightly's wall (goal <= 10%)",
              flush=True)
    return wall, {k: round(v, 1) for k, v in m["timings"].items()}, m["status"]


def main() -> None:
    """Local disk, then S3; print both and ``ratio=``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--step", type=int, default=60, help="simulated telemetry sampling step (s)")
    ap.add_argument("--skip-local", action="store_true")
    args = ap.parse_args()
    bucket = os.environ.get("NODEWATCH_LOCAL_BUCKET")
    if not bucket or not os.environ.get("AWS_ENDPOINT_URL"):
        raise SystemExit("no S3 endpoint: source the env of infra/local/cluster.sh (cluster.sh up s3) first")
    base = Path(tempfile.mkdtemp(prefix="nodewatch-bench-s3-"))
    prefix = f"{bucket}/bench-{uuid.uuid4().hex[:8]}"
    walls = {}
    costs = None
    if os.environ.get("PREFECT_API_URL"):
        sys.path.insert(0, str(Path(__file__).parent))
        from nightly import unit_costs  # benchmarks/nightly.py

        costs = unit_costs(3)
        print(f"Prefect API {os.environ['PREFECT_API_URL']}: empty flow run {costs[0]:.2f} s, empty task run "
              f"{costs[1] * 1000:.0f} ms (best of 3 / median); load {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for name, store in (("local", str(base / "store")), ("s3", f"s3://{prefix}")):
            if name == "local" and args.skip_local:
                continue
            wall, steps, status = run(store, base / f"inbox-{name}", args.nodes, args.step, costs)
            walls[name] = wall
            print(f"{name:5s} nightly of {args.nodes} nodes: {wall:.1f} s ({status}); steps {steps}; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
        if len(walls) == 2:
            print(f"ratio={walls['s3'] / walls['local']:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
        try:
            import s3fs

            s3fs.S3FileSystem(endpoint_url=os.environ["AWS_ENDPOINT_URL"]).rm(prefix, recursive=True)
        except Exception as e:  # noqa: BLE001 - cleanup only
            print(f"could not delete s3://{prefix}: {e}")


if __name__ == "__main__":
    main()
