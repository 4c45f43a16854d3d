"""Compiled (numba) scanner for SWF job lines: one pass over a block of bytes, no Python per line.

Kept in its own module so that importing the parsers does not import numba (≈1 s); the SWF parser
imports this lazily. ``cache=True`` stores the compiled code in ``__pycache__`` so later processes
skip compilation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

N_FIELDS = 18

OK = 0
BLANK = 1
COMMENT = 2
TOO_FEW = 3
TOO_MANY = 4
BAD_NUMBER = 5

_MAX_DIGITS = 18


@njit(cache=True, nogil=True, boundscheck=False)
def _is_space(c: int) -> bool:
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True, nogil=True, boundscheck=False)
def scan_swf_block(buf, values, status, starts, ends, nfields, bad_field):  # pragma: no cover - compiled
    """Parse every line of ``buf`` (uint8, complete lines) into ``values[line, field]``.

    Per line it records ``status`` (OK, BLANK, COMMENT, TOO_FEW, TOO_MANY, BAD_NUMBER), the byte range
    ``starts``/``ends`` (end excludes ``\\n``), ``nfields`` (tokens seen) and ``bad_field`` (0-based index
    of the first unparseable token, else -1). Numbers are ``[+-]digits[.digits]`` (at most 18 digits).
    Returns the number of lines.
    """
    n = buf.size
    i = 0
    li = 0
    while i < n:
        s = i
        e = i
        while e < n and buf[e] != 10:
            e += 1
        starts[li] = s
        ends[li] = e
        bad_field[li] = -1
        j = s
        while j < e and _is_space(buf[j]):
            j += 1
        if j == e:
            status[li] = BLANK
            nfields[li] = 0
        elif buf[j] == 59:  # ';'
            status[li] = COMMENT
            nfields[li] = 0
        else:
            st = OK
            f = 0
            while j < e:
                # one token starts at j
                if f >= N_FIELDS:
                    if st == OK:
                        st = TOO_MANY
                    while j < e and not _is_space(buf[j]):
                        j += 1
                    f += 1
                    while j < e and _is_space(buf[j]):
                        j += 1
                    continue
                neg = False
                c = buf[j]
                if c == 45 or c == 43:  # '-' '+'
                    neg = c == 45
                    j += 1
                mant = 0
                nd = 0
                fd = 0
                while j < e and 48 <= buf[j] <= 57:
                    mant = mant * 10 + (buf[j] - 48)
                    nd += 1
                    j += 1
                if j < e and buf[j] == 46:  # '.'
                    j += 1
                    while j < e and 48 <= buf[j] <= 57:
                        mant = mant * 10 + (buf[j] - 48)
                        nd += 1
                        fd += 1
                        j += 1
                good = nd > 0 and nd <= _MAX_DIGITS and (j == e or _is_space(buf[j]))
                if not good:
                    if st == OK:
                        st = BAD_NUMBER
                        bad_field[li] = f
                    while j < e and not _is_space(buf[j]):
                        j += 1
                else:
                    v = float(mant)
                    if fd > 0:
                        v = v / 10.0**fd
                    values[li, f] = -v if neg else v
                f += 1
                while j < e and _is_space(buf[j]):
                    j += 1
            if st == OK and f < N_FIELDS:
                st = TOO_FEW
            status[li] = st
            nfields[li] = f
        li += 1
        i = e + 1
    return li


def scan(block: bytes) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run :func:`scan_swf_block` on ``block``; returns ``(n_lines, values, status, starts, ends, nfields, bad_field)``."""
    n_max = block.count(b"\n") + 1
    buf = np.frombuffer(block, dtype=np.uint8)
    values = np.empty((n_max, N_FIELDS), dtype=np.float64)
    status = np.empty(n_max, dtype=np.int8)
    starts = np.empty(n_max, dtype=np.int64)
    ends = np.empty(n_max, dtype=np.int64)
    nfields = np.empty(n_max, dtype=np.int32)
    bad_field = np.empty(n_max, dtype=np.int32)
    n = scan_swf_block(buf, values, status, starts, ends, nfields, bad_field)
    return n, values[:n], status[:n], starts[:n], ends[:n], nfields[:n], bad_field[:n]
