"""The store's atomicity on an object store (S3 endpoint of ``infra/local/cluster.sh``): no rename, write-then-pointer.

A writer process is SIGKILLed (``NODEWATCH_FAULT_AT``) at each publish step of a staged-table commit and of
a cube day commit, against ``s3://``; readers in this process must see the state before the run or
after it, never a part of it, and a re-run completes. Object writes of the store (manifests, CURRENT)
are single PUTs: no temporary key is left and no rename is needed.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import date

import numpy as np
import pytest

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import day_complete, open_telemetry_cube
from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

D1, D2 = date(2026, 3, 1), date(2026, 3, 2)
NODES = node_names(6)
METRICS = ["power_node", "temp_inlet"]

STAGE_CHILD = """
import sys
from nodewatch.tasks.core.commit import StagedCommit
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.synth import telemetry_table
st, run = Store(sys.argv[1]), sys.argv[2]
c = StagedCommit(st, run, "telemetry")
for d in ("2026-03-03", "2026-03-04", "2026-03-05"):  # each date as 2 bounded parts part-<run>-<k>.parquet
    for k in range(2):
        t = telemetry_table([d + "T00:00:00Z"] * 2, [f"cn000{2 * k + 1}", f"cn000{2 * k + 2}"], ["power_node"] * 2, [1.0, 2.0])
        c.write_parquet(t, st.staged_key("telemetry", d, run, part=k))
c.commit()
print("done")
"""

CUBE_CHILD = """
import sys
from datetime import date
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.build import build_days, dask_client
with dask_client("local", n_workers=1) as c:
    build_days(Store(sys.argv[1]), "telemetry", [date.fromisoformat(sys.argv[2])], c, node_batch=2)
print("done")
"""


@pytest.fixture
def s3_store(local_cluster, monkeypatch):
    """A fresh ``s3://<bucket>/<prefix>`` store on the local endpoint (credentials from the env, as in production)."""
    local_cluster.need("s3")
    for k, v in local_cluster.env.items():
        monkeypatch.setenv(k, v)
    return Store(f"s3://{local_cluster.env['NODEWATCH_LOCAL_BUCKET']}/atomic-{uuid.uuid4().hex[:8]}")


def _child(script: str, args: list[str], env: dict[str, str], fault: str | None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in env.items() if k != "NODEWATCH_FAULT_AT"}
    if fault:
        e["NODEWATCH_FAULT_AT"] = fault
    return subprocess.run([sys.executable, "-c", script, *args], env=e, capture_output=True, text=True, timeout=300)


def _fresh(store: Store) -> Store:
    """A new reader of the same store (no listing cache of the writer's filesystem object)."""
    store.fs.invalidate_cache()
    return Store(store.url)


@pytest.mark.parametrize("point,published", [
    # (before-commit: every part written, no commit object, the same claim; kept on local disk,
    # tests/core/test_commit_faults.py)
    ("stage:after-part:3", False),  # killed between the 2 bounded parts of the 2nd date
    ("stage:after-commit:1", True),  # the commit object written: the run is published
])
def test_staged_commit_killed_on_s3(local_cluster, s3_store, point, published):
    before = s3_store.staged_dates("telemetry")
    run = f"run-{uuid.uuid4().hex[:6]}"
    p = _child(STAGE_CHILD, [s3_store.url, run], local_cluster.full_env(), point)
    assert p.returncode == -9, (point, p.returncode, p.stderr[-2000:])  # killed at the point
    r = _fresh(s3_store)
    after = r.staged_dates("telemetry")
    want = ["2026-03-03", "2026-03-04", "2026-03-05"] if published else []
    assert after == sorted(before + want), (point, after)
    assert bool(r.staged_files("telemetry", run_id=run)) is published
    if not published:  # the parts are garbage for `nodewatch store gc`, never read
        from nodewatch.tasks.core.commit import garbage

        assert {g.run_id for g in garbage(r)} == {run}
        rerun = f"run-{uuid.uuid4().hex[:6]}"
        ok = _child(STAGE_CHILD, [s3_store.url, rerun], local_cluster.full_env(), None)
        assert ok.returncode == 0, ok.stderr[-2000:]
        assert _fresh(s3_store).staged_dates("telemetry") == want or want == []
        assert len(_fresh(s3_store).staged_files("telemetry", run_id=rerun)) == 6
    else:
        assert len(r.staged_files("telemetry", run_id=run)) == 6
        assert r.read_staged("telemetry", ["2026-03-04"], run_id=run).column("node").to_pylist() == [
            "cn0001", "cn0002", "cn0003", "cn0004"]


def _values(store: Store) -> dict[str, np.ndarray]:
    ds = open_telemetry_cube(store)
    return {k: ds[k].values for k in ("count", "mean", "max")}


@pytest.mark.parametrize("point,published", [
    ("cube:before-commit:1", False),  # every chunk of the day written into the session, the branch ref not moved
    ("cube:after-commit:1", True),  # the ref moved: the day is published whole
])
def test_cube_day_commit_killed_on_s3(local_cluster, s3_store, point, published):
    write_topology(s3_store, NODES, per_rack=2)
    for d in (D1, D2):
        write_telemetry_day(s3_store, d, NODES, METRICS, freq="5min", seed=3)
    ok = _child(CUBE_CHILD, [s3_store.url, D1.isoformat()], local_cluster.full_env(), None)
    assert ok.returncode == 0, ok.stderr[-2000:]
    old = _values(_fresh(s3_store))
    p = _child(CUBE_CHILD, [s3_store.url, D2.isoformat()], local_cluster.full_env(), point)
    assert p.returncode == -9, (point, p.returncode, p.stderr[-2000:])
    r = _fresh(s3_store)
    assert day_complete(r, D2) is published and day_complete(r, D1)
    seen = _values(r)
    d1 = slice(0, 96)
    assert all(np.array_equal(seen[k][:, d1], old[k][:, d1], equal_nan=True) for k in old)  # D1 untouched
    if published:
        assert float(np.nansum(seen["count"][:, 96:192])) > 0
    else:  # D2 is not in the cube at all (the axis the reader sees is the last commit's)
        assert seen["count"].shape[1] <= 96 or float(np.nansum(seen["count"][:, 96:192])) == 0
        again = _child(CUBE_CHILD, [s3_store.url, D2.isoformat()], local_cluster.full_env(), None)
        assert again.returncode == 0, again.stderr[-2000:]
        assert day_complete(_fresh(s3_store), D2)


def test_object_writes_are_single_puts(s3_store):
    s3_store.write_json({"a": 1}, "runs", "r1.json")
    s3_store.set_current("models/ruad", "r1")
    keys = [p.rsplit("/", 1)[1] for p in s3_store.fs.find(s3_store.root)]
    assert sorted(keys) == ["CURRENT", "r1.json"]  # no temporary key, no rename on an object store
    assert s3_store.current("models/ruad") == "r1" and s3_store.read_json("runs", "r1.json") == {"a": 1}
