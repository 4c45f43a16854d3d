"""Benchmark: telemetry long-format ingest (goal: >= 5M values/s on 2 cores).

Generates a long-format parquet file of ``--values`` values (default 20M: ``--nodes`` nodes x 20
metrics, 4 of them counters, at 1-minute steps), then measures in one run:

1. ``parse``: ``nodewatch.tasks.ingest.telemetry.parse_long_parquet`` over the whole file (streaming batches,
   counters -> rates) followed by the per-metric row checks of ``schemas/telemetry.py``
   (finite / in catalogue / in range): values/s; with ``--workers 2`` the file's row groups are split
   between two processes (the 2-core figure);
2. ``pipeline``: ``nodewatch.tasks.ingest.pipeline.ingest_files`` with the known nodes of a 1000-node topology
   (so the known-node expectation runs, as in production) (land raw, GX validation, row checks,
   dedupe, staging, manifest) on a ``--pipeline-values`` subset file, best of ``--repeat`` runs
   (each into a fresh store): values/s, with the CPU seconds per stage (``IngestResult.timings``);
   with ``--workers 2`` also the same volume as two files of disjoint nodes, each ingested by
   its own process into its own store (two runs side by side, as two flows would): values/s of
   wall clock on 2 cores;
3. ``baseline``: a straightforward per-row loop on a ``--baseline-values`` subset: pandas
   ``itertuples`` over the parquet rows building one dict per row, timestamp conversion, catalogue
   lookup, counter rate from the previous value, range check; and our parse + checks on the same
   subset. ``ratio=`` is ours / baseline on that subset.
4. the same comparison for the long CSV format (``csv.reader`` + per-row dict baseline): ``ratio_csv=``.

Run: ``nice .venv/bin/python benchmarks/ingest_telemetry.py`` (``--values 2000000`` for a quick run).
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing as mp
import os
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from nodewatch.schemas.metrics import CATALOGUE, COUNTERS
from nodewatch.schemas.telemetry import ROW_CHECKS
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.telemetry import parse_long_csv, parse_long_parquet

GAUGES = [
    "cpu0_load",
    "cpu0_user",
    "cpu0_sys",
    "cpu0_iowait",
    "cpu1_load",
    "cpu1_user",
    "cpu1_sys",
    "cpu1_iowait",
    "mem_used",
    "mem_free",
    "mem_cached",
    "power_node",
    "power_cpu",
    "power_mem",
    "temp_cpu0",
    "temp_inlet",
]
COUNTER_METRICS = ["net_rx_bytes", "net_tx_bytes", "ib_rx_bytes", "lustre_ops"]
METRICS = GAUGES + COUNTER_METRICS
T0 = pd.Timestamp("2024-03-01", tz="UTC")


def generate(path: Path, n_values: int, n_nodes: int, seed: int = 0, first_node: int = 0) -> int:
    """Write a long parquet (time-major, one row group per minute block); returns the number of values."""
    rng = np.random.default_rng(seed)
    m = len(METRICS)
    n_times = max(2, math.ceil(n_values / (n_nodes * m)))
    nodes = pa.array([f"n{first_node + i:05d}" for i in range(n_nodes)]).dictionary_encode()
    metrics = pa.array(METRICS).dictionary_encode()
    per_block = max(1, 500_000 // (n_nodes * m))
    lo = np.array([CATALOGUE[x].min if x not in COUNTERS else 0.0 for x in METRICS])
    hi = np.array([min(CATALOGUE[x].max, 1e6) if x not in COUNTERS else 1e6 for x in METRICS])
    counter_cols = np.array([x in COUNTERS for x in METRICS])
    acc = np.zeros((n_nodes, m))
    written = 0
    with pq.ParquetWriter(
        path,
        pa.schema(
            [("timestamp", pa.timestamp("ns", tz="UTC")), ("node", nodes.type), ("metric", metrics.type), ("value", pa.float64())]
        ),
        compression="zstd",
    ) as w:
        for t0 in range(0, n_times, per_block):
            nt = min(per_block, n_times - t0)
            vals = np.empty((nt, n_nodes, m))
            for k in range(nt):
                g = lo + (hi - lo) * rng.random((n_nodes, m))
                acc += np.where(counter_cols, rng.random((n_nodes, m)) * 1e5, 0.0)
                vals[k] = np.where(counter_cols, acc, g)
            n = nt * n_nodes * m
            t_ns = (T0.value + (t0 + np.repeat(np.arange(nt), n_nodes * m)) * 60_000_000_000).astype(np.int64)
            node_idx = np.tile(np.repeat(np.arange(n_nodes), m), nt).astype(np.int32)
            met_idx = np.tile(np.arange(m), nt * n_nodes).astype(np.int32)
            w.write_table(
                pa.table(
                    {
                        "timestamp": pa.array(t_ns, pa.timestamp("ns", tz="UTC")),
                        "node": pa.DictionaryArray.from_arrays(pa.array(node_idx), nodes.dictionary),
                        "metric": pa.DictionaryArray.from_arrays(pa.array(met_idx), metrics.dictionary),
                        "value": pa.array(vals.ravel()),
                    }
                ),
                row_group_size=n,
            )
            written += n
    return written


def parse_and_check(path: str) -> tuple[int, int]:
    """Our parse + per-metric checks over one file: (values in, values rejected or failing a check)."""
    n_in = bad = 0
    with open(path, "rb") as stream:
        for r in parse_long_parquet(stream, ParseContext(name=Path(path).name, batch_rows=500_000)):
            n_in += r.rows_in
            bad += r.rejects.num_rows
            for check in ROW_CHECKS:
                for _, mask in check(r.rows):
                    bad += int(mask.sum())
    return n_in, bad


def parse_parallel(paths: list[Path], workers: int) -> tuple[int, int]:
    """One file per task over ``workers`` processes (what the ingest flow does: tasks mapped per file)."""
    with mp.get_context("fork").Pool(workers) as pool:
        res = pool.map(parse_and_check, [str(p) for p in paths])
    return sum(r[0] for r in res), sum(r[1] for r in res)


CLUSTER_NODES = 1000
"""Known nodes given to every benchmark ingest (a staged topology's nodes): the known-node check runs as in production."""


def _pipeline(job: tuple[str, str]) -> tuple[int, object]:
    """``ingest_files`` of one telemetry file into a fresh store, with known nodes: (values in, result)."""
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.ingest.pipeline import ingest_files
    from nodewatch.tasks.ingest.registry import sources

    path, store_dir = job
    store = Store(store_dir)
    # the known nodes tasks/ingest/run.py passes from a staged topology of a CLUSTER_NODES-node cluster
    known = {f"n{i:05d}" for i in range(CLUSTER_NODES)}
    res = ingest_files(store, sources()["telemetry"], [Path(path)], RunRecorder(store, "bench", {}), data_docs=False,
                       known_nodes=known)
    return res.counts.rows_in, res


def baseline_rows(df: pd.DataFrame) -> tuple[int, int]:
    """Straightforward per-row loop: dict per row, time conversion, catalogue lookup, counter rate, range check."""
    out = []
    prev: dict[tuple[str, str], tuple[float, float]] = {}
    bad = 0
    for row in df.itertuples(index=False):
        rec = {
            "time": pd.Timestamp(row.timestamp).tz_convert("UTC"),
            "node": str(row.node),
            "metric": str(row.metric),
            "value": float(row.value),
        }
        meta = CATALOGUE.get(rec["metric"])
        if meta is None:
            bad += 1
            continue
        if meta.kind == "counter":
            key = (rec["node"], rec["metric"])
            t = rec["time"].value / 1e9
            p = prev.get(key)
            prev[key] = (t, rec["value"])
            if p is None:
                bad += 1
                continue
            dv = rec["value"] - p[1]
            rec["value"] = (dv if dv >= 0 else rec["value"]) / (t - p[0])
            rec["metric"] = meta.rate_name
            meta = CATALOGUE[rec["metric"]]
        v = rec["value"]
        if not math.isfinite(v) or (meta.min is not None and v < meta.min) or (meta.max is not None and v > meta.max):
            bad += 1
        out.append(rec)
    return len(df), bad


def baseline_csv(path: Path) -> tuple[int, int]:
    """csv.reader + per-row dict baseline for the long CSV format."""
    prev: dict[tuple[str, str], tuple[float, float]] = {}
    n = bad = 0
    out = []
    with open(path, newline="") as f:
        r = csv.reader(f)
        next(r)
        for ts, node, metric, value in r:
            n += 1
            rec = {"time": datetime.fromisoformat(ts), "node": node, "metric": metric, "value": float(value)}
            meta = CATALOGUE.get(metric)
            if meta is None:
                bad += 1
                continue
            if meta.kind == "counter":
                t = rec["time"].timestamp()
                p = prev.get((node, metric))
                prev[(node, metric)] = (t, rec["value"])
                if p is None:
                    bad += 1
                    continue
                dv = rec["value"] - p[1]
                rec["value"] = (dv if dv >= 0 else rec["value"]) / (t - p[0])
                meta = CATALOGUE[meta.rate_name]
            v = rec["value"]
            if not math.isfinite(v) or v < meta.min or v > meta.max:
                bad += 1
            out.append(rec)
    return n, bad


def ours_csv(path: Path) -> tuple[int, int]:
    """Our long-CSV parser + checks."""
    n = bad = 0
    with open(path, "rb") as f:
        for r in parse_long_csv(f, ParseContext(name=path.name, batch_rows=500_000)):
            n += r.rows_in
            bad += r.rejects.num_rows
            for check in ROW_CHECKS:
                for _, mask in check(r.rows):
                    bad += int(mask.sum())
    return n, bad


def timed(fn, *a, repeat: int = 1):  # noqa: ANN001, ANN201
    """(result, best wall seconds of ``repeat`` runs): the machine is shared, so the best run is the least disturbed."""
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(*a)
        best = min(best, time.perf_counter() - t0)
    return out, best


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--values", type=int, default=20_000_000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pipeline-values", type=int, default=2_000_000)
    ap.add_argument("--baseline-values", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N for the parse and baseline timings")
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-telemetry-") as d:
        d = Path(d)
        w = max(1, args.workers)
        per = args.nodes // w
        files = [d / f"long-{i}.parquet" for i in range(w)]
        t0 = time.perf_counter()
        n = sum(generate(f, args.values // w, per, seed=i, first_node=i * per) for i, f in enumerate(files))
        size = sum(f.stat().st_size for f in files) / 2**20
        print(f"generated {n:,} values in {w} files ({size:.0f} MiB parquet) in {time.perf_counter() - t0:.1f} s")

        n1 = bad1 = 0
        t1 = 0.0
        for f in files:
            (a_, b_), t_ = timed(parse_and_check, str(f), repeat=args.repeat)
            n1, bad1, t1 = n1 + a_, bad1 + b_, t1 + t_
        print(f"parse+checks 1 process: {n1:,} values in {t1:.2f} s = {n1 / t1 / 1e6:.2f} M values/s ({bad1:,} rejected/failing)")
        c0 = time.process_time()
        for f in files:
            parse_and_check(str(f))
        cpu = time.process_time() - c0
        print(f"parse+checks CPU time (all threads of this process): {cpu:.2f} s = {n1 / cpu / 1e6:.2f} M values per CPU-second")
        if w > 1:
            (n2, bad2), t2 = timed(parse_parallel, files, w, repeat=args.repeat)
            print(f"parse+checks {w} processes: {n2:,} values in {t2:.2f} s = {n2 / t2 / 1e6:.2f} M values/s")

        from nodewatch.tasks.core.runs import RunRecorder
        from nodewatch.tasks.core.store import Store
        from nodewatch.tasks.ingest.pipeline import ingest_files
        from nodewatch.tasks.ingest.registry import sources

        sub = d / "sub.parquet"
        generate(sub, args.pipeline_values, min(args.nodes, 200), seed=1)
        warm = d / "warm.parquet"
        generate(warm, 2000, 5, seed=3)
        store = Store(str(d / "store"))
        ingest_files(store, sources()["telemetry"], [warm], RunRecorder(store, "warm-up", {}), data_docs=False)  # GX import
        runs = iter(range(10**6))
        res, tp = timed(lambda: _pipeline((str(sub), str(d / f"store-{next(runs)}")))[1], repeat=args.repeat)
        c = res.counts
        print(
            f"pipeline (land+parse+GX+row checks+dedupe+stage): {c.rows_in:,} values in {tp:.2f} s = "
            f"{c.rows_in / tp / 1e6:.2f} M values/s (staged {c.staged:,}, quarantined {c.quarantined:,}, dup {c.duplicates:,})"
        )
        print("  stages (CPU s of the last run): " + " ".join(f"{k}={v:.2f}" for k, v in res.timings.items()))
        if w > 1:
            nodes = min(args.nodes, 200) // w
            subs = [d / f"sub-{i}.parquet" for i in range(w)]
            for i, f in enumerate(subs):
                generate(f, args.pipeline_values // w, nodes, seed=10 + i, first_node=i * nodes)
            with mp.get_context("fork").Pool(w) as pool:
                best = math.inf
                for r in range(args.repeat):
                    t0 = time.perf_counter()
                    out = pool.map(_pipeline, [(str(f), str(d / f"store-par-{r}-{i}")) for i, f in enumerate(subs)])
                    best = min(best, time.perf_counter() - t0)
            n2 = sum(o[0] for o in out)
            print(
                f"pipeline {w} processes (one file and store each): {n2:,} values in {best:.2f} s = "
                f"{n2 / best / 1e6:.2f} M values/s"
            )

        base = d / "base.parquet"
        generate(base, args.baseline_values, min(args.nodes, 50), seed=2)
        df = pq.read_table(base).to_pandas()
        (nb, badb), tb = timed(baseline_rows, df, repeat=args.repeat)
        (no, bado), to = timed(parse_and_check, str(base), repeat=args.repeat)
        assert nb == no and badb == bado, (nb, no, badb, bado)
        print(f"baseline pandas itertuples+dict: {nb:,} values in {tb:.2f} s = {nb / tb / 1e6:.3f} M values/s")
        print(f"ours on the same subset: {no:,} values in {to:.3f} s = {no / to / 1e6:.2f} M values/s")
        print(f"ratio={tb / to:.1f}")

        csvp = d / "base.csv"
        tab = pq.read_table(base)
        tab = tab.set_column(
            0, "timestamp", pa.array(pd.DatetimeIndex(tab.column(0).to_pandas()).strftime("%Y-%m-%dT%H:%M:%S+00:00"))
        )
        pcsv.write_csv(
            tab.cast(
                pa.schema([("timestamp", pa.string()), ("node", pa.string()), ("metric", pa.string()), ("value", pa.float64())])
            ),
            csvp,
            write_options=pcsv.WriteOptions(quoting_style="none"),
        )
        (nbc, badbc), tbc = timed(baseline_csv, csvp, repeat=args.repeat)
        (noc, badoc), toc = timed(ours_csv, csvp, repeat=args.repeat)
        assert nbc == noc and badbc == badoc, (nbc, noc, badbc, badoc)
        print(f"CSV baseline csv.reader+dict: {nbc / tbc / 1e6:.3f} M values/s; ours long-csv: {noc / toc / 1e6:.2f} M values/s")
        print(f"ratio_csv={tbc / toc:.1f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
