"""Parser for Slurm ``sacct -P`` (``--parsable2``) dumps: ``|``-separated, one header line of field names.

Only the columns the ``jobs`` table needs are read (any order, any other columns allowed):
JobID (required; ``123``, ``123.batch``, ``123_4``, ``123_[1-5]`` pending array, ``123+0`` het component),
Submit, Start, End, State, NNodes (required), Cluster, Partition, User/UID, Group/GID, Elapsed (or
ElapsedRaw), Timelimit, ExitCode, NCPUS (or AllocCPUS), NodeList.

sacct does not escape ``|`` or newlines inside free-text fields (JobName, SubmitLine, Constraints,
Comment...), so a record can have more fields than the header and can span several lines. Records
are re-assembled by joining lines until the header's field count is reached; when a record has
extra fields they are assigned to the free-text columns by a small dynamic programme that keeps
every typed column (times, durations, integers, exit codes, states, job ids) matching its pattern.
A record that cannot be aligned is rejected with a ``parse:`` reason and the following line is
tried as the start of the next record, so one broken record never swallows good ones.

Timestamps carry no zone in sacct output: they are read in ``ctx.tz`` (default UTC; for
ambiguous/nonexistent local times around DST changes the earlier offset is used).
``CANCELLED by 123`` gives state CANCELLED and cancelled_by ``"123"``; ``ExitCode`` ``2:15`` gives
exit_code 2, signal 15; ``UNLIMITED``/``Partition_Limit`` time limits are null; node lists are
expanded with :func:`nodewatch.tasks.ingest.hostlist.expand_hostlist` and every name is checked with
:func:`nodewatch.schemas.names.is_valid_node_name` (a bad list or name rejects the row); NCPUS 0 (nothing
allocated yet) gives a null ``cores``. A job that never started (``Start`` ``Unknown``/``None`` and
``Elapsed`` 0 or absent: pending, or cancelled/failed in the queue) is a valid record: its
``elapsed_s`` is null (:func:`nodewatch.schemas.jobs.never_started`) and an NNodes of 0 gives a null
``nodes``; ``End`` (when it left the queue) is kept. Everything else is passed through for
validation to judge (e.g. NNodes 0 of a job that ran, End before Start).
"""

from __future__ import annotations

import lzma
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import BinaryIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from nodewatch.schemas.jobs import PARSED_SCHEMA
from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.ingest.base import ParseContext, ParseResult, empty_rejects, rejects_table
from nodewatch.tasks.ingest.hostlist import HostlistError, expand_hostlist
from nodewatch.tasks.ingest.inputs import InputError

REQUIRED_COLUMNS: tuple[str, ...] = ("JobID", "Submit", "Start", "End", "State", "NNodes")
"""sacct fields a dump must have."""

FREE_TEXT_COLUMNS: tuple[str, ...] = (
    "SubmitLine", "Constraints", "JobName", "Comment", "AdminComment", "SystemComment", "WorkDir",
    "StdOut", "StdErr", "StdIn", "Extra", "Container",
)
"""Columns whose values may contain ``|`` (in order of preference when an alignment is ambiguous)."""

MAX_EXTRA_FIELDS = 200
"""Records with more surplus ``|`` than this are rejected instead of aligned."""

MAX_RECORD_LINES = 200
"""A record may span at most this many lines (newlines inside SubmitLine...)."""

_TIME = r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|Unknown|None)"
_DUR = r"(?:(?:\d+-)?\d+:\d\d:\d\d(?:\.\d+)?|\d+:\d\d(?:\.\d+)?|UNLIMITED|Partition_Limit|INVALID)"
_INT = r"\d+"
_PATTERNS: dict[str, str] = {
    "JobID": r"\d+(?:_(?:\d+|\[[^\]|]*\]))?(?:\+\d+)?(?:\.[A-Za-z0-9_+\-]+)?",
    "JobIDRaw": r"\d+(?:\+\d+)?(?:\.[A-Za-z0-9_+\-]+)?",
    "ExitCode": r"\d+:\d+",
    "DerivedExitCode": r"\d+:\d+",
    "State": r"[A-Z_]+\+?(?: by \d+)?",
}
for _c in ("Submit", "Start", "End", "Eligible"):
    _PATTERNS[_c] = _TIME
