import json

import pyarrow as pa

from nodewatch.schemas.manifest import RowCounts
from nodewatch.tasks.core.runs import RunRecorder, load_manifest, new_run_id
from nodewatch.tasks.core.store import Store


def test_land_raw_is_content_addressed(tmp_path):
    s = Store(str(tmp_path / "st"))
    f = tmp_path / "a.swf"
    f.write_bytes(b"hello\n")
    g = tmp_path / "copy.swf"
    g.write_bytes(b"hello\n")
    a = s.land_raw("jobs", f)
    b = s.land_raw("jobs", g)
    assert a.new and not b.new and a.sha256 == b.sha256 and a.key == b.key
    assert len(list(s.iter_files("raw"))) == 1


def test_current_pointer_and_manifest(tmp_path):
    s = Store(str(tmp_path / "st"))
    rec = RunRecorder(s, "ingest_jobs", {"x": 1})
    rec.add_counts("jobs", RowCounts(rows_in=5, staged=3, quarantined=1, duplicates=1))
    m = rec.finish()
    assert m.status == "completed"
    s.set_current("tables/checkpoint", rec.run_id)
    assert s.current("tables/checkpoint") == rec.run_id
    assert load_manifest(s, rec.run_id).counts["jobs"].staged == 3
    assert s.list_runs() == [rec.run_id]
    # no temp files left behind
    assert not [p for p in s.iter_files() if "/.tmp-" in p]


def test_unbalanced_counts_mark_run_partial(tmp_path):
    s = Store(str(tmp_path / "st"))
    rec = RunRecorder(s, "f", {})
    rec.add_counts("jobs", RowCounts(rows_in=5, staged=3))
    m = rec.finish()
    assert m.status == "partial" and "do not add up" in m.errors[0]


def test_run_ids_sort_by_time():
    from datetime import UTC, datetime

    a = new_run_id("f", now=datetime(2026, 1, 1, tzinfo=UTC))
    b = new_run_id("f", now=datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC))
    c = new_run_id("f", now=datetime(2026, 1, 2, tzinfo=UTC))
    assert a < b < c and a.startswith("20260101T000000.000000Z-") and len(a) == len("20260101T000000.000000Z-abcdef")


def test_parquet_write_roundtrip(tmp_path):
    s = Store(str(tmp_path / "st"))
    t = pa.table({"a": [1, 2]})
    s.write_parquet(t, s.staged_key("jobs", "2026-01-01", "20260101T000000Z-abcdef"))
    assert s.staged_dates("jobs") == ["2026-01-01"]
    assert s.read_staged("jobs").num_rows == 2
    s.write_json({"b": 1}, "x", "y.json")
    assert json.loads((tmp_path / "st" / "x" / "y.json").read_text()) == {"b": 1}
