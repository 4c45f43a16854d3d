"""Syslog parsers: RFC 3164, RFC 5424, rsyslog file format, Loghub BGL and HPC (vectorised pass + per-line reference)."""

from __future__ import annotations

import gzip
import random
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from syslog_helpers import (
    FIX,
    NS,
    _compare_fast_slow,
    _random_3164,
    _random_5424,
    _random_rsyslog,
    reasons_of,
    run,
    ts,
)

from nodewatch.tasks.ingest import syslog_loghub, syslog_rfc3164, syslog_rfc5424, syslog_rsyslog
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import open_binary
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.syslog import FORMATS, parse_bgl, parse_hpc, parse_rfc3164, parse_rfc5424, parse_rsyslog
from nodewatch.tasks.ingest.syslog_blocks import normalise_host


def test_rfc3164_fields_by_hand():
    data = (
        b"<34>Oct 11 22:14:15 mymachine.example.com su: 'su root' failed for lonvick on /dev/pts/8\n"
        b"Oct  1 01:02:03 CN01 sshd[123]: Accepted publickey\r\n"
        b"Oct 11 22:14:15 cn02 no tag here: still message\n"
        b"\n"
        b"Oct 11 22:14:15 cn03 app:\n"
    )
    rows, rej, _ = run(parse_rfc3164, data, reference_time=datetime(2023, 11, 1, tzinfo=UTC))
    assert rej.num_rows == 0
    d = rows.to_pylist()
    assert [r["source_offset"] for r in d] == [1, 2, 3, 5]  # empty line 4 is no record
    assert d[0]["facility"] == 4 and d[0]["severity"] == 2  # 34 = 4*8 + 2
    assert d[0]["node"] == "mymachine" and d[0]["app"] == "su" and d[0]["pid"] is None
    assert d[0]["message"] == "'su root' failed for lonvick on /dev/pts/8"
    assert d[0]["time"] == datetime(2023, 10, 11, 22, 14, 15, tzinfo=UTC)
    assert d[1]["node"] == "cn01" and d[1]["pid"] == 123 and d[1]["app"] == "sshd" and d[1]["facility"] is None
    assert d[1]["message"] == "Accepted publickey" and d[1]["time"] == datetime(2023, 10, 1, 1, 2, 3, tzinfo=UTC)
    assert d[2]["app"] is None and d[2]["message"] == "no tag here: still message"
    assert d[3]["app"] == "app" and d[3]["message"] == ""
    assert set(r["source_format"] for r in d) == {"rfc3164"}


@pytest.mark.parametrize(
    "line, ref, tz, expected",
    [
        # a December line in a file produced in January belongs to the previous year
        ("Dec 31 23:59:59 cn1 a: x", datetime(2024, 1, 5, tzinfo=UTC), "UTC", "2023-12-31T23:59:59"),
        # a January line in a file stamped Dec 31 belongs to the next year
        ("Jan  1 00:00:10 cn1 a: x", datetime(2023, 12, 31, 23, 0, tzinfo=UTC), "UTC", "2024-01-01T00:00:10"),
        # local time Europe/Zurich (UTC+1 in winter, +2 in summer)
        ("Jan  2 12:00:00 cn1 a: x", datetime(2024, 1, 5, tzinfo=UTC), "Europe/Zurich", "2024-01-02T11:00:00"),
        ("Jul  2 12:00:00 cn1 a: x", datetime(2024, 7, 5, tzinfo=UTC), "Europe/Zurich", "2024-07-02T10:00:00"),
        # the reference itself is read in the file's zone: 2023-12-31 23:30 UTC is already Jan 1 in Zurich
        ("Jan  1 00:10:00 cn1 a: x", datetime(2023, 12, 31, 23, 30, tzinfo=UTC), "Europe/Zurich", "2023-12-31T23:10:00"),
        # DST end: 02:30 happens twice on 2024-10-27 in Zurich; the earlier instant (CEST, UTC+2) is taken
        ("Oct 27 02:30:00 cn1 a: x", datetime(2024, 10, 28, tzinfo=UTC), "Europe/Zurich", "2024-10-27T00:30:00"),
        # leap day in an inferred leap year
        ("Feb 29 10:00:00 cn1 a: x", datetime(2024, 3, 1, tzinfo=UTC), "UTC", "2024-02-29T10:00:00"),
    ],
)
def test_rfc3164_year_inference_and_time_zone(line, ref, tz, expected):
    rows, rej, _ = run(parse_rfc3164, (line + "\n").encode(), reference_time=ref, tz=tz)
    assert rej.num_rows == 0
    assert rows.column("time")[0].as_py() == ts(expected).to_pydatetime()
    # the per-line reference parser agrees
    slow = syslog_rfc3164.slow(line, ParseContext(name="x", reference_time=ref, tz=tz))
    assert slow["time"] == ts(expected).value


