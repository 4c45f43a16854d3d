"""Compiled (numba) single pass over the UTF-8 bytes of many messages: tokens, digit flags, masked-shape hashes.

:func:`scan` walks the bytes of an Arrow ``large_string`` array once (no Python per message) and returns, per
message, the number of whitespace-separated tokens and a 64-bit FNV-1a hash of its *masked shape* (every token
holding an ASCII digit hashed as ``<*>``), and per token its byte range and digit flag. The Python side
(:meth:`nodewatch.tasks.syslog.templates.TemplateMiner.assign`) dedupes the hashes, builds the shape string of one
representative message per hash and gathers the parameter tokens with
:func:`nodewatch.tasks.ingest._syslog_kernel.strings`. Whitespace = ASCII space, \\t, \\n, \\v, \\f, \\r (what drain3
splits on for ASCII text). Only the first ``max_bytes`` bytes of a message are scanned. Imported lazily (numba
takes ~1 s to import); ``cache=True`` keeps the compiled code in ``__pycache__``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@njit(cache=True, nogil=True)
def _is_ws(c: int) -> bool:  # pragma: no cover - compiled
    return c == 32 or (9 <= c <= 13)


@njit(cache=True, nogil=True)
def count_tokens(buf, offsets, max_bytes):  # pragma: no cover - compiled
    """Number of tokens of every message (first ``max_bytes`` bytes)."""
    n = offsets.size - 1
    out = np.zeros(n, np.int64)
    for i in range(n):
        a = offsets[i]
        b = min(offsets[i + 1], a + max_bytes)
        intok = False
        k = 0
        for p in range(a, b):
            w = _is_ws(buf[p])
            if not w and not intok:
                k += 1
            intok = not w
        out[i] = k
    return out


@njit(cache=True, nogil=True)
def scan(buf, offsets, max_bytes, ntok):  # pragma: no cover - compiled
    """Shape hash per message; start, end and digit flag per token (``ntok`` from :func:`count_tokens`)."""
    n = offsets.size - 1
    total = 0
    for i in range(n):
        total += ntok[i]
    ts = np.empty(total, np.int64)
    te = np.empty(total, np.int64)
    td = np.zeros(total, np.bool_)
    h = np.empty(n, np.uint64)
    j = 0
    for i in range(n):
        a = offsets[i]
        b = min(offsets[i + 1], a + max_bytes)
        hv = _FNV_OFFSET
        p = a
        while p < b:
            while p < b and _is_ws(buf[p]):
                p += 1
            if p >= b:
                break
            s = p
            dig = False
            while p < b and not _is_ws(buf[p]):
                c = buf[p]
                if 48 <= c <= 57:
                    dig = True
                p += 1
            ts[j] = s
            te[j] = p
            td[j] = dig
            j += 1
            hv = (hv ^ np.uint64(0x1F)) * _FNV_PRIME  # token separator
            if dig:
                hv = (hv ^ np.uint64(0x2A)) * _FNV_PRIME  # '<*>'
                hv = (hv ^ np.uint64(0x3C)) * _FNV_PRIME
            else:
                for q in range(s, p):
                    hv = (hv ^ np.uint64(buf[q])) * _FNV_PRIME
        h[i] = hv
    return h, ts, te, td


@njit(cache=True, nogil=True)
def param_tokens(ntok, ok, tstart, flags):  # pragma: no cover - compiled
    """Indices of the parameter tokens of every row, and their count per row.

    Row ``i`` owns tokens ``sum(ntok[:i]) ... + ntok[i]``; where ``ok[i]``, its token ``q`` is a parameter when
    ``flags[tstart[i] + q]`` (the template's ``<*>`` positions, all templates' flags concatenated). Rows that are
    not ``ok`` give none. Replaces five token-length numpy temporaries (repeat, arange, two gathers, a mask).
    """
    n = ntok.size
    per_row = np.zeros(n, np.int32)
    total = 0
    for i in range(n):
        if ok[i]:
            c = 0
            b = tstart[i]
            for q in range(ntok[i]):
                if flags[b + q]:
                    c += 1
            per_row[i] = c
            total += c
    idx = np.empty(total, np.int64)
    j = 0
    t = 0
    for i in range(n):
        if ok[i] and per_row[i] > 0:
            b = tstart[i]
            for q in range(ntok[i]):
                if flags[b + q]:
                    idx[j] = t + q
                    j += 1
        t += ntok[i]
    return idx, per_row


@njit(cache=True, nogil=True)
def first_rows(codes, k):  # pragma: no cover - compiled
    """First row of each of the ``k`` codes (codes numbered in order of first appearance, e.g. ``pd.factorize``)."""
    out = np.full(k, -1, np.int64)
    for i in range(codes.size):
        c = codes[i]
        if out[c] < 0:
            out[c] = i
    return out
