"""Syslog parsers under mutation: no crash and every line accounted; compiled kernels agree with the reference."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest
from syslog_helpers import (
    FIX,
    _random_3164,
    _random_5424,
    _random_rsyslog,
    run,
)

from nodewatch.tasks.ingest import syslog_rfc3164, syslog_rfc5424, syslog_rsyslog
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.syslog import parse_bgl, parse_hpc, parse_rfc3164, parse_rfc5424, parse_rsyslog
from nodewatch.tasks.ingest.syslog_blocks import _make_block


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
