"""Worker processes of a nodewatch cluster: glibc malloc tuned at start, pyarrow threads opt-in, coarse tasks
compute their own reads.

In-process clusters only (no Slurm needed): the plugin and the scheduler choice are the same code on Slurm
jobs; their effect on speed is measured by ``benchmarks/scaleout_backfill.py`` (docs/operations.md).
"""

from __future__ import annotations

import ctypes

import pytest

from nodewatch.tasks.cubes import cluster


def _scheduler_in_task() -> str:
    import dask

    return str(dask.config.get("scheduler", None))


def _glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallopt")
    except OSError:
        return False


def _tuned() -> bool:
    return cluster._malloc_tuned


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as cl, \
            Client(cl, set_as_default=False) as c:
        yield c


def test_run_on_computes_dask_collections_in_the_worker(client):
    # a plain submit sees no scheduler override: dask collections would go back through the worker's client
    assert client.submit(_scheduler_in_task, pure=False).result() == "None"
    assert cluster.run_on(client.scheduler.address, _scheduler_in_task) == "sync"
    assert cluster.run_on(None, _scheduler_in_task) == "None"  # the flow's thread: its own default


@pytest.mark.skipif(not _glibc(), reason="not glibc: nothing to tune")
def test_setup_workers_tunes_malloc_on_every_worker(client, monkeypatch):
    monkeypatch.setattr(cluster, "_malloc_tuned", False)
    monkeypatch.setenv("NODEWATCH_TUNE_MALLOC", "0")
    assert cluster.tune_malloc() is False and cluster._malloc_tuned is False  # the benchmark's "before"
    monkeypatch.delenv("NODEWATCH_TUNE_MALLOC")
    cluster.setup_workers(client)
    assert list(client.run(_tuned).values()) == [True]


def test_arrow_threads_is_opt_in_and_validated(monkeypatch):
    import os

    import pyarrow as pa

    before = pa.cpu_count()
    try:
        pa.set_cpu_count(1)  # as the nanny's OMP_NUM_THREADS=1 leaves a worker
        for unset_or_bad in ("", "0", "-2", "lots", "9999"):
            monkeypatch.setenv("NODEWATCH_ARROW_THREADS", unset_or_bad)
            assert cluster.arrow_threads() == 1 and pa.cpu_count() == 1
        monkeypatch.setenv("NODEWATCH_ARROW_THREADS", "3")
        assert cluster.arrow_threads() == 3 == pa.cpu_count()
        if hasattr(os, "sched_getaffinity"):
            monkeypatch.setenv("NODEWATCH_ARROW_THREADS", "auto")
            assert cluster.arrow_threads() == len(os.sched_getaffinity(0)) == pa.cpu_count()
    finally:
        pa.set_cpu_count(before)
