"""Parser for the Standard Workload Format (SWF) of the Parallel Workloads Archive.

Format (https://www.cs.huji.ac.il/labs/parallel/workload/swf.html): header comment lines start with
``;`` (``; Key: value``), then one job per line with 18 whitespace-separated numbers, ``-1`` = unknown:

 1 job number, 2 submit time, 3 wait time, 4 run time, 5 allocated processors, 6 average CPU time,
 7 used memory, 8 requested processors, 9 requested time, 10 requested memory, 11 status, 12 user id,
 13 group id, 14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time.

Mapping to the ``jobs`` table (:mod:`schemas.jobs`):

* times are seconds relative to the header's ``UnixStartTime`` (epoch 0 if the header lacks it):
  submit = UnixStartTime + f2, start = submit + f3 (null if f3 is -1), end = start + f4 (null if f3
  or f4 is -1), elapsed_s = f4 (null if -1); fractional seconds are rounded to the nanosecond,
  elapsed/timelimit to the second;
* processors = f5, or f8 (requested) when f5 is -1; cores = processors;
  nodes = ceil(processors * MaxNodes / MaxProcs) when the header has both, else processors;
* status f11: 1 → COMPLETED, 0 → FAILED, 5 → CANCELLED, anything else (2/3/4 = partial executions
  of a checkpointed job, -1 = unknown) → UNKNOWN;
* user/group = f12/f13 as strings, partition = the name given by a ``; Partition: <n> <name>``
  header line, else the number; timelimit_s = f9;
* system = the file name without ``.swf``/compression suffixes (unique per trace: the header's
  ``Computer``/``Installation`` values repeat across traces of the same machine, and job numbers
  restart in each trace, so using them would make distinct jobs collide on the unique key).

Values are passed through unchanged otherwise (e.g. a run time of -5 gives elapsed_s = -5 and an end
before the start) so that validation quarantines the row with the expectation it failed.

Lines are scanned by a compiled kernel (:mod:`tasks.ingest._swf_kernel`) over 8 MiB blocks;
everything after it is vectorised numpy/Arrow. A line that is not 18 numbers is rejected with a
``parse:`` reason; a file whose first block holds no job line at all raises :class:`InputError`.
"""

from __future__ import annotations

import lzma
import re
import zlib
from collections.abc import Iterator
from datetime import timedelta
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from schemas.jobs import PARSED_SCHEMA
from tasks.ingest.base import ParseContext, ParseResult, empty_rejects, rejects_table
from tasks.ingest.inputs import InputError

BLOCK_BYTES = 8 << 20

SWF_FIELDS = (
    "job_number", "submit_time", "wait_time", "run_time", "allocated_procs", "avg_cpu_time", "used_memory",
    "requested_procs", "requested_time", "requested_memory", "status", "user_id", "group_id", "executable",
    "queue", "partition", "preceding_job", "think_time",
)
"""Names of the 18 SWF fields, in order."""

SWF_STATUS: dict[int, str] = {1: "COMPLETED", 0: "FAILED", 5: "CANCELLED"}
"""SWF status code -> job state; every other code maps to ``UNKNOWN``."""

_HEADER_RE = re.compile(r"^\s*;\s*([A-Za-z][A-Za-z0-9_ ]*?)\s*:\s*(.*?)\s*$")
_PARTITION_RE = re.compile(r"^(-?\d+)\s+(\S.*)$")
_STREAM_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, pa.ArrowException, ValueError)
_NS = 1_000_000_000


def system_name(file_name: str) -> str:
    """``system`` value of an SWF file: its base name without ``.swf`` and compression suffixes."""
    base = file_name.replace("\\", "/").rsplit("/", 1)[-1]
    base = re.sub(r"(\.(gz|xz|bz2|zst|zstd))+$", "", base)
    base = re.sub(r"\.swf$", "", base, flags=re.IGNORECASE)
    return base or "swf"


