"""Start a dask-jobqueue SLURMCluster for nodewatch and keep it running (see infra/dask-jobqueue.yaml).

``dask-jobqueue`` is a dependency of nodewatch (pinned in constraints.txt). Prints the scheduler address to
export as ``NODEWATCH_DASK_ADDRESS``: a long-lived scheduler shared by every run. Without it,
``NODEWATCH_DASK=slurm`` makes each run start its own SLURMCluster (``nodewatch.tasks.cubes.cluster``,
docs/scaleout.md). The jobs get ``--export=NONE`` and source a 0600 file holding this process's environment
(credentials of the store never go through sbatch); the file is removed when this process ends.
"""

from __future__ import annotations

import argparse
import shutil
import time


def main() -> None:
    """Create the cluster from the jobqueue config, scale it and block."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="Slurm jobs (each runs `processes` workers)")
    ap.add_argument("--port", type=int, default=8786, help="scheduler port")
    ap.add_argument("--adapt-max", type=int, default=0, help="adaptive scaling up to this many jobs (0: fixed)")
    args = ap.parse_args()
    from dask_jobqueue import SLURMCluster

    from nodewatch.tasks.cubes.cluster import slurm_cluster_kwargs, worker_env_file

    env_file = worker_env_file()
    try:
        kw = slurm_cluster_kwargs(args.jobs, env_file)
        cluster = SLURMCluster(scheduler_options={"port": args.port, "dashboard_address": "127.0.0.1:8787"},
                               job_extra_directives=kw["job_extra_directives"], job_script_prologue=kw["job_script_prologue"])
        if args.adapt_max:
            cluster.adapt(minimum_jobs=1, maximum_jobs=args.adapt_max)
        else:
            cluster.scale(jobs=args.jobs)
        print(f"export NODEWATCH_DASK_ADDRESS={cluster.scheduler_address}", flush=True)
        print(cluster.job_script(), flush=True)
        while True:
            time.sleep(3600)
    finally:
        shutil.rmtree(env_file.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
