"""A file is marked ingested only when its rows are committed; an unexpected parse error quarantines the whole file
(named, one line, run partial) and is not retried; two runs at once over the same input stage it once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nodewatch.flows.ingest import transient
from nodewatch.tasks.core.runs import RunRecorder, load_manifest
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources


def _bad_parquet(path: Path) -> Path:
    """10 telemetry rows whose int64 epoch-second timestamps (1e18) overflow: Arrow raises ArrowInvalid."""
    n = 10
    pq.write_table(pa.table({"time": pa.array([10**18] * n, pa.int64()), "node": ["cn01"] * n,
                             "metric": ["power"] * n, "value": [100.0] * n}), path)
    return path


def _good_csv(path: Path) -> Path:
    path.write_text("time,node,metric,value\n" + "".join(f"2026-01-05T00:0{i}:00Z,cn01,power,{100 + i}\n" for i in range(5)))
    return path


def test_unexpected_parse_error_quarantines_the_file_and_never_marks_it(tmp_path):
    st = Store(str(tmp_path / "store"))
    bad, good = _bad_parquet(tmp_path / "bad.parquet"), _good_csv(tmp_path / "good.csv")
    rec = RunRecorder(st, "ingest", {})
    res = ingest_files(st, sources()["telemetry"], [bad, good], rec, data_docs=False)
    m = rec.finish()
    b, g = res.inputs
    assert b.status == "quarantined-file" and "\n" not in b.message
    assert str(bad) in b.message and "ArrowInvalid" in b.message
    assert b.counts.rows_in == 0 and g.counts.staged == 5
    assert m.status == "partial" and any("ArrowInvalid" in e for e in m.errors)
    q = st.read_json("quarantine", "files", "telemetry", f"{b.sha256}.json")
    assert "ArrowInvalid" in q["error"]
    # marked ingested: only the good file (its rows are committed); the bad one is tried again by a re-run
    assert st.was_ingested("telemetry", b.sha256) is None
    assert st.was_ingested("telemetry", g.sha256)["run_id"] == rec.run_id
    rec2 = RunRecorder(st, "ingest", {})
    res2 = ingest_files(st, sources()["telemetry"], [bad, good], rec2, data_docs=False)
    assert [i.status for i in res2.inputs] == ["quarantined-file", "skipped-duplicate-file"]
    assert rec2.finish().status == "partial"


def test_only_transient_io_errors_are_retried():
    assert transient(ConnectionError("reset")) and transient(TimeoutError()) and transient(OSError(5, "EIO"))
    assert not transient(ValueError("x")) and not transient(pa.ArrowInvalid("x")) and not transient(MemoryError())
    assert not transient(OSError("Couldn't deserialize thrift"))  # pyarrow's OSError on bad bytes (no errno)


def test_flow_quarantines_once_and_ends_partial(prefect_harness, tmp_path):
    """Through the Prefect flow: one record per file (no retry leaving 'same bytes twice in this run'), run partial."""
    from nodewatch.flows.ingest import ingest

    store = str(tmp_path / "store")
    bad = _bad_parquet(tmp_path / "bad.parquet")
    m = ingest(source="telemetry", paths=[str(bad)], store=store, data_docs=False)
    assert m["status"] == "partial"
    assert [i["status"] for i in m["inputs"]] == ["quarantined-file"]
    assert not any("same bytes" in (i.get("message") or "") for i in m["inputs"])
    m2 = ingest(source="telemetry", paths=[str(bad)], store=store, data_docs=False)
    assert [i["status"] for i in m2["inputs"]] == ["quarantined-file"]  # not skipped as already ingested


CHILD = """
import sys
from pathlib import Path
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
st = Store(sys.argv[1])
rec = RunRecorder(st, "ingest", {"source": "syslog"})
rec.write()
ingest_files(st, sources()["syslog"], [Path(sys.argv[2])], rec, data_docs=False)
rec.finish()
print(rec.run_id)
"""


@pytest.mark.slow
def test_two_runs_at_once_stage_the_rows_once(tmp_path):
    n = 30_000
    src = tmp_path / "day.log"
    src.write_text("".join(
        f"<30>1 2026-01-05T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z cn{i % 32:02d} sshd {i} - - line {i}\n"
        for i in range(n)))
    store = str(tmp_path / "store")
    env = {k: v for k, v in os.environ.items() if k != "NODEWATCH_FAULT_AT"}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, store, str(src)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    st = Store(store)
    assert st.read_staged("syslog").num_rows == n  # not 2n
    counts = [load_manifest(st, o[0].split()[-1]).counts["syslog"] for o in outs]
    assert sorted(c.staged for c in counts) == [0, n]
    assert sorted(c.duplicates for c in counts) == [0, n]
