"""Syslog parsers: RFC 3164, RFC 5424, rsyslog file format, Loghub BGL and HPC (vectorised pass + per-line reference)."""

from __future__ import annotations

import gzip
import io
import random
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.tasks.ingest import syslog_loghub, syslog_rfc3164, syslog_rfc5424, syslog_rsyslog
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import open_binary
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.syslog import FORMATS, parse_bgl, parse_hpc, parse_rfc3164, parse_rfc5424, parse_rsyslog
from nodewatch.tasks.ingest.syslog_blocks import _make_block, normalise_host

FIX = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "syslog"
NS = 1_000_000_000


def run(parser, data: bytes, **ctx_kw) -> tuple[pa.Table, pa.Table, int]:
    """All rows, all rejects and the number of batches of one parse."""
    ctx_kw.setdefault("name", "test.log")
    res = list(parser(io.BytesIO(data), ParseContext(**ctx_kw)))
    rows = pa.concat_tables([r.rows for r in res]) if res else None
    rej = pa.concat_tables([r.rejects for r in res]) if res else None
    return rows, rej, len(res)


def reasons_of(rej: pa.Table) -> dict[int, str]:
    """Reject reasons by line number."""
    return dict(zip(rej.column("source_offset").to_pylist(), rej.column("reason").to_pylist(), strict=True))


def ts(s: str) -> pd.Timestamp:
    return pd.Timestamp(s, tz="UTC")


# ----------------------------------------------------------------------------------- RFC 3164


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


def _host_tag_msg(rng: random.Random, i: int) -> str:
    """``host tag[pid]: message`` with the shapes that matter (FQDN, IP, no tag, ``word:x`` that is no tag)."""
    host = rng.choice(["cn01", "CN02.example.org", "gpu-3", "10.0.0.7", "login1.hpc.local"])
    tag = rng.choice([f"sshd[{rng.randrange(99999)}]: ", "kernel: ", "", "CRON[12]: ", "systemd: ", "app:x "])
    msg = rng.choice([f"Accepted key for u{i}", "", "a: b: c", "[  12.3] eth0 up", "ünïcode ok", "x  y"])
    return f"{host} {tag}{msg}"


def _random_3164(rng: random.Random, n: int) -> list[str]:
    out = []
    months = syslog_rfc3164.MONTHS
    for i in range(n):
        pri = f"<{rng.randrange(192)}>" if rng.random() < 0.5 else ""
        day = rng.randrange(1, 29)
        dstr = f"{day:2d}" if rng.random() < 0.8 else f"{day:02d}"
        rest = _host_tag_msg(rng, i)
        out.append(
            f"{pri}{rng.choice(months)} {dstr} {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d} {rest}"
        )
    return out


def _compare_fast_slow(module, lines: list[str], ctx: ParseContext, min_fast_share: float):
    data = ("\n".join(lines) + "\n").encode()
    blk = _make_block(data, 1, 1 << 20)
    cols, ok = module.fast(blk, blk.usable, ctx)
    assert ok.mean() >= min_fast_share  # the vectorised pass really carries the load
    fast_idx = blk.usable[ok]
    names = ["time", "host", "facility", "severity", "app", "pid", "message", "msgid", "structured_data"]
    for name in names:
        if name not in cols:
            continue
        v = cols[name]
        got = v.tolist() if isinstance(v, np.ndarray) else v.to_pylist()
        for j, i in enumerate(fast_idx):
            ref = module.slow(lines[i], ctx)
            assert not isinstance(ref, str), (lines[i], ref)
            assert got[j] == ref.get(name), (name, lines[i], got[j], ref.get(name))


def test_rfc3164_vectorised_pass_matches_reference_parser():
    lines = _random_3164(random.Random(7), 3000)
    ctx = ParseContext(name="x", reference_time=datetime(2024, 12, 30, tzinfo=UTC), tz="America/New_York")
    _compare_fast_slow(syslog_rfc3164, lines, ctx, 0.7)


# ----------------------------------------------------------------------------------- RFC 5424


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


def _random_5424(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        frac = rng.choice(["", ".1", ".003", ".123456", ".123456789"])
        off = rng.choice(["Z", "+01:00", "-07:00", "+05:30"])
        sd = rng.choice(["-", '[id@1 a="1"]', '[id@1 a="1" b="x y"][p@2 c="3"]', '[e@3 v="a\\"b"]'])
        msg = rng.choice(["", "hello", "\ufeffbom msg", "k=v x", "ümlaut"])
        tail = f" {msg}" if msg or rng.random() < 0.5 else ""
        out.append(
            f"<{rng.randrange(192)}>1 20{rng.randrange(10, 30)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T"
            f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}{frac}{off} "
            f"{rng.choice(['cn01', 'CN02.example.org', 'gpu-3'])} {rng.choice(['-', 'slurmd', 'kernel'])} "
            f"{rng.choice(['-', str(rng.randrange(99999)), 'w-3'])} {rng.choice(['-', 'ID47'])} {sd}{tail}"
        )
    return out


def test_rfc5424_vectorised_pass_matches_reference_parser():
    lines = _random_5424(random.Random(3), 3000)
    _compare_fast_slow(syslog_rfc5424, lines, ParseContext(name="x"), 0.6)


