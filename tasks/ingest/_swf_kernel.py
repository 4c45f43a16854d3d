"""Compiled (numba) scanner for SWF job lines: one pass over a block of bytes, no Python per line.

It tokenises each line, parses the 18 numbers and directly computes the ``jobs`` row values (times
in ns, nodes, validity bits), so the Python side only wraps the arrays into Arrow. Kept in its own
module so that importing the parsers does not import numba (about 1 s); the SWF parser imports it
lazily. ``cache=True`` stores the compiled code in ``__pycache__`` so later processes skip compiling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

N_FIELDS = 18

# line status
OK = 0
BLANK = 1
COMMENT = 2
TOO_FEW = 3
TOO_MANY = 4
BAD_NUMBER = 5
NON_INTEGRAL = 6
FUTURE = 7
OUT_OF_RANGE = 8

# validity bits of a row (set = value present)
V_JOB = 1
V_USER = 2
V_GROUP = 4
V_PART = 8
V_SUBMIT = 16
V_START = 32
V_END = 64
V_PROCS = 128
V_ELAPSED = 256
V_LIMIT = 512

_MAX_DIGITS = 18
_MIN_S = -9.2e9  # earliest second representable in int64 nanoseconds (year 1678)
_MAX_S = 9.2e9


@njit(cache=True, nogil=True, boundscheck=False)
def _is_space(c):  # pragma: no cover - compiled
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True, nogil=True, boundscheck=False)
def _frac(x):  # pragma: no cover - compiled
    return x != np.floor(x)


@njit(cache=True, nogil=True, boundscheck=False)
def scan_swf_block(buf, pos, base_s, max_nodes, max_procs, limit_s,  # pragma: no cover - compiled
                   l_status, l_start, l_end, l_nfields, l_badfield,
                   r_line, r_job, r_user, r_group, r_part, r_submit, r_start, r_end, r_nodes, r_cores, r_elapsed,
                   r_limit, r_status, r_valid):
    """Scan lines of ``buf`` from byte ``pos`` until the end or until the output arrays are full.

    Per line: ``l_status`` (OK / BLANK / COMMENT / TOO_FEW / TOO_MANY / BAD_NUMBER / NON_INTEGRAL /
    FUTURE / OUT_OF_RANGE), byte range ``l_start``/``l_end`` (end excludes ``\\n``), token count and
    index of the first bad token. Per OK line, one row in the ``r_*`` arrays (``r_line`` = index of
    the line in this call). Numbers are ``[+-]digits[.digits]`` (at most 18 digits); -1 = missing.
    A job that never started (run time -1, or run time 0 with allocated processors -1) gets no start,
    end or elapsed time (``V_START``/``V_END``/``V_ELAPSED`` unset) whatever its wait time.

    Returns ``(n_lines, n_rows, next_pos)``.
    """
    n = buf.size
    cap = l_status.size
    v = np.empty(N_FIELDS, dtype=np.float64)
    li = 0
    ri = 0
    i = pos
    while i < n and li < cap:
        s = i
        j = i
        while j < n and _is_space(buf[j]):
            j += 1
        st = OK
        f = 0
        bad = -1
        if j >= n or buf[j] == 10:
            st = BLANK
        elif buf[j] == 59:  # ';'
            st = COMMENT
            while j < n and buf[j] != 10:
                j += 1
        else:
            while j < n and buf[j] != 10:
                if f >= N_FIELDS:
                    if st == OK:
                        st = TOO_MANY
                    while j < n and buf[j] != 10 and not _is_space(buf[j]):
                        j += 1
                    f += 1
                    while j < n and _is_space(buf[j]):
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
                while j < n and 48 <= buf[j] <= 57:
                    mant = mant * 10 + (buf[j] - 48)
                    nd += 1
                    j += 1
                if j < n and buf[j] == 46:  # '.'
                    j += 1
                    while j < n and 48 <= buf[j] <= 57:
                        mant = mant * 10 + (buf[j] - 48)
                        nd += 1
                        fd += 1
                        j += 1
                if nd > 0 and nd <= _MAX_DIGITS and (j >= n or buf[j] == 10 or _is_space(buf[j])):
                    x = float(mant)
                    if fd > 0:
                        x = x / 10.0**fd
                    v[f] = -x if neg else x
                else:
                    if st == OK:
                        st = BAD_NUMBER
                        bad = f
                    while j < n and buf[j] != 10 and not _is_space(buf[j]):
                        j += 1
                f += 1
                while j < n and _is_space(buf[j]):
                    j += 1
            if st == OK and f < N_FIELDS:
                st = TOO_FEW
        e = j  # at '\n' or n
        if st == OK:
            procs = v[7] if v[4] == -1 else v[4]
            if _frac(v[0]) or _frac(procs) or _frac(v[8]) or _frac(v[10]) or _frac(v[11]) or _frac(v[12]) or _frac(v[15]):
                st = NON_INTEGRAL
        if st == OK:
            valid = 0
            sub_ok = v[1] != -1
            # never started (cancelled/failed in the queue): no run time, or a zero one with no allocation
            never = v[3] == -1 or (v[3] == 0 and v[4] == -1)
            start_ok = sub_ok and v[2] != -1 and not never
            end_ok = start_ok and v[3] != -1
            sub_s = base_s + v[1]
            start_s = sub_s + (v[2] if start_ok else 0.0)
            end_s = start_s + (v[3] if end_ok else 0.0)
            if (sub_ok and sub_s > limit_s) or (start_ok and start_s > limit_s) or (end_ok and end_s > limit_s):
                st = FUTURE
            elif ((sub_ok and sub_s < _MIN_S) or (start_ok and start_s < _MIN_S) or (end_ok and end_s < _MIN_S)
                  or abs(v[3]) > _MAX_S or abs(v[8]) > _MAX_S):
                st = OUT_OF_RANGE
            else:
                sub_ns = np.int64(np.rint(sub_s * 1e9)) if sub_ok else np.int64(0)
                start_ns = sub_ns + np.int64(np.rint(v[2] * 1e9)) if start_ok else np.int64(0)
                end_ns = start_ns + np.int64(np.rint(v[3] * 1e9)) if end_ok else np.int64(0)
                r_line[ri] = li
                r_job[ri] = np.int64(v[0])
                r_user[ri] = np.int64(v[11])
                r_group[ri] = np.int64(v[12])
                r_part[ri] = np.int64(v[15])
                r_submit[ri] = sub_ns
                r_start[ri] = start_ns
                r_end[ri] = end_ns
                p = np.int64(procs)
                nodes = p
                if p > 0 and max_nodes > 0 and max_procs > 0:
                    nodes = -((-p * max_nodes) // max_procs)
                r_nodes[ri] = np.int32(nodes)
                r_cores[ri] = np.int32(p)
                r_elapsed[ri] = np.int64(np.rint(v[3]))
                r_limit[ri] = np.int64(np.rint(v[8]))
                r_status[ri] = np.int64(v[10])
                if v[0] != -1:
                    valid |= V_JOB
                if v[11] != -1:
                    valid |= V_USER
                if v[12] != -1:
                    valid |= V_GROUP
                if v[15] != -1:
                    valid |= V_PART
                if sub_ok:
                    valid |= V_SUBMIT
                if start_ok:
                    valid |= V_START
                if end_ok:
                    valid |= V_END
                if procs != -1:
                    valid |= V_PROCS
                if not never:
                    valid |= V_ELAPSED
                if v[8] != -1:
                    valid |= V_LIMIT
                r_valid[ri] = valid
                ri += 1
        l_status[li] = st
        l_start[li] = s
        l_end[li] = e
        l_nfields[li] = f
        l_badfield[li] = bad
        li += 1
        i = e + 1
    return li, ri, i


@njit(cache=True, nogil=True, boundscheck=False)
def _itoa(vals, present, offsets, data):  # pragma: no cover - compiled
    """Decimal text of ``vals`` into ``data`` with Arrow string ``offsets`` (empty where not present)."""
    pos = 0
    tmp = np.empty(20, dtype=np.uint8)
    for i in range(vals.size):
        offsets[i] = pos
        if not present[i]:
            continue
        x = vals[i]
        if x < 0:
            data[pos] = 45
            pos += 1
            x = -x
        k = 0
        while True:
            tmp[k] = 48 + x % 10
            x //= 10
            k += 1
            if x == 0:
                break
        for m in range(k):
            data[pos + m] = tmp[k - 1 - m]
        pos += k
    offsets[vals.size] = pos
    return pos


def int_strings(vals: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Arrow string buffers (int32 offsets, utf-8 data) of the decimal text of int64 ``vals``."""
    offsets = np.empty(vals.size + 1, dtype=np.int32)
    data = np.empty(max(1, vals.size * 20), dtype=np.uint8)
    n = _itoa(vals.astype(np.int64, copy=False), present.astype(np.bool_, copy=False), offsets, data)
    return offsets, data[:n]


