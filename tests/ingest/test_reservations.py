"""Reservations source: scontrol-style CSV -> staged reservations with expanded hostlists."""

from __future__ import annotations

import io

import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.schemas.reservations import RESERVATIONS, row_checks
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import InputError
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.reservations import parse_reservations_csv, sniff_reservations_csv


def parse(text: str, **kw):
    res = list(parse_reservations_csv(io.BytesIO(text.encode()), ParseContext(name="res.csv", **kw)))
    return pa.concat_tables([r.rows for r in res]), pa.concat_tables([r.rejects for r in res])


def test_parse_hostlist_flags_users_local_time():
    rows, rej = parse(
        "name,start,end,nodes,flags,users\n"
        'maint_row0,2024-03-01T08:00:00,2024-03-01T12:00:00,"n[001-003],gpu1","MAINT,IGNORE_JOBS","root,alice"\n'
        "lic,2024-03-02T08:00:00+00:00,2024-03-02T09:00:00+00:00,(null),license_only,\n",
        tz="Europe/Zurich",
    )
    assert rej.num_rows == 0
    d = rows.to_pydict()
    assert d["node_list"] == [["n001", "n002", "n003", "gpu1"], []]
    assert d["flags"] == [["MAINT", "IGNORE_JOBS"], ["LICENSE_ONLY"]]
    assert d["users"] == [["root", "alice"], []]
    assert d["start"][0] == pd.Timestamp("2024-03-01T07:00:00Z")  # 08:00 CET
    assert d["end"][1] == pd.Timestamp("2024-03-02T09:00:00Z")
    assert rows.schema.equals(RESERVATIONS.arrow_schema(), check_metadata=False)
    assert not any(m.any() for _, m in row_checks(rows))


def test_bad_rows_rejected_with_reason():
    rows, rej = parse(
        "name,start,end,nodes\nok,2024-03-01T08:00:00,2024-03-01T09:00:00,n1\n"
        "b,2024-03-01T08:00:00,2024-03-01T09:00:00,n[3-1]\nc,2024-03-01T08:00:00,later,n1\n"
    )
    assert rows.column("name").to_pylist() == ["ok"]
    assert rej.column("source_offset").to_pylist() == [3, 4]
    assert rej.column("reason")[1].as_py() == "parse: unparseable end time 'later'"
    assert rej.column("reason")[0].as_py().startswith("parse: hostlist 'n[3-1]'")


def test_missing_columns_and_sniff():
    with pytest.raises(InputError, match=r"^res\.csv: line 1: missing columns \['nodes'\]"):
        parse("name,start,end\n")
    assert sniff_reservations_csv(b"name,start,end,nodes,flags,users\n") == 1.0
    assert sniff_reservations_csv(b"node,rack,row,chassis,position,architecture\n") == 0.0
    assert sniff_reservations_csv(b"ReservationName,StartTime,EndTime,Duration,Nodes,NodeCnt,Flags,Users,Accounts,State\n") == 1.0


def test_pipeline_stages_maint_windows(store, tmp_path):
    p = tmp_path / "reservations.csv"
    p.write_text(
        "name,start,end,nodes,flags,users\n"
        'm0,2024-03-01T08:00:00,2024-03-01T12:00:00,n[001-002],"MAINT,IGNORE_JOBS",root\n'
        "m1,2024-03-08T08:00:00,2024-03-08T12:00:00,n[003-004],MAINT,root\n"
        "m1,2024-03-08T08:00:00,2024-03-08T12:00:00,n[003-004],MAINT,root\n"
    )
    r = ingest_files(store, sources()["reservations"], [p], RunRecorder(store, "ingest", {}), data_docs=False)
    assert (r.counts.rows_in, r.counts.staged, r.counts.duplicates) == (3, 2, 1)
    t = store.read_staged("reservations")
    assert sorted(t.column("name").to_pylist()) == ["m0", "m1"]


def test_scontrol_field_names_nodecnt_and_site_flags():
    rows, rej = parse(
        "ReservationName,StartTime,EndTime,Duration,Nodes,NodeCnt,Flags,Users,Accounts,State\n"
        'maint_row0_000,2024-03-04T06:00:00,2024-03-04T10:00:00,04:00:00,cn[0001-0024],24,"MAINT,IGNORE_JOBS,SPEC_NODES",root,(null),INACTIVE\n'
        'emergency_r01_000,2024-03-04T11:00:00,2024-03-04T12:00:00,01:00:00,cn[0025-0048],23,"MAINT,UNSCHEDULED",root,(null),ACTIVE\n'
    )
    assert rows.column("name").to_pylist() == ["maint_row0_000"]
    assert len(rows.column("node_list")[0].as_py()) == 24
    assert rej.to_pydict()["reason"] == ["parse: NodeCnt '23' but the hostlist expands to 24 nodes"]
    site = pa.table({"flags": [["MAINT", "UNSCHEDULED"], ["bad flag"]], "node_list": [["n1"], ["n1"]]})
    assert dict(row_checks(site))["expect_reservation_flags_to_match_regex(flags)"].tolist() == [False, True]


@pytest.mark.parametrize("body", ["", "\n", "\r\n\n"])
def test_header_only_csv_is_a_valid_file_with_no_rows(body):
    head = "ReservationName,StartTime,EndTime,Duration,Nodes,NodeCnt,Flags,Users,Accounts,State\n"
    rows, rej = parse(head + body)
    assert rows.num_rows == 0 and rej.num_rows == 0
    assert rows.schema.equals(RESERVATIONS.arrow_schema(), check_metadata=False)


def test_body_after_a_long_first_block_still_parses():
    head = "name,start,end,nodes\n"
    line = "m,2024-03-01T08:00:00,2024-03-01T09:00:00,n1\n"
    rows, rej = parse(head + line * 3000)  # > 64 KiB: the peeked block is put back in front of the rest
    assert rows.num_rows == 3000 and rej.num_rows == 0
    assert rows.column("source_offset").to_pylist()[-1] == 3001