for _c in ("Elapsed", "CPUTime", "Timelimit", "TotalCPU", "UserCPU", "SystemCPU", "Suspended", "Reserved", "ResvCPU",
           "AveCPU", "MinCPU", "Planned", "PlannedCPU"):
    _PATTERNS[_c] = _DUR
for _c in ("ElapsedRaw", "CPUTimeRAW", "DBIndex", "GID", "UID", "NCPUS", "NNodes", "AllocCPUS", "AllocNodes", "AssocID",
           "Priority", "QOSRAW", "TimelimitRaw", "ReqCPUS", "ReqNodes", "ResvCPURAW", "NTasks", "WCKeyID",
           "PlannedCPURAW"):
    _PATTERNS[_c] = _INT
_TYPED = {k: re.compile(v) for k, v in _PATTERNS.items()}

_JOBID_RE = re.compile(r"(?P<job>\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?)(?:\.(?P<step>[A-Za-z0-9_+\-]+))?")
_DUR_RE = re.compile(r"(?:(?P<d>\d+)-)?(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d)(?:\.\d+)?")
_MMSS_RE = re.compile(r"(?P<m>\d+):(?P<s>\d\d)(?:\.\d+)?")
_DAYHOUR_RE = re.compile(r"(?P<d>\d+)-(?P<h>\d+)(?::(?P<m>\d\d))?")
_STATE_RE = re.compile(r"(?P<state>[A-Z_]+)\+?(?: by (?P<uid>\d+))?")
_EXIT_RE = re.compile(r"(?P<code>\d+):(?P<sig>\d+)")
_NO_TIME = frozenset({"", "Unknown", "None", "N/A"})
_NO_LIMIT = frozenset({"", "UNLIMITED", "Partition_Limit", "INVALID", "NONE"})
_STATE_ALIASES = {"REQUEUE_FED": "REQUEUED", "REQUEUE_HOLD": "REQUEUED", "CANCELED": "CANCELLED", "OOM": "OUT_OF_MEMORY"}

_KEPT = ("JobID", "Submit", "Start", "End", "State", "NNodes", "Cluster", "Partition", "User", "UID", "Group", "GID",
         "Elapsed", "ElapsedRaw", "Timelimit", "ExitCode", "NCPUS", "AllocCPUS", "NodeList")


class RowError(ValueError):
    """A record that cannot become a row; the message is the reject reason (without ``parse:``)."""


def parse_duration(text: str) -> int | None:
    """Seconds of a Slurm duration: ``[D-]HH:MM:SS``, ``MM:SS[.mmm]``, ``D-HH[:MM]``; null for unlimited/empty.

    Raises:
        RowError: the text is none of these.
    """
    s = text.strip()
    if s in _NO_LIMIT:
        return None
    m = _DUR_RE.fullmatch(s)
    if m:
        return int(m["d"] or 0) * 86400 + int(m["h"]) * 3600 + int(m["m"]) * 60 + int(m["s"])
    m = _MMSS_RE.fullmatch(s)
    if m:
        return int(m["m"]) * 60 + int(m["s"])
    m = _DAYHOUR_RE.fullmatch(s)
    if m:
        return int(m["d"]) * 86400 + int(m["h"]) * 3600 + int(m["m"] or 0) * 60
    raise RowError(f"bad duration {text!r} (expected [D-]HH:MM:SS)")


