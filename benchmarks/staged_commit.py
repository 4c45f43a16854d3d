"""Staged-table commits: nodewatch's commit objects against Delta Lake (delta-rs), same rows both ways.

Writes ``--days`` date partitions of ``--rows`` telemetry-like rows per day as ``--runs`` runs (each run
one commit adding one part per day), then reads everything back and one day, both with

* ``nodewatch``: parts written by :class:`~nodewatch.tasks.core.commit.StagedCommit` (pyarrow, zstd)
  and one JSON commit object per run; reads through ``Store.read_staged``;
* ``delta``: ``deltalake.write_deltalake(..., mode="append", partition_by=["date"])`` (one Delta
  commit per run); reads through ``DeltaTable(...).to_pyarrow_table(partitions=...)``.

Prints the times, the bytes on disk, the objects written, and ``ratio=`` = (delta time / nodewatch time)
for write + read of the whole run set (> 1: our protocol is faster). deltalake is not a nodewatch
dependency: point ``--deltalake-path`` at a directory holding it (``pip install --target DIR deltalake``)
or install it in the environment; without it only our side is measured.

    .venv/bin/python benchmarks/staged_commit.py --rows 500000 --days 4 --runs 4 --deltalake-path /tmp/deltalake-bench
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa


def rows_for(day: int, run: int, n: int, seed: int = 0) -> pa.Table:
    """``n`` telemetry-like rows of 2026-01-(day+1) from run ``run``."""
    rng = np.random.default_rng(seed + 1000 * day + run)
    t0 = np.datetime64(f"2026-01-{day + 1:02d}T00:00:00", "ns").astype(np.int64)
    times = t0 + np.sort(rng.integers(0, 86_400 * 10**9, n))
    return pa.table({
        "time": pa.array(times, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        "node": pa.array([f"cn{i:04d}" for i in rng.integers(0, 256, n)], pa.string()),
        "metric": pa.array(np.array(["power", "temp", "cpu_util", "mem_used"])[rng.integers(0, 4, n)], pa.string()),
        "value": pa.array(rng.normal(100, 10, n)),
        "source_offset": pa.array(np.arange(n, dtype=np.int64)),
    })


def du(path: Path) -> tuple[int, int]:
    """(bytes, files) below ``path``."""
    size = files = 0
    for p in path.rglob("*"):
        if p.is_file():
            size += p.stat().st_size
            files += 1
    return size, files


def bench_ours(root: Path, data: dict[tuple[int, int], pa.Table], days: int, runs: int) -> dict[str, float]:
    from nodewatch.tasks.core.commit import StagedCommit
    from nodewatch.tasks.core.store import Store

    st = Store(str(root))
    t0 = time.perf_counter()
    for r in range(runs):
        c = StagedCommit(st, f"20260101T00000{r}.000000Z-bench{r}", "telemetry")
        for d in range(days):
            c.write_parquet(data[(d, r)], st.staged_key("telemetry", f"2026-01-{d + 1:02d}", c.run_id))
        c.commit()
    w = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_all = Store(str(root)).read_staged("telemetry").num_rows
    r_all = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_day = Store(str(root)).read_staged("telemetry", ["2026-01-02"]).num_rows
    r_day = time.perf_counter() - t0
    size, files = du(root / "staged")
    return {"write_s": w, "read_all_s": r_all, "read_day_s": r_day, "rows": n_all, "rows_day": n_day, "bytes": size,
            "files": files}


def bench_delta(root: Path, data: dict[tuple[int, int], pa.Table], days: int, runs: int) -> dict[str, float]:
    from deltalake import DeltaTable, write_deltalake

    uri = str(root / "telemetry")
    t0 = time.perf_counter()
    for r in range(runs):
        batch = pa.concat_tables([data[(d, r)].append_column("date", pa.array([f"2026-01-{d + 1:02d}"] * data[(d, r)].num_rows))
                                  for d in range(days)])
        write_deltalake(uri, batch, mode="append", partition_by=["date"])
    w = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_all = DeltaTable(uri).to_pyarrow_table().num_rows
    r_all = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_day = DeltaTable(uri).to_pyarrow_table(filters=[("date", "=", "2026-01-02")]).num_rows
    r_day = time.perf_counter() - t0
    size, files = du(root)
    return {"write_s": w, "read_all_s": r_all, "read_day_s": r_day, "rows": n_all, "rows_day": n_day, "bytes": size,
            "files": files}


def main() -> None:
    """Run both sides on the same rows and print the figures and ``ratio=``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows per day and run")
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--deltalake-path", default=os.environ.get("DELTALAKE_PATH"))
    a = ap.parse_args()
    if a.deltalake_path:
        sys.path.insert(0, a.deltalake_path)
    data = {(d, r): rows_for(d, r, a.rows) for d in range(a.days) for r in range(a.runs)}
    tmp = Path(tempfile.mkdtemp(prefix="nodewatch-bench-commit-"))
    try:
        ours = bench_ours(tmp / "ours", data, a.days, a.runs)
        print(f"nodewatch commit objects: write {ours['write_s']:.2f} s, read all {ours['read_all_s']:.2f} s, "
              f"read one day {ours['read_day_s']:.3f} s, {ours['rows']:,} rows, {ours['bytes'] / 2**20:.1f} MiB "
              f"in {ours['files']} files")
        try:
            import deltalake
        except ImportError:
            print("deltalake not importable (pass --deltalake-path): only our side measured")
            return
        delta = bench_delta(tmp / "delta", data, a.days, a.runs)
        print(f"delta-rs {deltalake.__version__}: write {delta['write_s']:.2f} s, read all {delta['read_all_s']:.2f} s, "
              f"read one day {delta['read_day_s']:.3f} s, {delta['rows']:,} rows, {delta['bytes'] / 2**20:.1f} MiB "
              f"in {delta['files']} files")
        assert ours["rows"] == delta["rows"] and ours["rows_day"] == delta["rows_day"]
        t_ours = ours["write_s"] + ours["read_all_s"]
        t_delta = delta["write_s"] + delta["read_all_s"]
        print(f"write ratio={delta['write_s'] / ours['write_s']:.2f} read ratio={delta['read_all_s'] / ours['read_all_s']:.2f}")
        print(f"ratio={t_delta / t_ours:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
