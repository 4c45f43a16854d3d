"""Where the Dask graphs of nodewatch run: a LocalCluster, an existing scheduler, or Slurm jobs (dask-jobqueue).

Chosen by the ``address`` argument (the setting ``dask_address`` / ``--dask-address``) or, when none is
given, the environment variable ``NODEWATCH_DASK``:

* unset / ``local`` -- a ``distributed.LocalCluster`` in this process (threads by default);
* ``slurm`` -- a ``dask_jobqueue.SLURMCluster``: every worker is a real ``sbatch`` job (visible in
  ``squeue``), configured by Dask's ``jobqueue.slurm`` config (``infra/dask-jobqueue.yaml`` or
  ``DASK_JOBQUEUE__SLURM__*`` variables; ``infra/local/cluster.sh`` writes a loopback-only set).
  The cluster keeps ``n_workers`` jobs (adaptive with minimum = maximum): a job that dies or is
  ``scancel``-ed is replaced, and the tasks it held are recomputed elsewhere by the scheduler;
* anything else -- the address of a running scheduler (``tcp://host:8786``).

The workers need the store: a shared file system or an object store (``s3://``) and its credentials.
They never travel in ``sbatch``'s environment export (Slurm keeps a job's environment in its state
files and shows it to ``scontrol``): the jobs are submitted with ``--export=NONE`` and the job script
sources a 0600 file in a private 0700 directory (:func:`worker_env_file`: the submitting environment,
written by the client, removed when the cluster closes). The job script names only that file's path.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ENV = "NODEWATCH_DASK"
"""Environment variable choosing the Dask cluster when no address is given (``local``, ``slurm`` or an address)."""


_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ucx|ws|wss)://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$|^inproc://[A-Za-z0-9_.\-/]+$")
"""A scheduler address: ``[proto://]host:port``, or an in-process ``inproc://host/pid/n`` (tests, notebooks)."""


def resolve(address: str | None) -> str:
    """``"local"``, ``"slurm"`` or a scheduler address, from ``address`` or else ``$NODEWATCH_DASK``.

    Anything else (a typo, a path, text with spaces) is a ``ValueError`` with a one-line message.
    """
    choice = (address or os.environ.get(ENV) or "local").strip()
    if choice.lower() in ("local", "slurm"):
        return choice.lower()
    if not _ADDRESS.match(choice):
        raise ValueError(f"Dask cluster {choice[:80]!r} ({ENV} / dask_address): expected local, slurm or a scheduler "
                         "address like tcp://host:8786")
    return choice


MMAP_THRESHOLD = 32 << 20
"""glibc ``M_MMAP_THRESHOLD`` set in worker processes: allocations below it come from the heap (reused)."""
TRIM_THRESHOLD = 256 << 20
"""glibc ``M_TRIM_THRESHOLD`` set in worker processes: freed heap kept up to this much before it is returned."""
_malloc_tuned = False


def tune_malloc() -> bool:
    """Let glibc reuse freed memory for the large temporary arrays of a worker process (idempotent).

    Dask's nanny starts worker processes with ``MALLOC_TRIM_THRESHOLD_=65536``; setting that variable turns
    off glibc's dynamic mmap threshold, so every numpy temporary above 128 kB (a scan's index arrays are
    16 MB per record batch) is a fresh ``mmap`` whose pages are faulted in and zeroed by the kernel, and
    unmapped again on free. A 7-day x 256-node x 57-metric cube build in one worker process spent 6.0 of
    its 13.4 CPU seconds in the kernel (one in-process thread: 8.1 s in all); with these two settings
    7.1 s, 0.85 s of them in the kernel (docs/operations.md, scale section). Returns whether it applied
    (glibc only; elsewhere nothing changes); ``NODEWATCH_TUNE_MALLOC=0`` leaves glibc's settings alone.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return True
    if os.environ.get("NODEWATCH_TUNE_MALLOC", "1") == "0":  # the benchmark's before/after in one run
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        ok = bool(libc.mallopt(-3, MMAP_THRESHOLD)) and bool(libc.mallopt(-1, TRIM_THRESHOLD))  # M_MMAP_/M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        return False
    _malloc_tuned = ok
    return ok


def arrow_threads() -> int:
    """Size pyarrow's CPU pool (parquet decoding) in a worker process from ``NODEWATCH_ARROW_THREADS``; returns it.

    Dask's nanny starts workers with ``OMP_NUM_THREADS=1``, which pyarrow reads as its pool size, so a worker
    decodes parquet on one thread where an in-process thread of the flow decodes on every core. Unset or
    invalid: left so (the default). ``auto``: the CPUs this process may run on (``sched_getaffinity``: a Slurm
    job confined by ``task/affinity`` or ``task/cgroup`` gets its own cores; on the one-host test bed, every
    core); ``<n>``: n threads. Opt-in: at nice 19 on a loaded host, ``auto`` made the 2-job backfill 0.75x as
    fast (docs/operations.md, scale section, 28 Nov 17:31).
    """
    import pyarrow as pa

    env = os.environ.get("NODEWATCH_ARROW_THREADS", "").strip().lower()
    if env == "auto" and hasattr(os, "sched_getaffinity"):
        pa.set_cpu_count(len(os.sched_getaffinity(0)))
    elif env.isdigit() and 0 < int(env) <= 256:
        pa.set_cpu_count(int(env))
    return pa.cpu_count()


def _worker_setup() -> bool:
    """What every worker process of a nodewatch cluster runs once: :func:`tune_malloc`, :func:`arrow_threads`
    and the heavy imports of the task bodies (paid at worker start, not inside the first task)."""
    import icechunk  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    # the modules the task bodies of build.py need (build itself is unpickled with the first task: importing
    # it here would be an import cycle, build imports this module)
    import nodewatch.tasks.cubes.repo  # noqa: F401
    import nodewatch.tasks.cubes.telemetry  # noqa: F401
    import nodewatch.tasks.cubes.writer  # noqa: F401

    arrow_threads()
    return tune_malloc()


def setup_workers(client: Any) -> None:
    """Run :func:`_worker_setup` on every worker of ``client`` now and on every worker that joins later
    (a ``WorkerPlugin``: replacements of lost Slurm jobs get it too)."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class _Setup(WorkerPlugin):
        name = "nodewatch-worker-setup"

        def setup(self, worker: Any) -> None:
            _worker_setup()

    client.register_plugin(_Setup(), name=_Setup.name)


def _dashboard(address: str | None) -> str | None:
    """Dashboard address for a LocalCluster: ``None`` (no dashboard) or a host-qualified address."""
    if not address:
        return None
    return f"127.0.0.1{address}" if address.startswith(":") else address


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def worker_env_file(environ: dict[str, str] | None = None, parent: str | None = None) -> Path:
    """Write the workers' environment (``export K=V`` lines) to a 0600 file in a new 0700 directory.

    ``environ`` defaults to this process's environment (``SLURM_*`` left out: Slurm sets its own).
    ``parent`` (default: Dask's ``jobqueue.slurm.log-directory``, else ``~/.nodewatch``) must be on a file
    system the compute nodes see. The caller removes the directory (``shutil.rmtree(path.parent)``).
    """
    import dask.config

    base = Path(parent or dask.config.get("jobqueue.slurm.log-directory", None) or Path.home() / ".nodewatch")
    base.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="nodewatch-worker-env-", dir=base))  # 0700
    f = d / "env"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    env = os.environ if environ is None else environ
    with os.fdopen(fd, "w") as out:
        for k, v in sorted(env.items()):
            if _ENV_NAME.match(k) and not k.startswith("SLURM_") and "\0" not in v:
                out.write(f"export {k}={shlex.quote(v)}\n")
    return f


