"""Bad-input corpus of the replay's job sources: SWF traces and job-list CSVs (quarantined with reasons, counted)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from nodewatch.models.coalloc.engine import replay
from nodewatch.models.coalloc.interference import InterferenceModel, allowed_matrix
from nodewatch.tasks.coalloc.trace import load_csv, load_swf, load_trace
from nodewatch.tasks.ingest.inputs import InputError

HEADER = "; Version: 2.2\n; UnixStartTime: 946684800\n; MaxNodes: 4\n; MaxProcs: 32\n"


def swf_line(job: int, submit: int, wait: int, run: int, procs: int, req: int = 100, status: int = 1) -> str:
    return f"{job} {submit} {wait} {run} {procs} -1 -1 {procs} {req} -1 {status} 1 1 -1 1 -1 -1 -1\n"


def write_swf(path: Path, body: str) -> Path:
    path.write_text(HEADER + body)
    return path


def test_swf_bad_rows_are_quarantined_with_reasons_and_counted(tmp_path: Path) -> None:
    body = (
        swf_line(1, 0, 0, 50, 8)
        + swf_line(2, 10, 0, -5, 8)  # negative run time
        + swf_line(3, 20, 0, 30, 64)  # 8 nodes on a 4-node machine
        + "4 garbage line\n"  # parse reject
        + swf_line(5, 30, -1, -1, -1, status=5)  # never started: skipped by rule
        + swf_line(6, 40, 5, 20, 16, req=-1)  # no requested time: estimate = run time
        + swf_line(7, 50, 0, 10, 32, req=738738720)  # sentinel-like absurd request: kept, estimate huge
    )
    got = load_swf(write_swf(tmp_path / "t.swf", body), n_nodes=4, cores_per_node=8)
    c = got.counts
    assert c["rows_in"] == 7 and c["replayed"] == 3 and c["never_started"] == 1 and c["quarantined"] == 3
    reasons = sorted(got.quarantine["reason"])
    assert reasons[0] == "larger than the machine (> 4 nodes)" and reasons[1] == "negative run time"
    assert reasons[2].startswith("parse:")
    assert c["quarantined: negative run time"] == 1
    j = got.jobs
    assert j.submit.tolist() == [0, 40, 50] and j.work.tolist() == [50, 20, 10] and j.nodes.tolist() == [1, 2, 4]
    assert j.est.tolist() == [100, 20, 738738720]
    # the replay continues on what is left
    slow = InterferenceModel().fit().slowdown_matrix(j.app, j.ranks)
    s = replay(j.submit, j.work, j.est, j.nodes, j.app, slow, allowed_matrix("naive"), "backfill", 4, 8)
    assert np.isfinite(s.end).all()


def test_swf_compressed_truncated_and_garbage(tmp_path: Path) -> None:
    good = HEADER + "".join(swf_line(i, i, 0, 10, 8) for i in range(1, 200))
    gz = tmp_path / "t.swf.gz"
    gz.write_bytes(gzip.compress(good.encode()))
    assert load_swf(gz, 4).counts["replayed"] == 199
    cut = tmp_path / "cut.swf.gz"
    cut.write_bytes(gz.read_bytes()[:-30])
    with pytest.raises(InputError, match="truncated|unexpectedly"):
        load_swf(cut, 4)
    junk = tmp_path / "junk.swf"
    junk.write_bytes(b"\x00\xff\xfe binary \x01\x02\n" * 10)
    with pytest.raises(InputError):
        load_swf(junk, 4)
    empty = tmp_path / "empty.swf"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        load_swf(empty, 4)


def test_swf_symlink_is_refused(tmp_path: Path) -> None:
    real = write_swf(tmp_path / "real.swf", swf_line(1, 0, 0, 5, 8))
    link = tmp_path / "link.swf"
    link.symlink_to(real)
    with pytest.raises(Exception, match="link|symbolic|regular"):
        load_swf(link, 4)


CSV = "submit_s,app,ranks,runtime_s,estimate_s,job_id\n"


def test_csv_corpus(tmp_path: Path) -> None:
    rows = [
        "0,gtc,512,100,,a",
        "1,AMG,1024,50,80,b",  # case-insensitive class
        "2,hpl,512,10,,c",  # unknown class
        "3,milc,512,-4,,d",  # negative run time
        "4,ghost,100000,10,,e",  # larger than the machine
        "5,snap,abc,10,,f",  # not a number
        "6,snap,512,10,,b",  # duplicate id
        "7,snap,-1,10,,g",  # sentinel processor count
        "8,snap,512,inf,,h",  # not finite
        "9,gtc,512,10,xx,i",  # bad estimate
        "10,gtc,512,10",  # truncated row: missing trailing fields are empty
        "11,\x1b[31mred,512,10,,\x1b[2Jevil|`x`",  # hostile class and id: unknown class, kept as text
    ]
    p = tmp_path / "jobs.csv"
    p.write_text(CSV + "\n".join(rows) + "\n")
    got = load_csv(p, n_nodes=64, cores_per_node=32)
    c = got.counts
    assert c["rows_in"] == 12 and c["replayed"] == 3 and c["quarantined"] == 9
    by = dict(zip(got.quarantine["source_offset"], got.quarantine["reason"], strict=True))
    assert by[4] == "unknown application class" and by[5] == "negative run time"
    assert by[6] == "larger than the machine (> 64 nodes)" and by[7].startswith("parse: ranks")
    assert by[8] == "duplicate job id" and by[9] == "no processor count" and by[10].startswith("parse: runtime_s")
    assert by[11].startswith("parse: estimate_s") and by[13] == "unknown application class"
    assert got.jobs.app.tolist() == [0, 1, 0] and got.jobs.nodes.tolist() == [16, 32, 16]
    assert got.jobs.est.tolist() == [100, 80, 10]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "empty"),
        (b"submit_s,app,ranks\n0,gtc,512\n", "missing column"),
        ("submit_s,app,ranks,runtime_s\n0,gtc,512,10\n".encode("utf-16"), "not UTF-8"),
        (b"submit_s,app,submit_s,ranks,runtime_s\n0,gtc,0,512,10\n", "repeated column"),
        (b"\x00\x01\x02garbage", "missing column|not UTF-8|not a job-list"),
    ],
)
def test_csv_unusable_files_are_one_line_errors(tmp_path: Path, content: bytes, match: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_bytes(content)
    with pytest.raises(InputError, match=match):
        load_trace(p, 8, 32)


def test_all_quarantined_csv_still_loads(tmp_path: Path) -> None:
    p = tmp_path / "j.csv"
    p.write_text(CSV + "0,nope,512,1,,x\n")
    got = load_csv(p, 8)
    assert len(got.jobs) == 0 and got.counts["quarantined"] == 1


def test_csv_row_with_too_many_fields_is_quarantined(tmp_path: Path) -> None:
    p = tmp_path / "j.csv"
    p.write_text("submit_s,app,ranks,runtime_s\n0,gtc,512,10\n1,gtc,512,10,1,2,3\n\n2,amg,512,5\n")
    got = load_csv(p, 64)
    assert got.counts["replayed"] == 2 and got.quarantine["reason"].tolist() == ["parse: expected 4 fields, found 7"]
    assert got.quarantine["source_offset"].tolist() == [3]


def test_csv_compressed_and_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nodewatch.tasks.coalloc.trace as tr

    p = tmp_path / "j.csv.gz"
    p.write_bytes(gzip.compress((CSV + "0,gtc,512,10,,a\n1,amg,512,5,,b\n").encode()))
    assert load_trace(p, 64, 32).counts["replayed"] == 2
    monkeypatch.setattr(tr, "MAX_CSV_BYTES", 40)
    with pytest.raises(InputError, match="larger than"):
        load_trace(p, 8, 32)


def test_staged_rows_without_run_time_are_quarantined() -> None:
    import pandas as pd

    from nodewatch.tasks.coalloc.trace import _from_jobs_table

    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    t = pd.DataFrame({
        "job_id": ["1", "2", "3"], "submit_time": [t0, t0, t0], "start_time": [t0, t0, pd.NaT],
        "elapsed_s": pd.array([10, None, None], dtype="Int64"), "timelimit_s": pd.array([20, 20, 20], dtype="Int64"),
        "nodes": pd.array([1, 1, 1], dtype="Int32"), "cores": pd.array([8, 8, 8], dtype="Int32"),
        "source_offset": [1, 2, 3],
    })
    got = _from_jobs_table(t, pd.DataFrame({"source_offset": [], "reason": []}), 4, 8, "x")
    assert got.counts == {"rows_in": 3, "replayed": 1, "quarantined": 1, "never_started": 1,
                          "quarantined: no run time (started, but the trace does not say for how long)": 1}
