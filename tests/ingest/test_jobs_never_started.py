"""Issue 24, "Records that are not errors": jobs that never started are staged, not quarantined.

A job cancelled (or failed) in the queue is a valid record: SWF lines with run time -1 (or run time 0
and no allocated processors) and sacct rows with ``Start=Unknown`` are staged with their state, no
start and no elapsed time (``nodewatch.schemas.jobs.never_started``). The quarantine keeps meaning
bad data: a COMPLETED job without a run time, or a job that ran on an unknown number of nodes.
At HEAD before the change the SWF line ``... 74 -1 -1 ... 5 ...`` was staged with a start time
(submit + wait) and LLNL-Thunder's 1,058 queue-cancelled/failed jobs were quarantined
(``expect_column_values_to_not_be_null(nodes)``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from nodewatch.schemas.jobs import NODES_NULL_LABEL, NOT_STARTED_STATE_LABEL, never_started
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.states.classify import job_layers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bad_inputs"))
import make_jobs_corpus as corpus  # noqa: E402


def _ingest(store, files, fmt="auto"):
    rec = RunRecorder(store, "test", {})
    res = ingest_files(store, sources()["jobs"], files, rec, fmt=fmt, data_docs=False)
    return rec.finish(), res


def _quarantined(store, res) -> pa.Table | None:
    tabs = [store.read_parquet(p.split(store.root + "/", 1)[1]) for p in res.quarantine_files]
    return pa.concat_tables(tabs) if tabs else None


def test_swf_never_started_jobs_are_staged_with_state_and_counted(store, tmp_path):
    f = tmp_path / "queue.swf"
    f.write_bytes(corpus._swf(corpus.SWF_NEVER_STARTED))
    manifest, res = _ingest(store, [f], fmt="swf")
    c = res.inputs[0].counts
    assert (c.rows_in, c.staged, c.quarantined, c.duplicates) == (6, 4, 2, 0)
    assert manifest.counts["jobs"].balanced
    staged = store.read_staged("jobs").sort_by("job_id")
    ns = never_started(staged)
    assert int(ns.sum()) == 3  # jobs 4, 5, 6; job 7 ran (wait unknown, run time 100 s)
    by_job = {r["job_id"]: r for r in staged.to_pylist()}
    assert by_job["4"]["state"] == "CANCELLED" and by_job["4"]["start_time"] is None  # was submit + 74 s at HEAD
    assert by_job["4"]["elapsed_s"] is None and by_job["4"]["end_time"] is None and by_job["4"]["nodes"] == 2
    assert by_job["5"]["state"] == "FAILED" and by_job["5"]["nodes"] is None  # was quarantined at HEAD
    assert by_job["6"]["state"] == "UNKNOWN" and by_job["6"]["elapsed_s"] is None
    assert by_job["7"]["start_time"] is None and by_job["7"]["elapsed_s"] == 100
    q = _quarantined(store, res)
    reasons = dict(zip(q["source_offset"].to_pylist(), q["reason"].to_pylist(), strict=True))
    assert reasons == {13: NOT_STARTED_STATE_LABEL, 14: NODES_NULL_LABEL}  # bad data stays quarantined


def test_sacct_pending_then_cancelled_follows_the_same_rule(store, tmp_path):
    rows = [
        corpus.sacct_row(job="200", nnodes="1", nodelist="None assigned", state="CANCELLED by 4242", start="Unknown",
                         end="2024-03-01T10:30:00", elapsed="00:00:00"),
        corpus.sacct_row(job="201", nnodes="0", nodelist="None assigned", state="PENDING", start="Unknown",
                         end="Unknown", elapsed="00:00:00"),
        corpus.sacct_row(job="202"),
    ]  # fmt: skip
    f = tmp_path / "dump.log"
    f.write_bytes(corpus._sacct(rows))
    _, res = _ingest(store, [f], fmt="sacct")
    c = res.inputs[0].counts
    assert (c.rows_in, c.staged, c.quarantined) == (3, 3, 0)  # the PENDING row with NNodes 0 was quarantined at HEAD
    staged = store.read_staged("jobs").sort_by("job_id")
    assert never_started(staged).tolist() == [True, True, False]
    assert staged["state"].to_pylist() == ["CANCELLED", "PENDING", "COMPLETED"]
    assert staged["elapsed_s"].to_pylist() == [None, None, 3600]  # "00:00:00" of a job that never ran is no run time
    assert staged["nodes"].to_pylist() == [1, None, 2]


def test_a_never_started_job_occupies_no_node(store):
    """The states build's job layer gives a never-started job no JOB_RUNNING interval and counts it."""
    rows = [
        corpus.sacct_row(job="300", nnodes="1", nodelist="n01", state="CANCELLED by 1", start="Unknown",
                         end="2024-03-01T10:30:00", elapsed="00:00:00"),
        corpus.sacct_row(job="301", nodelist="n02"),
    ]  # fmt: skip
    import io

    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.jobs_sacct import parse_sacct

    parsed = pa.concat_tables(r.rows for r in parse_sacct(io.BytesIO(corpus._sacct(rows)), ParseContext(name="d.log")))
    assert never_started(parsed).tolist() == [True, False]
    (ni, s, e, row), labels, counts = job_layers(parsed, pa.array(["n01", "n02"]), t_end=0)
    assert counts["jobs_never_started"] == 1
    assert labels.to_pylist() == ["job 301"] and set(ni.tolist()) == {1}  # only n02 is busy