def test_rfc3164_rejects_with_reasons():
    data = (
        b"Feb 29 10:00:00 cn4 cron[9]: not a leap year\n"
        b"Foo 11 22:14:15 cn1 a: bad month\n"
        b"Oct 11 25:14:15 cn1 a: bad hour\n"
        b"<1234>Oct 11 22:14:15 cn1 a: long pri\n"
        b"Oct 11 22:14:15\n"
        b"Oct 11 22:14:15 cn1 a: good\n"
    )
    rows, rej, _ = run(parse_rfc3164, data, reference_time=datetime(2024, 1, 5, tzinfo=UTC))
    assert rows.column("source_offset").to_pylist() == [6]
    reasons = reasons_of(rej)
    assert reasons == {
        1: "parse: invalid date Feb 29 in inferred year 2023",
        2: "parse: unknown month 'Foo'",
        3: "parse: invalid timestamp 'Oct 11 25:14:15'",
        4: "parse: bad PRI <1234> (expected 1-3 digits)",
        5: "parse: no host name after the timestamp",
    }
    assert rej.column("raw")[1].as_py() == "Foo 11 22:14:15 cn1 a: bad month"


def test_rfc3164_vectorised_pass_matches_reference_parser():
    lines = _random_3164(random.Random(7), 3000)
    ctx = ParseContext(name="x", reference_time=datetime(2024, 12, 30, tzinfo=UTC), tz="America/New_York")
    _compare_fast_slow(syslog_rfc3164, lines, ctx, 0.7)


def test_rfc5424_rfc_examples():
    rows, rej, _ = run(parse_rfc5424, (FIX / "rfc5424_examples.log").read_bytes())
    assert rej.num_rows == 0
    d = rows.to_pylist()
    assert d[0]["time"] == datetime(2003, 10, 11, 22, 14, 15, 3000, tzinfo=UTC)
    assert (d[0]["facility"], d[0]["severity"], d[0]["node"], d[0]["app"], d[0]["msgid"]) == (4, 2, "mymachine", "su", "ID47")
    assert d[0]["message"] == "'su root' failed for lonvick on /dev/pts/8"  # BOM dropped
    assert d[0]["pid"] is None and d[0]["structured_data"] is None
    # -07:00 offset, microseconds
    assert d[1]["time"] == datetime(2003, 8, 24, 12, 14, 15, 3, tzinfo=UTC)
    assert (d[1]["node"], d[1]["pid"], d[1]["facility"], d[1]["severity"]) == ("192.0.2.1", 8710, 20, 5)
    assert d[2]["structured_data"] == '[exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"]'
    assert d[2]["message"] == "An application event log entry..."
    assert d[3]["structured_data"].endswith('[examplePriority@32473 class="high"]') and d[3]["message"] == ""


