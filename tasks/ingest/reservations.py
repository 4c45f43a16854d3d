"""Reservations source: ``nodewatch ingest reservations reservations.csv``.

Input: a CSV flattened from ``scontrol show reservation`` with header
``name,start,end,nodes,flags,users`` (any order; ``flags``/``users`` optional; scontrol's field
names ``ReservationName,StartTime,EndTime,Nodes,NodeCnt,Flags,Users`` are accepted too, other
columns such as ``Duration,Accounts,State`` are ignored; a ``NodeCnt`` that differs from the
expanded hostlist rejects the row). ``start``/``end``
are ISO 8601 (``scontrol`` prints local time without a zone: read in ``ParseContext.tz``), ``nodes``
a Slurm hostlist (``node[001-004],gpu1``; ``(null)`` = none) expanded with
:func:`nodewatch.tasks.ingest.hostlist.expand_hostlist`, ``flags`` and ``users`` lists separated by ``,``
(quoted), ``;``, ``|`` or blanks. Staged as ``reservations`` (``schemas/reservations.py``).
Rows whose hostlist cannot be expanded or whose times cannot be parsed are rejected with a
``parse:`` reason; the end-after-start rule, unknown flags and unknown/invalid node names are the
pipeline's validation.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.reservations import RESERVATIONS, ROW_CHECKS
from nodewatch.tasks.ingest._vectorised import (
    csv_header,
    file_error,
    iter_csv_text,
    parse_time_strings,
    read_header,
    reject_table,
    split_list,
)
from nodewatch.tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec, empty_rejects
from nodewatch.tasks.ingest.hostlist import HostlistError, expand_hostlist

REQUIRED = ("name", "start", "end", "nodes")
OPTIONAL = ("flags", "users", "nodecnt")
HEADER_ALIASES = {
    "reservationname": "name",
    "starttime": "start",
    "endtime": "end",
    "nodelist": "nodes",
    "node_list": "nodes",
}
"""``scontrol show reservation`` field names accepted for the columns (case-insensitive)."""
ROW_SCHEMA = RESERVATIONS.arrow_schema()


def parse_reservations_csv(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse a reservations CSV into ``reservations`` rows (see module doc)."""
    cols = read_header(stream, ctx)
    low = {HEADER_ALIASES.get(c.lower(), c.lower()): c for c in cols}
    missing = [c for c in REQUIRED if c not in low]
    if missing:
        raise file_error(
            ctx, f"line 1: missing columns {missing} (header {cols[:12]}); expected name,start,end,nodes[,flags,users]"
        )
    use = [low[c] for c in REQUIRED + OPTIONAL if c in low]
    body = _body_or_none(stream)
    if body is None:  # header only: a valid file with no reservations (e.g. a day without any)
        yield ParseResult(ROW_SCHEMA.empty_table(), empty_rejects())
        return
    for dec, lines, rej in iter_csv_text(body, ctx, cols, use):
        n = len(lines)
        name = pc.utf8_trim_whitespace(dec[low["name"]])
        start = parse_time_strings(dec[low["start"]], ctx.tz)
        end = parse_time_strings(dec[low["end"]], ctx.tz)
        node_lists: list[list[str] | None] = []
        reasons: list[str | None] = []
        for expr in dec[low["nodes"]].to_pylist():
            try:
                node_lists.append(expand_hostlist(expr))
                reasons.append(None)
            except HostlistError as e:
                node_lists.append(None)
                reasons.append(f"parse: {e}")
        bad_t = np.asarray(pc.or_(pc.is_null(start), pc.is_null(end)).to_numpy(zero_copy_only=False), bool)
        for i in np.flatnonzero(bad_t).tolist():
            which = "start" if start[i].as_py() is None else "end"
            reasons[i] = f"parse: unparseable {which} time {dec[low[which]][i].as_py()!r}"
        if "nodecnt" in low:  # scontrol's NodeCnt must equal the expanded hostlist
            for i, cnt in enumerate(dec[low["nodecnt"]].to_pylist()):
                got = node_lists[i]
                if reasons[i] is None and got is not None and cnt and cnt.strip() and cnt.strip() != str(len(got)):
                    reasons[i] = f"parse: NodeCnt {cnt.strip()!r} but the hostlist expands to {len(got)} nodes"
        bad = np.array([r is not None for r in reasons], bool) if n else np.zeros(0, bool)
        if bad.any():
            bi = np.flatnonzero(bad)
            raws = [",".join(str(dec[c][i].as_py()) for c in use) for i in bi.tolist()]
            rej.append(reject_table(lines[bi], raws, [reasons[i] for i in bi.tolist()]))
        empty = pa.array([[]] * n, pa.list_(pa.string()))
        flags = split_list(pc.utf8_upper(dec[low["flags"]])) if "flags" in low else empty
        users = split_list(dec[low["users"]]) if "users" in low else empty
        node_list = pa.array([x or [] for x in node_lists], pa.list_(pa.string()))
        rows = pa.table([name, start, end, node_list, flags, users, pa.array(lines, pa.int64())], schema=ROW_SCHEMA)
        if bad.any():
            rows = rows.filter(pa.array(~bad))
        yield ParseResult(rows, pa.concat_tables(rej))


class _Prepend(io.RawIOBase):
    """Read-only stream that returns ``head`` and then the rest of ``stream``."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        super().__init__()
        self._head = head
        self._s = stream

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._s.read(len(b))
        n = len(data)
        b[:n] = data
        return n


def _body_or_none(stream: BinaryIO) -> BinaryIO | None:
    """The CSV body after the header, or ``None`` when it holds nothing but blank lines (header-only file).

    pyarrow's CSV reader refuses an empty body ("Empty CSV file"); a header-only reservations CSV is a
    valid file with 0 rows, so it is detected here by peeking at the first block.
    """
    head = stream.read(1 << 16)
    if len(head) < 1 << 16 and not head.strip(b" \t\r\n"):
        return None
    return io.BufferedReader(_Prepend(head, stream))  # type: ignore[return-value]


def sniff_reservations_csv(head: bytes) -> float:
    """Header holding name, start, end and nodes."""
    cols = csv_header(head)
    return 1.0 if cols and set(REQUIRED) <= {HEADER_ALIASES.get(c.lower(), c.lower()) for c in cols} else 0.0


SOURCES = [
    SourceSpec(
        name="reservations",
        table=RESERVATIONS,
        formats=(
            Format("reservations-csv", parse_reservations_csv, sniff_reservations_csv, "CSV: name,start,end,nodes[,flags,users]"),
        ),
        node_column=None,
        # not node_list_column="node_list" yet: the pipeline's list check runs NODE_NAME_PATTERN (a
        # look-ahead) through pyarrow's RE2, which rejects it; names are checked by ROW_CHECKS instead.
        row_checks=ROW_CHECKS,
        help=(
            "Slurm reservations flattened from `scontrol show reservation` to CSV (name,start,end,nodes[,flags,users] "
            "or ReservationName,StartTime,EndTime,Nodes,NodeCnt,Flags,Users,...); "
            "nodes is a Slurm hostlist. MAINT reservations are the maintenance windows."
        ),
    )
]