def test_never_started_mask_on_arrow_and_pandas():
    t = pa.table(
        {
            "start_time": pa.array([None, None, 1, 1], pa.timestamp("ns", tz="UTC")),
            "elapsed_s": pa.array([None, 5, None, 5], pa.int64()),
        }
    )
    assert never_started(t).tolist() == [True, False, False, False]
    assert never_started(t.to_pandas()).tolist() == [True, False, False, False]
    assert never_started(pa.table({"nodes": [1, 2]})).tolist() == [False, False]


# ------------------------------------------------------------------ real traces
# never-started jobs per trace (rule of jobs_swf: run time -1, or 0 with no allocated processors), and the
# lines that stay quarantined (LLNL-Thunder: 1,190 placeholder lines with no submit time at all)
REAL = {
    "LLNL-Thunder-2007-1.1-cln.swf.gz": {"never_started": 1_058, "quarantined": 1_190, "rows_in": 121_039},
    "SDSC-BLUE-2000-4.2-cln.swf.gz": {"never_started": 10_744, "quarantined": 0, "rows_in": 243_306},
    "KTH-SP2-1996-2.1-cln.swf.gz": {"never_started": 0, "quarantined": 0, "rows_in": 27_992},
    "HPC2N-2002-2.1-cln.swf.gz": {"never_started": 0, "quarantined": 0, "rows_in": 202_876},
}


@pytest.mark.parametrize(
    "name",
    [
        "LLNL-Thunder-2007-1.1-cln.swf.gz",
        pytest.param("SDSC-BLUE-2000-4.2-cln.swf.gz", marks=pytest.mark.slow),
    ],
)
def test_real_trace_balances_with_never_started_jobs_staged(store, name):
    path = Path(__file__).resolve().parents[3] / "shared" / "data" / "swf" / name
    if not path.is_file():
        pytest.skip(f"{path} not available (../shared/data is optional)")
    exp = REAL[name]
    _, res = _ingest(store, [path], fmt="swf")
    c = res.inputs[0].counts
    assert c.rows_in == exp["rows_in"]
    assert c.rows_in == c.staged + c.quarantined + c.duplicates
    assert c.quarantined == exp["quarantined"]
    staged = store.read_staged("jobs", columns=["start_time", "elapsed_s", "state", "nodes"])
    ns = never_started(staged)
    assert int(ns.sum()) == exp["never_started"]
    states = set(pc.filter(staged["state"], pa.array(ns)).to_pylist())
    assert states <= {"CANCELLED", "FAILED", "UNKNOWN"}
    print(f"{name}: {int(ns.sum()):,} never-started jobs staged, {c.quarantined:,} rows quarantined")
    q = _quarantined(store, res)
    if q is not None:  # what stays quarantined is bad data: no submit time
        assert all("not_be_null(submit_time)" in r for r in q["reason"].to_pylist())
    assert np.all(np.asarray(pc.is_valid(staged["nodes"])) | ns)  # only never-started jobs lack nodes
