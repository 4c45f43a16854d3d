"""Job-record parsers (SWF, sacct -P): real fixtures, hand-computed values, bad-input corpus."""

from __future__ import annotations

import importlib.util
import io
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from nodewatch.schemas.jobs import JOB_STATES, JOBS, PARSED_SCHEMA
from nodewatch.tasks.ingest import jobs_swf
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import InputError, open_binary
from nodewatch.tasks.ingest.jobs_sacct import RowError, parse_duration, parse_sacct, sniff_sacct, split_job_id, split_state
from nodewatch.tasks.ingest.jobs_swf import parse_swf, sniff_swf, system_name

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "jobs"
BAD = Path(__file__).resolve().parents[1] / "bad_inputs"

_spec = importlib.util.spec_from_file_location("make_jobs_corpus", BAD / "make_jobs_corpus.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules["make_jobs_corpus"] = corpus
_spec.loader.exec_module(corpus)  # type: ignore[union-attr]


def parse(parser, path: Path | None = None, data: bytes | None = None, name: str | None = None, **ctx):
    """Run a parser over a file or bytes; returns (rows, rejects, n_batches)."""
    ctx_obj = ParseContext(name=name or (path.name if path else "mem"), **ctx)
    stream = open_binary(path) if path is not None else io.BytesIO(data or b"")
    with stream:
        batches = list(parser(stream, ctx_obj))
    rows = pa.concat_tables([b.rows for b in batches]) if batches else PARSED_SCHEMA.empty_table()
    rejects = pa.concat_tables([b.rejects for b in batches]) if batches else None
    for b in batches:
        assert b.rows.schema.equals(PARSED_SCHEMA)
    return rows, rejects, len(batches)


def ts(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


# ---------------------------------------------------------------- schema


def test_schema_expectations():
    labels = {e.label for e in JOBS.expectations()}
    assert "expect_column_pair_values_a_to_be_greater_than_b(end_time>=start_time)" in labels
    assert "expect_column_values_to_be_between(nodes)" in labels
    assert "expect_column_values_to_be_in_set(state)" in labels
    assert "expect_column_values_to_not_be_null(submit_time)" in labels
    assert JOBS.unique_key == ("system", "job_id", "step")
    assert JOBS.arrow_schema().field("submit_time").type == pa.timestamp("ns", tz="UTC")
    assert PARSED_SCHEMA.names == [*JOBS.names, "source_offset"]


# ---------------------------------------------------------------- SWF


def test_swf_kth_fixture_by_hand():
    rows, rejects, _ = parse(parse_swf, FIX / "KTH-SP2-1996-2.1-cln-head.swf")
    assert rows.num_rows == 40 and rejects.num_rows == 0
    r = rows.slice(0, 1).to_pylist()[0]
    # line 25: "15 599850 192180 3477 4 -1 -1 4 53940 -1 1 12 12 -1 -1 -1 -1 -1", UnixStartTime 843480031
    submit = 843480031 + 599850
    assert r == {
        "job_id": "15", "step": None, "system": "KTH-SP2-1996-2.1-cln-head", "user": "12", "group": "12",
        "submit_time": ts(submit), "start_time": ts(submit + 192180), "end_time": ts(submit + 192180 + 3477),
        "nodes": 4, "cores": 4, "elapsed_s": 3477, "timelimit_s": 53940, "state": "COMPLETED", "cancelled_by": None,
        "exit_code": None, "signal": None, "node_list": None, "partition": None, "source_format": "swf",
        "source_offset": 25,
    }
    # line 27 (job 17) has status 0 -> FAILED
    assert rows.column("state")[2].as_py() == "FAILED"
    assert rows.column("source_offset").to_pylist() == list(range(25, 65))


def test_swf_llnl_fixture_nodes_and_missing_values():
    rows, rejects, _ = parse(parse_swf, FIX / "LLNL-Thunder-2007-1.1-cln-head.swf")
    assert rows.num_rows == 31 and rejects.num_rows == 0
    d = rows.to_pydict()
    # MaxNodes 1002, MaxProcs 4008 -> 4 processors per node; job 1 has 472 processors -> 118 nodes
    assert d["nodes"][0] == 118 and d["cores"][0] == 472
    # wait time -1: start/end unknown, run time still known
    assert d["start_time"][0] is None and d["end_time"][0] is None and d["elapsed_s"][0] == 34616
    assert d["submit_time"][0] == ts(1170175078)
    assert d["timelimit_s"][0] is None and d["group"][0] is None
    assert d["partition"][0] == "pbatch"  # "; Partition:  1  pbatch"
    assert d["state"][:3] == ["FAILED", "FAILED", "CANCELLED"]  # status 0, 0, 5


def test_swf_status_mapping_and_nodes_rule():
    header = "; UnixStartTime: 0\n"
    lines = [corpus.swf_job(job=str(i), procs="9").replace(" 1  7  3", f" {s}  7  3") for i, s in
             enumerate(["1", "0", "5", "2", "3", "4", "-1"], start=1)]
    data = (header + "\n".join(lines) + "\n").encode()
    rows, _, _ = parse(parse_swf, data=data)
    assert rows.column("state").to_pylist() == ["COMPLETED", "FAILED", "CANCELLED", "UNKNOWN", "UNKNOWN", "UNKNOWN",
                                                "UNKNOWN"]
    assert set(rows.column("state").to_pylist()) <= set(JOB_STATES)
    assert rows.column("nodes").to_pylist() == [9] * 7  # no MaxNodes/MaxProcs header: nodes = processors
    data8 = ("; MaxNodes: 10\n; MaxProcs: 80\n" + "\n".join(lines[:1]) + "\n").encode()
    rows8, _, _ = parse(parse_swf, data=data8)
    assert rows8.column("nodes").to_pylist() == [2]  # ceil(9 / 8)


def test_swf_requested_procs_fallback():
    line = corpus.swf_job(procs="4").split()
    line[4] = "-1"  # allocated unknown, requested 4
    rows, _, _ = parse(parse_swf, data=("; MaxNodes: 4\n; MaxProcs: 16\n" + " ".join(line) + "\n").encode())
    assert rows.column("nodes").to_pylist() == [1] and rows.column("cores").to_pylist() == [4]


def test_swf_block_boundaries_and_batches(monkeypatch):
    path = FIX / "KTH-SP2-1996-2.1-cln-head.swf"
    ref, _, _ = parse(parse_swf, path)
    monkeypatch.setattr(jobs_swf, "BLOCK_BYTES", 97)  # lines cross block boundaries everywhere
    small, rej, _ = parse(parse_swf, path)
    assert small.equals(ref) and rej.num_rows == 0
    monkeypatch.undo()
    batched, _, n = parse(parse_swf, path, batch_rows=7)
    assert n == 6 and batched.equals(ref)


def test_swf_system_name():
    assert system_name("/x/y/HPC2N-2002-2.1-cln.swf.gz") == "HPC2N-2002-2.1-cln"
    assert system_name("trace.SWF") == "trace"
    assert system_name("a.swf.xz") == "a"


def test_swf_full_traces(shared_data):
    expected = {  # jobs per trace from ../shared/data/PROVENANCE.md
        "KTH-SP2-1996-2.1-cln.swf.gz": 27_992,
        "LLNL-Thunder-2007-1.1-cln.swf.gz": 121_039,
        "HPC2N-2002-2.1-cln.swf.gz": 202_876,
        "SDSC-BLUE-2000-4.2-cln.swf.gz": 243_306,
    }
    for name, n in expected.items():
        path = shared_data / "swf" / name
        assert sniff_swf(open_binary(path).read(65536)) >= 0.9
        rows, rejects, _ = parse(parse_swf, path)
        assert rows.num_rows == n, name
        assert rejects.num_rows == 0, name
        assert rows.column("job_id").null_count == 0
        # LLNL-Thunder has 1,190 records with every field -1 (no submit time) and 2,248 (those included) without
        # a processor count: they are parsed and left to validation, which quarantines them (not-null rules)
        llnl = name.startswith("LLNL")
        assert rows.column("submit_time").null_count == (1190 if llnl else 0)
        assert rows.column("nodes").null_count == (2248 if llnl else 0)


# ---------------------------------------------------------------- sacct units


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("00:00:00", 0), ("23:33:25", 84805), ("3-00:00:00", 259200), ("18-15:54:58", 18 * 86400 + 15 * 3600 + 54 * 60 + 58),
     ("05:30", 330), ("00:01.277", 1), ("2-12", 2 * 86400 + 12 * 3600), ("UNLIMITED", None), ("Partition_Limit", None),
     ("", None)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_parse_duration_bad():
    with pytest.raises(RowError, match="bad duration '1:2:3:4'"):
        parse_duration("1:2:3:4")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4744528", ("4744528", None)), ("4744528_255", ("4744528_255", None)), ("7957382.batch", ("7957382", "batch")),
     ("9067954.0", ("9067954", "0")), ("123_[1-5]", ("123_[1-5]", None)), ("123_[1,3-5%2]", ("123_[1,3-5%2]", None)),
     ("123+0", ("123+0", None)), ("123+1.extern", ("123+1", "extern")), ("4744528_255.extern", ("4744528_255", "extern"))],
)
def test_split_job_id(text, expected):
    assert split_job_id(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("CANCELLED by 89200431", ("CANCELLED", "89200431")), ("NODE_FAIL", ("NODE_FAIL", None)),
     ("OUT_OF_MEMORY", ("OUT_OF_MEMORY", None)), ("TIMEOUT", ("TIMEOUT", None)), ("REQUEUE_HOLD", ("REQUEUED", None)),
     ("CANCELLED+", ("CANCELLED", None))],
)
def test_split_state(text, expected):
    assert split_state(text) == expected


