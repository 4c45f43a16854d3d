"""Pipeline-level outcomes of the job bad-input corpus: every file ends as staged, quarantined or
duplicate rows (counts balance) or as a quarantined file with a one-line error; nothing is lost."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import discovery_errors, sources

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bad_inputs"))
import make_jobs_corpus as corpus  # noqa: E402


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """A copy of the generated corpus (tests/test_jobs_parsers.py checks it equals the script's output)."""
    d = tmp_path_factory.mktemp("jobs_corpus")
    for f in corpus.OUT_DIR.iterdir():
        shutil.copy(f, d / f.name)
    return d


def _ingest(store, files, fmt="auto"):
    rec = RunRecorder(store, "test", {})
    res = ingest_files(store, sources()["jobs"], files, rec, fmt=fmt, data_docs=False)
    return rec.finish(), res


def _reasons_by_line(store, res) -> dict[int, str]:
    """Quarantined rows of the run: source line -> reason (one input file per run)."""
    tabs = [store.read_parquet(p.split(store.root + "/", 1)[1]) for p in res.quarantine_files]
    rows = pa.concat_tables(tabs).select(["source_offset", "reason"]).to_pylist() if tabs else []
    out = {r["source_offset"]: r["reason"] for r in rows}
    assert len(out) == len(rows), rows
    return out


def test_no_source_module_is_broken():
    assert discovery_errors() == {}
    assert "jobs" in sources()


@pytest.mark.parametrize("name", sorted(corpus.EXPECTED))
def test_corpus_file_outcome(store, corpus_dir, name):
    """With the format given explicitly the parser's own error/reasons reach the manifest."""
    exp = corpus.EXPECTED[name]
    manifest, res = _ingest(store, [corpus_dir / name], fmt=name.split("_")[0])
    rec = res.inputs[0]
    c = rec.counts
    assert c.rows_in == c.staged + c.quarantined + c.duplicates, c
    assert manifest.counts["jobs"].balanced
    if exp.error:
        assert rec.status == "quarantined-file"
        assert exp.error.split(", line")[0] in rec.message
        assert "\n" not in rec.message and "Traceback" not in rec.message
        assert store.exists("quarantine", "files", "jobs", f"{rec.sha256}.json")
        return
    assert rec.status == "ingested"
    assert c.rows_in == exp.rows + len(exp.rejects)
    # every quarantined row, by line: the parser's rejects and the GX suite's failures, exact reasons
    assert _reasons_by_line(store, res) == exp.rejects | exp.quarantined
    assert c.quarantined == len(exp.rejects) + len(exp.quarantined)
    assert c.duplicates == exp.duplicates
    assert c.staged == exp.rows - len(exp.quarantined) - exp.duplicates


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("swf_garbage.swf", "cannot tell the format of this jobs file"),
        ("sacct_wrong_delimiter.log", "cannot tell the format of this jobs file"),
        ("swf_empty.swf", "empty or unreadable file"),
    ],
)
def test_auto_detection_refuses_unknown_files(store, corpus_dir, name, message):
    _, res = _ingest(store, [corpus_dir / name])
    msg = res.inputs[0].message
    assert res.inputs[0].status == "quarantined-file" and message in msg
    assert "--format swf|sacct" in msg or "empty" in message
    assert msg.startswith(f"{corpus_dir / name}:1: ") and "\n" not in msg  # one line naming file and line


def test_failed_file_is_retried_with_another_format_not_with_the_same(store, corpus_dir):
    """A file that failed auto-detection is skipped when re-sent with the same choice, but the retry
    the error message suggests (``--format ...``) really parses it."""
    f = corpus_dir / "sacct_wrong_delimiter.log"
    _, first = _ingest(store, [f])
    assert first.inputs[0].status == "quarantined-file"
    _, again = _ingest(store, [f])
    assert again.inputs[0].status == "skipped-duplicate-file" and "pass another --format" in again.inputs[0].message
    _, retry = _ingest(store, [f], fmt="sacct")
    rec = retry.inputs[0]
    assert rec.status != "skipped-duplicate-file" and rec.format == "sacct"
    assert rec.counts.rows_in == rec.counts.staged + rec.counts.quarantined + rec.counts.duplicates
    _, ok = _ingest(store, [corpus_dir / "swf_crlf.swf"])
    _, ok2 = _ingest(store, [corpus_dir / "swf_crlf.swf"], fmt="swf")
    assert ok.inputs[0].status == "ingested" and ok2.inputs[0].status == "skipped-duplicate-file"


def test_truncated_gzip_keeps_rows_read_before_the_break(store, corpus_dir):
    _, res = _ingest(store, [corpus_dir / "sacct_truncated.log.gz"])
    rec = res.inputs[0]
    assert rec.status == "quarantined-file" and rec.counts.staged > 900


def test_duplicate_file_adds_nothing(store, corpus_dir):
    f = corpus_dir / "swf_crlf.swf"
    copy = corpus_dir.parent / "copy-of-crlf.swf"
    shutil.copy(f, copy)
    _, first = _ingest(store, [f])
    _, second = _ingest(store, [copy, f])
    assert first.counts.staged == 3
    assert [i.status for i in second.inputs] == ["skipped-duplicate-file", "skipped-duplicate-file"]
    assert store.read_staged("jobs").num_rows == 3


def test_real_samples_ingest_and_reingest_is_noop(store, shared_data):
    files = sorted((shared_data / "sacct").glob("*.log")) + [shared_data / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"]
    m1, r1 = _ingest(store, files)
    assert all(i.status == "ingested" for i in r1.inputs)
    assert r1.counts.staged >= 27_992
    n = store.read_staged("jobs").num_rows
    m2, r2 = _ingest(store, files)
    assert r2.counts.rows_in == 0 and store.read_staged("jobs").num_rows == n