class SwfHeader:
    """Header values of an SWF file that the parser uses (filled from ``; Key: value`` lines)."""

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.partitions: dict[int, str] = {}

    def add_line(self, line: str) -> None:
        """Record one comment line (lines that are not ``Key: value`` are ignored)."""
        m = _HEADER_RE.match(line)
        if m is None:
            return
        key, value = m.group(1).strip(), m.group(2)
        if key == "Partition":
            pm = _PARTITION_RE.match(value)
            if pm:
                self.partitions[int(pm.group(1))] = pm.group(2).strip()
            return
        self.fields.setdefault(key, value)

    def _int(self, key: str) -> int | None:
        v = self.fields.get(key)
        if v is None:
            return None
        try:
            return int(float(v.split()[0]))
        except (ValueError, IndexError):
            return None

    @property
    def unix_start(self) -> int:
        """``UnixStartTime`` (0 if absent)."""
        return self._int("UnixStartTime") or 0

    @property
    def max_nodes(self) -> int | None:
        """``MaxNodes`` if positive."""
        v = self._int("MaxNodes")
        return v if v and v > 0 else None

    @property
    def max_procs(self) -> int | None:
        """``MaxProcs`` if positive."""
        v = self._int("MaxProcs")
        return v if v and v > 0 else None


def _reason(status: int, nfields: int, bad_field: int) -> str:
    from tasks.ingest import _swf_kernel as k

    if status == k.TOO_FEW:
        return f"parse: expected 18 whitespace-separated fields, found {nfields}"
    if status == k.TOO_MANY:
        return f"parse: expected 18 whitespace-separated fields, found {nfields}"
    name = SWF_FIELDS[bad_field] if 0 <= bad_field < len(SWF_FIELDS) else "?"
    return f"parse: field {bad_field + 1} ({name}) is not a number"


def _int_strings(vals: np.ndarray, missing: np.ndarray) -> pa.Array:
    """Integral float values -> decimal strings (null where ``missing``)."""
    ints = pa.array(vals.astype(np.int64), pa.int64(), mask=missing)
    return ints.cast(pa.string())


GOOD, NON_INTEGRAL, FUTURE, OUT_OF_RANGE = 0, 1, 2, 3
_ROW_REASONS = {
    NON_INTEGRAL: "parse: job number, processors, requested time, status, user, group and partition must be integers",
    FUTURE: "parse: time is more than 1 day after the file's reference time (future timestamp)",
    OUT_OF_RANGE: "parse: time before the year 1678 (out of range)",
}
_MIN_S = -9.2e9  # earliest second representable as int64 nanoseconds (1678)


