"""Local wall-clock times -> UTC across daylight-saving changes (one place for every source).

Inputs whose timestamps carry no zone are read in ``--tz``. Two kinds of local time need a rule:

* **ambiguous** (the repeated hour when DST ends, e.g. 02:00-02:59 twice in Europe/Berlin on the
  last Sunday of October): resolved **by order**. A source writes its lines in time order, so in a
  run of consecutive ambiguous values (in input order) the values before the first step *back* in
  wall time (more than :data:`FOLD_STEP_BACK_NS`) are the first, earlier hour and the values from
  that step on are the second, later hour. A run with no step back is the first hour. Rows of
  several nodes interleaved by time (or one node after another, each with its own run) resolve
  alike, because a run ends at the first non-ambiguous value;
* **nonexistent** (the skipped hour when DST starts, e.g. 02:00-02:59 on the last Sunday of March):
  never shifted; the value is reported (:data:`NONEXISTENT_NS` / null) and the caller quarantines
  the row with :func:`nonexistent_reason`.

Order is decided within one call (a parser block: at least 1 MiB of syslog lines, 4 MiB of CSV);
a repeated hour split across two blocks resolves the second block's part without the first's
history. Lines of the per-line fallback parsers are resolved one by one (first hour).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Z", "GMT", "Etc/GMT"})

NONEXISTENT_NS = np.iinfo(np.int64).min
"""Sentinel of :func:`local_to_utc_ns` for a local time that does not exist in the zone."""

FOLD_STEP_BACK_NS = 60 * 10**9
"""A step back in wall time larger than this (60 s) inside a run of ambiguous times starts the second hour;
smaller steps are the ordinary disorder of log lines."""


def resolve_local_ns(local_ns: np.ndarray, tz: str) -> tuple[np.ndarray, np.ndarray]:
    """Naive local epoch-ns in IANA zone ``tz`` -> ``(utc_ns, nonexistent)``.

    ``utc_ns`` is int64 (entries where ``nonexistent`` is True are meaningless); ambiguous times are
    resolved by order (module doc).
    """
    local_ns = np.asarray(local_ns, np.int64)
    if tz in UTC_NAMES or len(local_ns) == 0:
        return local_ns, np.zeros(len(local_ns), bool)
    arr = pa.array(local_ns, pa.timestamp("ns"))
    early = pc.assume_timezone(arr, timezone=tz, ambiguous="earliest", nonexistent="earliest")
    late = pc.assume_timezone(arr, timezone=tz, ambiguous="latest", nonexistent="latest")
    e = np.asarray(early.cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    lt = np.asarray(late.cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    diff = lt - e
    gap = diff == 1  # nonexistent: "earliest" is the last ns before the gap, "latest" the first after it
    amb = diff > 1
    out = e.copy()
    if amb.any():
        later = _second_pass(local_ns, amb)
        out[later] = lt[later]
    return out, gap


def _second_pass(local_ns: np.ndarray, amb: np.ndarray) -> np.ndarray:
    """Mask of ambiguous values that belong to the second (later) occurrence, decided by order."""
    second = np.zeros(len(local_ns), bool)
    idx = np.flatnonzero(amb)
    # runs of consecutive ambiguous positions
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    for run in np.split(idx, breaks):
        v = local_ns[run]
        prev_max = np.maximum.accumulate(v)
        back = np.zeros(len(v), bool)
        back[1:] = v[1:] < prev_max[:-1] - FOLD_STEP_BACK_NS
        second[run] = np.logical_or.accumulate(back)
    return second


def local_to_utc_ns(local_ns: np.ndarray, tz: str) -> np.ndarray:
    """:func:`resolve_local_ns` as one int64 array: nonexistent local times are :data:`NONEXISTENT_NS`."""
    out, gap = resolve_local_ns(local_ns, tz)
    if gap.any():
        out = out.copy()
        out[gap] = NONEXISTENT_NS
    return out


def localize(naive: pa.Array, tz: str) -> pa.Array:
    """Zone-less Arrow timestamps read as wall time in ``tz`` -> ``timestamp[ns, UTC]``.

    Ambiguous times resolved by order, nonexistent ones (and nulls) null; values out of the ns range
    raise ``ArrowInvalid`` as the cast does.
    """
    ts = pa.timestamp("ns", tz="UTC")
    naive = naive.cast(pa.timestamp("ns"))
    if tz in UTC_NAMES:
        return pc.assume_timezone(naive, "UTC").cast(ts)
    if isinstance(naive, pa.ChunkedArray):
        naive = naive.combine_chunks()
    valid = np.asarray(pc.is_valid(naive).to_numpy(zero_copy_only=False), bool)
    local = np.asarray(pc.fill_null(naive.cast(pa.int64()), 0).to_numpy(zero_copy_only=False), np.int64)
    out, gap = resolve_local_ns(local, tz)
    return pa.array(out, pa.int64(), mask=~valid | gap).cast(ts)


def nonexistent_reason(shown: str, tz: str) -> str:
    """Reject reason of a local time that the clock skipped (``shown`` is the time as read)."""
    return f"parse: local time {shown} does not exist in {tz} (skipped by the daylight-saving change)"


def is_nonexistent(text: str, tz: str) -> bool:
    """Whether ``text`` is a naive ISO time that does not exist in ``tz`` (for reject reasons)."""
    if tz in UTC_NAMES:
        return False
    try:
        v = pa.array([text.strip()]).cast(pa.timestamp("ns"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    local = np.asarray(v.cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    try:
        return bool(resolve_local_ns(local, tz)[1][0])
    except pa.ArrowInvalid:
        return False


def reject_nonexistent(time: pa.Array | pa.ChunkedArray, reason: pa.Array, tz: str) -> pa.Array:
    """``reason`` with :func:`nonexistent_reason` set where ``time`` holds :data:`NONEXISTENT_NS`
    (rows a parser produced with :func:`local_to_utc_ns`); other reasons are kept."""
    t = np.asarray(pc.fill_null(time.cast(pa.int64()), 0).to_numpy(zero_copy_only=False), np.int64)
    gap = t == NONEXISTENT_NS
    if not gap.any():
        return reason
    why = pa.array(np.where(gap, nonexistent_reason("(wall clock)", tz), None), pa.string())
    return pc.if_else(pc.is_valid(reason), reason, why)