def slurm_cluster_kwargs(n_workers: int, env_file: Path | None = None) -> dict[str, Any]:
    """Arguments of ``SLURMCluster`` filling what Dask's ``jobqueue.slurm`` config leaves unset.

    One worker process with one thread per job unless configured (``cores``, ``memory``), this venv's
    Python, a dashboard on loopback only, and a job name naming nodewatch. With ``env_file``
    (:func:`worker_env_file`) the jobs get ``--export=NONE`` and source that file instead: no variable of
    the submitting environment (credentials) is handed to ``sbatch``.
    """
    import dask.config

    def cfg(key: str) -> Any:
        return dask.config.get(f"jobqueue.slurm.{key}", None)

    kw: dict[str, Any] = {"python": sys.executable}
    if env_file is not None:
        directives = cfg("job-extra-directives") or []
        kw["job_extra_directives"] = [d for d in directives if not str(d).startswith("--export")] + ["--export=NONE"]
        kw["job_script_prologue"] = [f"set -a; . {shlex.quote(str(env_file))}; set +a",
                                     *(cfg("job-script-prologue") or [])]
    if cfg("cores") is None:
        kw["cores"] = 1
    if cfg("memory") is None:
        kw["memory"] = "2GB"
    if cfg("processes") is None:
        kw["processes"] = 1
    if cfg("name") in (None, "dask-worker"):
        kw["job_name"] = "nodewatch-dask"
    sched = dict(cfg("scheduler-options") or {})
    sched.setdefault("dashboard_address", "127.0.0.1:0")
    kw["scheduler_options"] = sched
    return kw