@dataclass
class Scan:
    """Result of scanning one block: per-line arrays ``l_*`` and per-row arrays ``r_*`` (see the kernel)."""

    n_lines: int
    l_status: np.ndarray
    l_start: np.ndarray
    l_end: np.ndarray
    l_nfields: np.ndarray
    l_badfield: np.ndarray
    r_line: np.ndarray
    r_job: np.ndarray
    r_user: np.ndarray
    r_group: np.ndarray
    r_part: np.ndarray
    r_submit: np.ndarray
    r_start: np.ndarray
    r_end: np.ndarray
    r_nodes: np.ndarray
    r_cores: np.ndarray
    r_elapsed: np.ndarray
    r_limit: np.ndarray
    r_status: np.ndarray
    r_valid: np.ndarray


_L_FIELDS = ("l_status", "l_start", "l_end", "l_nfields", "l_badfield")
_R_FIELDS = ("r_line", "r_job", "r_user", "r_group", "r_part", "r_submit", "r_start", "r_end", "r_nodes", "r_cores",
             "r_elapsed", "r_limit", "r_status", "r_valid")
_DTYPES = {"l_status": np.int8, "l_start": np.int64, "l_end": np.int64, "l_nfields": np.int32, "l_badfield": np.int32,
           "r_line": np.int64, "r_nodes": np.int32, "r_cores": np.int32, "r_valid": np.int32}


