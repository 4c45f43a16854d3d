"""Benchmark: the co-allocation replay engine, numba-compiled vs the same event loop in the Python interpreter.

Goals (issue 20): replay of SDSC-BLUE (243k jobs) with three policies in <= 60 s on 2 cores; ``ratio=``
of the compiled event loop against a per-event Python loop on a 20k-job slice, both giving identical
schedules.

* Baseline (``ratio=``): :func:`nodewatch.models.coalloc.reference.replay_reference`, a straightforward
  per-event Python loop written separately from the kernel (objects per job and node group, linear scans,
  no heap). The schedules must be identical: start, end, core seconds and paired seconds of every job
  are compared with ``np.array_equal``; the benchmark exits with an error otherwise.
* Also shown: the kernel itself run by CPython (``compiled=False``), i.e. what numba buys.
* Slice: the first ``--slice`` replayable jobs of the trace (submit order), machine of the trace
  (SDSC-BLUE: 144 nodes), EASY backfill, policies exclusive / naive / no_twins.
* Full trace: load (SWF parser + class rule) and the three policies under EASY backfill and First-fit,
  with the numba cache warm; the cold compile (empty ``NUMBA_CACHE_DIR``) is measured in a subprocess.

Wall-clock and CPU seconds are printed: on the shared 2-core machine wall time includes waiting.

    nice .venv/bin/python benchmarks/coalloc_replay.py [--trace PATH] [--nodes 144] [--slice 20000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nodewatch.models.coalloc.engine import replay  # noqa: E402
from nodewatch.models.coalloc.interference import InterferenceModel, allowed_matrix  # noqa: E402
from nodewatch.models.coalloc.reference import replay_reference  # noqa: E402
from nodewatch.models.coalloc.workload import Jobs  # noqa: E402
from nodewatch.tasks.coalloc.trace import load_swf  # noqa: E402

SDSC = REPO.parent / "shared" / "data" / "swf" / "SDSC-BLUE-2000-4.2-cln.swf.gz"
POLICIES = ("exclusive", "naive", "no_twins")


def _slice(j: Jobs, n: int) -> Jobs:
    return Jobs(j.submit[:n], j.work[:n], j.est[:n], j.nodes[:n], j.ranks[:n], j.app[:n])


def _timed(fn):  # noqa: ANN001, ANN202
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def cold_compile_seconds() -> float:
    """Compile the kernel in a fresh process with an empty numba cache; returns its wall seconds."""
    code = ("import time,numpy as np;from nodewatch.models.coalloc.engine import replay;t=time.perf_counter();"
            "replay(np.zeros(1),np.ones(1),np.ones(1),np.ones(1,int),np.zeros(1,int),np.ones((1,5)),"
            "np.ones((5,5),bool),'backfill',1,1);print(time.perf_counter()-t)")
    with tempfile.TemporaryDirectory(prefix="nw-coalloc-numba-") as d:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                             env={**os.environ, "NUMBA_CACHE_DIR": d}, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run the benchmark and print the figures and ``ratio=``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=SDSC)
    ap.add_argument("--nodes", type=int, default=144)
    ap.add_argument("--cores-per-node", type=int, default=8)
    ap.add_argument("--slice", type=int, default=20_000)
    ap.add_argument("--skip-cold", action="store_true", help="do not measure the cold numba compile")
    a = ap.parse_args()
    if not a.trace.exists():
        sys.exit(f"{a.trace} not found: this benchmark needs the real SWF trace (see ../shared/data/PROVENANCE.md)")
    print(f"load average at start: {os.getloadavg()}")
    loaded, w_load, c_load = _timed(lambda: load_swf(a.trace, a.nodes, a.cores_per_node))
    j = loaded.jobs
    print(f"trace {a.trace.name}: {loaded.counts}; load {w_load:.2f} s wall / {c_load:.2f} s CPU")
    model = InterferenceModel().fit()
    slow = model.slowdown_matrix(j.app, j.ranks)
    replay(j.submit[:10], j.work[:10], j.est[:10], j.nodes[:10], j.app[:10], slow[:10], allowed_matrix("naive"),
           "backfill", a.nodes, a.cores_per_node)  # load the cached compiled kernel (or compile it once)

    # ---- 20k slice: compiled vs interpreted, identical schedules
    s = _slice(j, a.slice)
    ss = slow[: a.slice]
    tot_c = tot_r = tot_p = 0.0
    for pol in POLICIES:
        args = (s.submit, s.work, s.est, s.nodes, s.app, ss, allowed_matrix(pol), "backfill", a.nodes, a.cores_per_node)
        fast, w_fast, _ = _timed(lambda args=args: replay(*args))
        ref, w_ref, _ = _timed(lambda args=args: replay_reference(*args))
        interp, w_int, _ = _timed(lambda args=args: replay(*args, compiled=False))
        same = all(np.array_equal(x, y, equal_nan=True) for x, y in
                   zip((fast.start, fast.end, fast.core_s, fast.shared_s), ref, strict=True))
        same_i = all(np.array_equal(x, y, equal_nan=True) for x, y in
                     ((fast.start, interp.start), (fast.end, interp.end), (fast.core_s, interp.core_s)))
        if not (same and same_i):
            sys.exit(f"schedules differ for {pol}: the benchmark is invalid")
        tot_c += w_fast
        tot_r += w_ref
        tot_p += w_int
        print(f"slice {len(s):,} jobs backfill {pol:9s}: compiled {w_fast:.3f} s, reference loop {w_ref:.2f} s, "
              f"kernel interpreted {w_int:.2f} s, identical schedules: {same and same_i}")
    print(f"compiled vs kernel interpreted: {tot_p / tot_c:.1f}x")

    # ---- full trace, three policies, both algorithms
    full_w = {}
    for alg in ("backfill", "firstfit"):
        w0 = time.perf_counter()
        for pol in POLICIES:
            replay(j.submit, j.work, j.est, j.nodes, j.app, slow, allowed_matrix(pol), alg, a.nodes, a.cores_per_node)
        full_w[alg] = time.perf_counter() - w0
        print(f"full trace {len(j):,} jobs, {alg}, 3 policies: {full_w[alg]:.2f} s wall "
              f"(+ load {w_load:.2f} s = {full_w[alg] + w_load:.2f} s; goal <= 60 s)")
    if not a.skip_cold:
        print(f"cold numba compile (empty cache, fresh process): {cold_compile_seconds():.1f} s wall")
    print(f"load average at end: {os.getloadavg()}")
    print(f"ratio={tot_r / tot_c:.1f}")


if __name__ == "__main__":
    main()
