"""Commit protocol at the store level: stores from before the protocol, a full disk (tiny tmpfs), a truncated
part found by ``nodewatch store verify`` and re-staged by ``nodewatch store repair``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from commit_helpers import snapshot, syslog_file

from nodewatch.tasks.core.commit import PROTOCOL_MARKER
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import StagedPartError, Store
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources


def _ingest(st: Store, src: Path) -> RunRecorder:
    rec = RunRecorder(st, "ingest", {"source": "syslog"})
    rec.write()
    ingest_files(st, sources()["syslog"], [src], rec, data_docs=False)
    rec.finish()
    return rec


def test_store_from_before_the_protocol_stays_readable_and_ignores_tmp(tmp_path):
    root = tmp_path / "old"
    d = root / "staged" / "jobs" / "date=2026-01-01"
    d.mkdir(parents=True)
    pq.write_table(pa.table({"job_id": [1, 2], "x": ["a", "b"]}), d / "part-r1.parquet")
    (d / ".tmp-r2.parquet").write_bytes(b"PAR1 truncated by a full disk")  # read as a part before the protocol
    st = Store(str(root))
    assert st.read_staged("jobs").num_rows == 2
    assert st.staged_dates("jobs") == ["2026-01-01"]
    assert st.exists(PROTOCOL_MARKER)
    # a part written later by a run that never committed it is not legacy: invisible
    pq.write_table(pa.table({"job_id": [3], "x": ["c"]}), d / "part-r3.parquet")
    assert Store(str(root)).read_staged("jobs").num_rows == 2


def test_re_ingest_next_to_a_truncated_tmp_file_works(tmp_path):
    st = Store(str(tmp_path / "store"))
    src = syslog_file(tmp_path / "in.log")
    d = Path(st.path("staged", "syslog", "date=2026-01-01"))
    d.mkdir(parents=True)
    (d / ".tmp-20260101T000000.000000Z-dead00.parquet").write_bytes(b"PAR1\x00\x00")
    _ingest(st, src)
    assert st.read_staged("syslog").num_rows == 3 * 42


@pytest.fixture
def tiny_fs(tmpfs):
    """A 4 MiB tmpfs (conftest ``tmpfs``)."""
    return tmpfs("4m")


def test_full_disk_mid_staging_shows_nothing_and_the_rerun_is_complete(tmp_path, tiny_fs, fill_disk):
    src = syslog_file(tmp_path / "in.log", days=3, per_day=4000)
    ref = Store(str(tmp_path / "ref"))
    _ingest(ref, src)
    st = Store(str(tiny_fs / "store"))
    st.land_raw("syslog", src)  # the input fits; then fill the disk so that the staged parts do not
    filler = fill_disk(tiny_fs)
    free = shutil.disk_usage(tiny_fs).free
    assert free < 65536
    # free a little room: the manifest, the protocol marker and the first part fit, the second part does not
    part = max(Path(p).stat().st_size for p in ref.staged_files("syslog"))
    with open(filler, "r+b") as f:
        f.truncate(filler.stat().st_size - (12 * 1024 + part * 3 // 2))
    rec = RunRecorder(st, "ingest", {"source": "syslog"})
    rec.write()
    with pytest.raises(OSError):
        ingest_files(st, sources()["syslog"], [src], rec, data_docs=False)
    assert [f for f in st.iter_files("staged", "syslog") if rec.run_id in f]  # it failed mid-staging, parts written
    assert Store(st.url).read_staged("syslog") is None  # nothing of the failed run is visible
    filler.unlink()
    rec.finish("failed")
    _ingest(st, src)
    assert snapshot(Store(st.url), "syslog") == snapshot(ref, "syslog")
    assert not [f for f in Store(st.url).iter_files("staged", "syslog") if rec.run_id in f]  # its parts were removed


def test_truncated_part_is_named_listed_and_restaged(prefect_harness, tmp_path):
    from typer.testing import CliRunner

    from nodewatch.flows.cli import app

    src = syslog_file(tmp_path / "in.log")
    ref = Store(str(tmp_path / "ref"))
    _ingest(ref, src)
    st = Store(str(tmp_path / "store"))
    _ingest(st, src)
    part = st.staged_files("syslog", ["2026-01-02"])[0]
    data = Path(part).read_bytes()
    Path(part).write_bytes(data[: len(data) // 2])
    with pytest.raises(StagedPartError, match="2026-01-02"):
        Store(st.url).read_staged("syslog")
    runner = CliRunner()
    r = runner.invoke(app, ["--store", st.url, "store", "verify"])
    assert r.exit_code == 1 and "damaged" in r.output and "date=2026-01-02" in r.output
    r = runner.invoke(app, ["--store", st.url, "store", "repair"])
    assert r.exit_code == 0, r.output
    assert snapshot(Store(st.url), "syslog", drop=("source_offset",)) == snapshot(ref, "syslog", drop=("source_offset",))
    r = runner.invoke(app, ["--store", st.url, "store", "verify"])
    assert r.exit_code == 0, r.output