def split_state(text: str) -> tuple[str, str | None]:
    """``"CANCELLED by 123"`` -> ``("CANCELLED", "123")``; aliases such as REQUEUE_HOLD map to REQUEUED.

    Unknown state names are returned unchanged (validation quarantines them).
    """
    s = text.strip()
    m = _STATE_RE.fullmatch(s)
    if not m:
        raise RowError(f"bad State {text!r}")
    state = _STATE_ALIASES.get(m["state"], m["state"])
    return state, m["uid"]


def split_job_id(text: str) -> tuple[str, str | None]:
    """``"123_4.batch"`` -> ``("123_4", "batch")``; ``"123+0"`` -> ``("123+0", None)``."""
    m = _JOBID_RE.fullmatch(text.strip())
    if not m:
        raise RowError(f"bad JobID {text!r}")
    return m["job"], m["step"]


@dataclass
class _Header:
    names: list[str]
    index: dict[str, int]
    free: list[int]
    typed: list[re.Pattern[str] | None]


def _make_header(line: str, name: str, line_no: int) -> _Header:
    names = [n.strip() for n in line.split("|")]
    if len(names) < 2:
        raise InputError(f"{name}: not a sacct -P dump (first line has no '|'-separated header), line {line_no}")
    index: dict[str, int] = {}
    for i, n in enumerate(names):
        index.setdefault(n, i)
    missing = [c for c in REQUIRED_COLUMNS if c not in index]
    if missing:
        if "JobID" not in index and "JobIDRaw" not in index:
            raise InputError(
                f"{name}: not a sacct -P dump (header has no JobID column; missing {', '.join(missing)}), line {line_no}"
            )
        raise InputError(f"{name}: sacct header lacks required column(s) {', '.join(missing)}, line {line_no}")
    free = [i for i, n in enumerate(names) if n in FREE_TEXT_COLUMNS]
    typed = [_TYPED.get(n) for n in names]
    return _Header(names, index, free, typed)


def _is_header_line(line: str) -> bool:
    parts = set(line.split("|"))
    return all(c in parts for c in REQUIRED_COLUMNS)


def _mismatched(values: list[str], hdr: _Header) -> list[str]:
    """Names of typed columns whose (non-empty) value does not match the column's pattern."""
    return [hdr.names[i] for i, p in enumerate(hdr.typed) if p is not None and values[i] and not p.fullmatch(values[i])]


