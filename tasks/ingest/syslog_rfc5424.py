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

from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.syslog_blocks import MAX_YEAR, MIN_YEAR, Block, const_str, days_from_civil, days_in_month, masked
from nodewatch.tasks.ingest.syslog_rfc3164 import sniff_share

_NS = 1_000_000_000


def rfc3339_fast(block: Block, t0: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compiled RFC 3339 timestamps ``YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+hh:mm)`` starting at ``t0``.

    The timestamp ends at the first space (or the line end ``e``). Returns ``(epoch ns UTC, end
    position, ok)`` for every line; values where ``ok`` is False are garbage. Same rules as
    :func:`rfc3339_slow`.
    """
    from nodewatch.tasks.ingest import _syslog_kernel as kern

    n = len(t0)
    ok, time, t_end = np.empty(n, np.bool_), np.empty(n, np.int64), np.empty(n, np.int64)
    kern.scan_rfc3339(block.buf, np.ascontiguousarray(t0, np.int64), np.ascontiguousarray(e, np.int64), ok, time, t_end)
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
    """Compiled parse of well-formed RFC 5424 lines; returns (columns of accepted lines, accepted mask).

    One pass of :func:`nodewatch.tasks.ingest._syslog_kernel.scan_5424` (non-empty header tokens, SD ``-`` or
    ``[...]`` elements); other lines go to :func:`slow`.
    """
    from nodewatch.tasks.ingest import _syslog_kernel as kern

    s = block.starts[idx]
    e = block.ends[idx]
    n = len(idx)
    ok, sd_nil, has_pid = np.empty(n, np.bool_), np.empty(n, np.bool_), np.empty(n, np.bool_)
    time, pri, pid = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    bounds = np.empty((11, n), np.int64)
    kern.scan_5424(block.buf, s, e, ok, time, pri, bounds, pid, has_pid, sd_nil)
    if not ok.all():
        time, pri, pid, has_pid, sd_nil, e = time[ok], pri[ok], pid[ok], has_pid[ok], sd_nil[ok], e[ok]
        bounds = bounds[:, ok]
    hs, he, as_, ae, ps, pe, ms_, me, sd0, sd_end, msg_s = bounds
    buf, size = block.buf, len(block.data)

    def nil(a0: np.ndarray, a1: np.ndarray) -> np.ndarray:
        return (a1 - a0 == 1) & (buf[a0] == 45)

    cols = {
        "time": time,
        "host": kern.strings(buf, size, hs, he),
        "facility": pri >> 3,
        "severity": pri & 7,
        "app": kern.strings(buf, size, as_, ae, nil(as_, ae)),
        "pid": masked(pid, ~has_pid),
        "msgid": kern.strings(buf, size, ms_, me, nil(ms_, me)),
        "structured_data": kern.strings(buf, size, sd0, sd_end, sd_nil),
        "message": kern.strings(buf, size, msg_s, e),
        "source_format": const_str("rfc5424", len(time)),
    }
    return cols, ok


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
