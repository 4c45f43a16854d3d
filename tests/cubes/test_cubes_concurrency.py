"""Two real processes backfilling different days of one cube at the same time leave a valid cube.

Both processes start from the same pre-created short cube (32 days, 2 metrics), so each one *must*
change an axis under the lock whatever the scheduling: the first day brings a new metric (append to
the metric axis), the second day lies beyond the allocated 32 days (time axis resize). The result
must equal a sequential build from the same starting cube, value for value (each day is one Icechunk
commit; the two commits are rebased onto each other).
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from nodewatch.schemas.cubes import spec_for
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import day_complete, open_telemetry_cube
from nodewatch.tasks.cubes.build import build_days, dask_client, read_topology
from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology
from nodewatch.tasks.cubes.writer import ALLOC_DAYS, ensure_cube, read_geometry

REPO = Path(__file__).resolve().parents[2]
DAYS = [date(2026, 1, 1), date(2026, 2, 10)]  # the second day is beyond the first 32-day block: forces a resize
BASE_METRICS = ["power_node", "temp_inlet"]
NEW_METRIC = "load1"  # only in the first day's data: forces a metric append

WORKER = """
import sys, time
from datetime import date
from pathlib import Path
from nodewatch.schemas.cubes import spec_for
from nodewatch.tasks.cubes.build import build_days, dask_client
from nodewatch.tasks.cubes.writer import read_geometry
from nodewatch.tasks.core.store import Store
store, day, go = Store(sys.argv[1]), date.fromisoformat(sys.argv[2]), Path(sys.argv[3])
g0 = read_geometry(store, spec_for("telemetry"))  # before the start signal: the pre-created short cube
with dask_client(n_workers=1, processes=False) as c:
    while not go.exists():
        time.sleep(0.01)
    res = build_days(store, "telemetry", [day], c, node_batch=2, epoch=date(2026, 1, 1), slab_rows=500)
    assert res[0].status == "built", res
print("ok", day, g0.n_days, len(g0.metrics))
"""


def _stage(store: Store) -> None:
    nodes = node_names(5)
    write_topology(store, nodes, per_rack=2)
    write_telemetry_day(store, DAYS[0], nodes, [*BASE_METRICS, NEW_METRIC], freq="5min", seed=7, drop_frac=0.1)
    write_telemetry_day(store, DAYS[1], nodes, BASE_METRICS, freq="5min", seed=7, drop_frac=0.1)


def _precreate(store: Store) -> None:
    """The short cube both builds start from: 32 days from the epoch, every node, 2 of the 3 metrics."""
    geo = ensure_cube(
        store,
        spec_for("telemetry"),
        [DAYS[0]],
        set(node_names(5)),
        read_topology(store),
        set(BASE_METRICS),
        node_batch=2,
        epoch=DAYS[0],
    )
    assert geo.n_days == ALLOC_DAYS and not geo.covers(DAYS[1]) and geo.metrics == tuple(BASE_METRICS)


@pytest.mark.slow
def test_two_processes_backfill_different_days(tmp_path):
    seq, par = Store(str(tmp_path / "seq")), Store(str(tmp_path / "par"))
    for s in (seq, par):
        _stage(s)
        _precreate(s)
    with dask_client(n_workers=1, processes=False) as c:
        for d in DAYS:
            build_days(seq, "telemetry", [d], c, node_batch=2, epoch=DAYS[0], slab_rows=500)
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
    for p, d, (out, err) in zip(procs, DAYS, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        # each process saw the short cube before it started: its axis change was not optional
        assert out.split() == ["ok", d.isoformat(), str(ALLOC_DAYS), "2"], out
    assert all(day_complete(par, d) for d in DAYS)
    geo = read_geometry(par, spec_for("telemetry"))
    assert geo.n_days == 2 * ALLOC_DAYS and geo.metrics == (*BASE_METRICS, NEW_METRIC)  # both growths landed
    ds_par, ds_seq = open_telemetry_cube(par).load(), open_telemetry_cube(seq).load()
    assert ds_par.sizes["time"] == 64 * 96 and ds_par.sizes["node"] == 5 and ds_par.sizes["metric"] == 3
    assert int(ds_par["count"].sum()) == int(ds_seq["count"].sum()) > 0
    assert int(ds_par["count"].sel(metric=NEW_METRIC).isel(time=slice(0, 96)).sum()) > 0
    np.testing.assert_array_equal(ds_par["mean"].values, ds_seq["mean"].values)
    for k in ("count", "mean", "min", "max", "std"):  # same values as a sequential build
        np.testing.assert_array_equal(ds_par[k].values, ds_seq[k].values)
    assert not Path(par.path("cubes", ".telemetry.zarr.lock")).exists()