def test_split_job_id_bad():
    with pytest.raises(RowError, match="bad JobID '12a'"):
        split_job_id("12a")


# ---------------------------------------------------------------- sacct fixtures


def test_sacct_dump2101():
    rows, rejects, _ = parse(parse_sacct, FIX / "sacct_dump2101.log")
    assert rows.num_rows == 14
    assert rejects.to_pydict()["source_offset"] == [16]
    assert rejects.column("reason")[0].as_py() == "parse: record has 74 fields, header has 107 (truncated record?)"
    d = rows.to_pydict()
    assert d["job_id"][0] == "4744528_255" and d["step"][0] is None and d["system"][0] == "ub-hpc"
    assert d["state"][0] == "CANCELLED" and d["cancelled_by"][0] == "89200431"
    assert d["node_list"][0] is None  # "None assigned"
    assert d["submit_time"][0] == datetime(2020, 12, 18, 22, 12, 16, tzinfo=UTC)
    assert d["timelimit_s"][0] == 2 * 86400 and d["cores"][0] == 12 and d["nodes"][0] == 1
    i = d["source_offset"].index(10)  # 4822203.extern
    assert (d["job_id"][i], d["step"][i], d["state"][i], d["exit_code"][i], d["signal"][i]) == (
        "4822203", "extern", "OUT_OF_MEMORY", 0, 125)
    # lines 13-15: JobName with '|' inside ("Job| Name003", "Job| Name |003", "Jo| bNa| me003"), Constraints "cpu-a|cpu-b"
    for off in (12, 13, 14, 15):
        j = d["source_offset"].index(off)
        assert d["state"][j] == "TIMEOUT" and d["elapsed_s"][j] == 3 * 86400 + 22
        assert d["node_list"][j] == ["cpn-q06-12-01"] and d["partition"][j] == "general-compute"