def _rows_from_values(
    v: np.ndarray, line_no: np.ndarray, header: SwfHeader, system: str, limit_s: float
) -> tuple[pa.Table, np.ndarray]:
    """Build job rows from a ``(n, 18)`` value matrix.

    Also returns a per-row problem code (GOOD, NON_INTEGRAL ids/counts, FUTURE or OUT_OF_RANGE times);
    times of rows with a time problem are zeroed so the nanosecond conversion cannot overflow.
    """
    n = v.shape[0]
    job = v[:, 0]
    sub, wait, run = v[:, 1], v[:, 2], v[:, 3]
    procs = np.where(v[:, 4] == -1, v[:, 7], v[:, 4])
    intcols = np.stack([job, procs, v[:, 8], v[:, 10], v[:, 11], v[:, 12], v[:, 15]], axis=1)
    problem = np.zeros(n, dtype=np.int8)
    problem[(intcols != np.floor(intcols)).any(axis=1)] = NON_INTEGRAL

    base = float(header.unix_start)
    sub_missing = sub == -1
    start_missing = sub_missing | (wait == -1)
    end_missing = start_missing | (run == -1)
    sub_s = base + sub
    start_s = sub_s + np.where(start_missing, 0, wait)
    end_s = start_s + np.where(end_missing, 0, run)
    times = np.stack([np.where(sub_missing, 0, sub_s), start_s, end_s], axis=1)
    problem[(times < _MIN_S).any(axis=1)] = OUT_OF_RANGE
    problem[(times > limit_s).any(axis=1)] = FUTURE
    bad_time = (problem == FUTURE) | (problem == OUT_OF_RANGE)
    if bad_time.any():
        sub, wait, run = (np.where(bad_time, 0, a) for a in (sub, wait, run))
        base_arr = np.where(bad_time, 0.0, base)
    else:
        base_arr = base
    submit_ns = np.rint((base_arr + sub) * _NS).astype(np.int64)
    start_ns = submit_ns + np.rint(np.where(start_missing, 0, wait) * _NS).astype(np.int64)
    end_ns = start_ns + np.rint(np.where(end_missing, 0, run) * _NS).astype(np.int64)

    procs_i = procs.astype(np.int64)
    procs_missing = procs == -1
    mn, mp = header.max_nodes, header.max_procs
    # nodes = ceil(procs / (MaxProcs / MaxNodes)) in integer arithmetic; without both header values, nodes = procs
    nodes = procs_i if mn is None or mp is None else np.where(procs_i > 0, -((-procs_i * mn) // mp), procs_i)
    status = v[:, 10].astype(np.int64)
    state_idx = np.full(n, 3, dtype=np.int8)
    state_idx[status == 1] = 0
    state_idx[status == 0] = 1
    state_idx[status == 5] = 2
    states = pa.DictionaryArray.from_arrays(
        pa.array(state_idx, pa.int8()), pa.array(["COMPLETED", "FAILED", "CANCELLED", "UNKNOWN"])
    ).cast(pa.string())

    part = v[:, 15]
    uniq, inv = np.unique(part, return_inverse=True)
    labels = [header.partitions.get(int(u), str(int(u))) for u in uniq]
    partition = pa.DictionaryArray.from_arrays(
        pa.array(inv.astype(np.int32), pa.int32(), mask=part == -1), pa.array(labels, pa.string())
    ).cast(pa.string())

    ts = PARSED_SCHEMA.field("submit_time").type
    cols = {
        "job_id": _int_strings(job, job == -1),
        "step": pa.nulls(n, pa.string()),
        "system": pa.repeat(pa.scalar(system, pa.string()), n),
        "user": _int_strings(v[:, 11], v[:, 11] == -1),
        "group": _int_strings(v[:, 12], v[:, 12] == -1),
        "submit_time": pa.array(submit_ns, pa.int64(), mask=sub_missing).cast(ts),
        "start_time": pa.array(start_ns, pa.int64(), mask=start_missing).cast(ts),
        "end_time": pa.array(end_ns, pa.int64(), mask=end_missing).cast(ts),
        "nodes": pa.array(nodes.astype(np.int32), pa.int32(), mask=procs_missing),
        "cores": pa.array(procs_i.astype(np.int32), pa.int32(), mask=procs_missing),
        "elapsed_s": pa.array(np.rint(run).astype(np.int64), pa.int64(), mask=run == -1),
        "timelimit_s": pa.array(np.rint(v[:, 8]).astype(np.int64), pa.int64(), mask=v[:, 8] == -1),
        "state": states,
        "cancelled_by": pa.nulls(n, pa.string()),
        "exit_code": pa.nulls(n, pa.int32()),
        "signal": pa.nulls(n, pa.int32()),
        "node_list": pa.nulls(n, pa.list_(pa.string())),
        "partition": partition,
        "source_format": pa.repeat(pa.scalar("swf", pa.string()), n),
        "source_offset": pa.array(line_no, pa.int64()),
    }
    return pa.Table.from_pydict(cols, schema=PARSED_SCHEMA), problem


def _read_blocks(stream: BinaryIO, name: str) -> Iterator[bytes]:
    """Yield blocks of about :data:`BLOCK_BYTES` of complete lines (the last one may lack its newline).

    Reads with ``read1`` where available so that when a compressed stream is cut, the complete lines
    decompressed before the cut are still yielded, then :class:`InputError` is raised.
    """
    read = getattr(stream, "read1", None) or stream.read
    buf = bytearray()
    lines_done = 0
    while True:
        try:
            chunk = read(1 << 20)
        except _STREAM_ERRORS as e:
            cut = buf.rfind(b"\n")
            if cut >= 0:
                block = bytes(buf[: cut + 1])
                lines_done += block.count(b"\n")
                yield block
            raise InputError(
                f"{name}: stream ends unexpectedly (truncated or corrupt compressed file: {e}), line {lines_done + 1}"
            ) from e
        if not chunk:
            if buf:
                yield bytes(buf)
            return
        buf += chunk
        if len(buf) >= BLOCK_BYTES:
            cut = buf.rfind(b"\n")
            if cut >= 0:
                block = bytes(buf[: cut + 1])
                del buf[: cut + 1]
                lines_done += block.count(b"\n")
                yield block


def parse_swf(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse an SWF trace into ``jobs`` rows (see module docstring for the mapping).

    Raises:
        InputError: empty file, no job line in the first block (not SWF: wrong delimiter, binary
            garbage...), or a compressed stream that ends early.
    """
    from tasks.ingest import _swf_kernel as k

    header = SwfHeader()
    system = system_name(ctx.name)
    seen_data = False
    any_bytes = False
    first_block = True
    line_base = 0
    limit_s = (ctx.reference_time + timedelta(days=1)).timestamp()  # later times are "in the future"
    for block in _read_blocks(stream, ctx.name):
        any_bytes = True
        n, values, status, starts, ends, nfields, bad_field = k.scan(block)
        line_no = np.arange(line_base + 1, line_base + n + 1, dtype=np.int64)
        line_base += n
        is_comment = status == k.COMMENT
        if not seen_data:
            data_lines = np.flatnonzero((status != k.COMMENT) & (status != k.BLANK))
            upto = data_lines[0] if data_lines.size else n
            for i in np.flatnonzero(is_comment[:upto]):
                header.add_line(block[starts[i] : ends[i]].decode("utf-8", "replace"))
        ok = status == k.OK
        bad = ~ok & ~is_comment & (status != k.BLANK)
        if first_block and bad.any() and not ok.any():
            i = int(np.flatnonzero(bad)[0])
            raw = block[starts[i] : ends[i]][:80].decode("utf-8", "replace")
            what = _reason(int(status[i]), int(nfields[i]), int(bad_field[i]))[len("parse: ") :]
            raise InputError(f"{ctx.name}: not an SWF trace ({what}: {raw!r}), line {int(line_no[i])}")
        first_block = False
        if ok.any() or bad.any():
            seen_data = True
        rows, problem = _rows_from_values(values[ok], line_no[ok], header, system, limit_s)
        drop = problem != GOOD
        rej_idx = np.flatnonzero(bad)
        rej_off = [int(line_no[i]) for i in rej_idx]
        rej_raw = [block[starts[i] : ends[i]] for i in rej_idx]
        rej_reason = [_reason(int(status[i]), int(nfields[i]), int(bad_field[i])) for i in rej_idx]
        if drop.any():
            ok_idx = np.flatnonzero(ok)
            for j in np.flatnonzero(drop):
                i = ok_idx[j]
                rej_off.append(int(line_no[i]))
                rej_raw.append(block[starts[i] : ends[i]])
                rej_reason.append(_ROW_REASONS[int(problem[j])])
            rows = rows.filter(pa.array(~drop))
        rejects = rejects_table(rej_off, rej_raw, rej_reason) if rej_off else empty_rejects()
        if rejects.num_rows:
            order = np.argsort(np.asarray(rejects["source_offset"]), kind="stable")
            rejects = rejects.take(pa.array(order))
        if rows.num_rows == 0 and rejects.num_rows == 0:
            continue
        for lo in range(0, max(rows.num_rows, 1), ctx.batch_rows):
            part = rows.slice(lo, ctx.batch_rows)
            yield ParseResult(part, rejects if lo == 0 else empty_rejects())
    if not any_bytes:
        raise InputError(f"{ctx.name}: empty file (0 bytes), line 0")


def sniff_swf(head: bytes) -> float:
    """Confidence that ``head`` (first 64 KiB) is an SWF trace."""
    text = head.decode("latin-1")
    lines = [ln for ln in text.splitlines()[:200] if ln.strip()]
    if not lines:
        return 0.0
    comment = [ln for ln in lines if ln.lstrip().startswith(";")]
    keys = sum(1 for ln in comment if re.match(r"\s*;\s*(Version|UnixStartTime|MaxNodes|MaxProcs|MaxJobs|Computer)\s*:", ln))
    data = [ln for ln in lines if not ln.lstrip().startswith(";")][:50]
    if len(data) > 1 and not head.endswith(b"\n"):
        data = data[:-1]  # possibly cut by the 64 KiB window
    numeric = sum(1 for ln in data if re.fullmatch(r"\s*(-?\d+(\.\d*)?\s+){17}-?\d+(\.\d*)?\s*", ln))
    if keys >= 2 and (not data or numeric / len(data) >= 0.5):
        return 0.95
    if data and numeric / len(data) >= 0.9:
        return 0.8
    if keys >= 2:
        return 0.6
    return 0.0
