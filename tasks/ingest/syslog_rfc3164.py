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

from tasks.ingest.base import ParseContext
from tasks.ingest.syslog_blocks import (
    Block,
    const_str,
    days_from_civil,
    days_in_month,
    digits,
    first_in,
    local_now,
    local_to_utc_ns,
    masked,
    optional_substrings,
    substrings,
    var_digits,
    window,
)

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH_CODES = np.array([(ord(m[0]) << 16) | (ord(m[1]) << 8) | ord(m[2]) for m in MONTHS], np.int64)
_MONTH_ORDER = np.argsort(_MONTH_CODES)
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
    """Vectorised parse of the common RFC 3164 shape; returns (columns of accepted lines, accepted mask)."""
    buf = block.buf
    s = block.starts[idx]
    e = block.ends[idx]
    n = len(idx)
    has_pri = buf[s] == 60  # '<'
    pri_len = np.zeros(n, np.int64)
    for L in (3, 4, 5):
        pri_len = np.where(has_pri & (pri_len == 0) & (buf[s + L - 1] == 62), L, pri_len)
    ok = ~has_pri | (pri_len > 0)
    pri, pri_ok = var_digits(buf, s + 1, s + np.maximum(pri_len - 1, 1), 3)
    ok &= ~has_pri | pri_ok
    t = s + pri_len
    ok &= e - t >= 18
    for off, ch in ((3, 32), (6, 32), (9, 58), (12, 58), (15, 32)):
        ok &= buf[t + off] == ch
    code = (buf[t].astype(np.int64) << 16) | (buf[t + 1].astype(np.int64) << 8) | buf[t + 2]
    pos = np.searchsorted(_MONTH_CODES[_MONTH_ORDER], code)
    pos = np.minimum(pos, 11)
    month = _MONTH_ORDER[pos] + 1
    ok &= _MONTH_CODES[_MONTH_ORDER][pos] == code
    d1 = buf[t + 4]
    day, day_ok = digits(buf, t + 4, 2)
    day1, day1_ok = digits(buf, t + 5, 1)
    day = np.where(d1 == 32, day1, day)
    ok &= np.where(d1 == 32, day1_ok, day_ok) & (day >= 1)
    hh, ok_h = digits(buf, t + 7, 2)
    mm, ok_m = digits(buf, t + 10, 2)
    ss, ok_s = digits(buf, t + 13, 2)
    ok &= ok_h & ok_m & ok_s & (hh < 24) & (mm < 60) & (ss < 60)
    hs = t + 16
    ht, ht_ok = host_tag_fast(block, hs, e)
    ok &= ht_ok

    month, day, hh, mm, ss = month[ok], day[ok], hh[ok], mm[ok], ss[ok]
    sod = hh * 3600 + mm * 60 + ss
    year = infer_years(month, day, sod, local_now(ctx.reference_time, ctx.tz))
    date_ok = day <= days_in_month(year, month)
    keep = np.flatnonzero(ok)
    ok[keep[~date_ok]] = False  # Feb 29 of a non-leap inferred year -> fallback rejects with reason
    sel = date_ok
    local = (days_from_civil(year[sel], month[sel], day[sel]) * 86400 + sod[sel]) * _NS
    k = ok
    cols = {
        "time": local_to_utc_ns(local, ctx.tz),
        **host_tag_columns(block, ht, e, k),
        "facility": masked(pri[k] >> 3, ~has_pri[k]),
        "severity": masked(pri[k] & 7, ~has_pri[k]),
        "source_format": const_str("rfc3164", int(k.sum())),
    }
    return cols, ok


def host_tag_fast(block: Block, hs: np.ndarray, e: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Vectorised ``host tag[pid]: message`` starting at ``hs`` (the part after a syslog timestamp).

    Returns positions (``hs, he`` host; ``ts, tag_end`` tag; ``pid``; ``ms`` message start) and flags
    (``has_tag, has_pid``) for every line, and ``ok``: False where the shape needs the per-line parser.
    """
    buf = block.buf
    ok = buf[hs] != 32
    # host and tag are short: search 64-byte windows instead of the whole block (longer ones -> fallback)
    h_len = first_in(window(block, hs, 64), 32)
    he = hs + h_len
    ok &= (h_len < 64) & (he < e)
    ts = he + 1
    w2 = window(block, ts, 64)
    space_col = first_in(w2, 32)
    ok &= (space_col < 64) | (e - ts <= 64)  # the first word after the host ends inside the window
    colon = ts + first_in(w2, 58)
    space2 = ts + space_col
    brack = ts + first_in(w2, 91)
    has_tag = (colon < space2) & (colon < e) & (colon > ts)
    has_pid = has_tag & (brack < colon)
    ok &= ~has_pid | ((buf[colon - 1] == 93) & (brack > ts))
    pid, pid_ok = var_digits(buf, brack + 1, colon - 1, 10)
    ok &= ~has_pid | pid_ok
    tag_end = np.where(has_pid, brack, colon)
    ms = np.where(has_tag, colon + 1, ts)
    ms = np.where(has_tag & (buf[ms] == 32) & (ms < e), ms + 1, ms)
    # a tag ends with ': ' or ':' at the end of the line; 'word:rest' is not a tag -> fallback decides
    ok &= ~has_tag | (buf[colon + 1] == 32) | (colon + 1 == e)
    pos = {"hs": hs, "he": he, "ts": ts, "tag_end": tag_end, "pid": pid, "ms": ms, "has_tag": has_tag, "has_pid": has_pid}
    return pos, ok


def host_tag_columns(block: Block, pos: dict[str, np.ndarray], e: np.ndarray, k: np.ndarray) -> dict[str, pa.Array]:
    """``host, app, pid, message`` columns of the lines selected by mask ``k`` (see :func:`host_tag_fast`)."""
    p = {name: v[k] for name, v in pos.items()}
    ek = e[k]
    return {
        "host": substrings(block, p["hs"], p["he"]),
        "app": optional_substrings(block, p["ts"], p["tag_end"], ~p["has_tag"]),
        "pid": masked(p["pid"], ~p["has_pid"]),
        "message": substrings(block, np.minimum(p["ms"], ek), ek),
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
        return f"parse: invalid timestamp {line[m.start('mon'):m.end('s')]!r}"
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
