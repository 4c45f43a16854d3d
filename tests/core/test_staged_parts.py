"""Bounded staged parts (issue 21): a run's date written as several ``part-<run_id>-<k>.parquet`` files, published
by the run's one commit object. Readers see all of a run's parts or none (a real SIGKILL between parts), every
reader (``staged_files``, ``read_staged``, the ingest's duplicate check, the manifest's counts) handles k parts, a
retry of the same run id shows only its new parts, and stores with one ``part-<run_id>.parquet`` still read."""

from __future__ import annotations

import signal

import pyarrow as pa
import pytest
from commit_helpers import INGEST, run_child, snapshot, syslog_file

from nodewatch.tasks.core.commit import StagedCommit, garbage, run_of_file
from nodewatch.tasks.core.runs import RunRecorder, load_manifest
from nodewatch.tasks.core.settings import SettingsError
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.staging import part_bounds

ROWS = "12"  # rows per part: each 42-row day of syslog_file becomes 4 parts


def _ingest(st: Store, src) -> str:
    rec = RunRecorder(st, "ingest", {"source": "syslog"})
    ingest_files(st, sources()["syslog"], [src], rec, data_docs=False)
    rec.finish()
    return rec.run_id


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The same input staged with the default bound (one ``part-<run>.parquet`` per date: the old layout)."""
    d = tmp_path_factory.mktemp("single")
    src = syslog_file(d / "in.log")
    st = Store(str(d / "store"))
    run = _ingest(st, src)
    return src, st, run


def test_names_and_bounds(monkeypatch):
    st = Store("memory://parts-names")
    assert st.staged_key("t", "2026-01-01", "r1") == "staged/t/date=2026-01-01/part-r1.parquet"
    assert st.staged_key("t", "2026-01-01", "r1", part=3) == "staged/t/date=2026-01-01/part-r1-00003.parquet"
    rid = "20261128T150000.123456Z-123456"  # a run id whose hash is all digits is not taken for a part number
    assert run_of_file(f"part-{rid}.parquet") == rid == run_of_file(f"part-{rid}-00012.parquet")
    assert run_of_file(".tmp-" + "a" * 32 + f"-part-{rid}-00001.parquet") == rid
    assert part_bounds() == (128 * 2**20, 1 << 62)
    monkeypatch.setenv("NODEWATCH_STAGED_PART_MB", "0.5")
    monkeypatch.setenv("NODEWATCH_STAGED_PART_ROWS", "7")
    assert part_bounds() == (2**19, 7)
    # a bad setting is a user error (SettingsError: one line, exit code 2) naming the variable
    for var, bad in [("NODEWATCH_STAGED_PART_ROWS", "0"), ("NODEWATCH_STAGED_PART_ROWS", "0.5"),
                     ("NODEWATCH_STAGED_PART_MB", "-1"), ("NODEWATCH_STAGED_PART_MB", "nan"),
                     ("NODEWATCH_STAGED_PART_MB", "inf"), ("NODEWATCH_STAGED_PART_MB", "abc")]:
        monkeypatch.setenv("NODEWATCH_STAGED_PART_MB", "0.5")
        monkeypatch.setenv("NODEWATCH_STAGED_PART_ROWS", "7")
        monkeypatch.setenv(var, bad)
        with pytest.raises(SettingsError, match=f"^{var}=.*(must be a positive number|not a number)$"):
            part_bounds()


def test_a_date_as_k_parts_reads_like_one_part(tmp_path, monkeypatch, single):
    src, ref_st, ref_run = single
    monkeypatch.setenv("NODEWATCH_STAGED_PART_ROWS", ROWS)
    st = Store(str(tmp_path / "store"))
    run = _ingest(st, src)
    files = st.staged_files("syslog", run_id=run)
    names = [f.rsplit("/", 1)[1] for f in files]
    days = st.staged_dates("syslog")
    assert days == ref_st.staged_dates("syslog") and len(days) == 3
    for d in days:  # 42 rows a day -> parts of 12, 12, 12, 6 rows, numbered in order
        day_names = [f.rsplit("/", 1)[1] for f in st.staged_files("syslog", [d], run_id=run)]
        assert day_names == [f"part-{run}-{k:05d}.parquet" for k in range(4)]
        rows = [st.read_parquet(f[len(st.root) + 1:]).num_rows for f in st.staged_files("syslog", [d])]
        assert rows == [12, 12, 12, 6]
    assert len(names) == 12 and all(run_of_file(n) == run for n in names)
    # the same rows, in the same order, as the single-part run
    assert st.read_staged("syslog").equals(ref_st.read_staged("syslog"))
    # the manifest: rows in = staged + quarantined + duplicates; the commit object counts the parts' rows
    c = load_manifest(st, run).counts["syslog"]
    ref = load_manifest(ref_st, ref_run).counts["syslog"]
    assert (c.staged, c.quarantined, c.duplicates) == (ref.staged, ref.quarantined, ref.duplicates) == (126, 2, 0)
    commit = st.read_json("staged", "_commits", f"{run}--syslog.json")
    assert commit["rows"]["staged/syslog"] == 126 and len([k for k in commit["add"] if k.startswith("staged/")]) == 12
    # the duplicate check reads every part: a second run over the same rows stages none of them
    run2 = _ingest(st, syslog_file(tmp_path / "again.log", bad=0))  # same lines, other bytes (no bad lines)
    c2 = load_manifest(st, run2).counts["syslog"]
    assert (c2.staged, c2.duplicates) == (0, 126) and st.staged_files("syslog", run_id=run2) == []


def test_writer_killed_between_parts_shows_nothing(tmp_path, monkeypatch, single):
    src, ref_st, _ = single
    monkeypatch.setenv("NODEWATCH_STAGED_PART_ROWS", ROWS)
    st = Store(str(tmp_path / "store"))
    r = run_child(INGEST, [st.url, str(src)], fault="stage:after-part:6")  # 2nd day, 2nd of its 4 parts
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    written = [f for f in st.iter_files("staged", "syslog") if "-0000" in f]
    assert len(written) == 6, written
    fresh = Store(st.url)
    assert fresh.read_staged("syslog") is None and fresh.staged_dates("syslog") == []
    assert len(garbage(fresh)) == 6
    r = run_child(INGEST, [st.url, str(src)])
    assert r.returncode == 0, r.stderr[-2000:]
    assert snapshot(Store(st.url), "syslog") == snapshot(ref_st, "syslog")


def test_retry_of_a_run_id_shows_only_its_new_parts_and_old_layout_reads(tmp_path):
    st = Store(str(tmp_path / "store"))
    st.write_parquet(pa.table({"x": [0]}), st.staged_key("t", "2026-01-01", "old"))  # the old one-part layout
    t = pa.table({"x": [1, 2]})
    dead = StagedCommit(st, "r1", "t")  # an attempt that dies after 3 parts, before its commit
    for k in range(3):
        dead.write_parquet(t, st.staged_key("t", "2026-01-01", "r1", part=k))
    retry = StagedCommit(Store(st.url), "r1", "t")  # the retry writes fewer parts under the same run id
    retry.write_parquet(pa.table({"x": [3]}), st.staged_key("t", "2026-01-01", "r1", part=0))
    retry.commit()
    fresh = Store(st.url)
    assert [f.rsplit("/", 1)[1] for f in fresh.staged_files("t")] == ["part-old.parquet", "part-r1-00000.parquet"]
    assert fresh.read_staged("t").column("x").to_pylist() == [0, 3]
    assert sorted(g.key.rsplit("/", 1)[1] for g in garbage(fresh)) == ["part-r1-00001.parquet", "part-r1-00002.parquet"]
    assert [f.rsplit("/", 1)[1] for f in fresh.staged_files("t", run_id="old")] == ["part-old.parquet"]


def test_the_byte_bound_closes_a_part_after_the_slice_that_reaches_it(tmp_path, monkeypatch, single):
    src, ref_st, _ = single
    import nodewatch.tasks.ingest.ingestor as ingestor

    monkeypatch.setattr(ingestor, "WRITE_ROWS", 5)  # slices of 5 rows (one row group each)
    monkeypatch.setenv("NODEWATCH_STAGED_PART_MB", str(1e-6))  # every slice takes a part past the bound
    st = Store(str(tmp_path / "store"))
    run = _ingest(st, src)
    rows = [st.read_parquet(f[len(st.root) + 1:]).num_rows for f in st.staged_files("syslog", ["2026-01-01"])]
    assert rows == [5] * 8 + [2]
    assert all(run_of_file(f.rsplit("/", 1)[1]) == run for f in st.staged_files("syslog"))
    assert st.read_staged("syslog").equals(ref_st.read_staged("syslog"))
