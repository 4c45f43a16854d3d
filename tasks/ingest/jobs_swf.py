"""Parser for the Standard Workload Format (SWF) of the Parallel Workloads Archive.

Format (https://www.cs.huji.ac.il/labs/parallel/workload/swf.html): header comment lines start with
``;`` (``; Key: value``), then one job per line with 18 whitespace-separated numbers, ``-1`` = unknown:

 1 job number, 2 submit time, 3 wait time, 4 run time, 5 allocated processors, 6 average CPU time,
 7 used memory, 8 requested processors, 9 requested time, 10 requested memory, 11 status, 12 user id,
 13 group id, 14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time.

Mapping to the ``jobs`` table (:mod:`nodewatch.schemas.jobs`):

* times are seconds relative to the header's ``UnixStartTime`` (epoch 0 if the header lacks it):
  submit = UnixStartTime + f2, start = submit + f3 (null if f3 is -1), end = start + f4 (null if f3
  or f4 is -1), elapsed_s = f4 (null if -1); fractional seconds are rounded to the nanosecond,
  elapsed/timelimit to the second;
* a job that **never started** (cancelled or failed in the queue) is a valid record, staged with its
  state and no start, end or elapsed time (:func:`nodewatch.schemas.jobs.never_started`): run time f4
  = -1, or f4 = 0 with no allocated processors (f5 = -1; LLNL-Thunder's cancelled/failed queue jobs).
  Its wait time (time until cancelled) is not a start. A wait time of -1 alone does not mean never
  started: LLNL-Thunder has no wait times at all, and its jobs have run times (start null, ran);
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

Lines are scanned by a compiled kernel (:mod:`nodewatch.tasks.ingest._swf_kernel`) over 8 MiB blocks;
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

from nodewatch.schemas.jobs import PARSED_SCHEMA
from nodewatch.tasks.ingest.base import ParseContext, ParseResult, empty_rejects, rejects_table
from nodewatch.tasks.ingest.inputs import InputError

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


_REASONS = {
    "TOO_FEW": "parse: expected 18 whitespace-separated fields, found {n}",
    "TOO_MANY": "parse: expected 18 whitespace-separated fields, found {n}",
    "BAD_NUMBER": "parse: field {f} ({name}) is not a number",
    "NON_INTEGRAL": "parse: job number, processors, requested time, status, user, group and partition must be integers",
    "FUTURE": "parse: time is more than 1 day after the file's reference time (future timestamp)",
    "OUT_OF_RANGE": "parse: time or duration out of range (before 1678 or beyond 2262)",
}


def _reason(status: int, nfields: int, bad_field: int) -> str:
    """Reject reason for a line status of the kernel."""
    from nodewatch.tasks.ingest import _swf_kernel as k

    key = {k.TOO_FEW: "TOO_FEW", k.TOO_MANY: "TOO_MANY", k.BAD_NUMBER: "BAD_NUMBER", k.NON_INTEGRAL: "NON_INTEGRAL",
           k.FUTURE: "FUTURE", k.OUT_OF_RANGE: "OUT_OF_RANGE"}[status]
    name = SWF_FIELDS[bad_field] if 0 <= bad_field < len(SWF_FIELDS) else "?"
    return _REASONS[key].format(n=nfields, f=bad_field + 1, name=name)


def _int_strings(vals: np.ndarray, present: np.ndarray) -> pa.Array:
    """int64 values -> decimal strings (null where not ``present``), formatted by the compiled kernel."""
    from nodewatch.tasks.ingest import _swf_kernel as k

    offsets, data = k.int_strings(vals, present)
    n = vals.size
    validity = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), validity)


def _partition_strings(part: np.ndarray, present: np.ndarray, names: dict[int, str]) -> pa.Array:
    """Partition numbers -> header names (``; Partition: <n> <name>``), else the number as a string."""
    if not names or part.size == 0:
        return _int_strings(part, present)
    lo, hi = int(part.min()), int(part.max())
    if lo < -1 or hi > 65535:
        labels_u, inv = np.unique(part, return_inverse=True)
        labels = [names.get(int(u), str(int(u))) for u in labels_u]
        idx = inv.astype(np.int32)
    else:  # small non-negative numbers: direct lookup, no sort
        labels = [names.get(u, str(u)) for u in range(-1, hi + 1)]
        idx = (part + 1).astype(np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32(), mask=~present), pa.array(labels, pa.string())).cast(
        pa.string()
    )


def _rows(sc, line_no0: int, header: SwfHeader, system: str) -> pa.Table:
    """Wrap the kernel's row arrays into a ``jobs`` batch (``line_no0`` = line number of the block's first line)."""
    from nodewatch.tasks.ingest import _swf_kernel as k

    n = sc.r_job.size
    valid = sc.r_valid

    def has(bit: int) -> np.ndarray:
        return (valid & bit) != 0

    status = sc.r_status
    state_idx = np.full(n, 3, dtype=np.int8)
    state_idx[status == 1] = 0
    state_idx[status == 0] = 1
    state_idx[status == 5] = 2
    states = pa.DictionaryArray.from_arrays(
        pa.array(state_idx, pa.int8()), pa.array(["COMPLETED", "FAILED", "CANCELLED", "UNKNOWN"])
    ).cast(pa.string())
    ts = PARSED_SCHEMA.field("submit_time").type
    procs = has(k.V_PROCS)
    cols = {
        "job_id": _int_strings(sc.r_job, has(k.V_JOB)),
        "step": pa.nulls(n, pa.string()),
        "system": pa.repeat(pa.scalar(system, pa.string()), n),
        "user": _int_strings(sc.r_user, has(k.V_USER)),
        "group": _int_strings(sc.r_group, has(k.V_GROUP)),
        "submit_time": pa.array(sc.r_submit, pa.int64(), mask=~has(k.V_SUBMIT)).cast(ts),
        "start_time": pa.array(sc.r_start, pa.int64(), mask=~has(k.V_START)).cast(ts),
        "end_time": pa.array(sc.r_end, pa.int64(), mask=~has(k.V_END)).cast(ts),
        "nodes": pa.array(sc.r_nodes, pa.int32(), mask=~procs),
        "cores": pa.array(sc.r_cores, pa.int32(), mask=~procs),
        "elapsed_s": pa.array(sc.r_elapsed, pa.int64(), mask=~has(k.V_ELAPSED)),
        "timelimit_s": pa.array(sc.r_limit, pa.int64(), mask=~has(k.V_LIMIT)),
        "state": states,
        "cancelled_by": pa.nulls(n, pa.string()),
        "exit_code": pa.nulls(n, pa.int32()),
        "signal": pa.nulls(n, pa.int32()),
        "node_list": pa.nulls(n, pa.list_(pa.string())),
        "partition": _partition_strings(sc.r_part, has(k.V_PART), header.partitions),
        "source_format": pa.repeat(pa.scalar("swf", pa.string()), n),
        "source_offset": pa.array(sc.r_line + line_no0, pa.int64()),
    }
    return pa.Table.from_pydict(cols, schema=PARSED_SCHEMA)


class _StreamCut(Exception):
    """The input stream failed after the blocks already yielded."""


def _read_blocks(stream: BinaryIO) -> Iterator[memoryview]:
    """Yield blocks of about :data:`BLOCK_BYTES` of complete lines (the last one may lack its newline).

    Reads with ``read1`` where available so that when a compressed stream is cut, the complete lines
    decompressed before the cut are still yielded; then :class:`_StreamCut` is raised. Blocks are
    memoryviews (no copy of the bytes read).
    """
    read = getattr(stream, "read1", None) or stream.read
    parts: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = read(BLOCK_BYTES - size if size < BLOCK_BYTES else 1 << 16)
        except _STREAM_ERRORS as e:
            data = b"".join(parts)
            cut = data.rfind(b"\n")
            if cut >= 0:
                yield memoryview(data)[: cut + 1]
            raise _StreamCut(str(e)) from e
        if chunk:
            parts.append(chunk)
            size += len(chunk)
            if size < BLOCK_BYTES:
                continue
        data = b"".join(parts) if len(parts) > 1 else (parts[0] if parts else b"")
        if not chunk:
            if data:
                yield memoryview(data)
            return
        cut = data.rfind(b"\n")
        if cut < 0:
            # no newline in BLOCK_BYTES: binary data or a bomb, never an SWF line (memory stays bounded)
            raise _StreamCut(f"a line longer than {BLOCK_BYTES >> 20} MiB: binary data, not an SWF trace")
        rest = data[cut + 1 :]
        parts, size = ([rest], len(rest)) if rest else ([], 0)
        yield memoryview(data)[: cut + 1]


def parse_swf(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse an SWF trace into ``jobs`` rows (see the module docstring for the mapping).

    Raises:
        InputError: empty file, no job line in the first block (not SWF: wrong delimiter, binary
            garbage...), or a compressed stream that ends early (after yielding the rows before the cut).
    """
    from nodewatch.tasks.ingest import _swf_kernel as k

    header = SwfHeader()
    system = system_name(ctx.name)
    seen_data = False
    any_bytes = False
    first_block = True
    line_base = 0
    limit_s = (ctx.reference_time + timedelta(days=1)).timestamp()  # later times are "in the future"
    blocks = _read_blocks(stream)
    while True:
        try:
            block = next(blocks)
        except StopIteration:
            break
        except _StreamCut as e:
            why = str(e).removeprefix(f"{ctx.name}: ")  # (a DecompressedStream error names the file too)
            if why.startswith("a line longer"):
                raise InputError(f"{ctx.name}: {why}, line {line_base + 1}") from None
            raise InputError(
                f"{ctx.name}: stream ends unexpectedly (truncated or corrupt compressed file: {why}), line {line_base + 1}"
            ) from e
        any_bytes = True
        if not seen_data:
            # header = the comment lines before the first job line (parsed in Python: a few dozen lines)
            for raw in bytes(block[: 1 << 20]).split(b"\n"):
                stripped = raw.strip()
                if not stripped:
                    continue
                if not stripped.startswith(b";"):
                    break
                header.add_line(raw.decode("utf-8", "replace"))
        sc = k.scan(block, header.unix_start, header.max_nodes or 0, header.max_procs or 0, limit_s)
        status = sc.l_status
        bad = status >= k.TOO_FEW
        if first_block and sc.r_job.size == 0 and bad.any():
            i = int(np.flatnonzero(bad)[0])
            raw = bytes(block[sc.l_start[i] : sc.l_end[i]][:80]).decode("utf-8", "replace")
            what = _reason(int(status[i]), int(sc.l_nfields[i]), int(sc.l_badfield[i]))[len("parse: ") :]
            raise InputError(f"{ctx.name}: not an SWF trace ({what}: {raw!r}), line {line_base + i + 1}")
        first_block = False
        if sc.r_job.size or bad.any():
            seen_data = True
        rows = _rows(sc, line_base + 1, header, system)
        rej_idx = np.flatnonzero(bad)
        if rej_idx.size:
            rejects = rejects_table(
                [line_base + int(i) + 1 for i in rej_idx],
                [bytes(block[sc.l_start[i] : sc.l_end[i]]) for i in rej_idx],
                [_reason(int(status[i]), int(sc.l_nfields[i]), int(sc.l_badfield[i])) for i in rej_idx],
            )
        else:
            rejects = empty_rejects()
        line_base += sc.n_lines
        if rows.num_rows == 0 and rejects.num_rows == 0:
            continue
        for lo in range(0, max(rows.num_rows, 1), ctx.batch_rows):
            yield ParseResult(rows.slice(lo, ctx.batch_rows), rejects if lo == 0 else empty_rejects())
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