def _align(fields: list[str], hdr: _Header) -> tuple[list[str], int]:
    """Map ``fields`` (>= header length) onto the header columns; returns (values, typed mismatches).

    Dynamic programme over columns with state "surplus fields absorbed so far": a free-text column
    may absorb any number of the surplus fields (joined back with ``|``); every typed column costs
    one mismatch when its value does not match its pattern. Ties go to the earlier column in
    :data:`FREE_TEXT_COLUMNS`.
    """
    n_cols = len(hdr.names)
    extra = len(fields) - n_cols
    if extra == 0:
        return fields, len(_mismatched(fields, hdr))
    big = 1_000_000
    inf = float("inf")
    # cost[u] = best cost having absorbed u surplus fields before the current column
    cost = [0.0] + [inf] * extra
    free = set(hdr.free)
    back: list[list[int]] = []
    for c in range(n_cols):
        pat = hdr.typed[c]
        new = [inf] * (extra + 1)
        choice = [0] * (extra + 1)
        if c in free:
            rank = FREE_TEXT_COLUMNS.index(hdr.names[c]) + 1
            for u in range(extra + 1):
                if cost[u] == inf:
                    continue
                for a in range(extra - u + 1):
                    v = cost[u] + a * rank
                    if v < new[u + a]:
                        new[u + a] = v
                        choice[u + a] = a
        else:
            for u in range(extra + 1):
                if cost[u] == inf:
                    continue
                val = fields[c + u]
                v = cost[u] + (big if pat is not None and val and not pat.fullmatch(val) else 0)
                new[u] = v
                choice[u] = 0
        back.append(choice)
        cost = new
    if cost[extra] == inf:
        return fields[:n_cols], n_cols
    # walk back
    absorbed = [0] * n_cols
    u = extra
    for c in range(n_cols - 1, -1, -1):
        a = back[c][u]
        absorbed[c] = a
        u -= a
    out: list[str] = []
    p = 0
    for c in range(n_cols):
        a = absorbed[c]
        out.append("|".join(fields[p : p + a + 1]))
        p += a + 1
    return out, int(cost[extra] // big)


class _Converter:
    """Turns aligned records into ``jobs`` row values."""

    def __init__(self, hdr: _Header, tz: ZoneInfo | None, limit: datetime) -> None:
        self.hdr = hdr
        self.tz = tz
        self.limit = limit

    def get(self, rec: list[str], col: str) -> str | None:
        i = self.hdr.index.get(col)
        if i is None:
            return None
        v = rec[i].strip()
        return v or None

    def time(self, rec: list[str], col: str) -> datetime | None:
        v = self.get(rec, col)
        if v is None or v in _NO_TIME:
            return None
        try:
            dt = datetime.fromisoformat(v)
        except ValueError as e:
            raise RowError(f"bad {col} time {v!r} (expected YYYY-MM-DDTHH:MM:SS)") from e
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=self.tz)
        if dt > self.limit:
            raise RowError(f"{col} {v} is more than 1 day after the file's reference time (future timestamp)")
        return dt

    def integer(self, rec: list[str], col: str) -> int | None:
        v = self.get(rec, col)
        if v is None:
            return None
        if not v.isdigit():
            raise RowError(f"bad {col} {v!r} (expected a non-negative integer)")
        return int(v)

    def row(self, rec: list[str]) -> dict[str, object]:
        for col in _KEPT:
            i = self.hdr.index.get(col)
            if i is not None and any("\udc80" <= ch <= "\udcff" for ch in rec[i]):
                raise RowError(f"column {col} is not valid UTF-8")
        job_id, step = split_job_id(self.get(rec, "JobID") or "")
        state_text = self.get(rec, "State")
        if state_text is None:
            raise RowError("empty State")
        state, cancelled_by = split_state(state_text)
        submit = self.time(rec, "Submit")
        start = self.time(rec, "Start")
        end = self.time(rec, "End")
        nodes = self.integer(rec, "NNodes")
        cores = self.integer(rec, "NCPUS") if "NCPUS" in self.hdr.index else self.integer(rec, "AllocCPUS")
        if cores == 0:
            cores = None
        elapsed_text = self.get(rec, "Elapsed")
        if elapsed_text is not None:
            elapsed = parse_duration(elapsed_text)
        elif self.get(rec, "ElapsedRaw") is not None:
            elapsed = self.integer(rec, "ElapsedRaw")
        elif start is not None and end is not None:
            elapsed = int((end - start).total_seconds())
        else:
            elapsed = None
        if start is None and not elapsed:
            # never started (pending, or cancelled/failed in the queue): no run time, and an NNodes of 0
            # is "nothing allocated, request not recorded" (like NCPUS 0), not a node count
            elapsed = None
            if nodes == 0:
                nodes = None
        limit_text = self.get(rec, "Timelimit")
        timelimit = parse_duration(limit_text) if limit_text is not None else None
        exit_code = signal = None
        ec = self.get(rec, "ExitCode")
        if ec is not None:
            m = _EXIT_RE.fullmatch(ec)
            if not m:
                raise RowError(f"bad ExitCode {ec!r} (expected code:signal)")
            exit_code, signal = int(m["code"]), int(m["sig"])
        node_list = None
        nl = self.get(rec, "NodeList")
        if nl is not None:
            try:
                hosts = expand_hostlist(nl)
            except HostlistError as e:
                raise RowError(str(e)) from e
            for h in hosts:
                if not is_valid_node_name(h):
                    raise RowError(f"invalid node name {h!r} in NodeList")
            node_list = hosts or None
        return {
            "job_id": job_id,
            "step": step,
            "system": self.get(rec, "Cluster"),
            "user": self.get(rec, "User") or self.get(rec, "UID"),
            "group": self.get(rec, "Group") or self.get(rec, "GID"),
            "submit_time": submit,
            "start_time": start,
            "end_time": end,
            "nodes": nodes,
            "cores": cores,
            "elapsed_s": elapsed,
            "timelimit_s": timelimit,
            "state": state,
            "cancelled_by": cancelled_by,
            "exit_code": exit_code,
            "signal": signal,
            "node_list": node_list,
            "partition": self.get(rec, "Partition"),
            "source_format": "sacct",
        }


