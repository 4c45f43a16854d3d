"""Benchmark: SWF job-trace parsing, compiled block scanner vs a straightforward line-by-line parser.

Goal (issue 3): >= 1M rows/s on a 1M-job SWF and >= 5x the line-by-line Python parser, same run.
Wall-clock rows/s and the ``ratio=`` line are the headline figures; CPU-time figures are printed too
because on a shared machine the wall clock includes time spent waiting for a core.

The 1M-job trace is made by resampling (with replacement, seeded, submit order kept) the job lines of a
real trace from ../shared/data/swf (header kept, job numbers renumbered); without that folder a
synthetic trace with the same header fields is generated. Both parsers read the same plain file
from a temporary directory and must return identical Arrow tables.

    nice .venv/bin/python benchmarks/ingest_jobs.py [--jobs 1000000] [--trace PATH] [--seed 0]
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nodewatch.schemas.jobs import PARSED_SCHEMA  # noqa: E402
from nodewatch.tasks.ingest.base import ParseContext  # noqa: E402
from nodewatch.tasks.ingest.jobs_swf import SWF_STATUS, SwfHeader, parse_swf, system_name  # noqa: E402

SHARED_SWF = REPO.parent / "shared" / "data" / "swf"


def make_trace(dest: Path, n_jobs: int, source: Path | None, seed: int) -> str:
    """Write an ``n_jobs`` SWF trace to ``dest``; returns a description of where it came from."""
    rng = np.random.default_rng(seed)
    if source is not None and source.exists():
        header: list[bytes] = []
        jobs: list[bytes] = []
        with gzip.open(source, "rb") if source.suffix == ".gz" else open(source, "rb") as f:
            for line in f:
                (header if line.lstrip().startswith(b";") else jobs).append(line)
        idx = np.sort(rng.integers(0, len(jobs), n_jobs))
        with open(dest, "wb") as out:
            out.writelines(header)
            for i, j in enumerate(idx, start=1):
                rest = jobs[j].lstrip().split(maxsplit=1)[1]
                out.write(b"%7d " % i + rest)
        return f"resampled from {source.name} ({len(jobs):,} jobs)"
    header_txt = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 1000000000\n; MaxNodes: 128\n; MaxProcs: 1024\n;\n"
    submit = np.cumsum(rng.integers(0, 60, n_jobs))
    wait = rng.integers(0, 7200, n_jobs)
    run = rng.integers(1, 86400, n_jobs)
    procs = 2 ** rng.integers(0, 11, n_jobs)
    status = rng.choice([0, 1, 5], n_jobs, p=[0.1, 0.8, 0.1])
    user = rng.integers(1, 500, n_jobs)
    with open(dest, "w") as out:
        out.write(header_txt)
        for i in range(n_jobs):
            out.write(f"{i + 1:7d} {submit[i]:9d} {wait[i]:6d} {run[i]:6d} {procs[i]:5d} -1 -1 {procs[i]:5d} 86400 -1 "
                      f"{status[i]:2d} {user[i]:4d} 1 -1 1 1 -1 -1\n")
    return "synthetic (no ../shared/data/swf)"


def parse_line_by_line(path: Path, name: str) -> pa.Table:
    """Baseline: iterate lines, ``split()``, build one dict per row, then ``Table.from_pylist``.

    Same mapping as :func:`nodewatch.tasks.ingest.jobs_swf.parse_swf` for well-formed lines (no reject handling).
    """
    header = SwfHeader()
    system = system_name(name)
    rows = []
    seen_data = False
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith(b";"):
                if not seen_data:
                    header.add_line(line.decode("utf-8", "replace"))
                continue
            seen_data = True
            p = [float(x) for x in line.split()]
            if len(p) != 18:
                continue
            base = header.unix_start
            procs = p[7] if p[4] == -1 else p[4]
            submit = None if p[1] == -1 else round((base + p[1]) * 1e9)
            never = p[3] == -1 or (p[3] == 0 and p[4] == -1)  # never started: staged with no start/end/elapsed
            start = None if never or submit is None or p[2] == -1 else submit + round(p[2] * 1e9)
            end = None if start is None or p[3] == -1 else start + round(p[3] * 1e9)
            if procs == -1:
                nodes = None
            elif procs > 0 and header.max_nodes and header.max_procs:
                nodes = math.ceil(int(procs) * header.max_nodes / header.max_procs)
            else:
                nodes = int(procs)
            rows.append({
                "job_id": None if p[0] == -1 else str(int(p[0])),
                "step": None,
                "system": system,
                "user": None if p[11] == -1 else str(int(p[11])),
                "group": None if p[12] == -1 else str(int(p[12])),
                "submit_time": submit,
                "start_time": start,
                "end_time": end,
                "nodes": nodes,
                "cores": None if procs == -1 else int(procs),
                "elapsed_s": None if never else round(p[3]),
                "timelimit_s": None if p[8] == -1 else round(p[8]),
                "state": SWF_STATUS.get(int(p[10]), "UNKNOWN"),
                "cancelled_by": None,
                "exit_code": None,
                "signal": None,
                "node_list": None,
                "partition": None if p[15] == -1 else header.partitions.get(int(p[15]), str(int(p[15]))),
                "source_format": "swf",
                "source_offset": line_no,
            })
    return pa.Table.from_pylist(rows, schema=PARSED_SCHEMA)


def parse_fast(path: Path, name: str) -> tuple[pa.Table, int]:
    """The production parser; returns (rows, rejects)."""
    with open(path, "rb") as f:
        batches = list(parse_swf(f, ParseContext(name=name, batch_rows=200_000)))
    return pa.concat_tables([b.rows for b in batches]), sum(b.rejects.num_rows for b in batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--trace", type=Path, default=SHARED_SWF / "SDSC-BLUE-2000-4.2-cln.swf.gz")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="nodewatch-bench-") as tmp:
        path = Path(tmp) / "bench-1M.swf"
        t = time.perf_counter()
        origin = make_trace(path, args.jobs, args.trace, args.seed)
        print(f"trace: {args.jobs:,} jobs, {path.stat().st_size / 1e6:.1f} MB, {origin} "
              f"(generated in {time.perf_counter() - t:.1f} s)")

        # load/compile the scanner once (numba cache) so the timing below is parsing only
        t = time.perf_counter()
        warm = Path(tmp) / "warm.swf"
        warm.write_bytes(b"; UnixStartTime: 0\n" + b"1 0 0 1 1 -1 -1 1 1 -1 1 1 1 -1 1 1 -1 -1\n")
        parse_fast(warm, "warm.swf")
        print(f"scanner load/compile: {time.perf_counter() - t:.2f} s (once per process; cached on disk)")

        print(f"load average before timing: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        t, c = time.perf_counter(), time.process_time()
        fast, rejects = parse_fast(path, path.name)
        t_fast, c_fast = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        slow = parse_line_by_line(path, path.name)
        t_slow, c_slow = time.perf_counter() - t, time.process_time() - c

        assert rejects == 0, f"{rejects} rejected lines"
        assert fast.num_rows == slow.num_rows == args.jobs, (fast.num_rows, slow.num_rows)
        assert fast.equals(slow), "parsers disagree"
        fast_rate = fast.num_rows / t_fast
        slow_rate = slow.num_rows / t_slow
        n = fast.num_rows
        for label, tw, tc in (("compiled block parser", t_fast, c_fast), ("line-by-line baseline", t_slow, c_slow)):
            print(f"{label}: wall {tw:6.2f} s {n / tw:12,.0f} rows/s | cpu {tc:6.2f} s {n / tc:12,.0f} rows/s")
        print(f"identical tables: yes ({fast.num_rows:,} rows)")
        print(f"goal >= 1,000,000 rows/s: {'met' if fast_rate >= 1e6 else 'NOT met'}; goal ratio >= 5: "
              f"{'met' if fast_rate / slow_rate >= 5 else 'NOT met'}")
        print(f"cpu-time ratio: {c_slow / c_fast:.2f}")
        print(f"ratio={fast_rate / slow_rate:.2f}")


if __name__ == "__main__":
    main()