# ------------------------------------------------------------------------------------ Loghub


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


# ---------------------------------------------------------------------------------- hosts


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


# ------------------------------------------------------------------------ rsyslog file format


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


def _random_rsyslog(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        frac = rng.choice(["", ".5", ".123", ".123456", ".123456789"])
        zone = rng.choice(["Z", "+00:00", "+01:00", "-05:30"])
        rest = _host_tag_msg(rng, i)
        out.append(
            f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:"
            f"{rng.randrange(60):02d}:{rng.randrange(60):02d}{frac}{zone} {rest}"
        )
    return out


def test_rsyslog_vectorised_pass_matches_reference_parser():
    lines = _random_rsyslog(random.Random(5), 3000)
    _compare_fast_slow(syslog_rsyslog, lines, ParseContext(name="x"), 0.7)


# ------------------------------------------------------------------------- sniff / registry


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
    assert spec.table.name == "syslog" and [f.name for f in spec.formats] == ["rfc5424", "rfc3164", "rsyslog", "bgl", "hpc"]
    names = spec.table.names
    for col in ("time", "node", "facility", "severity", "app", "pid", "message", "source_offset"):
        assert col in names
    assert "source_offset" not in spec.table.unique_key


# --------------------------------------------------------------------------- streaming


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


def _utf8_or_latin1(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _mutate(rng: random.Random, line: bytes) -> bytes:
    b = bytearray(line)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(4)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] = rng.choice(b" :[]<>-.0123456789Z+\xc3\xa9\xff\t")
        elif op == 1:
            del b[i : i + rng.randrange(1, 8)]
        elif op == 2:
            b[i:i] = bytes(rng.choice(b" :[]<>0123456789") for _ in range(rng.randrange(1, 4)))
        else:
            b = b[:i]
    return bytes(b).replace(b"\n", b" ")


@pytest.mark.parametrize(
    "parser, module, make",
    [
        (parse_rfc3164, syslog_rfc3164, lambda rng: _random_3164(rng, 1500)),
        (parse_rfc5424, syslog_rfc5424, lambda rng: _random_5424(rng, 1500)),
        (parse_rsyslog, syslog_rsyslog, lambda rng: _random_rsyslog(rng, 1500)),
        (parse_bgl, None, lambda rng: (FIX / "bgl_excerpt.log").read_text().splitlines() * 10),
        (parse_hpc, None, lambda rng: (FIX / "hpc_excerpt.log").read_text().splitlines() * 10),
    ],
)
def test_mutated_lines_never_crash_and_every_line_is_accounted(parser, module, make):
    rng = random.Random(11)
    lines = [_mutate(rng, ln.encode()) for ln in make(rng)]
    lines = [ln for ln in lines if ln.strip(b" \r")]
    data = b"\n".join(lines) + b"\n"
    ctx = dict(reference_time=datetime(2024, 12, 30, tzinfo=UTC))
    rows, rej, _ = run(parser, data, **ctx)
    blank = sum(1 for ln in lines if not ln.rstrip(b"\r"))
    assert rows.num_rows + rej.num_rows == len(lines) - blank
    assert all(r.startswith("parse: ") for r in rej.column("reason").to_pylist())
    if module is not None:  # rows of the vectorised pass agree with the per-line reference parser
        text = [_utf8_or_latin1(ln) for ln in data.split(b"\n")]  # the parsers' documented decoding
        pctx = ParseContext(name="x", **ctx)
        for r in rows.to_pylist()[:400]:
            ref = module.slow(text[r["source_offset"] - 1], pctx)
            assert not isinstance(ref, str) and ref["message"] == r["message"] and ref["app"] == r["app"]
            assert pd.Timestamp(r["time"]).value == ref["time"] and ref.get("pid") == r["pid"]


# ------------------------------------------------------------------ compiled kernel shapes


_HOSTS = ["cn01", "h", "CN02.example.org", "x" * 70, "10.0.0.7", "n\u00e9ud"]
_TAGS = [
    "sshd[123]: ",
    "kernel: ",
    "",
    "app:x ",
    "tag:",
    "t[]: ",
    "t[12a]: ",
    "t[1234567890123456789]: ",
    "a]b: ",
    "t[1 2]: ",
    "t[12]x: ",
    "t[1[2]: ",
    ": ",
    "tag:  two",
    "[x]: ",
]
_MSGS = ["", "hello", " lead", "a: b", "\ufeffbom", "\u00fcml", "x  y", "trail "]


def _rest(rng: random.Random) -> str:
    return f"{rng.choice(_HOSTS)} {rng.choice(_TAGS)}{rng.choice(_MSGS)}"


def _kernel_3164(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        pri = rng.choice(["", "", "<1>", "<13>", "<191>", "<999>", "<1234>", "<>", "<x>"])
        day = rng.randrange(0, 33) if rng.random() < 0.2 else rng.randrange(1, 29)
        dstr = rng.choice([f"{day:2d}", f"{day:02d}", f"{day}"])
        mon = rng.choice(["Jan", "Feb", "Dec", "Jun", "Feb", "Jan", "jan", "Foo"])
        hms = rng.choice([f"{rng.randrange(25):02d}:{rng.randrange(61):02d}:{rng.randrange(61):02d}", "01:02:03", "1:02:03"])
        sep = rng.choice([" ", " ", " ", "  "])
        rest = rng.choice([_rest(rng), _rest(rng), "hostonly", ""])
        out.append(f"{pri}{mon} {dstr} {hms}{sep}{rest}")
    return out


def _ts3339(rng: random.Random) -> str:
    """An RFC 3339 timestamp: half well-formed (fraction 0-9 digits, Z or offset), half near-misses."""
    if rng.random() < 0.5:
        frac = "." + "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 10))) if rng.random() < 0.7 else ""
        off = rng.choice(["Z", "+01:00", "-07:30", "+14:00", "-00:00"])
        return (
            f"20{rng.randrange(10, 40)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:"
            f"{rng.randrange(60):02d}:{rng.randrange(60):02d}{frac}{off}"
        )
    frac = rng.choice(["", ".1", ".12345", ".123456789", ".1234567890", ".", ".12a"])
    off = rng.choice(["Z", "+01:00", "-07:30", "+23:59", "+99:99", "z", "+0100", ""])
    y = rng.choice(["2024", "1677", "1678", "2261", "2262", "20x4"])
    mo, d = rng.choice([("02", "29"), ("02", "30"), ("12", "31"), ("13", "01"), ("01", "00"), ("06", "15")])
    hms = rng.choice(["23:59:59", "24:00:00", "12:60:00", "00:00:60", "01:02:03"])
    return f"{y}-{mo}-{d}T{hms}{frac}{off}"


def _kernel_5424(rng: random.Random, n: int) -> list[str]:
    sds = [
        "-",
        "-x",
        "[a]",
        '[id@1 a="1"]',
        '[id@1 a="x] y"][p@2 b="\\"q\\]"]',
        '[a x="1" no end',
        '[a b="\\',
        "[a][b]",
        "[a]x",
        '[a b="\u00e9\\\u00e9"]',
        "",
        "[",
        "[a]]",
        '[a b="1"] [c]',
    ]
    out = []
    for _ in range(n):
        head = rng.choice(["<1>1", "<13>1", "<191>1", "<13>1", "<1000>1", "<13>2", "<13>11", "13>1", "<>1"])
        host = rng.choice(["cn01", "cn01", "-", "x" * 70, "CN02.example.org", ""])
        app = rng.choice(["-", "app", "a" * 50])
        proc = rng.choice(["-", "123", "w-3", "1234567890123456789", "007"])
        msgid = rng.choice(["-", "ID47"])
        tail = rng.choice(["", " ", " msg", " \ufeffbom", " \ufeff", "  two"])
        ts = _ts3339(rng) if rng.random() < 0.9 else "-"
        out.append(f"{head} {ts} {host} {app} {proc} {msgid} {rng.choice(sds)}{tail}")
    return out


def _kernel_rsyslog(rng: random.Random, n: int) -> list[str]:
    return [f"{_ts3339(rng)}{rng.choice([' ', ' ', '  ', ''])}{rng.choice([_rest(rng), _rest(rng), 'h', ''])}" for _ in range(n)]


@pytest.mark.parametrize(
    "module, make, ctx",
    [
        (
            syslog_rfc3164,
            _kernel_3164,
            ParseContext(name="x", reference_time=datetime(2024, 2, 10, tzinfo=UTC), tz="Europe/Berlin"),
        ),
        (syslog_rfc5424, _kernel_5424, ParseContext(name="x")),
        (syslog_rsyslog, _kernel_rsyslog, ParseContext(name="x")),
    ],
)
def test_compiled_kernel_agrees_with_reference_on_edge_shapes(module, make, ctx):
    """Every line the compiled pass accepts is parsed exactly like the per-line reference; CRLF and Latin-1 too."""
    rng = random.Random(17)
    lines = make(rng, 4000)
    raw = [ln.encode() for ln in lines]
    raw += [ln.encode() + b"\r" for ln in lines[:300]]  # CRLF line ends
    raw += [ln.encode().replace(b"\xc3\xa9", b"\xe9") for ln in lines[:300] if "\u00e9" in ln]  # Latin-1 bytes
    blk = _make_block(b"\n".join(raw) + b"\n", 1, 1 << 20)
    cols, ok = module.fast(blk, blk.usable, ctx)
    assert ok.sum() >= 200 and (~ok).sum() >= 200  # both accepted and rejected shapes are exercised
    names = ["time", "host", "facility", "severity", "app", "pid", "message", "msgid", "structured_data"]
    got = {n: (v.tolist() if isinstance(v, np.ndarray) else v.to_pylist()) for n, v in cols.items() if n in names}
    for j, i in enumerate(blk.usable[ok]):
        ref = module.slow(blk.line(int(i)), ctx)
        assert not isinstance(ref, str), (blk.line(int(i)), ref)
        for name, vals in got.items():
            assert vals[j] == ref.get(name), (name, blk.line(int(i)), vals[j], ref.get(name))