MAX_LINE_BYTES = 16 << 20
"""A line longer than this (no newline in 16 MiB) makes the file unreadable."""

_STREAM_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, pa.ArrowException)


class _StreamCut(Exception):
    """The input stream failed after ``lines`` complete lines."""

    def __init__(self, lines: int, error: str) -> None:
        super().__init__(error)
        self.lines = lines


def _iter_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, line)`` (1-based, ``\\r\\n``/``\\n`` removed).

    Reads 64 KiB at a time (``read1`` where available), so when a compressed stream is cut the lines
    decompressed before the cut are still yielded; then :class:`_StreamCut` is raised.
    """
    read = getattr(stream, "read1", None) or stream.read
    buf = b""
    no = 0
    while True:
        try:
            chunk = read(1 << 16)
        except _STREAM_ERRORS as e:
            raise _StreamCut(no, str(e)) from e
        if not chunk:
            if buf:
                no += 1
                yield no, buf.rstrip(b"\r")
            return
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        if len(buf) > MAX_LINE_BYTES:
            raise _StreamCut(no, f"line {no + 1} is longer than {MAX_LINE_BYTES >> 20} MiB")
        for line in lines:
            no += 1
            yield no, line[:-1] if line.endswith(b"\r") else line


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _to_table(rows: list[dict[str, object]], offsets: list[int]) -> pa.Table:
    cols: dict[str, list[object]] = {f.name: [] for f in PARSED_SCHEMA}
    for r in rows:
        for k, v in r.items():
            cols[k].append(v)
    cols["source_offset"] = list(offsets)
    return pa.Table.from_pydict(cols, schema=PARSED_SCHEMA)


def _field_count(line: str) -> int:
    return line.count("|") + 1


def parse_sacct(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse a ``sacct -P`` dump into ``jobs`` rows (allocations and steps).

    Raises:
        InputError: empty file, no ``|`` header, a header without the required columns, an unknown
            ``ctx.tz``, or a compressed stream that ends early.
    """
    try:
        tz = ZoneInfo(ctx.tz)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise InputError(f"{ctx.name}: unknown time zone {ctx.tz!r}, line 0") from e
    limit = ctx.reference_time + timedelta(days=1)
    lines = _iter_lines(stream)
    hdr: _Header | None = None
    conv: _Converter | None = None
    rows: list[dict[str, object]] = []
    offsets: list[int] = []
    rej_off: list[int] = []
    rej_raw: list[str] = []
    rej_reason: list[str] = []
    pending: list[tuple[int, str]] = []  # lines read ahead, not yet consumed
    exhausted = False
    saw_any = False
    cut: InputError | None = None

    def next_line() -> tuple[int, str] | None:
        nonlocal exhausted
        if pending:
            return pending.pop(0)
        if exhausted:
            return None
        try:
            no, raw = next(lines)
        except StopIteration:
            exhausted = True
            return None
        except _StreamCut as e:
            # keep what was read: the caller flushes rows parsed so far, then raises
            nonlocal cut
            why = str(e).removeprefix(f"{ctx.name}: ")  # (a DecompressedStream error names the file too)
            cut = InputError(f"{ctx.name}: stream ends unexpectedly ({why}), line {e.lines + 1}")
            exhausted = True
            return None
        return no, _decode(raw)

    def flush() -> ParseResult:
        res = ParseResult(
            _to_table(rows, offsets) if rows else PARSED_SCHEMA.empty_table(),
            rejects_table(rej_off, rej_raw, rej_reason) if rej_off else empty_rejects(),
        )
        rows.clear()
        offsets.clear()
        rej_off.clear()
        rej_raw.clear()
        rej_reason.clear()
        return res

    def reject(no: int, text: str, reason: str) -> None:
        rej_off.append(no)
        rej_raw.append(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
        rej_reason.append("parse: " + reason)

    while True:
        item = next_line()
        if item is None:
            break
        no, line = item
        saw_any = True
        if hdr is None:
            if not line.strip():
                continue
            if "\x00" in line or any("\udc80" <= ch <= "\udcff" for ch in line[:4096]):
                raise InputError(f"{ctx.name}: not a sacct -P dump (binary or non-UTF-8 header), line {no}")
            hdr = _make_header(line.strip(), ctx.name, no)
            conv = _Converter(hdr, tz, limit)
            continue
        assert conv is not None
        if not line.strip():
            continue
        if _is_header_line(line):
            hdr = _make_header(line.strip(), ctx.name, no)  # concatenated dumps repeat the header
            conv = _Converter(hdr, tz, limit)
            continue
        n_cols = len(hdr.names)
        # assemble a record: join following lines while there are fewer fields than the header
        parts = [line]
        count = _field_count(line)
        consumed: list[tuple[int, str]] = []
        while count < n_cols and len(parts) < MAX_RECORD_LINES:
            nxt = next_line()
            if nxt is None:
                break
            consumed.append(nxt)
            parts.append(nxt[1])
            count += _field_count(nxt[1]) - 1
        text = "\n".join(parts)
        if count < n_cols:
            # truncated record: reject only the first line, retry the rest as new records
            pending[:0] = consumed
            reject(no, line, f"record has {_field_count(line)} fields, header has {n_cols} (truncated record?)")
        else:
            fields = text.split("|")
            extra = len(fields) - n_cols
            if extra > MAX_EXTRA_FIELDS:
                pending[:0] = consumed
                reject(no, line, f"record has {len(fields)} fields, header has {n_cols}")
            elif extra == 0 and not consumed:
                # the common case: one line, exact field count; kept columns are checked when converted
                try:
                    rows.append(conv.row(fields))
                    offsets.append(no)
                except RowError as e:
                    reject(no, text, str(e))
            else:
                values, mismatches = _align(fields, hdr)
                if mismatches and consumed:
                    # the joined lines do not form one record: keep the first line alone
                    pending[:0] = consumed
                    reject(no, line, f"record has {_field_count(line)} fields, header has {n_cols} and "
                                     "joining the next lines does not give a consistent record")
                elif mismatches:
                    bad = _mismatched(values, hdr)
                    reject(no, text, f"{len(fields)} fields do not line up with the {n_cols}-column header "
                                     f"(columns {', '.join(bad[:5])} malformed)")
                else:
                    try:
                        rows.append(conv.row(values))
                        offsets.append(no)
                    except RowError as e:
                        reject(no, text, str(e))
        if len(rows) + len(rej_off) >= ctx.batch_rows:
            yield flush()
    if cut is not None:
        if rows or rej_off:
            yield flush()
        raise cut
    if not saw_any:
        raise InputError(f"{ctx.name}: empty file (0 bytes), line 0")
    if hdr is None:
        raise InputError(f"{ctx.name}: no sacct header (only blank lines), line 1")
    if rows or rej_off:
        yield flush()


def sniff_sacct(head: bytes) -> float:
    """Confidence that ``head`` (first 64 KiB) is a ``sacct -P`` dump."""
    text = head.decode("utf-8", "replace")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    names = set(first.strip().split("|"))
    if "|" not in first:
        return 0.0
    if all(c in names for c in REQUIRED_COLUMNS):
        return 0.95
    if "JobID" in names or "JobIDRaw" in names:
        return 0.7
    return 0.0
