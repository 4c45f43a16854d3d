"""Start a dask-jobqueue SLURMCluster for nodewatch and keep it running (see infra/dask-jobqueue.yaml).

``dask-jobqueue`` is a dependency of nodewatch (pinned in constraints.txt). Prints the scheduler address to
export as ``NODEWATCH_DASK_ADDRESS``: a long-lived scheduler shared by every run. Without it,
``NODEWATCH_DASK=slurm`` makes each run start its own SLURMCluster (``nodewatch.tasks.cubes.cluster``,
docs/scaleout.md).
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    """Create the cluster from the jobqueue config, scale it and block."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="Slurm jobs (each runs `processes` workers)")
    ap.add_argument("--port", type=int, default=8786, help="scheduler port")
    ap.add_argument("--adapt-max", type=int, default=0, help="adaptive scaling up to this many jobs (0: fixed)")
    args = ap.parse_args()
    from dask_jobqueue import SLURMCluster

    cluster = SLURMCluster(scheduler_options={"port": args.port, "dashboard_address": ":8787"})
    if args.adapt_max:
        cluster.adapt(minimum_jobs=1, maximum_jobs=args.adapt_max)
    else:
        cluster.scale(jobs=args.jobs)
    print(f"export NODEWATCH_DASK_ADDRESS={cluster.scheduler_address}", flush=True)
    print(cluster.job_script(), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
