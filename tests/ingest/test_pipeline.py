"""The generic ingest pipeline on a tiny CSV source defined here (independent of real parsers)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, Expectation, TableSchema
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec, empty_rejects, rejects_table
from nodewatch.tasks.ingest.inputs import InputError, iter_lines
from nodewatch.tasks.ingest.pipeline import ingest_files

TS = pa.timestamp("ns", tz="UTC")
TABLE = TableSchema(
    name="things",
    columns=(
        Column("time", TS, nullable=False),
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN),
        Column("value", pa.float64(), nullable=False, min=0.0, max=100.0),
        Column("end", TS),
    ),
    time_column="time",
    unique_key=("node", "time"),
    extra_expectations=(
        Expectation("ExpectColumnPairValuesAToBeGreaterThanB", {"column_A": "end", "column_B": "time", "or_equal": True}),
    ),
)


def parse_things(stream, ctx: ParseContext) -> Iterator[ParseResult]:
    """epoch,node,value[,end_epoch] lines; '#' header required."""
    times, nodes, vals, ends, offs = [], [], [], [], []
    rej: tuple[list, list, list] = ([], [], [])
    first = True
    for n, line in iter_lines(stream):
        if first:
            first = False
            if not line.startswith(b"#"):
                raise InputError(f"{ctx.name}: line 1: missing '#' header")
            continue
        parts = line.decode("utf-8", "replace").split(",")
        try:
            t = datetime.fromtimestamp(int(parts[0]), UTC)
            v = float(parts[2])
            e = datetime.fromtimestamp(int(parts[3]), UTC) if len(parts) > 3 else None
        except (ValueError, IndexError, OverflowError) as ex:
            rej[0].append(n)
            rej[1].append(line)
            rej[2].append(f"parse: {ex}")
            continue
        times.append(t)
        nodes.append(parts[1])
        vals.append(v)
        ends.append(e)
        offs.append(n)
    rows = pa.table(
        {"time": pa.array(times, TS), "node": nodes, "value": pa.array(vals, pa.float64()), "end": pa.array(ends, TS),
         "source_offset": pa.array(offs, pa.int64())}
    )
    yield ParseResult(rows, rejects_table(*rej) if rej[0] else empty_rejects())


SPEC = SourceSpec(
    name="things",
    table=TABLE,
    formats=(Format("things-csv", parse_things, lambda head: 1.0 if head.startswith(b"#") else 0.0),),
)


def _write(p, lines):
    p.write_bytes(("#time,node,value,end\n" + "\n".join(lines) + "\n").encode())
    return p


def _run(store, files, **kw):
    rec = RunRecorder(store, "test", {})
    res = ingest_files(store, SPEC, files, rec, **kw)
    rec.finish()
    return rec, res


T0 = 1_767_225_600  # 2026-01-01


def test_counts_add_up_and_reasons(store, tmp_path):
    f = _write(
        tmp_path / "a.csv",
        [
            f"{T0},cn001,1.5",
            f"{T0},cn001,1.5",  # duplicate
            f"{T0 + 60},cn002,-4",  # out of range
            f"{T0 + 60},../../etc,3",  # hostile name
            "garbage",  # unparseable
            f"{T0 + 120},cn003,5,{T0}",  # end before start
            f"{2_000_000_000},cn004,5",  # future (2033)
            f"{100},cn005,5",  # before 1990
            f"{T0 + 180},cn006,nan",  # NaN
            f"{T0 + 240},cn007,7",
        ],
    )
    rec, res = _run(store, [f], data_docs=False)
    c = res.counts
    assert (c.rows_in, c.staged, c.quarantined, c.duplicates) == (10, 2, 7, 1)
    assert rec.manifest.status == "completed"
    q = pa.concat_tables([store.read_parquet(p.split(store.root + "/", 1)[1]) for p in res.quarantine_files])
    reasons = dict(zip(q.column("source_offset").to_pylist(), q.column("reason").to_pylist(), strict=True))
    assert reasons[4].startswith("expect_column_values_to_be_between(value>=0")
    assert reasons[5] == "expect_column_values_to_match_regex(node)"
    assert reasons[6].startswith("parse:")
    assert reasons[7] == "expect_column_pair_values_a_to_be_greater_than_b(end>=time)"
    assert "time<=" in reasons[8] and "time>=1990" in reasons[9]
    assert reasons[10] == "expect_column_values_to_not_be_null(value)"
    staged = store.read_staged("things")
    assert sorted(staged.column("node").to_pylist()) == ["cn001", "cn007"]
    assert set(staged.column("source_offset").to_pylist()) == {2, 11}


def test_same_bytes_twice_is_noop_and_cross_run_dedupe(store, tmp_path):
    a = _write(tmp_path / "a.csv", [f"{T0},cn001,1", f"{T0 + 60},cn001,2"])
    _run(store, [a], data_docs=False)
    _, res2 = _run(store, [a], data_docs=False)
    assert res2.inputs[0].status == "skipped-duplicate-file" and res2.counts.rows_in == 0
    # a different file overlapping one row already staged
    b = _write(tmp_path / "b.csv", [f"{T0 + 60},cn001,2", f"{T0 + 120},cn001,3"])
    _, res3 = _run(store, [b], data_docs=False)
    assert (res3.counts.rows_in, res3.counts.staged, res3.counts.duplicates) == (2, 1, 1)
    assert store.read_staged("things").num_rows == 3


def test_unparseable_file_is_quarantined_with_error(store, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"\x00\x01garbage\n")
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    rec, res = _run(store, [bad, empty], data_docs=False)
    statuses = {i.path.rsplit("/", 1)[1]: (i.status, i.message) for i in res.inputs}
    assert statuses["bad.csv"][0] == "quarantined-file" and "cannot tell the format" in statuses["bad.csv"][1]
    assert statuses["empty.csv"][0] == "quarantined-file" and "empty" in statuses["empty.csv"][1]
    assert store.exists("quarantine", "files", "things")
    assert rec.manifest.status == "partial"


def test_known_nodes_and_window(store, tmp_path):
    f = _write(tmp_path / "a.csv", [f"{T0},cn001,1", f"{T0},cn999,1", f"{T0 + 86400 * 3},cn001,1"])
    _, res = _run(
        store, [f], data_docs=False, known_nodes={"cn001"},
        window=(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)),
    )
    assert (res.counts.staged, res.counts.quarantined) == (1, 2)
    assert any("node" in k and "in_set" in k for k in res.unexpected)


@pytest.mark.slow
def test_data_docs_written(store, tmp_path):
    f = _write(tmp_path / "a.csv", [f"{T0},cn001,1", f"{T0},cn002,-1"])
    _, res = _run(store, [f], data_docs=True)
    assert res.data_docs and res.data_docs.endswith("index.html")
    from pathlib import Path

    html = Path(res.data_docs).read_text()
    assert "things" in html


def test_list_column_check_flags_hostile_and_unknown_names():
    from nodewatch.tasks.ingest.validation import _list_check

    batch = pa.table({"node_list": pa.array([["cn1", "cn2"], ["cn1", "../x"], None, ["cn9"], []], pa.list_(pa.string()))})
    (label_re, bad_re), (label_known, unknown) = _list_check("node_list", {"cn1", "cn2"})(batch)
    assert label_re == "expect_list_values_to_match_regex(node_list)"
    assert bad_re.tolist() == [False, True, False, False, False]
    assert "in_set" in label_known and unknown.tolist() == [False, False, False, True, False]


def test_node_name_length_is_an_expectation():
    labels = [e.label for e in TABLE.expectations()]
    assert "expect_column_value_lengths_to_be_between(node)" in labels


def test_same_key_different_values_is_a_quarantined_conflict(store, tmp_path):
    a = _write(tmp_path / "a.csv", [f"{T0},cn001,1", f"{T0},cn001,2", f"{T0},cn001,1", f"{T0 + 60},cn001,5"])
    _, res = _run(store, [a], data_docs=False)
    c = res.counts
    assert (c.rows_in, c.staged, c.quarantined, c.duplicates) == (4, 2, 1, 1)
    # across runs: a later file disagreeing with what is staged
    b = _write(tmp_path / "b.csv", [f"{T0 + 60},cn001,6", f"{T0 + 60},cn001,5"])
    _, res2 = _run(store, [b], data_docs=False)
    assert (res2.counts.staged, res2.counts.quarantined, res2.counts.duplicates) == (0, 1, 1)
    reasons = _reasons_of(store, res2)
    assert reasons == ["conflicting_duplicate(node,time): same key as an earlier row with different values"]
    assert store.read_staged("things").column("value").to_pylist() == [1.0, 5.0]


def _reasons_of(store, res):
    q = pa.concat_tables([store.read_parquet(p.split(store.root + "/", 1)[1]) for p in res.quarantine_files])
    return q.column("reason").to_pylist()


def test_null_key_parts_group_together(store, tmp_path):
    """A key with a nullable part ('end' here): nulls compare equal, so these rows share one key."""
    from dataclasses import replace

    spec = replace(SPEC, table=replace(TABLE, unique_key=("node", "end")))
    f = _write(tmp_path / "n.csv", [f"{T0},cn001,1", f"{T0 + 60},cn001,1", f"{T0 + 120},cn001,2"])
    rec = RunRecorder(store, "test", {})
    res = ingest_files(store, spec, [f], rec, data_docs=False)
    # same key (cn001, null): first staged; the second differs only in time -> conflict; the third too
    assert (res.counts.staged, res.counts.quarantined, res.counts.duplicates) == (1, 2, 0)
