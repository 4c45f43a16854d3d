"""RFC 3164 ("BSD") syslog lines: ``[<PRI>]Mmm dd hh:mm:ss host tag[pid]: message``.

Both the wire form with ``<PRI>`` and the file form written by rsyslog/syslog-ng (no PRI) are
accepted; without PRI, facility and severity are null.

* Time: the timestamp has no year and no zone. It is wall-clock time in ``ctx.tz``; the year is
  the one that puts the line in the window ``(reference - 334 days, reference + 31 days]`` around
  ``ctx.reference_time`` (when the file was produced), so a ``Dec 31`` line in a file produced in
  January belongs to the previous year and a ``Jan 1`` line in a file stamped Dec 31 to the next.
  DST-ambiguous wall times take the earlier instant.
* Tag: the first word after the host when it ends with ``:`` (``tag:`` or ``tag[pid]:``); otherwise
  the line has no tag (``app`` and ``pid`` null) and the whole rest is the message.
* PRI: 1-3 digits are passed through (facility = PRI // 8, severity = PRI % 8), so ``<999>`` gives
  facility 124 and is quarantined by validation (facility 0-23); longer PRIs are rejected here.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa

from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.syslog_blocks import (
    Block,
    const_str,
    days_from_civil,
    days_in_month,
    local_now,
    local_to_utc_ns,
    masked,
)

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_NS = 1_000_000_000
FUTURE_WINDOW = timedelta(days=31)
PAST_WINDOW = timedelta(days=334)


def infer_years(month: np.ndarray, day: np.ndarray, sec_of_day: np.ndarray, ref_local: datetime) -> np.ndarray:
    """Year of each (month, day, time) so that it falls in ``(ref - 334 d, ref + 31 d]`` (see module doc)."""
    year = np.full(len(month), ref_local.year, np.int64)
    ref_ns = _naive_ns(ref_local)
    # day may be Feb 29 in a non-leap year: clamp for the window test only
    dd = np.minimum(day, days_in_month(year, month))
    t = days_from_civil(year, month, dd) * 86400 * _NS + sec_of_day * _NS
    year = np.where(t > ref_ns + _td_ns(FUTURE_WINDOW), year - 1, year)
    year = np.where(t <= ref_ns - _td_ns(PAST_WINDOW), year + 1, year)
    return year


def _naive_ns(dt: datetime) -> int:
    d = dt - datetime(1970, 1, 1)
    return (d.days * 86400 + d.seconds) * _NS + d.microseconds * 1000


def _td_ns(td: timedelta) -> int:
    return (td.days * 86400 + td.seconds) * _NS


def fast(block: Block, idx: np.ndarray, ctx: ParseContext) -> tuple[dict, np.ndarray]:
    """Compiled parse of the common RFC 3164 shape; returns (columns of accepted lines, accepted mask).

    One pass of :func:`nodewatch.tasks.ingest._syslog_kernel.scan_3164` over the lines (fixed-width
    timestamp, 1-3 digit PRI, one space before the host); other lines go to :func:`slow`.
    """
    from nodewatch.tasks.ingest import _syslog_kernel as kern

    s = block.starts[idx]
    e = block.ends[idx]
    n = len(idx)
    ok = np.empty(n, np.bool_)
    local, pri = np.empty(n, np.int64), np.empty(n, np.int64)
    pos = host_tag_arrays(n)
    ref = local_now(ctx.reference_time, ctx.tz)
    kern.scan_3164(
        block.buf,
        s,
        e,
        ref.year,
        _naive_ns(ref),
        _td_ns(FUTURE_WINDOW),
        _td_ns(PAST_WINDOW),
        ok,
        local,
        pri,
        pos["hs"],
        pos["he"],
        pos["tag_end"],
        pos["pid"],
        pos["ms"],
        pos["has_tag"],
        pos["has_pid"],
    )
    k = None if ok.all() else ok
    pri_k = pri if k is None else pri[k]
    no_pri = pri_k < 0
    cols = {
        "time": local_to_utc_ns(local if k is None else local[k], ctx.tz),
        **host_tag_columns(block, pos, e, k),
        "facility": masked(pri_k >> 3, no_pri),
        "severity": masked(pri_k & 7, no_pri),
        "source_format": const_str("rfc3164", len(pri_k)),
    }
    return cols, ok


def host_tag_arrays(n: int) -> dict[str, np.ndarray]:
    """Uninitialised output arrays of the compiled ``host tag[pid]: message`` scan for ``n`` lines

    (``hs, he, tag_end, pid, ms`` int64, ``has_tag, has_pid`` bool; see :func:`host_tag_fast`).
    """
    pos = {name: np.empty(n, np.int64) for name in ("hs", "he", "tag_end", "pid", "ms")}
    pos["has_tag"] = np.empty(n, np.bool_)
    pos["has_pid"] = np.empty(n, np.bool_)
    return pos


def host_tag_fast(block: Block, hs: np.ndarray, e: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Compiled ``host tag[pid]: message`` starting at ``hs`` (the part after a syslog timestamp).

    Returns positions (``hs, he`` host; ``ts, tag_end`` tag; ``pid``; ``ms`` message start) and flags
    (``has_tag, has_pid``) for every line, and ``ok``: False where the shape needs the per-line parser
    (nothing after the timestamp, or a space before the host). Splits exactly as :func:`host_tag_slow`.
    """
    from nodewatch.tasks.ingest import _syslog_kernel as kern

    hs = np.ascontiguousarray(hs, np.int64)
    e = np.ascontiguousarray(e, np.int64)
    pos = host_tag_arrays(len(hs))
    pos["hs"] = hs
    ok = np.empty(len(hs), np.bool_)
    kern.scan_host_tag(block.buf, hs, e, ok, pos["he"], pos["tag_end"], pos["pid"], pos["ms"], pos["has_tag"], pos["has_pid"])
    pos["ts"] = np.minimum(pos["he"] + 1, e)
    return pos, ok


