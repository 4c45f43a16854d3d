"""Topology source: parser, row checks, load_topology and its use by the telemetry ingest."""

from __future__ import annotations

import io
import os
import time
from datetime import UTC, datetime

import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.schemas.topology import TOPOLOGY, node_name_mask, row_checks
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import InputError
from nodewatch.tasks.ingest.pipeline import ingest_files, known_nodes_and_aliases
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.topology import load_topology, parse_topology_csv, sniff_topology_csv

HEADER = "node,rack,row,chassis,position,architecture,aliases"


def parse(text: str, **kw):
    res = list(parse_topology_csv(io.BytesIO(text.encode()), ParseContext(name="topo.csv", **kw)))
    return pa.concat_tables([r.rows for r in res]), pa.concat_tables([r.rejects for r in res])


def test_parse_columns_any_order_and_optional_fields():
    ref = datetime(2024, 5, 1, 12, tzinfo=UTC)
    rows, rej = parse(
        "architecture,node,rack,row,chassis,position\nbroadwell,n001,r00,0,,\nskylake,n002,r01,0,c2,7\n", reference_time=ref
    )
    assert rej.num_rows == 0
    d = rows.to_pydict()
    assert d["node"] == ["n001", "n002"] and d["chassis"] == [None, "c2"] and d["position"] == [None, 7]
    assert d["aliases"] == [[], []]
    assert d["valid_from"] == [pd.Timestamp(ref)] * 2 and d["source_offset"] == [2, 3]
    assert rows.schema.equals(TOPOLOGY.arrow_schema(), check_metadata=False)


def test_aliases_split_and_checked():
    rows, _ = parse(f"{HEADER}\nn001,r0,0,0,0,bw,n001-ib; n001.cluster\nn002,r0,0,0,1,bw,n001-ib\nn003,r0,0,0,2,bw,a/b\n")
    assert rows.column("aliases").to_pylist() == [["n001-ib", "n001.cluster"], ["n001-ib"], ["a/b"]]
    checks = dict(row_checks(rows))
    assert checks["expect_aliases_unambiguous(aliases)"].tolist() == [True, True, False]
    assert checks["expect_list_values_to_match_regex(aliases)"].tolist() == [False, False, True]


def test_node_name_mask_matches_names_module():
    from nodewatch.schemas.names import is_valid_node_name

    names = ["n001", "a.b", "a..b", "a.", "../../etc", "-x", "x" * 63, "x" * 64, "nо1", "", "n_1-2"]
    assert node_name_mask(pa.array(names)).tolist() == [is_valid_node_name(n) for n in names]


def test_missing_column_is_a_file_error():
    with pytest.raises(InputError, match=r"^topo\.csv: line 1: missing columns \['architecture'\]"):
        parse("node,rack,row,chassis,position\n")
    assert sniff_topology_csv(HEADER.encode()) == 1.0 and sniff_topology_csv(b"node,rack\n") == 0.0


def test_load_topology_latest_snapshot_and_telemetry_uses_it(store, tmp_path):
    assert load_topology(store) == (set(), {}, None)
    old = tmp_path / "old.csv"
    old.write_text(f"{HEADER}\nn001,r0,0,0,0,bw,\nn009,r0,0,0,1,bw,\n")
    os.utime(old, (time.time() - 86400, time.time() - 86400))
    ingest_files(store, sources()["topology"], [old], RunRecorder(store, "ingest", {}), data_docs=False)
    new = tmp_path / "new.csv"
    new.write_text(f"{HEADER}\nn001,r0,0,0,0,bw,n001-ib\nn002,r0,0,0,1,bw,\n")
    res = ingest_files(store, sources()["topology"], [new], RunRecorder(store, "ingest", {}), data_docs=False)
    assert res.counts.staged == 2
    known, aliases, table = load_topology(store)
    assert known == {"n001", "n002"} and aliases == {"n001-ib": "n001"} and table.num_rows == 2
    assert known_nodes_and_aliases(store) == ({"n001", "n002"}, {"n001-ib": "n001"})

    tel = tmp_path / "t.csv"
    tel.write_text(
        "timestamp,node,metric,value\n"
        "2024-01-01T00:00:00Z,n001-ib,temp_cpu0,40\n"
        "2024-01-01T00:00:00Z,n002,temp_cpu0,41\n"
        "2024-01-01T00:00:00Z,n009,temp_cpu0,42\n"  # only in the old snapshot: unknown now
    )
    known, aliases = known_nodes_and_aliases(store)
    r = ingest_files(
        store,
        sources()["telemetry"],
        [tel],
        RunRecorder(store, "ingest", {}),
        known_nodes=known,
        aliases=aliases,
        data_docs=False,
    )
    assert (r.counts.staged, r.counts.quarantined) == (2, 1)
    staged = store.read_staged("telemetry")
    assert sorted(staged.column("node").to_pylist()) == ["n001", "n002"]
