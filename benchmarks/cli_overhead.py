"""Benchmark: wall time of small CLI commands: Prefect's temporary server, in-process, warm worker (issue 16).

Goal: <= 3 s overhead for a small ingest when no Prefect server is configured. Measures in one run,
each as a fresh ``python -m nodewatch.flows.launch`` process (what the ``nodewatch`` console script runs):

1. ``nodewatch --help``;
2. ``nodewatch ingest syslog <2,000-line file>`` on a fresh store, ``--prefect`` with no server
   configured (the old mode: Prefect starts its temporary server for the flow run), ``NODEWATCH_WARM=0``;
3. the same with no flag, ``NODEWATCH_WARM=0`` (the flow's steps without Prefect, in-process: pays the
   Great Expectations import and context, ~4 s);
4. the same handed to the warm worker (:mod:`nodewatch.flows.warm`, started by this script in a private
   runtime directory before the runs and stopped after them).

Runs 2, 3 and 4 alternate ``--repeat`` times (the machine is shared; the best run of each side counts).
For each ingest it prints the wall time, the time inside the run (manifest ``started``..``finished``:
settings, GX context, parse, validate, stage) and the manifest's step timings (parse_validate +
stage), and the overhead = wall - steps; then the import time of Great Expectations alone (paid
by the ingest's validator in both modes). Prints ``ratio=`` (old wall / new wall) and
``overhead_new=`` (seconds).

    nice .venv/bin/python benchmarks/cli_overhead.py [--lines 2000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

CLI = [sys.executable, "-m", "nodewatch.flows.launch"]
GX_IMPORT = "import time; t = time.perf_counter(); import great_expectations; print(time.perf_counter() - t)"


def write_log(path: Path, lines: int) -> None:
    """``lines`` RFC 5424 sshd lines over 50 nodes, 17 s apart."""
    t0 = datetime(2026, 1, 5, tzinfo=UTC)
    with path.open("w") as f:
        for i in range(lines):
            ts = (t0 + timedelta(seconds=17 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            f.write(f"<13>1 {ts} cn{i % 50 + 1:04d} sshd {100 + i % 9} - - Accepted publickey for u{i % 7} "
                    f"from 10.0.{i % 3}.{i % 200} port {1000 + i} ssh2\n")


def run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall seconds of one CLI process and its result."""
    t = time.perf_counter()
    p = subprocess.run(CLI + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    return time.perf_counter() - t, p


def ingest(mode: list[str], log: Path, env: dict[str, str], work: Path) -> dict[str, float]:
    """One ingest on a fresh store: wall, in-run and step seconds."""
    store = Path(tempfile.mkdtemp(prefix="store-", dir=work))
    wall, p = run(["--store", str(store), "ingest", "syslog", str(log), *mode], env, work)
    if p.returncode != 0 or "Traceback" in p.stdout + p.stderr:
        raise SystemExit(f"ingest {mode} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    (manifest,) = (json.loads(f.read_text()) for f in (store / "runs").glob("*.json"))
    t0, t1 = (datetime.fromisoformat(manifest[k].replace("Z", "+00:00")) for k in ("started", "finished"))
    steps = manifest["timings"].get("parse_validate", 0.0) + manifest["timings"].get("stage", 0.0)
    assert manifest["counts"]["syslog"]["staged"] > 0, manifest["counts"]
    return {"wall": wall, "in_run": (t1 - t0).total_seconds(), "steps": steps, "overhead": wall - steps}


def main() -> None:
    """Run the measurements and print them."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nodewatch-cli-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_HOME=str(work / "prefect-home"), PREFECT_LOGGING_LEVEL="WARNING", COLUMNS="120")
    log = work / "syslog-2000.log"
    write_log(log, a.lines)
    runtime = work / "run"
    runtime.mkdir(mode=0o700)
    cold_env = {**env, "NODEWATCH_WARM": "0"}
    warm_env = {**env, "NODEWATCH_WARM": "1", "XDG_RUNTIME_DIR": str(runtime)}
    help_wall, p = run(["--help"], cold_env, work)
    assert p.returncode == 0, p.stderr
    worker = subprocess.Popen([sys.executable, "-m", "nodewatch.flows.warm", "serve"], env=warm_env, cwd=work)
    t = time.perf_counter()
    while subprocess.run([sys.executable, "-m", "nodewatch.flows.warm", "status"], env=warm_env,
                         capture_output=True).returncode != 0:
        if time.perf_counter() - t > 120 or worker.poll() is not None:
            raise SystemExit("the warm worker did not start")
        time.sleep(0.5)
    print(f"warm worker ready after {time.perf_counter() - t:.1f} s (paid once per idle period)")
    modes = {"old (Prefect, temporary server)": (["--prefect"], cold_env),
             "cold (no server, in-process)": ([], cold_env),
             "warm (no server, warm worker)": ([], warm_env)}
    res: dict[str, list[dict[str, float]]] = {k: [] for k in modes}
    try:
        for i in range(a.repeat):
            for name, (flags, e) in modes.items():
                r = ingest(flags, log, e, work)
                res[name].append(r)
                print(f"repeat {i + 1} {name:32} wall {r['wall']:6.2f} s, in run {r['in_run']:5.2f} s, "
                      f"parse+validate+stage {r['steps']:5.2f} s, overhead {r['overhead']:6.2f} s")
    finally:
        subprocess.run([sys.executable, "-m", "nodewatch.flows.warm", "stop"], env=warm_env, capture_output=True)
        worker.wait(timeout=30)
    bo, bc, bw = (min(v, key=lambda r: r["wall"]) for v in res.values())
    gx = float(subprocess.run([sys.executable, "-c", GX_IMPORT], env=env, capture_output=True, text=True).stdout)
    print(f"nodewatch --help: {help_wall:.2f} s; import great_expectations alone (paid inside every in-process "
          f"ingest): {gx:.2f} s")
    print(f"ingest syslog {a.lines:,} lines, best of {a.repeat}: old {bo['wall']:.2f} s (overhead {bo['overhead']:.2f} s), "
          f"cold {bc['wall']:.2f} s (overhead {bc['overhead']:.2f} s), warm {bw['wall']:.2f} s "
          f"(overhead {bw['overhead']:.2f} s)")
    print(f"help={help_wall:.2f} old={bo['wall']:.2f} cold={bc['wall']:.2f} warm={bw['wall']:.2f} "
          f"overhead_cold={bc['overhead']:.2f} overhead_warm={bw['overhead']:.2f} "
          f"ratio_cold_warm={bc['wall'] / bw['wall']:.2f} ratio={bo['wall'] / bw['wall']:.2f}")


if __name__ == "__main__":
    main()