def scan(block: bytes | memoryview, base_s: float, max_nodes: int, max_procs: int, limit_s: float) -> Scan:
    """Scan every line of ``block``; header values as in :class:`nodewatch.tasks.ingest.jobs_swf.SwfHeader` (0 = absent)."""
    buf = np.frombuffer(block, dtype=np.uint8)
    cap = max(1024, len(block) // 40 + 16)  # a well-formed SWF line has >= 36 bytes
    parts: list[dict[str, np.ndarray]] = []
    pos = 0
    n_lines = 0
    while pos < len(block):
        arrs = {k: np.empty(cap, dtype=_DTYPES.get(k, np.int64)) for k in (*_L_FIELDS, *_R_FIELDS)}
        nl, nr, pos = scan_swf_block(buf, pos, float(base_s), int(max_nodes), int(max_procs), float(limit_s),
                                     *(arrs[k] for k in _L_FIELDS), *(arrs[k] for k in _R_FIELDS))
        out = {k: arrs[k][:nl] for k in _L_FIELDS} | {k: arrs[k][:nr] for k in _R_FIELDS}
        out["r_line"] = out["r_line"] + n_lines
        parts.append(out)
        n_lines += nl
    if not parts:
        empty = {k: np.empty(0, dtype=_DTYPES.get(k, np.int64)) for k in (*_L_FIELDS, *_R_FIELDS)}
        return Scan(0, **empty)
    if len(parts) == 1:
        return Scan(n_lines, **parts[0])
    return Scan(n_lines, **{k: np.concatenate([p[k] for p in parts]) for k in (*_L_FIELDS, *_R_FIELDS)})