def test_rfc5424_nanoseconds_escapes_and_rejects():
    data = (
        b'<165>1 2003-10-11T22:14:15.123456789+05:30 cn1 app 12 - [a x="q\\]z"] esc\n'
        b'<165>1 2003-10-11T22:14:15Z cn1 app worker-3 - [a x="] in"] odd\n'
        b"<165>1 - cn1 app 12 - - nil ts\n"
        b"<165>1 2003-10-11T22:14:15Z - app 12 - - nil host\n"
        b"<165>2 2003-10-11T22:14:15Z cn1 app 12 - - v2\n"
        b"<165>1 2003-02-29T22:14:15Z cn1 app 12 - - feb29\n"
        b"<165>1 2003-10-11T22:14:15Z cn1 app 12 -\n"
        b'<165>1 2003-10-11T22:14:15Z cn1 app 12 - [a x="1" no end\n'
    )
    rows, rej, _ = run(parse_rfc5424, data)
    d = rows.to_pylist()
    assert [r["source_offset"] for r in d] == [1, 2]
    assert pd.Timestamp(d[0]["time"]).value == ts("2003-10-11T16:44:15").value + 123456789
    assert d[0]["structured_data"] == '[a x="q\\]z"]' and d[0]["message"] == "esc"
    assert d[1]["pid"] is None and d[1]["structured_data"] == '[a x="] in"]' and d[1]["message"] == "odd"
    reasons = reasons_of(rej)
    assert reasons == {
        3: "parse: NILVALUE timestamp (the staged table needs a time)",
        4: "parse: NILVALUE host name (the staged table needs a node)",
        5: "parse: unsupported syslog protocol version 2",
        6: "parse: invalid date/time '2003-02-29T22:14:15Z'",
        7: "parse: RFC 5424 header has fewer than 7 fields",
        8: "parse: unterminated STRUCTURED-DATA element",
    }


def test_rfc5424_vectorised_pass_matches_reference_parser():
    lines = _random_5424(random.Random(3), 3000)
    _compare_fast_slow(syslog_rfc5424, lines, ParseContext(name="x"), 0.6)


def _check_loghub_against_structured(rows: pa.Table, rej: pa.Table, st: pd.DataFrame, kind: str):
    df = rows.to_pandas()
    if kind == "bgl":
        unknown = st.Node == "UNKNOWN_LOCATION"
        assert rej.num_rows == int(unknown.sum())
        assert set(rej.column("reason").to_pylist()) <= {"parse: BGL location UNKNOWN_LOCATION names no node"}
        st = st[~unknown]
        assert df.node.tolist() == st.Node.str.lower().str.replace(":", "_").tolist()
        assert (df.alert_label.fillna("-") == st.Label.values).all()
        assert df.app.tolist() == st.Component.tolist()
        micro = st.Time.str[-6:].astype(np.int64).values
        assert (df.time.astype("int64").values == st.Timestamp.astype(np.int64).values * NS + micro * 1000).all()
        assert df.severity.tolist() == [syslog_loghub.BGL_SEVERITY[x] for x in st.Level]
    else:
        assert rej.num_rows == 0
        assert df.node.tolist() == st.Node.str.lower().tolist()
        assert df.app.tolist() == st.Component.tolist() and df.msgid.tolist() == st.State.tolist()
        assert (df.time.astype("int64").values == st.Time.astype(np.int64).values * NS).all()
    assert df.message.tolist() == st.Content.tolist()
    assert df.source_offset.tolist() == list(range(1, len(st) + len(rej) + 1)) if kind == "hpc" else True


@pytest.mark.parametrize("kind, parser", [("bgl", parse_bgl), ("hpc", parse_hpc)])
def test_loghub_fixture_matches_upstream_structured_csv(kind, parser):
    rows, rej, _ = run(parser, (FIX / f"{kind}_excerpt.log").read_bytes())
    st = pd.read_csv(FIX / f"{kind}_excerpt_structured.csv", dtype=str, keep_default_na=False)
    assert rows.num_rows + rej.num_rows == len(st)
    _check_loghub_against_structured(rows, rej, st, kind)


@pytest.mark.parametrize("kind, parser, n_rows, n_rej", [("BGL", parse_bgl, 1990, 10), ("HPC", parse_hpc, 2000, 0)])
def test_loghub_real_samples_parse_completely(shared_data, kind, parser, n_rows, n_rej):
    path = shared_data / "loghub" / f"{kind}_2k.log"
    rows, rej, _ = run(parser, path.read_bytes())
    st = pd.read_csv(f"{path}_structured.csv", dtype=str, keep_default_na=False)
    assert len(st) == 2000 and (rows.num_rows, rej.num_rows) == (n_rows, n_rej)
    _check_loghub_against_structured(rows, rej, st, kind.lower())


