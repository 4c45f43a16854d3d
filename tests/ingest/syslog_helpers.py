"""Shared helpers of the syslog parser tests: running a parser on bytes, random line generators, fast/slow comparison."""

from __future__ import annotations

import io
import random

import numpy as np
import pandas as pd
import pyarrow as pa

from nodewatch.tasks.ingest import syslog_rfc3164
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.syslog_blocks import _make_block

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
