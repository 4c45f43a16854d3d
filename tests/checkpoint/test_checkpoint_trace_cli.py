"""Issue 16: sentinel jobs never stop a checkpoint table; ``--json`` and unwrapped output when piped.

The CLI tests run ``python -m nodewatch.flows.cli checkpoint ...`` as a subprocess with stdout piped (not a
terminal), as a user's shell pipe or script would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.tasks.checkpoint.compute import CkptCost, compute_table
from nodewatch.tasks.checkpoint.savings import trace_jobs
from nodewatch.tasks.checkpoint.tables import build_shapes, run_checkpoint_tables, usable_jobs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "jobs"
SENTINELS = FIXTURES / "KTH-SP2-1996-2.1-cln-sentinels.swf"  # 20 jobs, 2 with requested time 738,738,720 s
SENTINEL_S = 738_738_720


def _cli(*args: str, store: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80"}
    if store is not None:
        env["NODEWATCH_STORE"] = str(store)
    return subprocess.run(
        [sys.executable, "-m", "nodewatch.flows.cli", "checkpoint", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


# ------------------------------------------------------------------ sentinels
def test_trace_jobs_skips_sentinels_with_reason() -> None:
    raw = pd.DataFrame(
        {
            "step": [None, None, None, None, None, "batch"],
            "nodes": [4, 4, 2, 0, 8, 4],
            "elapsed_s": [3600, 3600, 1.0e9, 60, None, 100],
            "timelimit_s": [7200, SENTINEL_S, None, 60, None, 100],
        }
    )
    used, skipped = trace_jobs(raw)
    # the requested-time sentinel and the elapsed one (no request) are over a year; node count 0; no runtime
    assert skipped == {"runtime_over_one_year": 2, "bad_nodes": 1, "no_runtime": 1}
    assert used.to_dict("list") == {"nodes": [4], "runtime_h": [2.0]}
    used_e, skipped_e = trace_jobs(raw, runtime="elapsed")  # the requested sentinel does not matter here
    assert skipped_e == {"runtime_over_one_year": 1, "bad_nodes": 1, "no_runtime": 1}
    assert used_e["runtime_h"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="requested' or 'elapsed"):
        trace_jobs(raw, runtime="wall")


def test_trace_savings_cli_skips_sentinels_text_and_json() -> None:
    args = ("trace-savings", "--trace", str(SENTINELS), "--machine-nodes", "100", "--mtbf-machine", "2h", "--ckpt-cost", "6m")
    r = _cli(*args)
    assert r.returncode == 0, r.stdout + r.stderr  # at HEAD: exit 2, "runtime 2.05e+05 h is outside the supported range"
    assert "20 jobs read, 18 used" in r.stdout
    assert "skipped 2 job(s): runtime over one year" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    rj = _cli(*args, "--json")
    assert rj.returncode == 0, rj.stderr
    doc = json.loads(rj.stdout)  # stdout is exactly one JSON document
    assert doc["jobs_read"] == 20 and doc["jobs_used"] == 18
    assert doc["jobs_skipped"] == {"runtime_over_one_year": 2}
    assert "sentinel" in doc["skip_reasons"]["runtime_over_one_year"]
    assert len(doc["rows"]) == 1 and doc["rows"][0]["jobs"] >= 1


def test_trace_savings_staged_jobs_skip_sentinels(store, tmp_path: Path) -> None:
    """``--jobs staged`` reads the requested time too; a staged sentinel is skipped, not fatal."""
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    jobs = pd.DataFrame(
        {
            "system": "kth",
            "step": None,
            "start_time": [t0] * 4,
            "nodes": [8, 8, 16, 2],
            "elapsed_s": [36_000, 36_000, 30_000, 600],
            "timelimit_s": [40_000, SENTINEL_S, 36_000, 900],
        }
    )
    store.write_parquet(pa.Table.from_pandas(jobs, preserve_index=False), "staged", "jobs", "date=2024-01-01", "part-r1.parquet")
    r = _cli(
        "trace-savings", "--jobs", "staged", "--machine-nodes", "16", "--mtbf-machine", "2h", "--ckpt-cost", "6m", "--json",
        store=tmp_path / "store",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["jobs_skipped"] == {"runtime_over_one_year": 1} and doc["jobs_used"] == 3


def test_tables_skip_jobs_longer_than_a_year(store) -> None:
    """A staged job with an elapsed-time sentinel is left out of the shapes and counted in the manifest."""
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    jobs = pd.DataFrame(
        {"system": "s", "step": None, "start_time": [t0] * 3, "nodes": [4, 4, 64], "elapsed_s": [7200, 7200, SENTINEL_S]}
    )
    kept, skipped = usable_jobs(jobs)
    assert skipped == {"runtime_over_one_year": 1} and len(kept) == 2
    shapes, _ = build_shapes(jobs, grid=False)
    assert shapes["runtime_rep_h"].max() < 8766  # at HEAD the sentinel's bucket has a 205,205 h runtime
    compute_table(shapes, [CkptCost.fixed(0.1)], [FailureModel("p", 5 * 8766.0)])  # at HEAD: ValueError
    store.write_parquet(pa.Table.from_pandas(jobs, preserve_index=False), "staged", "jobs", "date=2024-01-01", "part-r1.parquet")
    m = run_checkpoint_tables(store, jobs="staged", failure_models=[FailureModel("p", 5 * 8766.0)], grid=False)
    assert m["status"] == "completed"
    assert m["notes"]["jobs_skipped"] == {"runtime_over_one_year": 1}
    c = m["counts"]["jobs"]
    assert (c["rows_in"], c["staged"], c["quarantined"]) == (3, 2, 1)


# ------------------------------------------------------------------ --json and no wrapping
def test_interval_json_and_unwrapped_text() -> None:
    args = ("interval", "--nodes", "128", "--hours", "24", "--ckpt-cost", "10m", "--mtbf-node", "5y", "--weibull-shape", "0.8")
    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 5  # one line per statement: nothing wrapped at 80 columns although COLUMNS=80
    assert lines[0].startswith("job: 128 nodes x 24 h") and lines[0].endswith("P(failure before the end) = 0.123")
    assert max(len(x) for x in lines) > 80
    rj = _cli(*args, "--json")
    assert rj.returncode == 0, rj.stderr
    doc = json.loads(rj.stdout)
    assert doc["job"]["job_mtbf_h"] == pytest.approx(5 * 8766 / 128)
    assert doc["aware"]["tau_h"] == pytest.approx(7.85, abs=1e-3) and doc["aware"]["checkpoints"] == 2
    assert doc["aware"]["expected_makespan_h"] == pytest.approx(24.461, abs=1e-3)
    assert doc["methods"]["daly"]["tau_h"] == pytest.approx(10.573, abs=1e-3)
    assert doc["methods"]["young"]["aware_saving_pct"] == pytest.approx(12.6, abs=0.05)
    never = _cli("interval", "--nodes", "2", "--hours", "2", "--ckpt-cost", "15m", "--mtbf-machine", "24h",
                 "--machine-nodes", "2", "--json")  # fmt: skip
    d2 = json.loads(never.stdout)
    assert d2["aware"]["never_checkpoint"] is True and d2["aware"]["tau_h"] is None  # not NaN/Infinity: strict JSON


def test_tables_and_show_json(tmp_path: Path) -> None:
    st = tmp_path / "store"
    r = _cli("tables", "--mtbf-node", "5y", "--weibull-shape", "0.8", "--ckpt-cost", "15m", "--no-prefect", "--json", store=st)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["status"] == "completed" and m["notes"]["intervals"] > 0
    s = _cli("show", "--json", store=st)
    assert s.returncode == 0, s.stderr
    doc = json.loads(s.stdout)
    assert doc["run_id"] == m["run_id"] and doc["current"] is True
    assert doc["summary"] == m["notes"]["summary"]
    assert doc["markdown"].startswith("#")
    text = _cli("show", store=st)
    assert text.returncode == 0 and text.stdout.strip() == doc["markdown"].strip()  # unwrapped, unchanged


def test_json_values_are_finite_or_null() -> None:
    from nodewatch.flows.cli._json import jsonable as _jsonable

    assert _jsonable({"a": np.float64("nan"), "b": [np.inf, np.int64(3)], "c": np.array([1.5])}) == {
        "a": None,
        "b": [None, 3],
        "c": [1.5],
    }