def test_bgl_unknown_level_and_short_line_rejected():
    good = (FIX / "bgl_excerpt.log").read_bytes().split(b"\n")[0]
    bad_level = good.replace(b" INFO ", b" LOUD ")
    rows, rej, _ = run(parse_bgl, b"\n".join([good, bad_level, b"- 1117838570 2005.06.03"]) + b"\n")
    assert rows.column("source_offset").to_pylist() == [1]
    assert rej.column("reason").to_pylist() == [
        "parse: unknown BGL level 'LOUD'",
        "parse: not a BGL RAS line (expected 10 space-separated fields)",
    ]


@pytest.mark.parametrize(
    "raw, aliases, expected",
    [
        ("CN0123.cluster.example.org", {}, "cn0123"),
        ("cn0123", {}, "cn0123"),
        ("10.0.0.7", {}, "10.0.0.7"),  # an IPv4 literal keeps its dots
        ("10.0.0.7", {"10.0.0.7": "cn0007"}, "cn0007"),
        ("login1.hpc.local", {"login1.hpc.local": "ln01"}, "ln01"),  # alias of the full name
        ("r3n5.hpc.local", {"R3N5": "cn0305"}, "cn0305"),  # alias of the short name, case-insensitive
    ],
)
def test_host_normalisation(raw, aliases, expected):
    assert normalise_host(raw, {k.lower(): v for k, v in aliases.items()}) == (expected, None)


@pytest.mark.parametrize(
    "raw, why",
    [
        ("../../etc", "parse: invalid host name '../../etc'"),
        ("a" * 300, "parse: invalid host name '" + "a" * 80 + "'..."),
        ("n\u043ede01", "parse: invalid host name 'n\u043ede01' (non-ASCII)"),  # Cyrillic o
        ("node\u212a", "parse: invalid host name 'node\u212a' (non-ASCII)"),  # Kelvin sign lower()s to ASCII k
        ("cn01/x", "parse: invalid host name 'cn01/x'"),
        ("-cn01", "parse: invalid host name '-cn01'"),
    ],
)
def test_hostile_host_names_are_rejected_not_used(raw, why):
    assert normalise_host(raw, {}) == (None, why)


def test_aliases_from_context_apply_in_parsers():
    data = b"Oct 11 22:14:15 R3N5.hpc.local a: x\nOct 11 22:14:15 ../../etc a: y\n"
    rows, rej, _ = run(parse_rfc3164, data, aliases={"r3n5": "cn0305"}, reference_time=datetime(2023, 11, 1, tzinfo=UTC))
    assert rows.column("node").to_pylist() == ["cn0305"]
    assert rej.column("reason").to_pylist() == ["parse: invalid host name '../../etc'"]
    assert rej.column("raw").to_pylist() == ["Oct 11 22:14:15 ../../etc a: y"]


def test_rsyslog_fields_by_hand():
    data = (
        b"2026-01-05T03:12:44.123456+01:00 cn0042 kernel: EDAC MC0: 1 CE memory read error\n"
        b"2026-01-05T02:12:45Z CN0043.cluster.local slurmd[2113]: launch task StepId=77.0\n"
        b"2026-01-05T02:12:46.5-05:30 cn0044 no tag here: the whole rest is the message\n"
        b"2026-01-05T02:12:47.123456789Z cn0045 crond[]: empty pid\n"
    )
    rows, rej, _ = run(parse_rsyslog, data)
    assert rej.num_rows == 0
    d = rows.to_pylist()
    assert d[0]["time"] == ts("2026-01-05T02:12:44.123456") and d[0]["node"] == "cn0042"
    assert (d[0]["app"], d[0]["pid"], d[0]["message"]) == ("kernel", None, "EDAC MC0: 1 CE memory read error")
    assert d[0]["facility"] is None and d[0]["severity"] is None and d[0]["source_format"] == "rsyslog"
    assert (d[1]["node"], d[1]["app"], d[1]["pid"]) == ("cn0043", "slurmd", 2113)
    assert d[2]["time"] == ts("2026-01-05T07:42:46.5") and d[2]["app"] is None
    assert d[2]["message"] == "no tag here: the whole rest is the message"
    assert pd.Timestamp(d[3]["time"]).value == ts("2026-01-05T02:12:47").value + 123456789
    assert (d[3]["app"], d[3]["pid"]) == ("crond", None)


