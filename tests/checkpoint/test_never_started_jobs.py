"""Issue 24: analyses that need a runtime skip jobs that never started by rule, with a count.

At HEAD ``trace_jobs`` (trace-savings, default ``runtime="requested"``) *used* a job cancelled in the
queue whenever it had a requested time (10,742 such jobs in SDSC-BLUE), job shapes and the
checkpoint tables left such jobs out without a word.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa

from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.tasks.checkpoint.savings import SKIP_REASONS, trace_jobs
from nodewatch.tasks.checkpoint.shapes import format_shapes_table, job_shapes
from nodewatch.tasks.checkpoint.tables import run_checkpoint_tables, usable_jobs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bad_inputs"))
import make_jobs_corpus as corpus  # noqa: E402

T0 = pd.Timestamp("2024-01-01", tz="UTC")


def _jobs() -> pd.DataFrame:
    """Two jobs that ran (one without a known start), two that never started (one with a requested time), a step."""
    return pd.DataFrame(
        {
            "system": "s",
            "step": [None, None, None, None, "batch"],
            "start_time": [T0, pd.NaT, pd.NaT, pd.NaT, T0],
            "nodes": pd.array([4, 2, 8, None, 4], "Int32"),
            "elapsed_s": pd.array([7200, 3600, None, None, 7200], "Int64"),
            "timelimit_s": pd.array([10_800, 7200, 36_000, None, None], "Int64"),
        }
    )


def test_trace_jobs_skips_never_started_even_with_a_requested_time():
    used, skipped = trace_jobs(_jobs())
    assert skipped == {"never_started": 2}  # at HEAD: the 8-node job was used with its 10 h request
    assert used.to_dict("list") == {"nodes": [4, 2], "runtime_h": [3.0, 2.0]}
    used_e, skipped_e = trace_jobs(_jobs(), runtime="elapsed")
    assert skipped_e == {"never_started": 2} and len(used_e) == 2
    assert "never started" in SKIP_REASONS["never_started"]


def test_job_shapes_count_never_started_jobs_and_show_them():
    shapes = job_shapes(_jobs())
    assert int(shapes["jobs"].sum()) == 2
    assert shapes.attrs["skipped"] == {"never_started": 2}
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(format_shapes_table(shapes))
    assert "skipped 2 job(s): never started" in console.export_text()


def test_checkpoint_tables_skip_never_started_with_a_count(store):
    kept, skipped = usable_jobs(_jobs())
    assert skipped == {"never_started": 2} and len(kept) == 3  # the step row stays (job_shapes ignores steps)
    t = pa.Table.from_pandas(_jobs(), preserve_index=False)
    store.write_parquet(t, "staged", "jobs", "date=2024-01-01", "part-r1.parquet")
    m = run_checkpoint_tables(store, jobs="staged", failure_models=[FailureModel("p", 5 * 8766.0)], grid=False)
    assert m["status"] == "completed"
    assert m["notes"]["jobs_skipped"] == {"never_started": 2}
    c = m["counts"]["jobs"]
    assert (c["rows_in"], c["staged"], c["quarantined"]) == (5, 3, 2)


def test_trace_savings_cli_prints_the_never_started_count(tmp_path):
    """``checkpoint trace-savings --trace`` on a trace with never-started jobs names them."""
    long_job = "   20    600     10  36000    4    -1   -1    4  40000   -1  1  7  3  -1  1  1 -1 -1"
    trace = tmp_path / "queue.swf"
    trace.write_bytes(corpus._swf([*corpus.SWF_JOBS, *corpus.SWF_NEVER_STARTED, long_job]))
    env = {**os.environ, "COLUMNS": "80"}
    args = ["trace-savings", "--trace", str(trace), "--machine-nodes", "4", "--mtbf-machine", "2h",
            "--ckpt-cost", "1m"]  # fmt: skip
    cmd = [sys.executable, "-m", "nodewatch.flows.cli", "checkpoint", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    # jobs 4, 5, 6 and 8 (COMPLETED without run time: the parser gives it no start/elapsed, ingest quarantines it)
    assert "skipped 4 job(s): never started" in r.stdout, r.stdout
    rj = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=300, env=env)
    doc = json.loads(rj.stdout)
    assert doc["jobs_skipped"]["never_started"] == 4 and doc["jobs_read"] == 10
