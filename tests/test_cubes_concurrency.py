"""Two real processes backfilling different days of one cube at the same time leave a valid cube."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from tasks.cubes import day_complete, open_telemetry_cube
from tasks.cubes.build import build_days, dask_client
from tasks.cubes.synth import node_names, write_telemetry_day, write_topology
from tasks.store import Store

REPO = Path(__file__).resolve().parent.parent
DAYS = [date(2026, 1, 1), date(2026, 2, 10)]  # the second day is beyond the first 32-day block: forces a resize

WORKER = """
import sys, time
from datetime import date
from pathlib import Path
from tasks.cubes.build import build_days, dask_client
from tasks.store import Store
store, day, go = Store(sys.argv[1]), date.fromisoformat(sys.argv[2]), Path(sys.argv[3])
with dask_client(n_workers=1, processes=False) as c:
    while not go.exists():
        time.sleep(0.01)
    res = build_days(store, "telemetry", [day], c, node_batch=2, epoch=date(2026, 1, 1), slab_rows=500)
    assert res[0].status == "built", res
print("ok", day)
"""


def _stage(store: Store) -> None:
    nodes = node_names(5)
    write_topology(store, nodes, per_rack=2)
    for d in DAYS:
        write_telemetry_day(store, d, nodes, ["power_node", "temp_inlet", "load1"], freq="5min", seed=7, drop_frac=0.1)


def _data_hashes(store: Store) -> dict[str, str]:
    out = {}
    for p in store.iter_files("cubes", "telemetry.zarr"):
        rel = p.split("telemetry.zarr", 1)[1]
        if rel == "/zarr.json":  # root attrs hold the creation time
            continue
        with store.fs.open(p, "rb") as f:
            out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.mark.slow
def test_two_processes_backfill_different_days(tmp_path):
    seq, par = Store(str(tmp_path / "seq")), Store(str(tmp_path / "par"))
    _stage(seq)
    _stage(par)
    with dask_client(n_workers=1, processes=False) as c:
        build_days(seq, "telemetry", DAYS, c, node_batch=2, epoch=DAYS[0], slab_rows=500)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, par.url, d.isoformat(), str(go)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for d in DAYS
    ]
    time.sleep(3.0)  # both clusters up and polling
    go.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        assert out.startswith("ok")
    assert all(day_complete(par, d) for d in DAYS)
    ds_par, ds_seq = open_telemetry_cube(par).load(), open_telemetry_cube(seq).load()
    assert ds_par.sizes["time"] == 64 * 96 and ds_par.sizes["node"] == 5
    assert int(ds_par["count"].sum()) == int(ds_seq["count"].sum()) > 0
    np.testing.assert_array_equal(ds_par["mean"].values, ds_seq["mean"].values)
    assert _data_hashes(par) == _data_hashes(seq)  # same chunks, same bytes as a sequential build
    assert not (par.path("cubes", ".telemetry.zarr.lock") and Path(par.path("cubes", ".telemetry.zarr.lock")).exists())