def test_sacct_submitline_multiline():
    rows, rejects, _ = parse(parse_sacct, FIX / "sacct_submitline_multiline.log")
    assert rejects.num_rows == 0
    d = rows.to_pydict()
    assert d["source_offset"] == [2, 3, 4, 5, 6, 7, 8, 13, 14, 15, 16, 17, 18]
    i = d["source_offset"].index(8)  # record spanning lines 8-12 (newlines inside SubmitLine)
    assert (d["job_id"][i], d["step"][i], d["nodes"][i], d["cores"][i]) == ("9067954", "1", 16, 576)
    assert len(d["node_list"][i]) == 16 and d["start_time"][i] == datetime(2022, 7, 31, 11, 52, 55, tzinfo=UTC)
    j = d["source_offset"].index(13)
    assert (d["job_id"][j], d["step"][j], d["elapsed_s"][j]) == ("9067954", "2", 9579)
    # SubmitLine "... --wrap=env | grep SLURM | sed ..." and JobName "qlo|gin" on the allocation rows
    for off in (2, 15, 16, 17, 18):
        k = d["source_offset"].index(off)
        assert (d["job_id"][k], d["state"][k], d["cancelled_by"][k], d["timelimit_s"][k]) == (
            "7957382", "CANCELLED", "75200", 86400)
        assert d["partition"][k] == "partition001" and d["system"][k] == "cluster001"


