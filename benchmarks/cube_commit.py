"""Benchmark: atomic publication of cube days -- Icechunk commits vs a protocol of our own (issue 23).

The same telemetry-like cube (``--nodes`` × ``--days`` × ``--metrics`` at 15 min, the five float32
statistics, one chunk per node chunk × day × all metrics, zstd) is written day by day and read back
three ways:

* ``plain``     -- today's in-place Zarr region writes (not atomic: the reference cost, torn on a crash);
* ``icechunk``  -- one Icechunk commit per day (what ``nodewatch.tasks.cubes.repo`` does), read with
  ``xr.open_zarr(session.store)``;
* ``own``       -- our best own protocol that also works on S3: each day is written aside as its own small
  Zarr group ``days/<day>/v-<token>.zarr`` and published by a pointer object ``days/<day>/CURRENT``
  written last; a reader resolves every pointer, opens every day group and concatenates them.

Per layout it prints the write seconds per day, the read seconds of one day (all variables) and of
the whole cube, and ``ratio=`` = (own write + own full read) / (icechunk write + icechunk full read):
above 1 the transactional engine is the cheaper way to get atomic days. Values read back are checked
identical across the three layouts.

Usage: ``nice .venv/bin/python benchmarks/cube_commit.py`` (``--nodes 50 --days 4`` for a quick run).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

VARS = ("count", "mean", "min", "max", "std")
SPD = 96


def day_arrays(nodes: int, metrics: int, day: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(day)
    mean = rng.normal(50, 10, (nodes, SPD, metrics)).astype(np.float32)
    return {"count": np.full((nodes, SPD, metrics), 15, np.float32), "mean": mean, "min": mean - 1, "max": mean + 1,
            "std": np.abs(rng.normal(1, 0.1, (nodes, SPD, metrics))).astype(np.float32)}


def template(nodes: int, days: int, metrics: int):  # noqa: ANN201
    import dask.array as da
    import xarray as xr

    shape = (nodes, days * SPD, metrics)
    coords = {"node": np.array([f"cn{i:05d}" for i in range(nodes)], dtype=object),
              "time": pd.date_range("2026-01-01", periods=days * SPD, freq="15min"),
              "metric": np.array([f"m{j:03d}" for j in range(metrics)], dtype=object)}
    ds = xr.Dataset({v: (("node", "time", "metric"), da.full(shape, np.nan, np.float32, chunks=(nodes, SPD, metrics)))
                     for v in VARS}, coords=coords)
    from zarr.codecs import ZstdCodec

    enc = {v: {"chunks": (nodes, SPD, metrics), "compressors": [ZstdCodec(level=3)]} for v in VARS}
    return ds, enc


def region_ds(a: dict[str, np.ndarray]):  # noqa: ANN201
    import xarray as xr

    return xr.Dataset({v: (("node", "time", "metric"), a[v]) for v in VARS})


def run_plain(root: Path, nodes: int, days: int, metrics: int) -> tuple[float, float, float, np.ndarray]:
    import xarray as xr

    url = str(root / "plain.zarr")
    ds, enc = template(nodes, days, metrics)
    ds.to_zarr(url, mode="w", compute=False, encoding=enc, zarr_format=3, consolidated=False)
    t0 = time.perf_counter()
    for d in range(days):
        region_ds(day_arrays(nodes, metrics, d)).to_zarr(url, region={"node": slice(None), "time": slice(d * SPD, (d + 1) * SPD),
                                                                      "metric": slice(None)}, mode="r+", consolidated=False)
    w = (time.perf_counter() - t0) / days
    t0 = time.perf_counter()
    one = xr.open_zarr(url, consolidated=False).isel(time=slice(SPD, 2 * SPD)).load()
    r1 = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = xr.open_zarr(url, consolidated=False).load()
    ra = time.perf_counter() - t0
    del one
    return w, r1, ra, full["mean"].values


def run_icechunk(root: Path, nodes: int, days: int, metrics: int) -> tuple[float, float, float, np.ndarray]:
    import xarray as xr

    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes import repo

    st = Store(str(root / "ic"))
    ds, enc = template(nodes, days, metrics)
    with repo.transaction(st, "c.zarr", "create", create=True) as s:
        ds.to_zarr(s.store, mode="w", compute=False, encoding=enc, zarr_format=3, consolidated=False)
    r = repo.open_repo(st, "c.zarr")
    t0 = time.perf_counter()
    for d in range(days):
        s = r.writable_session("main")
        region = {"node": slice(None), "time": slice(d * SPD, (d + 1) * SPD), "metric": slice(None)}
        region_ds(day_arrays(nodes, metrics, d)).to_zarr(s.store, region=region, mode="r+", consolidated=False)
        repo.set_day_marker(s.store, f"d{d:03d}", {"day": d})
        repo.commit(st, "c.zarr", s, f"day {d}")
    w = (time.perf_counter() - t0) / days
    t0 = time.perf_counter()
    xr.open_zarr(repo.readonly_store(st, "c.zarr"), consolidated=False).isel(time=slice(SPD, 2 * SPD)).load()
    r1 = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = repo.open_dataset(st, "c.zarr").load()
    ra = time.perf_counter() - t0
    return w, r1, ra, full["mean"].values


def run_own(root: Path, nodes: int, days: int, metrics: int) -> tuple[float, float, float, np.ndarray]:
    import os

    import xarray as xr
    from zarr.codecs import ZstdCodec

    base = root / "own"
    base.mkdir()
    enc = {v: {"chunks": (nodes, SPD, metrics), "compressors": [ZstdCodec(level=3)]} for v in VARS}
    times = pd.date_range("2026-01-01", periods=days * SPD, freq="15min")
    t0 = time.perf_counter()
    for d in range(days):
        ver = f"v-{uuid.uuid4().hex[:8]}.zarr"
        ddir = base / "days" / f"d{d:03d}"
        ddir.mkdir(parents=True, exist_ok=True)
        ds = region_ds(day_arrays(nodes, metrics, d)).assign_coords(time=times[d * SPD:(d + 1) * SPD])
        ds.to_zarr(str(ddir / ver), mode="w", encoding=enc, zarr_format=3, consolidated=False)
        tmp = ddir / f".tmp-{uuid.uuid4().hex}"
        tmp.write_text(ver)
        os.replace(tmp, ddir / "CURRENT")  # the publication: one small object written last
    w = (time.perf_counter() - t0) / days

    def open_all(only: int | None = None):  # noqa: ANN202
        parts = []
        for d in range(days) if only is None else [only]:
            ddir = base / "days" / f"d{d:03d}"
            parts.append(xr.open_zarr(str(ddir / (ddir / "CURRENT").read_text()), consolidated=False))
        return xr.concat(parts, dim="time")

    t0 = time.perf_counter()
    open_all(1).load()
    r1 = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = open_all().load()
    ra = time.perf_counter() - t0
    return w, r1, ra, full["mean"].values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--days", type=int, default=8)
    ap.add_argument("--metrics", type=int, default=20)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cube-commit-"))
    try:
        res = {}
        for _name, fn in (("plain", run_plain), ("icechunk", run_icechunk), ("own", run_own)):  # warm-up: imports, caches
            (root / "warm").mkdir()
            fn(root / "warm", 2, 2, 2)
            shutil.rmtree(root / "warm")
        for name, fn in (("plain", run_plain), ("icechunk", run_icechunk), ("own", run_own)):
            res[name] = fn(root, a.nodes, a.days, a.metrics)
            w, r1, ra, _ = res[name]
            print(f"{name:9s} write {w * 1000:8.1f} ms/day   read one day {r1 * 1000:8.1f} ms   read all {ra * 1000:8.1f} ms")
        ref = res["plain"][3]
        same = all(np.array_equal(res[k][3], ref) for k in ("icechunk", "own"))
        mb = a.nodes * SPD * a.metrics * 4 * len(VARS) / 2**20
        print(f"cube: {a.nodes} nodes x {a.days} days x {a.metrics} metrics, {mb:.1f} MiB raw per day; values identical: {same}")
        ic = res["icechunk"][0] * a.days + res["icechunk"][2]
        own = res["own"][0] * a.days + res["own"][2]
        plain = res["plain"][0] * a.days + res["plain"][2]
        print(f"icechunk cost vs plain in-place writes: x{ic / plain:.2f} (write all days + read all)")
        print(f"ratio={own / ic:.2f}  (own protocol / icechunk, write all days + read all; > 1: icechunk cheaper)")
        return 0 if same else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