@contextmanager
def slurm_client(n_workers: int, wait_s: float = 300.0, set_as_default: bool = True) -> Iterator[Any]:
    """A client of a ``SLURMCluster`` holding ``n_workers`` jobs (replaced when one dies); closed on exit.

    Waits up to ``wait_s`` for the first worker (a queue with no free node fails here, in one line).
    ``set_as_default=False`` keeps Dask's default scheduler as it was (only explicit submits go to Slurm).
    """
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise RuntimeError(f"{ENV}=slurm needs dask-jobqueue (pip install -c constraints.txt dask-jobqueue)") from None
    from distributed import Client

    env_file = worker_env_file()
    try:
        cluster = SLURMCluster(**slurm_cluster_kwargs(n_workers, env_file))
    except BaseException:
        shutil.rmtree(env_file.parent, ignore_errors=True)
        raise
    try:
        cluster.adapt(minimum_jobs=n_workers, maximum_jobs=n_workers, interval="1s", wait_count=1)
        client = Client(cluster, set_as_default=set_as_default)
        try:
            t0 = time.monotonic()
            client.wait_for_workers(1, timeout=wait_s)
            # the others are queued jobs; the graph starts on the first worker and spreads as they join
            deadline = t0 + min(wait_s, 60.0)
            setup_workers(client)
            while len(client.scheduler_info(n_workers=-1)["workers"]) < n_workers and time.monotonic() < deadline:
                time.sleep(0.5)
            yield client
        finally:
            client.close()
    finally:
        cluster.close()
        shutil.rmtree(env_file.parent, ignore_errors=True)


@contextmanager
def dask_client(address: str | None = None, n_workers: int = 2, processes: bool = False,
                dashboard: str | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` for the cluster :func:`resolve` picks (closed on exit, with a cluster it made).

    The LocalCluster has no dashboard unless ``dashboard`` gives an address; a bare port (``":8787"``) is
    bound to 127.0.0.1, never to every interface.

    Threads are the default: on 2 cores, 1000 nodes × 1 day × 50 metrics built in 32.5 s with threads
    vs 64.0 s with worker processes (peak RSS 1.04 vs 1.58 GiB), because parquet decoding and the
    numpy reductions release the GIL while processes must serialise every window state.
    """
    from distributed import Client, LocalCluster

    where = resolve(address)
    if where == "slurm":
        with slurm_client(n_workers) as c:
            yield c
        return
    if where != "local":
        with Client(where) as c:
            setup_workers(c)
            yield c
        return
    with (
        LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1 if processes else 2,
            processes=processes,
            **({"host": "127.0.0.1"} if processes else {}),
            dashboard_address=_dashboard(dashboard) or "127.0.0.1:0",  # the scheduler's HTTP server binds anyway
            scheduler_kwargs={"dashboard": bool(dashboard)},
            worker_dashboard_address="127.0.0.1:0",  # workers' HTTP servers (metrics) on loopback too
            memory_limit=0,
        ) as cluster,
        Client(cluster) as c,
    ):
        if processes:
            setup_workers(c)
        yield c


@contextmanager
def fanout(address: str | None = None, n_workers: int = 2) -> Iterator[str | None]:
    """Scheduler address for the steps that fan out (backfill scoring, training batches), for a flow run.

    ``None`` when :func:`resolve` says ``local`` (the flow keeps its thread pool); a given scheduler's
    address; or, for ``slurm``, the address of a ``SLURMCluster`` of ``n_workers`` jobs kept for the
    duration (one cluster per flow run, not one per task). It is not made Dask's default scheduler: the
    flow's own dask/xarray work (writes into Icechunk sessions, which must not be pickled) stays local.
    """
    where = resolve(address)
    if where == "local":
        yield None
    elif where != "slurm":
        yield where
    else:
        with slurm_client(n_workers, set_as_default=False) as c:
            yield c.scheduler.address


def run_on(address: str | None, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` here when ``address`` is ``None``, else as one task on the Dask scheduler at ``address``.

    Returns its result or raises its exception (a worker lost mid-task makes the scheduler rerun it
    elsewhere). Coarse tasks only: a group of node batches, a training batch, a whole day.
    """
    if not address:
        return fn(*args)
    from distributed import Client

    with Client(address, set_as_default=False, timeout="120s") as c:
        key = f"{getattr(fn, '__name__', 'task')}-{uuid.uuid4()}"  # named after fn, as a plain submit names it
        return c.submit(local_dask, fn, *args, key=key, pure=False).result()


def local_dask(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with the Dask collections it computes (xarray reads of a cube) run in this worker.

    Inside a Dask task the default scheduler of dask collections is the worker's client, so a scoring
    group's xarray reads became hundreds of tiny tasks sent back through the scheduler (7 x 256 nodes on 2
    Slurm workers: no faster than one local thread, 28 Nov); a coarse task computes its own reads here.
    """
    import dask

    with dask.config.set(scheduler="sync"):
        return fn(*args)