def test_sacct_simple_and_dump2110():
    rows, rejects, _ = parse(parse_sacct, FIX / "sacct_simple.log")
    assert rows.num_rows == 4 and rejects.num_rows == 0
    d = rows.to_pydict()
    assert d["elapsed_s"] == [84805, 12688, 2009, 2003]
    assert d["timelimit_s"] == [259200] * 4
    assert d["node_list"][2] == ["b002", "b003"] and d["nodes"][2] == 2
    assert d["user"][0] == "user001" and d["group"][0] == "users"
    rows, rejects, _ = parse(parse_sacct, FIX / "sacct_dump2110.log")
    assert rows.num_rows == 7 and rejects.num_rows == 0
    assert rows.column("step").to_pylist()[:3] == [None, "batch", "extern"]


def test_sacct_time_zone_and_special_ids():
    lines = [
        corpus.SACCT_HEADER,
        corpus.sacct_row(job="200+0", start="2024-07-01T10:00:00", end="2024-07-01T11:00:00"),
        corpus.sacct_row(job="200+1.batch"),
        corpus.sacct_row(job="300_[1-5]", nodelist="None assigned", state="PENDING", start="Unknown", end="Unknown",
                         elapsed="00:00:00"),
        corpus.sacct_row(job="400", state="NODE_FAIL").replace("|0:0|", "|1:9|"),
    ]
    data = ("\n".join(lines) + "\n").encode()
    rows, rejects, _ = parse(parse_sacct, data=data, tz="Europe/Stockholm")
    assert rejects.num_rows == 0
    d = rows.to_pydict()
    assert d["job_id"] == ["200+0", "200+1", "300_[1-5]", "400"]
    assert d["step"] == [None, "batch", None, None]
    # Stockholm is UTC+2 in July (CEST), UTC+1 in March (CET)
    assert d["start_time"][0] == datetime(2024, 7, 1, 8, 0, tzinfo=UTC)
    assert d["submit_time"][1] == datetime(2024, 3, 1, 8, 59, tzinfo=UTC)
    assert d["start_time"][2] is None and d["end_time"][2] is None and d["state"][2] == "PENDING"
    assert (d["state"][3], d["exit_code"][3], d["signal"][3]) == ("NODE_FAIL", 1, 9)


def test_sacct_unknown_tz():
    with pytest.raises(InputError, match="mem: unknown time zone 'Mars/Base'"):
        parse(parse_sacct, data=b"x", tz="Mars/Base")


def test_sacct_full_samples(shared_data):
    expected = {  # (rows, rejects)
        "sacct_dump2101.log": (14, 1),
        "sacct_dump2110.log": (7, 0),
        "sacct_simple.log": (4, 0),
        "sacct_submitline_multiline.log": (13, 0),
    }
    for name, (n, nrej) in expected.items():
        path = shared_data / "sacct" / name
        assert sniff_sacct(path.read_bytes()[:65536]) >= 0.9 and sniff_swf(path.read_bytes()[:65536]) == 0.0
        rows, rejects, _ = parse(parse_sacct, path)
        assert (rows.num_rows, rejects.num_rows) == (n, nrej), name


def test_sniffers_and_registry():
    swf = (FIX / "KTH-SP2-1996-2.1-cln-head.swf").read_bytes()
    sacct = (FIX / "sacct_dump2110.log").read_bytes()
    assert sniff_swf(swf) >= 0.9 and sniff_sacct(swf) == 0.0
    assert sniff_sacct(sacct) >= 0.9 and sniff_swf(sacct) == 0.0
    assert sniff_swf(b"") == 0.0 and sniff_sacct(b"") == 0.0
    from nodewatch.tasks.ingest.registry import sources

    spec = sources()["jobs"]
    assert spec.table is JOBS and [f.name for f in spec.formats] == ["swf", "sacct"] and spec.node_column is None


