"""Compiled (numba) scanners for syslog lines: one pass per block, no Python per line.

Each scanner walks the lines of a block (``Block.buf``, the padded bytes, and the line
starts/ends) once and writes, per line, an ``ok`` flag and the numbers and byte positions the
Python side needs to build the Arrow columns (PRI, time in ns, host/tag/message bounds, pid ...).
A line is accepted only in the shapes the per-line reference parsers
(``nodewatch.tasks.ingest.syslog_rfc3164.slow``, ``syslog_rfc5424.slow``, ``syslog_rsyslog.slow``) parse the
same way; anything else gets ``ok = False`` and goes to that reference parser, which parses it or
gives the reject reason. The field rules mirror the reference regexes byte for byte (the block
bytes are valid UTF-8 and every delimiter is ASCII, so byte and character positions agree).

:func:`build_strings` turns ``[start, end)`` byte ranges into the offsets and bytes of an Arrow
``string`` array in one copy.

Kept in its own module so that importing the parsers does not import numba (about 1 s); the
parsers import it lazily. ``cache=True`` stores the compiled code in ``__pycache__`` so later
processes skip compiling (a few seconds, once per machine and source change).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit

from nodewatch.tasks.ingest.syslog_blocks import MAX_YEAR, MIN_YEAR

_NS = 1_000_000_000
_MONTH_CODES = np.array(
    [
        (ord(m[0]) << 16) | (ord(m[1]) << 8) | ord(m[2])
        for m in ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    ],
    np.int64,
)
_DIM = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)
_POW10 = np.array([10**k for k in range(19)], np.int64)

# ------------------------------------------------------------------------------------ helpers


@njit(cache=True, nogil=True, boundscheck=False)
def _dig(c):  # pragma: no cover - compiled
    """Value of an ASCII digit byte, -1 for any other byte."""
    v = np.int64(c) - 48
    return v if 0 <= v <= 9 else -1


@njit(cache=True, nogil=True, boundscheck=False)
def _two(buf, p):  # pragma: no cover - compiled
    """Two ASCII digits at ``p`` (-1 if either is not a digit)."""
    a = _dig(buf[p])
    b = _dig(buf[p + 1])
    if a < 0 or b < 0:
        return -1
    return a * 10 + b


@njit(cache=True, nogil=True, boundscheck=False)
def _days_in_month(y, m):  # pragma: no cover - compiled
    if m == 2 and ((y % 4 == 0 and y % 100 != 0) or y % 400 == 0):
        return 29
    return _DIM[m]


@njit(cache=True, nogil=True, boundscheck=False)
def _days_from_civil(y, m, d):  # pragma: no cover - compiled
    """Days since 1970-01-01 (H. Hinnant's algorithm, as ``syslog_blocks.days_from_civil``)."""
    if m <= 2:
        y -= 1
    era = y // 400
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@njit(cache=True, nogil=True, boundscheck=False)
def _pri(buf, s, e):  # pragma: no cover - compiled
    """``<d{1,3}>`` at ``s``: (value, length incl. brackets), length 0 when malformed."""
    v = 0
    i = s + 1
    while i < e and i < s + 4:
        d = _dig(buf[i])
        if d < 0:
            break
        v = v * 10 + d
        i += 1
    if i == s + 1 or i >= e or buf[i] != 62:
        return 0, 0
    return v, i + 1 - s


@njit(cache=True, nogil=True, boundscheck=False)
def _space_at_or_after(buf, p, e):  # pragma: no cover - compiled
    """Position of the first space in ``[p, e)``, ``e`` if none."""
    while p < e and buf[p] != 32:
        p += 1
    return p


@njit(cache=True, nogil=True, boundscheck=False)
def _rfc3339(buf, t0, t1):  # pragma: no cover - compiled
    """``YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+hh:mm)`` exactly filling ``[t0, t1)``: (ok, epoch ns UTC).

    Same rules as ``syslog_rfc5424.rfc3339_slow`` (ASCII digits only; the offset is not range checked).
    """
    if t1 - t0 < 20:
        return False, 0
    if buf[t0 + 4] != 45 or buf[t0 + 7] != 45 or buf[t0 + 10] != 84 or buf[t0 + 13] != 58 or buf[t0 + 16] != 58:
        return False, 0
    y1 = _two(buf, t0)
    y2 = _two(buf, t0 + 2)
    mo = _two(buf, t0 + 5)
    d = _two(buf, t0 + 8)
    h = _two(buf, t0 + 11)
    mi = _two(buf, t0 + 14)
    s = _two(buf, t0 + 17)
    if y1 < 0 or y2 < 0 or mo < 0 or d < 0 or h < 0 or mi < 0 or s < 0:
        return False, 0
    y = y1 * 100 + y2
    if y < MIN_YEAR or y > MAX_YEAR or mo < 1 or mo > 12 or d < 1 or h > 23 or mi > 59 or s > 59:
        return False, 0
    if d > _days_in_month(y, mo):
        return False, 0
    p = t0 + 19
    frac = 0
    if buf[p] == 46:  # '.'
        p += 1
        f0 = p
        while p < t1 and p - f0 < 10:
            dd = _dig(buf[p])
            if dd < 0:
                break
            frac = frac * 10 + dd
            p += 1
        nf = p - f0
        if nf < 1 or nf > 9:
            return False, 0
        frac *= _POW10[9 - nf]
    off = 0
    if p + 1 == t1 and buf[p] == 90:  # 'Z'
        pass
    elif p + 6 == t1 and (buf[p] == 43 or buf[p] == 45) and buf[p + 3] == 58:
        oh = _two(buf, p + 1)
        om = _two(buf, p + 4)
        if oh < 0 or om < 0:
            return False, 0
        off = oh * 3600 + om * 60
        if buf[p] == 45:
            off = -off
    else:
        return False, 0
    days = _days_from_civil(y, mo, d)
    return True, (days * 86400 + h * 3600 + mi * 60 + s - off) * _NS + frac


@njit(cache=True, nogil=True, boundscheck=False)
def _host_tag(buf, hs, e):  # pragma: no cover - compiled
    """``host tag[pid]: message`` in ``[hs, e)`` exactly as ``syslog_rfc3164.host_tag_slow``.

    Returns ``(he, tag_end, pid, ms, has_tag, has_pid)``: host ``[hs, he)``, tag ``[he + 1, tag_end)``
    (when ``has_tag``), ``pid`` (when ``has_pid``: 1-18 ASCII digits), message ``[ms, e)``.
    """
    he = _space_at_or_after(buf, hs, e)
    if he >= e:  # no space: the whole rest is the host, empty message
        return e, e, 0, e, False, False
    ts = he + 1
    i = ts
    while i < e:
        c = buf[i]
        if c == 32 or c == 58 or c == 91:
            break
        i += 1
    no_tag = (he, ts, 0, ts, False, False)
    if i == ts or i >= e or buf[i] == 32:
        return no_tag
    tag_end = i
    pid = 0
    has_pid = False
    if buf[i] == 91:  # '[pid]' must follow, then ':'
        j = i + 1
        while j < e and buf[j] != 93 and buf[j] != 32:
            j += 1
        if j + 1 >= e or buf[j] != 93 or buf[j + 1] != 58:
            return no_tag
        nd = j - (i + 1)
        if 1 <= nd <= 18:
            has_pid = True
            for q in range(i + 1, j):
                d = _dig(buf[q])
                if d < 0:
                    has_pid = False
                    break
                pid = pid * 10 + d
        if not has_pid:
            pid = 0
        i = j + 1
    # i is the ':'; it ends the line or is followed by ' ' (else 'word:rest' is no tag)
    if i + 1 == e:
        return he, tag_end, pid, e, True, has_pid
    if buf[i + 1] != 32:
        return no_tag
    return he, tag_end, pid, i + 2, True, has_pid


# ----------------------------------------------------------------------------------- scanners


@njit(cache=True, nogil=True, boundscheck=False)
def scan_3164(  # pragma: no cover - compiled
    buf, starts, ends, ref_year, ref_ns, future_ns, past_ns, ok, local, pri, hs, he, tag_end, pid, ms, has_tag, has_pid
):
    """RFC 3164 lines ``[<PRI>]Mmm dd hh:mm:ss host tag[pid]: msg`` (fixed-width timestamp only).

    ``local`` is the naive local wall-clock time in ns with the year inferred as
    ``syslog_rfc3164.infer_years`` (``ref_ns`` = reference as naive local ns); ``pri`` is -1 without PRI.
    An impossible date (Feb 29 of a non-leap inferred year) is not ok (the reference gives the reason).
    """
    for k in range(starts.size):
        s = starts[k]
        e = ends[k]
        ok[k] = False
        p = -1
        t = s
        if buf[s] == 60:
            p, n = _pri(buf, s, e)
            if n == 0:
                continue
            t = s + n
        if e - t < 17:
            continue
        code = (np.int64(buf[t]) << 16) | (np.int64(buf[t + 1]) << 8) | np.int64(buf[t + 2])
        month = 0
        for m in range(12):
            if _MONTH_CODES[m] == code:
                month = m + 1
                break
        if month == 0 or buf[t + 3] != 32 or buf[t + 6] != 32 or buf[t + 9] != 58 or buf[t + 12] != 58:
            continue
        if buf[t + 15] != 32:
            continue
        day = _dig(buf[t + 5]) if buf[t + 4] == 32 else _two(buf, t + 4)
        hh = _two(buf, t + 7)
        mm = _two(buf, t + 10)
        ss = _two(buf, t + 13)
        if day < 1 or day > 31 or hh < 0 or hh > 23 or mm < 0 or mm > 59 or ss < 0 or ss > 59:
            continue
        h0 = t + 16
        if buf[h0] == 32:  # several spaces before the host: reference decides
            continue
        sod = hh * 3600 + mm * 60 + ss
        year = ref_year
        dd = min(day, _days_in_month(year, month))
        tt = (_days_from_civil(year, month, dd) * 86400 + sod) * _NS
        if tt > ref_ns + future_ns:
            year -= 1
        elif tt <= ref_ns - past_ns:
            year += 1
        if day > _days_in_month(year, month):
            continue
        local[k] = (_days_from_civil(year, month, day) * 86400 + sod) * _NS
        pri[k] = p
        hs[k] = h0
        he[k], tag_end[k], pid[k], ms[k], has_tag[k], has_pid[k] = _host_tag(buf, h0, e)
        ok[k] = True


@njit(cache=True, nogil=True, boundscheck=False)
def scan_5424(  # pragma: no cover - compiled
    buf, starts, ends, ok, time, pri, bounds, pid, has_pid, sd_nil
):
    """RFC 5424 lines ``<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD [MSG]`` (non-empty header tokens).

    ``bounds[:, k]`` (shape ``(11, n)``) holds the byte positions ``hs, he, as, ae, ps, pe, ms, me, sd0, sd_end, msg_s``;
    STRUCTURED-DATA is ``-`` (``sd_nil``) or ``[...]`` elements scanned as ``syslog_rfc5424._parse_sd``.
    """
    for k in range(starts.size):
        s = starts[k]
        e = ends[k]
        ok[k] = False
        if buf[s] != 60:
            continue
        p, n = _pri(buf, s, e)
        if n == 0:
            continue
        h = s + n
        if h + 1 >= e or buf[h] != 49 or buf[h + 1] != 32:
            continue
        t0 = h + 2
        t1 = _space_at_or_after(buf, t0, e)
        if t1 >= e:
            continue
        good, tns = _rfc3339(buf, t0, t1)
        if not good:
            continue
        # HOSTNAME APP-NAME PROCID MSGID: non-empty tokens, each followed by a space
        a = t1 + 1
        for f in range(4):
            b = _space_at_or_after(buf, a, e)
            if b == a or b >= e:
                good = False
                break
            bounds[2 * f, k] = a
            bounds[2 * f + 1, k] = b
            a = b + 1
        if not good:
            continue
        if bounds[1, k] - bounds[0, k] == 1 and buf[bounds[0, k]] == 45:  # NILVALUE host
            continue
        ps = bounds[4, k]
        pe = bounds[5, k]
        v = 0
        hp = pe - ps <= 18
        if hp:
            for q in range(ps, pe):
                d = _dig(buf[q])
                if d < 0:
                    hp = False
                    break
                v = v * 10 + d
        sd0 = a
        if sd0 >= e:
            continue
        c = buf[sd0]
        if c == 45:  # '-'
            if sd0 + 1 < e and buf[sd0 + 1] != 32:
                continue
            sd_end = sd0 + 1
            nil = True
        elif c == 91:  # '['
            i = sd0
            while i < e and buf[i] == 91:
                i += 1
                in_quote = False
                while i < e:
                    ch = buf[i]
                    if ch == 92 and in_quote:
                        i += 2
                        continue
                    if ch == 34:
                        in_quote = not in_quote
                    elif ch == 93 and not in_quote:
                        break
                    i += 1
                if i >= e:
                    good = False
                    break
                i += 1
            if not good or (i < e and buf[i] != 32):
                continue
            sd_end = i
            nil = False
        else:
            continue
        msg_s = min(sd_end + 1, e)
        if msg_s + 3 <= e and buf[msg_s] == 0xEF and buf[msg_s + 1] == 0xBB and buf[msg_s + 2] == 0xBF:
            msg_s += 3
        bounds[8, k] = sd0
        bounds[9, k] = sd_end
        bounds[10, k] = msg_s
        time[k] = tns
        pri[k] = p
        pid[k] = v if hp else 0
        has_pid[k] = hp
        sd_nil[k] = nil
        ok[k] = True


@njit(cache=True, nogil=True, boundscheck=False)
def scan_rsyslog(  # pragma: no cover - compiled
    buf, starts, ends, ok, time, hs, he, tag_end, pid, ms, has_tag, has_pid
):
    """rsyslog file-format lines ``TIMESTAMP host tag[pid]: msg`` (one space after the timestamp)."""
    for k in range(starts.size):
        s = starts[k]
        e = ends[k]
        ok[k] = False
        t1 = _space_at_or_after(buf, s, e)
        if t1 + 1 >= e or buf[t1 + 1] == 32:
            continue
        good, tns = _rfc3339(buf, s, t1)
        if not good:
            continue
        time[k] = tns
        hs[k] = t1 + 1
        he[k], tag_end[k], pid[k], ms[k], has_tag[k], has_pid[k] = _host_tag(buf, t1 + 1, e)
        ok[k] = True


@njit(cache=True, nogil=True, boundscheck=False)
def scan_rfc3339(buf, t0, e, ok, time, t_end):  # pragma: no cover - compiled
    """RFC 3339 timestamps starting at ``t0`` and ending at the first space (or ``e``)."""
    for k in range(t0.size):
        t1 = _space_at_or_after(buf, t0[k], e[k])
        t_end[k] = t1
        ok[k], time[k] = _rfc3339(buf, t0[k], t1)


@njit(cache=True, nogil=True, boundscheck=False)
def scan_host_tag(buf, hs, e, ok, he, tag_end, pid, ms, has_tag, has_pid):  # pragma: no cover - compiled
    """``host tag[pid]: msg`` starting at ``hs`` (not ok for an empty rest or a leading space)."""
    for k in range(hs.size):
        ok[k] = hs[k] < e[k] and buf[hs[k]] != 32
        he[k], tag_end[k], pid[k], ms[k], has_tag[k], has_pid[k] = _host_tag(buf, hs[k], e[k])


@njit(cache=True, nogil=True, boundscheck=False)
def build_strings(buf, starts, ends, valid, size):  # pragma: no cover - compiled
    """Offsets (int32) and bytes of the strings ``buf[starts[i]:ends[i]]`` (empty where not ``valid``).

    Positions are clipped into ``[0, size]`` (``size`` = data length), so bad ranges never read outside.
    """
    n = starts.size
    offsets = np.empty(n + 1, np.int32)
    total = 0
    offsets[0] = 0
    for i in range(n):
        if valid[i]:
            a = min(max(starts[i], 0), size)
            b = min(max(ends[i], a), size)
            total += b - a
        offsets[i + 1] = total
    data = np.empty(max(total, 1), np.uint8)
    for i in range(n):
        o = offsets[i]
        ln = offsets[i + 1] - o
        if ln:
            a = min(max(starts[i], 0), size)
            data[o : o + ln] = buf[a : a + ln]
    return offsets, data


def strings(buf: np.ndarray, size: int, starts: np.ndarray, ends: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    """Arrow ``string`` array of ``buf[starts[i]:ends[i]]`` (null where ``null``), one copy of the bytes.

    ``size`` is the length of the data in ``buf`` (positions are clipped into it). Cuts must fall on
    UTF-8 character boundaries (ASCII delimiters do).
    """
    n = len(starts)
    valid = np.ones(n, np.bool_) if null is None else ~null
    offsets, data = build_strings(buf, starts, ends, valid, size)
    n_null = 0 if null is None else int(null.sum())
    if n_null == n and n:
        return pa.nulls(n, pa.string())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if n_null else None
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), validity, n_null)
