"""RFC 5424 syslog lines: ``<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA [MSG]``.

* TIMESTAMP is RFC 3339 with optional fraction (up to 9 digits kept, nanoseconds) and ``Z`` or a
  ``+hh:mm`` offset; converted to UTC. A NILVALUE (``-``) timestamp or host rejects the line: the
  staged table needs both.
* ``-`` (NILVALUE) APP-NAME / PROCID / MSGID become null; a non-numeric PROCID gives a null ``pid``.
* STRUCTURED-DATA is kept verbatim in ``structured_data`` (null for ``-``); a UTF-8 BOM at the
  start of MSG is dropped.
* PRI is passed through like RFC 3164 (``<999>`` -> facility 124, quarantined by validation).
"""

from __future__ import annotations

import re

import numpy as np

from tasks.ingest.base import ParseContext
from tasks.ingest.syslog_blocks import (
    MAX_YEAR,
    MIN_YEAR,
    Block,
    const_str,
    days_from_civil,
    days_in_month,
    digit_columns,
    digits,
    first_in,
    masked,
    next_at,
    optional_substrings,
    substrings,
    var_digits,
    window,
)
from tasks.ingest.syslog_rfc3164 import sniff_share

_NS = 1_000_000_000


def rfc3339_fast(block: Block, t0: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised RFC 3339 timestamps ``YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+hh:mm)`` starting at ``t0``.

    The timestamp ends at the first space of a 40-byte window (or the line end ``e``). Returns
    ``(epoch ns UTC, end position, ok)`` for every line; values where ``ok`` is False are garbage.
    """
    buf = block.buf
    w_ts = window(block, t0, 40)
    ts_len = first_in(w_ts, 32)
    t_end = np.minimum(t0 + ts_len, e)  # every derived index stays inside the line (+ padding)
    ok = (ts_len >= 20) & (ts_len < 40)
    year, a = digit_columns(w_ts, [0, 1, 2, 3])
    month, b = digit_columns(w_ts, [5, 6])
    day, c = digit_columns(w_ts, [8, 9])
    hh, d = digit_columns(w_ts, [11, 12])
    mi, f = digit_columns(w_ts, [14, 15])
    ss, g = digit_columns(w_ts, [17, 18])
    ok &= a & b & c & d & f & g & (year >= MIN_YEAR) & (year <= MAX_YEAR)
    for off, ch in ((4, 45), (7, 45), (10, 84), (13, 58), (16, 58)):
        ok &= w_ts[:, off] == ch
    zulu = buf[t_end - 1] == 90
    sign = buf[t_end - 6]
    has_off = ~zulu & ((sign == 43) | (sign == 45)) & (buf[t_end - 3] == 58)
    oh, oa = digits(buf, t_end - 5, 2)
    om, ob = digits(buf, t_end - 2, 2)
    ok &= zulu | (has_off & oa & ob & (oh < 24) & (om < 60))
    offset_s = np.where(zulu, 0, np.where(sign == 45, -1, 1) * (oh * 3600 + om * 60))
    frac_end = np.where(zulu, t_end - 1, t_end - 6)
    has_frac = frac_end > t0 + 19
    ok &= ~has_frac | (buf[t0 + 19] == 46)
    fdig = frac_end - (t0 + 20)
    frac, fok = var_digits(buf, t0 + 20, frac_end, 9)
    ok &= ~has_frac | (fok & (fdig <= 9))
    frac_ns = np.where(has_frac, frac * 10 ** (9 - np.clip(fdig, 0, 9)), 0)
    ok &= (month >= 1) & (month <= 12) & (day >= 1) & (hh < 24) & (mi < 60) & (ss < 60)
    ok &= day <= days_in_month(year, np.clip(month, 1, 12))
    days = days_from_civil(np.where(ok, year, 1970), np.where(ok, month, 1), np.where(ok, day, 1))
    time = (days * 86400 + hh * 3600 + mi * 60 + ss - offset_s) * _NS + frac_ns
    return np.where(ok, time, 0), t_end, ok


def rfc3339_slow(ts: str, fmt: str = "RFC 3339") -> int | str:
    """Per-line reference of :func:`rfc3339_fast`: epoch ns UTC, or a reject reason (naming ``fmt``)."""
    tm = _TS_RE.match(ts)
    if not tm:
        return f"parse: bad {fmt} timestamp {ts[:40]!r}"
    y, mo, d = int(tm["y"]), int(tm["mo"]), int(tm["d"])
    if not MIN_YEAR <= y <= MAX_YEAR:
        return f"parse: year {y} outside {MIN_YEAR}-{MAX_YEAR} (not representable in nanoseconds)"
    h, mi, s = int(tm["h"]), int(tm["mi"]), int(tm["s"])
    if not (1 <= mo <= 12 and 1 <= d <= int(days_in_month(np.array([y]), np.array([mo]))[0]) and h < 24 and mi < 60 and s < 60):
        return f"parse: invalid date/time {ts[:40]!r}"
    off = 0 if tm["z"] else (1 if tm["sign"] == "+" else -1) * (int(tm["oh"]) * 3600 + int(tm["om"]) * 60)
    f = tm["f"] or ""
    frac = int(f.ljust(9, "0")) if f else 0
    days = int(days_from_civil(np.array([y]), np.array([mo]), np.array([d]))[0])
    return (days * 86400 + h * 3600 + mi * 60 + s - off) * _NS + frac


def fast(block: Block, idx: np.ndarray, ctx: ParseContext) -> tuple[dict, np.ndarray]:
    """Vectorised parse of well-formed RFC 5424 lines; returns (columns of accepted lines, accepted mask)."""
    buf = block.buf
    s = block.starts[idx]
    e = block.ends[idx]
    n = len(idx)
    ok = buf[s] == 60
    pri_len = np.zeros(n, np.int64)
    for L in (3, 4, 5):
        pri_len = np.where(ok & (pri_len == 0) & (buf[s + L - 1] == 62), L, pri_len)
    ok &= pri_len > 0
    pri, pri_ok = var_digits(buf, s + 1, s + np.maximum(pri_len - 1, 1), 3)
    h = s + pri_len
    ok &= pri_ok & (buf[h] == 49) & (buf[h + 1] == 32)  # version "1 "
    t0 = h + 2
    time_ns, t_end, ts_ok = rfc3339_fast(block, t0, e)
    ok &= ts_ok
    # HOSTNAME APP-NAME PROCID MSGID: each token ends at the first space of a short window
    # (a longer token, an empty one or a double space -> per-line fallback)
    bounds = []
    start = t_end + 1
    for width in (64, 56, 24, 40):
        length = first_in(window(block, start, width), 32)
        ok &= (length > 0) & (length < width) & (start + length < e)
        end = np.minimum(start + length, e)
        bounds.append((start, end))
        start = np.minimum(end + 1, e)
    (hs, he), (as_, ae), (ps, pe), (ms_, me) = bounds
    # --- HOSTNAME APP-NAME PROCID MSGID
    nil = lambda a0, a1: (a1 - a0 == 1) & (buf[a0] == 45)  # noqa: E731
    ok &= ~nil(hs, he)
    pid, pid_ok = var_digits(buf, ps, pe, 18)
    # --- STRUCTURED-DATA
    sd0 = me + 1
    sd_nil = buf[sd0] == 45
    sd_end = sd0 + 1
    has_sd = ok & ~sd_nil
    if has_sd.any():  # STRUCTURED-DATA present somewhere: locate its end with block-wide delimiter positions
        close = next_at(_pair_positions(block), sd0)  # first "] " after sd0 (position of ']')
        bslash = next_at(block.positions(92), sd0)
        sd_end = np.where(sd_nil, sd0 + 1, np.where(close < e, close + 1, e))
        quotes = block.positions(34)
        even_quotes = (np.searchsorted(quotes, sd_end) - np.searchsorted(quotes, sd0)) % 2 == 0
        # well-formed shape only: every ']' closes an element and is followed by '[' or ends the SD
        def count(pos: np.ndarray) -> np.ndarray:
            return np.searchsorted(pos, sd_end) - np.searchsorted(pos, sd0)

        n_open, n_close = count(block.positions(91)), count(block.positions(93))
        n_joint = count(_pair_positions(block, b"]["))
        shape_ok = (n_open == n_close) & (n_joint == n_close - 1)
        ok &= sd_nil | ((buf[sd0] == 91) & (buf[sd_end - 1] == 93) & (bslash >= sd_end) & even_quotes & shape_ok)
    else:
        ok &= sd_nil
    ok &= (sd_end == e) | (buf[sd_end] == 32)
    msg_s = np.minimum(sd_end + 1, e)
    bom = (buf[msg_s] == 0xEF) & (buf[msg_s + 1] == 0xBB) & (buf[msg_s + 2] == 0xBF) & (msg_s + 3 <= e)
    msg_s = np.where(bom, msg_s + 3, msg_s)

    k = ok
    cols = {
        "time": time_ns[k],
        "host": substrings(block, hs[k], he[k]),
        "facility": pri[k] >> 3,
        "severity": pri[k] & 7,
        "app": optional_substrings(block, as_[k], ae[k], nil(as_, ae)[k]),
        "pid": masked(pid[k], ~pid_ok[k]),
        "msgid": optional_substrings(block, ms_[k], me[k], nil(ms_, me)[k]),
        "structured_data": optional_substrings(block, sd0[k], sd_end[k], sd_nil[k]),
        "message": substrings(block, msg_s[k], e[k]),
        "source_format": const_str("rfc5424", int(k.sum())),
    }
    return cols, ok


def _pair_positions(block: Block, pair: bytes = b"] ") -> np.ndarray:
    """Positions of the two-byte sequence ``pair`` (default ``"] "``), with an end sentinel."""
    body = block.buf[: len(block.data)]
    a, b = pair
    pos = np.flatnonzero((body[:-1] == a) & (body[1:] == b)) if len(body) > 1 else np.zeros(0, np.int64)
    return np.append(pos, np.int64(len(block.data)))


_HEAD_RE = re.compile(r"^<(?P<pri>[^>]{0,8})>(?P<ver>\d{1,2}) (?P<rest>.*)$", re.S)
_TS_RE = re.compile(
    r"^(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)T(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.(?P<f>\d{1,9}))?"
    r"(?:(?P<z>Z)|(?P<sign>[+-])(?P<oh>\d\d):(?P<om>\d\d))$"
)


def _parse_sd(text: str) -> tuple[str | None, str] | str:
    """Split ``STRUCTURED-DATA [MSG]``: (sd or None, msg) or a reject reason."""
    if text.startswith("-"):
        if len(text) > 1 and text[1] != " ":
            return "parse: STRUCTURED-DATA must be '-' or '[...]'"
        return None, text[2:]
    if not text.startswith("["):
        return "parse: STRUCTURED-DATA must be '-' or '[...]'"
    i, n = 0, len(text)
    while i < n and text[i] == "[":
        i += 1
        in_quote = False
        while i < n:
            ch = text[i]
            if ch == "\\" and in_quote:
                i += 2
                continue
            if ch == '"':
                in_quote = not in_quote
            elif ch == "]" and not in_quote:
                break
            i += 1
        if i >= n:
            return "parse: unterminated STRUCTURED-DATA element"
        i += 1
    if i < n and text[i] != " ":
        return "parse: no space after STRUCTURED-DATA"
    return text[:i], text[i + 1 :]


def slow(line: str, ctx: ParseContext) -> dict | str:
    """Per-line RFC 5424 parser (reference for the vectorised pass); raw row or reject reason."""
    m = _HEAD_RE.match(line)
    if not m:
        return "parse: not an RFC 5424 line (expected '<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG')"
    pri_s = m["pri"]
    if not (pri_s.isascii() and pri_s.isdigit() and len(pri_s) <= 3):
        return f"parse: bad PRI <{pri_s}> (expected 1-3 digits)"
    if m["ver"] != "1":
        return f"parse: unsupported syslog protocol version {m['ver']}"
    parts = m["rest"].split(" ", 5)
    if len(parts) < 6:
        return "parse: RFC 5424 header has fewer than 7 fields"
    ts, host, app, procid, msgid, tail = parts
    if ts == "-":
        return "parse: NILVALUE timestamp (the staged table needs a time)"
    time = rfc3339_slow(ts, "RFC 5424")
    if isinstance(time, str):
        return time
    if host == "-":
        return "parse: NILVALUE host name (the staged table needs a node)"
    sd = _parse_sd(tail)
    if isinstance(sd, str):
        return sd
    sdata, msg = sd
    if msg.startswith("\ufeff"):
        msg = msg[1:]
    pri = int(pri_s)
    return {
        "time": time,
        "host": host,
        "facility": pri >> 3,
        "severity": pri & 7,
        "app": None if app == "-" else app,
        "pid": int(procid) if procid.isascii() and procid.isdigit() and len(procid) <= 18 else None,
        "msgid": None if msgid == "-" else msgid,
        "structured_data": sdata,
        "message": msg,
        "source_format": "rfc5424",
    }


_SNIFF_RE = re.compile(rb"^<\d{1,3}>1 (?:\d{4}-\d\d-\d\dT\S+|-) \S+ \S+ \S+ \S+ ")


def sniff(head: bytes) -> float:
    """Share of the first non-empty lines (up to 200) that look like RFC 5424."""
    return sniff_share(head, _SNIFF_RE)