# ---------------------------------------------------------------- bad-input corpus


def test_corpus_is_generated_by_script():
    built = corpus.build()
    on_disk = {p.name: p.read_bytes() for p in (BAD / "jobs").iterdir()}
    assert on_disk == built, "run: python tests/bad_inputs/make_jobs_corpus.py"
    assert set(built) == set(corpus.EXPECTED)


@pytest.mark.parametrize("name", sorted(corpus.EXPECTED))
def test_bad_input(name):
    exp = corpus.EXPECTED[name]
    parser = parse_swf if name.startswith("swf_") else parse_sacct
    path = BAD / "jobs" / name
    if exp.error is not None:
        with pytest.raises(InputError) as info:
            parse(parser, path)
        msg = str(info.value)
        assert exp.error in msg
        assert msg.startswith(name + ": ") and "\n" not in msg and "line" in msg
        return
    rows, rejects, _ = parse(parser, path)
    assert rows.num_rows == exp.rows
    got = dict(zip(rejects.column("source_offset").to_pylist(), rejects.column("reason").to_pylist(), strict=True))
    assert got == exp.rejects
    for col, values in exp.values.items():
        assert rows.column(col).to_pylist() == values, col
    # every input line is accounted for: parsed rows + rejects (header/comment/blank lines excluded)
    assert rows.num_rows + rejects.num_rows == exp.rows + len(exp.rejects)


def test_crlf_equals_lf():
    lf, _, _ = parse(parse_swf, data=corpus._swf(corpus.SWF_JOBS), name="t.swf")
    crlf, _, _ = parse(parse_swf, BAD / "jobs" / "swf_crlf.swf", name="t.swf")
    assert crlf.equals(lf)
    lf2, _, _ = parse(parse_sacct, data=corpus._sacct([corpus.sacct_row(), corpus.sacct_row(job="101", nodelist="n03",
                                                                                           nnodes="1")]))
    crlf2, _, _ = parse(parse_sacct, BAD / "jobs" / "sacct_crlf.log", name="mem")
    assert crlf2.equals(lf2)


def test_truncated_gzip_keeps_rows_before_error(monkeypatch):
    monkeypatch.setattr(jobs_swf, "BLOCK_BYTES", 4096)
    stream = open_binary(BAD / "jobs" / "swf_truncated.swf.gz")
    offsets = []
    with pytest.raises(InputError) as info:
        for batch in parse_swf(stream, ParseContext(name="t.swf.gz")):
            assert batch.rejects.num_rows == 0
            offsets.extend(batch.rows.column("source_offset").to_pylist())
    # rows decompressed before the cut were yielded, without gaps, and the error names the next line
    assert len(offsets) > 100 and offsets == list(range(9, 9 + len(offsets)))
    assert str(info.value).endswith(f"line {offsets[-1] + 1}")


def test_truncated_gzip_sacct_keeps_rows_before_error():
    stream = open_binary(BAD / "jobs" / "sacct_truncated.log.gz")
    offsets = []
    with pytest.raises(InputError) as info:
        for batch in parse_sacct(stream, ParseContext(name="t.log.gz", batch_rows=100)):
            assert batch.rejects.num_rows == 0
            offsets.extend(batch.rows.column("source_offset").to_pylist())
    # every complete line before the cut became a row (line 1 is the header); the error names the next line
    assert len(offsets) > 100 and offsets == list(range(2, 2 + len(offsets)))
    assert str(info.value).startswith("t.log.gz: stream ends unexpectedly (")
    assert str(info.value).endswith(f"line {offsets[-1] + 1}")


def test_sacct_lines_across_read_chunks():
    # records longer than the 64 KiB read size and CRLF split across reads parse like short ones
    long_name = "x" * 70000
    data = corpus._sacct([corpus.sacct_row(name=long_name), corpus.sacct_row(job="101")], eol="\r\n")
    rows, rejects, _ = parse(parse_sacct, data=data)
    assert rows.column("job_id").to_pylist() == ["100", "101"] and rejects.num_rows == 0