def test_rsyslog_rejects_with_reasons():
    data = (
        b"2026-02-30T10:00:00Z cn4 cron[9]: no such day\n"
        b"2026-01-05 10:00:00 cn4 cron[9]: space instead of T\n"
        b"2026-01-05T25:00:00Z cn4 a: bad hour\n"
        b"2026-01-05T10:00:00+01 cn4 a: short offset\n"
        b"2026-01-05T10:00:00Z\n"
        b"2026-01-05T10:00:00Z  cn4 a: two spaces\n"
        b"2026-01-05T10:00:00Z ../../etc a: hostile\n"
        b"2026-01-05T10:00:00Z cn4 a: good\n"
    )
    rows, rej, _ = run(parse_rsyslog, data)
    assert rows.column("source_offset").to_pylist() == [8]
    reasons = reasons_of(rej)
    assert reasons == {
        1: "parse: invalid date/time '2026-02-30T10:00:00Z'",
        2: "parse: bad RFC 3339 timestamp '2026-01-05'",
        3: "parse: invalid date/time '2026-01-05T25:00:00Z'",
        4: "parse: bad RFC 3339 timestamp '2026-01-05T10:00:00+01'",
        5: "parse: not an rsyslog file-format line (expected 'TIMESTAMP host tag: message')",
        6: "parse: no host name after the timestamp",
        7: "parse: invalid host name '../../etc'",
    }


def test_rsyslog_vectorised_pass_matches_reference_parser():
    lines = _random_rsyslog(random.Random(5), 3000)
    _compare_fast_slow(syslog_rsyslog, lines, ParseContext(name="x"), 0.7)


def test_sniffers_pick_the_right_format():
    heads = {
        "rfc5424": (FIX / "rfc5424_examples.log").read_bytes(),
        "rfc3164": b"<34>Oct 11 22:14:15 cn1 su: x\nOct  1 01:02:03 cn2 sshd[1]: y\n",
        "rsyslog": b"2026-01-05T03:12:44.123456+01:00 cn1 su: x\n2026-01-05T02:12:45Z cn2 sshd[1]: y\n",
        "bgl": (FIX / "bgl_excerpt.log").read_bytes(),
        "hpc": (FIX / "hpc_excerpt.log").read_bytes(),
    }
    for name, head in heads.items():
        scores = {f.name: f.sniff(head) for f in FORMATS}
        assert scores[name] == 1.0, (name, scores)
        assert all(v < 0.5 for k, v in scores.items() if k != name), (name, scores)
    assert all(f.sniff(b"\x00\x01\x02 random") == 0.0 for f in FORMATS)


def test_source_is_registered():
    spec = sources()["syslog"]
    assert spec.table.name == "syslog"
    assert [f.name for f in spec.formats] == ["rfc5424", "rfc3164", "rsyslog", "bgl", "hpc", "cfdr"]
    names = spec.table.names
    for col in ("time", "node", "facility", "severity", "app", "pid", "message", "source_offset"):
        assert col in names
    assert "source_offset" not in spec.table.unique_key


def test_batches_are_bounded_and_offsets_continuous(tmp_path):
    lines = _random_5424(random.Random(5), 30000)
    p = tmp_path / "big.log.gz"
    with gzip.open(p, "wb") as f:
        f.write(("\n".join(lines) + "\n").encode())
    with open_binary(p) as s:
        res = list(parse_rfc5424(s, ParseContext(name="big.log.gz", batch_rows=2000)))
    assert len(res) >= 3  # ~3 MB in >= 1 MiB blocks
    offs = np.concatenate(
        [np.concatenate([r.rows.column("source_offset").to_numpy(), r.rejects.column("source_offset").to_numpy()]) for r in res]
    )
    assert sorted(offs.tolist()) == list(range(1, 30001))
    assert max(r.rows_in for r in res) < 15000
