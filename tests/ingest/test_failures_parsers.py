"""LANL and PNNL failure-record parsers (tasks/ingest/failures.py) on fixtures and bad input."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest

from nodewatch.schemas.failures import FAILURES
from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.failures import LANL_HEADER, SOURCES, parse_lanl, parse_pnnl, sniff_lanl, sniff_pnnl
from nodewatch.tasks.ingest.inputs import InputError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "failures"
LANL_HEAD = ",".join(LANL_HEADER) + "\n"
PNNL_HEAD = "Date,Hardware Identifier,What Failed,Description of Failure,Action Taken\n"
GOOD_LANL = "20,cluster,512,2048,4,13,12,5-Apr,5-Jun,current,part,4,1,1,0,compute,6/21/2005 10:54,6/21/2005 11:00,6,,CPU,,,,,No\n"


def _parse(fn, data: bytes, name: str = "f.csv", **kw) -> tuple[pa.Table, pa.Table]:  # noqa: ANN001
    res = list(fn(io.BytesIO(data), ParseContext(name=name, **kw)))
    rows = pa.concat_tables([r.rows for r in res]) if res else None
    rej = pa.concat_tables([r.rejects for r in res]) if res else None
    return rows, rej


def test_lanl_fixture() -> None:
    data = (FIX / "lanl_excerpt.csv").read_bytes()
    rows, rej = _parse(parse_lanl, data)
    n_lines = len([line for line in data.splitlines()[1:] if line.strip()])
    assert rows.num_rows + rej.num_rows == n_lines == 60
    assert rej.num_rows == 0
    df = rows.to_pandas()
    assert set(rows.column_names) == {*FAILURES.names, "source_offset"}
    first = df.iloc[0]
    assert first.system == "lanl-s2" and first.node == "lanl-s2-n0" and first.purpose == "graphics.fe"
    # 6/21/2005 10:54 Mountain Daylight Time = 16:54 UTC; down time 6 minutes
    assert str(first.start) == "2005-06-21 16:54:00+00:00" and first.downtime_s == 360
    assert first.category == "Hardware" and first.cause == "Graphics Accel Hdwr" and not first.same_event
    s17 = df[df.system == "lanl-s17"]
    assert len(s17) == 5 and s17.node.isna().all()  # system-wide records
    assert all(is_valid_node_name(n) for n in df.node.dropna())
    assert df.source_offset.min() == 2


def test_lanl_winter_time_is_mst() -> None:
    rows, _ = _parse(parse_lanl, (LANL_HEAD + GOOD_LANL.replace("6/21/2005", "1/21/2005")).encode())
    assert str(rows.column("start")[0].as_py()) == "2005-01-21 17:54:00+00:00"
    rows, _ = _parse(parse_lanl, (LANL_HEAD + GOOD_LANL).encode(), tz="UTC")
    assert str(rows.column("start")[0].as_py()) == "2005-06-21 16:54:00+00:00"  # default UTC -> site zone
    rows, _ = _parse(parse_lanl, (LANL_HEAD + GOOD_LANL).encode(), tz="Europe/Berlin")
    assert str(rows.column("start")[0].as_py()) == "2005-06-21 08:54:00+00:00"


def test_pnnl_fixture() -> None:
    data = (FIX / "pnnl_excerpt.csv").read_bytes()
    rows, rej = _parse(parse_pnnl, data)
    assert rows.num_rows == 42 and rej.num_rows == 0
    df = rows.to_pandas()
    assert df.node.iloc[0] == "pnnl-mpp2-n13" and df.purpose.iloc[0] == "compute"
    assert str(df.start.iloc[0]) == "2003-11-29 08:00:00+00:00"  # date only: local midnight PST
    assert df.fru.iloc[0] == "DISK" and df.category.iloc[0] == "Hardware" and df.action.iloc[0] == "REPLACE"
    cp1252 = df[df.source_offset == 40].iloc[0]
    assert cp1252.node == "pnnl-mpp2-home-storage-test" and cp1252.purpose == "home"
    assert "\u201cMeta Data Unprotected\u201d" in cp1252.cause
    assert all(is_valid_node_name(n) for n in df.node)


def test_sniffers_and_sources() -> None:
    assert sniff_lanl((FIX / "lanl_excerpt.csv").read_bytes()[:4096]) == 1.0
    assert sniff_pnnl((FIX / "lanl_excerpt.csv").read_bytes()[:4096]) == 0.0
    assert sniff_pnnl((FIX / "pnnl_excerpt.csv").read_bytes()[:4096]) == 1.0
    assert sniff_lanl(b"\x00\x01garbage") == 0.0
    assert SOURCES[0].name == "failures" and SOURCES[0].table is FAILURES
    assert {f.name for f in SOURCES[0].formats} == {"lanl", "pnnl"}


@pytest.mark.parametrize(
    "line,reason",
    [
        (GOOD_LANL[:40] + "\n", "expected 26"),  # truncated
        (GOOD_LANL.replace(",13,12,", ",13,../../etc,"), "node number '../../etc'"),  # hostile node
        (GOOD_LANL.replace("20,cluster", "x;rm,cluster"), "System"),
        (GOOD_LANL.replace("6/21/2005 10:54", "2005-06-21T10:54"), "Prob Started"),
        (GOOD_LANL.replace("6/21/2005 11:00", "soon"), "Prob Fixed"),
        (GOOD_LANL.replace("6/21/2005 11:00", "2/30/2005 11:00"), "end '2/30/2005 11:00' is not a valid date"),
        (GOOD_LANL.replace(",6,,CPU", ",six,,CPU"), "Down Time"),
        (GOOD_LANL.replace(",,CPU,,,,,", ",Power,CPU,,,,,"), "more than one blame"),
        (GOOD_LANL.replace(",No\n", ",Maybe\n"), "Same Event"),
        (GOOD_LANL.replace("cluster", "clu\x00ster"), "neither UTF-8"),
    ],
)
def test_lanl_bad_lines_are_rejected_with_reason(line: str, reason: str) -> None:
    rows, rej = _parse(parse_lanl, (LANL_HEAD + GOOD_LANL + line).encode())
    assert rows.num_rows == 1 and rej.num_rows == 1
    r = rej.to_pylist()[0]
    assert r["source_offset"] == 3 and r["reason"].startswith("parse: ") and reason in r["reason"]
    assert "\n" not in r["reason"]


def test_lanl_out_of_range_values_pass_to_validation() -> None:
    # negative down time, end before start, far-future start: parsed as is, for GX to quarantine
    line = GOOD_LANL.replace(",6,,CPU", ",-5,,CPU").replace("6/21/2005 11:00", "6/20/2005 11:00")
    line = line.replace("6/21/2005 10:54", "6/21/2095 10:54")
    rows, rej = _parse(parse_lanl, (LANL_HEAD + line).encode())
    assert rej.num_rows == 0 and rows.column("downtime_s")[0].as_py() == -300
    assert rows.column("end")[0].as_py() < rows.column("start")[0].as_py()


@pytest.mark.parametrize(
    "data,msg",
    [
        (b"", "empty file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "not a LANL"),
        (PNNL_HEAD.encode(), "not a LANL"),
        (LANL_HEAD.encode("utf-16"), "not a LANL"),
    ],
)
def test_lanl_unreadable_files(data: bytes, msg: str) -> None:
    with pytest.raises(InputError, match=msg) as e:
        _parse(parse_lanl, data, name="bad.csv")
    assert "bad.csv" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "line,reason",
    [
        ("11/29/2003 7:00,node 25\n", "expected 5"),
        ("2003-11-29,node 25,DISK,x,REPLACE,\n", "Date"),
        ("13/45/2003 7:00,node 25,DISK,x,REPLACE,\n", "not a valid date"),
        ("11/29/2003 7:00,!!!,DISK,x,REPLACE,\n", "names no component"),
        ("11/29/2003 7:00,node 25,DISK,x,REPLACE,extra\n", "expected 5"),
    ],
)
def test_pnnl_bad_lines(line: str, reason: str) -> None:
    rows, rej = _parse(parse_pnnl, (PNNL_HEAD + "11/29/2003,node 13,DISK,x,REPLACE,\n" + line).encode())
    assert rows.num_rows == 1 and rej.num_rows == 1
    assert reason in rej.column("reason")[0].as_py() and rej.column("source_offset")[0].as_py() == 3


def test_pnnl_hostile_identifier_becomes_safe_slug() -> None:
    rows, rej = _parse(parse_pnnl, (PNNL_HEAD + "11/29/2003 7:00,../../etc/passwd,DISK,x,REPLACE,\n").encode())
    node = rows.column("node")[0].as_py()
    assert node == "pnnl-mpp2-etc-passwd" and is_valid_node_name(node) and "/" not in node


def test_batches_are_bounded() -> None:
    data = (LANL_HEAD + GOOD_LANL * 25).encode()
    res = list(parse_lanl(io.BytesIO(data), ParseContext(name="f", batch_rows=10)))
    assert [r.rows_in for r in res] == [10, 10, 5]