def host_tag_columns(block: Block, pos: dict[str, np.ndarray], e: np.ndarray, k: np.ndarray | None) -> dict[str, pa.Array]:
    """``host, app, pid, message`` columns of the lines selected by mask ``k`` (all when None).

    ``pos`` as returned by :func:`host_tag_fast` (``ts``, the tag start, defaults to ``he + 1``).
    """
    from nodewatch.tasks.ingest import _syslog_kernel as kern

    def sel(a: np.ndarray) -> np.ndarray:
        return a if k is None else a[k]

    size = len(block.data)
    hs, he, ms, ek = sel(pos["hs"]), sel(pos["he"]), sel(pos["ms"]), sel(e)
    ts = sel(pos["ts"]) if "ts" in pos else he + 1
    return {
        "host": kern.strings(block.buf, size, hs, he),
        "app": kern.strings(block.buf, size, ts, sel(pos["tag_end"]), ~sel(pos["has_tag"])),
        "pid": masked(sel(pos["pid"]), ~sel(pos["has_pid"])),
        "message": kern.strings(block.buf, size, np.minimum(ms, ek), ek),
    }


_LINE_RE = re.compile(
    r"^(?:<(?P<pri>[^>]{0,8})>)?(?P<mon>[A-Za-z]{3}) {1,2}(?P<day>\d{1,2}) (?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2})"
    r"(?: +(?P<rest>.*))?$"
)
_TAG_RE = re.compile(r"^(?P<tag>[^ :\[]+)(?:\[(?P<pid>[^\] ]*)\])?:(?: (?P<msg>.*))?$", re.S)  # fields end at ' ' only


def slow(line: str, ctx: ParseContext) -> dict | str:
    """Per-line parser for every RFC 3164 line (the reference the vectorised pass must agree with).

    Returns a raw row (``time`` in epoch ns, ``host`` unnormalised) or the reject reason.
    """
    m = _LINE_RE.match(line)
    if not m:
        return "parse: not an RFC 3164 line (expected '[<PRI>]Mmm dd hh:mm:ss host tag: message')"
    pri_s = m["pri"]
    pri = None
    if pri_s is not None:
        if not pri_s.isdigit() or not pri_s.isascii() or len(pri_s) > 3:
            return f"parse: bad PRI <{pri_s}> (expected 1-3 digits)"
        pri = int(pri_s)
    mon = m["mon"]
    if mon not in MONTHS:
        return f"parse: unknown month {mon!r}"
    month, day, hh, mi, ss = MONTHS.index(mon) + 1, int(m["day"]), int(m["h"]), int(m["m"]), int(m["s"])
    if not (1 <= day <= 31 and hh < 24 and mi < 60 and ss < 60):
        return f"parse: invalid timestamp {line[m.start('mon') : m.end('s')]!r}"
    rest = m["rest"]
    if not rest:
        return "parse: no host name after the timestamp"
    sod = hh * 3600 + mi * 60 + ss
    year = int(infer_years(np.array([month]), np.array([day]), np.array([sod]), local_now(ctx.reference_time, ctx.tz))[0])
    if day > int(days_in_month(np.array([year]), np.array([month]))[0]):
        return f"parse: invalid date {mon} {day} in inferred year {year}"
    local = (int(days_from_civil(np.array([year]), np.array([month]), np.array([day]))[0]) * 86400 + sod) * _NS
    time = int(local_to_utc_ns(np.array([local], np.int64), ctx.tz)[0])
    return {
        "time": time,
        **host_tag_slow(rest),
        "facility": None if pri is None else pri >> 3,
        "severity": None if pri is None else pri & 7,
        "source_format": "rfc3164",
    }


def host_tag_slow(rest: str) -> dict:
    """Per-line reference of :func:`host_tag_fast`: ``{"host", "app", "pid", "message"}`` of ``host tag[pid]: msg``."""
    host, _, body = rest.partition(" ")
    app = pid = None
    msg = body
    tm = _TAG_RE.match(body)
    if tm:
        app, msg = tm["tag"], tm["msg"] or ""
        p = tm["pid"]
        if p is not None and p.isdigit() and p.isascii() and len(p) <= 18:
            pid = int(p)
    return {"host": host, "app": app, "pid": pid, "message": msg}


_SNIFF_RE = re.compile(rb"^(?:<\d{1,3}>)?[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ ")


def sniff(head: bytes) -> float:
    """Share of the first non-empty lines (up to 200) that look like RFC 3164."""
    return sniff_share(head, _SNIFF_RE)


def sniff_share(head: bytes, pattern: re.Pattern[bytes]) -> float:
    """Share of the first complete non-empty lines of ``head`` (up to 200) matching ``pattern``."""
    lines = head.split(b"\n")
    if len(lines) > 1 and len(head) >= 65536:
        lines = lines[:-1]  # possibly cut by the 64 KiB head
    lines = [ln for ln in lines if ln.strip()][:200]
    if not lines:
        return 0.0
    return sum(1 for ln in lines if pattern.match(ln)) / len(lines)
