"""The nightly for N simulated nodes (default 256) with the store on S3, against a local-disk store, same run.

Needs the S3 endpoint of ``infra/local/cluster.sh`` (``cluster.sh up s3``, then ``. "$(infra/local/cluster.sh
env)"``: endpoint, bucket, credentials). For each store (local disk first, then ``s3://<bucket>/bench-<id>``):
bootstrap one simulated history day and train (untimed), then time ``nightly(demo=True)`` of the next day.
Prints the walls and per-step times of both, and ``ratio=<s3 / local>`` (the price of the object store;
lower is better). The S3 prefix is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path


def run(store: str, inbox: Path, n_nodes: int, step_s: int) -> tuple[float, dict[str, float], str]:
    """Bootstrap (untimed) then the timed demo nightly on ``store``; returns (wall, step timings, status)."""
    from nodewatch.flows.demo import bootstrap
    from nodewatch.flows.nightly import nightly

    t = time.perf_counter()
    bootstrap(str(inbox), store, 1, 1, 10, {"n_nodes": n_nodes, "nodes_per_rack": 32, "racks_per_row": 4, "step_s": step_s})
    print(f"{store}: bootstrap (untimed) {time.perf_counter() - t:.0f} s; load {os.getloadavg()[0]:.1f}", flush=True)
    t = time.perf_counter()
    m = nightly(demo=True, inbox=str(inbox), store=store)
    return time.perf_counter() - t, {k: round(v, 1) for k, v in m["timings"].items()}, m["status"]


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
    try:
        for name, store in (("local", str(base / "store")), ("s3", f"s3://{prefix}")):
            if name == "local" and args.skip_local:
                continue
            wall, steps, status = run(store, base / f"inbox-{name}", args.nodes, args.step)
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
