"""Dask on Slurm: cube builds fan out on a dask-jobqueue ``SLURMCluster`` whose workers are real ``sbatch`` jobs.

Against the one-host Slurm of ``infra/local/cluster.sh`` (slurmctld + one slurmd per logical node): the
workers show in ``squeue``; the store credentials reach them through a 0600 file, never through sbatch's
environment export (no test secret in ``scontrol show job``, the batch scripts, slurmctld's saved job
environments or the logs); one worker's job is ``scancel``-ed while it is computing; the build completes,
the lost job is replaced by a new one, and every cube chunk is byte-identical to a build on a local
threaded cluster.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from datetime import date, timedelta
from pathlib import Path

import pytest

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.build import build_days, dask_client
from nodewatch.tasks.cubes.cluster import resolve, slurm_cluster_kwargs
from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

START = date(2026, 2, 1)
DAYS = [START + timedelta(days=i) for i in range(4)]
NODES = node_names(48)
METRICS = ["power_node", "temp_inlet", "cpu_user", "mem_used"]


def _stage(root: Path) -> Store:
    st = Store(str(root))
    write_topology(st, NODES, per_rack=8)
    for i, d in enumerate(DAYS):
        write_telemetry_day(st, d, NODES, METRICS, freq="1min", seed=i)
    return st


def _squeue(env: dict[str, str]) -> list[tuple[str, str, str]]:
    r = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [tuple(line.split()) for line in r.stdout.splitlines() if line.strip()]  # type: ignore[misc]


def _secrets_not_in_slurm(local_cluster, env: dict[str, str], client, jobs: set[str]) -> list[Path]:
    """The test secrets reach the workers (through the 0600 env file) but no Slurm record, script or log."""
    import hashlib
    import os
    import stat

    secrets = [x for x in local_cluster.secrets() if len(x) >= 16]
    assert len(secrets) >= 2
    digest = hashlib.sha256(env["AWS_SECRET_ACCESS_KEY"].encode()).hexdigest()
    seen = client.run(lambda: hashlib.sha256(os.environ.get("AWS_SECRET_ACCESS_KEY", "").encode()).hexdigest())
    assert set(seen.values()) == {digest}, "the workers did not get the store credentials"
    script = client.cluster.job_script()
    assert "--export=NONE" in script
    env_files = [Path(line.split(". ", 1)[1].split(";")[0].strip("'")) for line in script.splitlines() if "set -a; . " in line]
    assert len(env_files) == 1 and stat.S_IMODE(env_files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(env_files[0].parent.stat().st_mode) == 0o700
    texts = {"job script": script}
    for j in jobs:
        for what, cmd in ((f"scontrol show job {j}", ["scontrol", "-dd", "show", "job", j]),
                          (f"batch script {j}", ["scontrol", "write", "batch_script", j, "-"])):
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, (what, r.stderr)
            texts[what] = r.stdout
    slurm_dir = Path(env["SLURM_CONF"]).parent  # slurmctld state (job environments), spool, logs
    logs = Path(env["DASK_JOBQUEUE__SLURM__LOG_DIRECTORY"])
    files = [f for d in (slurm_dir, logs, local_cluster.base / "logs") for f in d.rglob("*")
             if f.is_file() and f.parent != env_files[0].parent]  # all but the 0600 env file itself
    assert any("environment" in f.name for f in files), "no job environment in slurmctld's state to check"
    leaks = [what for what, t in texts.items() for x in secrets if x in t]
    leaks += [str(f) for f in files for x in secrets if x.encode() in f.read_bytes()]
    assert leaks == []
    return env_files


def test_resolve_choices(monkeypatch):
    monkeypatch.delenv("NODEWATCH_DASK", raising=False)
    assert resolve(None) == "local"
    assert resolve("tcp://10.0.0.1:8786") == "tcp://10.0.0.1:8786"
    monkeypatch.setenv("NODEWATCH_DASK", "SLURM")
    assert resolve(None) == "slurm"
    assert resolve("tcp://h:1") == "tcp://h:1"  # an explicit address wins over the env
    kw = slurm_cluster_kwargs(2)
    assert kw["scheduler_options"]["dashboard_address"].startswith("127.0.0.1")


def test_build_on_slurm_survives_scancel(local_cluster, tmp_path, monkeypatch):
    local_cluster.need("slurm")
    env = local_cluster.full_env()
    for k, v in local_cluster.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("NODEWATCH_DASK", "slurm")
    import dask.config

    dask.config.refresh()  # pick up the DASK_JOBQUEUE__SLURM__* variables of the test bed
    base = _stage(tmp_path / "staged")
    shutil.copytree(base.root, tmp_path / "ref")
    shutil.copytree(base.root, tmp_path / "slurm")
    ref, onslurm = Store(str(tmp_path / "ref")), Store(str(tmp_path / "slurm"))
    with dask_client("local", n_workers=1) as c:
        build_days(ref, "telemetry", DAYS, c, node_batch=8)

    killed: dict[str, str] = {}
    errors: list[BaseException] = []
    with dask_client(None, n_workers=3) as client:  # NODEWATCH_DASK=slurm
        cluster = client.cluster
        jobs = {w.job_id for w in cluster.workers.values() if getattr(w, "job_id", None)}
        q = _squeue(env)
        running = {j for j, name, state in q if state == "RUNNING" and name == "nodewatch-dask"}
        assert len(jobs) == 3 and jobs <= running, (jobs, q)
        addrs = {w["name"]: a for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}
        assert all(a.startswith("tcp://127.0.0.1:") for a in addrs.values()), addrs  # loopback only
        env_files = _secrets_not_in_slurm(local_cluster, env, client, jobs)

        def run() -> None:
            try:
                build_days(onslurm, "telemetry", DAYS, client, node_batch=8)
            except BaseException as e:  # noqa: BLE001 - reported by the assertion below
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline and t.is_alive():
            busy = [a for a, tasks in client.processing().items() if tasks]
            if busy:
                name = next(n for n, a in addrs.items() if a == busy[0])
                job = cluster.workers[name].job_id
                subprocess.run(["scancel", job], env=env, check=True, timeout=30)
                killed[name] = job
            time.sleep(0.05)
        t.join(600)
        assert killed, "the build finished before a busy worker could be cancelled"
        assert not errors, errors
        deadline = time.monotonic() + 120  # the adaptive cluster submits a job in place of the cancelled one
        while time.monotonic() < deadline:
            now = {j for j, name, state in _squeue(env) if name == "nodewatch-dask"}
            if len(now) >= 3 and (now - jobs):
                break
            time.sleep(1)
        assert (now - jobs) and list(killed.values())[0] not in now, (jobs, now, killed)
    assert not [f for f in env_files if f.exists()], "the workers' env file outlived the cluster"
    a, b = repo.chunk_bytes(ref, "telemetry.zarr"), repo.chunk_bytes(onslurm, "telemetry.zarr")
    assert len(a) > 50 and a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []  # byte-identical chunks
