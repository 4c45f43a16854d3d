"""Parsers for failure records: LANL 1996-2005 (LA-UR-05-7318) and the PNNL MPP2 event trace.

Both produce rows of :data:`nodewatch.schemas.failures.FAILURES` plus ``source_offset`` (1-based line number).

LANL (CSV with header, 26 columns; layout in the README beside the data): ``System`` N becomes
``system = "lanl-s<N>"``; the zero-based node number ``nodenumz`` becomes ``node = "lanl-s<N>-n<nodenumz>"`` (null when empty:
system 17 has system-wide records);
``Prob Started``/``Prob Fixed`` (``m/d/yyyy h:mm``) become ``start``/``end``; ``Down Time`` (minutes)
becomes ``downtime_s``; the one non-empty blame column (Facilities ... Software) gives ``category`` and
its text ``cause``; ``fru type`` -> ``fru``; ``nodes`` -> ``system_nodes``; ``Same Event`` Yes/No.

PNNL (``Date,Hardware Identifier,What Failed,Description of Failure,Action Taken``; dates
``m/d/yyyy[ h:mm]``, a date without time is midnight): ``system = "pnnl-mpp2"``; ``node N`` becomes
``pnnl-mpp2-n<N>`` with purpose ``compute``; other identifiers (``dtemp storage 05``, ``quadrics switch
1N05``...) become ``pnnl-mpp2-<slug>`` with their first word as purpose; ``What Failed`` -> ``fru``
and category (OS/APPL -> Software, UNKNOWN -> Undetermined, everything else Hardware).

Time zone: both sources record local site time without a zone. The parser uses ``ctx.tz`` when it is
not the default ``UTC``, else the site's zone (LANL: America/Denver; PNNL: America/Los_Angeles).
Ambiguous fall-back hours are read as standard time, non-existent spring-forward minutes shifted
forward. Lines are UTF-8 or, failing that, Windows-1252 (the PNNL export's curly quotes); lines with
NUL bytes or undecodable bytes are rejected. Blank lines carry no record and are skipped; every other
line becomes a row or a reject with a ``parse:`` reason. Range, duplicate, future and window checks
are left to the ingest pipeline.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa

from nodewatch.schemas.failures import FAILURES
from nodewatch.tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec, empty_rejects, rejects_table
from nodewatch.tasks.ingest.inputs import InputError, iter_lines

LANL_TZ = "America/Denver"
PNNL_TZ = "America/Los_Angeles"
LANL_HEADER = [
    "System", "machine type", "nodes", "procstot", "procsinnode", "nodenum", "nodenumz", "node install",
    "node prod", "node decom", "fru type", "mem", "cputype", "memtype", "num intercon", "purpose",
    "Prob Started", "Prob Fixed", "Down Time", "Facilities", "Hardware", "Human Error", "Network",
    "Undetermined", "Software", "Same Event",
]
PNNL_HEADER = ["Date", "Hardware Identifier", "What Failed", "Description of Failure", "Action Taken"]
_LANL_DATE = re.compile(r"^\d{1,2}/\d{1,2}/\d{4} \d{1,2}:\d{2}$")
_PNNL_DATE = re.compile(r"^\d{1,2}/\d{1,2}/\d{4}( \d{1,2}:\d{2})?$")
_INT = re.compile(r"^\d{1,9}$")
_SLUG = re.compile(r"[^a-z0-9]+")
_COLUMNS = [c.name for c in FAILURES.columns]


def _tz(ctx: ParseContext, site: str) -> str:
    return ctx.tz if ctx.tz and ctx.tz != "UTC" else site


def _to_utc(texts: list[str | None], fmt_with_time: str, fmt_date: str | None, tz: str) -> pd.Series:
    """Parse local date strings (None stays NaT) and convert to UTC nanoseconds."""
    s = pd.Series(texts, dtype=object)
    t = pd.to_datetime(s, format=fmt_with_time, errors="coerce")
    if fmt_date is not None:
        no_time = t.isna() & s.notna()
        if no_time.any():
            t[no_time] = pd.to_datetime(s[no_time], format=fmt_date, errors="coerce")
    t = pd.DatetimeIndex(t.astype("datetime64[ns]"))
    local = t.tz_localize(tz, ambiguous=np.zeros(len(t), bool), nonexistent="shift_forward")
    return pd.Series(local.tz_convert("UTC"))


class _Batch:
    """Accumulates rows and rejects of one batch."""

    def __init__(self) -> None:
        self.cols: dict[str, list] = {c: [] for c in [*_COLUMNS, "source_offset"]}
        self.start_txt: list[str] = []
        self.end_txt: list[str | None] = []
        self.raw: list[bytes] = []
        self.rej: tuple[list[int], list[bytes | str], list[str]] = ([], [], [])

    def __len__(self) -> int:
        return len(self.start_txt) + len(self.rej[0])

    def reject(self, offset: int, raw: bytes, reason: str) -> None:
        self.rej[0].append(offset)
        self.rej[1].append(raw)
        self.rej[2].append(reason)

    def add(self, offset: int, raw: bytes, start: str, end: str | None, **values: object) -> None:
        self.raw.append(raw)
        self.start_txt.append(start)
        self.end_txt.append(end)
        for c in _COLUMNS:
            if c not in ("start", "end"):
                self.cols[c].append(values.get(c))
        self.cols["source_offset"].append(offset)

    def result(self, tz: str, fmt: str, fmt_date: str | None) -> ParseResult:
        start = _to_utc(self.start_txt, fmt, fmt_date, tz)
        end = _to_utc(self.end_txt, fmt, fmt_date, tz)
        bad = (start.isna() | (end.isna() & pd.Series([e is not None for e in self.end_txt]))).to_numpy()
        for i in np.flatnonzero(bad):  # shaped like a date but impossible (13/45/2003)
            which = "start" if pd.isna(start.iloc[i]) else "end"
            text = self.start_txt[i] if which == "start" else self.end_txt[i]
            self.reject(self.cols["source_offset"][i], self.raw[i], f"parse: {which} {text!r} is not a valid date")
        keep = ~bad
        start, end = start[keep].reset_index(drop=True), end[keep].reset_index(drop=True)
        for c in self.cols:
            if c not in ("start", "end"):
                self.cols[c] = [v for v, k in zip(self.cols[c], keep, strict=True) if k]
        arrays = {}
        schema = FAILURES.arrow_schema()
        for c in _COLUMNS:
            typ = schema.field(c).type
            if c == "start":
                arrays[c] = pa.array(start, typ)
            elif c == "end":
                arrays[c] = pa.array(end, typ)
            else:
                arrays[c] = pa.array(self.cols[c], typ)
        arrays["source_offset"] = pa.array(self.cols["source_offset"], pa.int64())
        rows = pa.table(arrays)
        rejects = rejects_table(*self.rej) if self.rej[0] else empty_rejects()
        return ParseResult(rows, rejects)


def _decode(raw: bytes) -> str | None:
    """UTF-8, else Windows-1252 (the PNNL export has cp1252 curly quotes); None for NUL/undecodable bytes."""
    if b"\x00" in raw:
        return None
    for enc in ("utf-8", "cp1252"):
        try:
            return raw.decode(enc)
        except UnicodeDecodeError:
            continue
    return None


def _header(stream: BinaryIO, ctx: ParseContext, expected: list[str], what: str) -> Iterator[tuple[int, bytes]]:
    lines = iter_lines(stream)
    for n, raw in lines:
        if not raw.strip():
            continue
        text = (_decode(raw) or "").lstrip("\ufeff")
        got = next(csv.reader([text]), [])
        if [g.strip() for g in got[: len(expected)]] != expected:
            raise InputError(
                f"{ctx.name}:{n}: not a {what} file: header must start with {','.join(expected[:3])}... "
                f"(got {text[:60]!r})"
            )
        break
    else:
        raise InputError(f"{ctx.name}: empty file, expected a {what} header")
    return lines


# --------------------------------------------------------------------------- LANL
_BLAME = LANL_HEADER[19:25]


def parse_lanl(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse LANL failure records (LA-UR-05-7318 CSV) into ``failures`` rows."""
    tz = _tz(ctx, LANL_TZ)
    lines = _header(stream, ctx, LANL_HEADER[:7], "LANL failure-records")
    b = _Batch()
    for n, raw in lines:
        if not raw.strip():
            continue
        text = _decode(raw)
        if text is None:
            b.reject(n, raw, "parse: line is neither UTF-8 nor Windows-1252 text")
        else:
            f = next(csv.reader([text]), [])
            reason = _lanl_row(b, n, raw, f)
            if reason:
                b.reject(n, raw, f"parse: {reason}")
        if len(b) >= ctx.batch_rows:
            yield b.result(tz, "%m/%d/%Y %H:%M", None)
            b = _Batch()
    if len(b):
        yield b.result(tz, "%m/%d/%Y %H:%M", None)


def _lanl_row(b: _Batch, n: int, raw: bytes, f: list[str]) -> str | None:
    if len(f) != len(LANL_HEADER):
        return f"expected {len(LANL_HEADER)} comma-separated fields, got {len(f)}"
    f = [x.strip() for x in f]
    system, nodes, nodenumz = f[0], f[2], f[6]
    if not _INT.match(system):
        return f"System {system[:40]!r} is not a number"
    if nodenumz and not _INT.match(nodenumz):
        return f"node number {nodenumz[:40]!r} is not a non-negative integer"
    if not _LANL_DATE.match(f[16]):
        return f"Prob Started {f[16][:40]!r} is not m/d/yyyy h:mm"
    if f[17] and not _LANL_DATE.match(f[17]):
        return f"Prob Fixed {f[17][:40]!r} is not m/d/yyyy h:mm"
    down = f[18]
    if down and not re.fullmatch(r"-?\d{1,9}", down):
        return f"Down Time {down[:40]!r} is not a whole number of minutes"
    blamed = [(c, v) for c, v in zip(_BLAME, f[19:25], strict=True) if v]
    if len(blamed) > 1:
        return f"more than one blame category ({', '.join(c for c, _ in blamed)})"
    category, cause = blamed[0] if blamed else (None, None)
    same = {"yes": True, "y": True, "no": False, "n": False, "": None}.get(f[25].lower(), "bad")
    if same == "bad":
        return f"Same Event {f[25][:20]!r} is not Yes/No"
    b.add(
        n, raw, f[16], f[17] or None,
        system=f"lanl-s{int(system)}",
        node=f"lanl-s{int(system)}-n{int(nodenumz)}" if nodenumz else None,  # empty: system-wide record
        purpose=f[15] or None,
        downtime_s=int(down) * 60 if down else None,
        category=category,
        cause=cause,
        fru=f[10] or None,
        action=None,
        system_nodes=int(nodes) if _INT.match(nodes) else None,
        same_event=same,
        source_format="lanl",
    )
    return None


def sniff_lanl(head: bytes) -> float:
    """1.0 if the first line is the LANL header."""
    first = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].decode("utf-8", "replace")
    return 1.0 if first.replace(" ", "").lower().startswith("system,machinetype,nodes,procstot") else 0.0


# --------------------------------------------------------------------------- PNNL
def _pnnl_category(what: str) -> str:
    w = what.upper()
    if w in ("OS", "APPL"):
        return "Software"
    if w == "UNKNOWN":
        return "Undetermined"
    return "Hardware"


def parse_pnnl(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse the PNNL MPP2 event trace CSV into ``failures`` rows."""
    tz = _tz(ctx, PNNL_TZ)
    lines = _header(stream, ctx, PNNL_HEADER[:3], "PNNL event-trace")
    b = _Batch()
    for n, raw in lines:
        if not raw.strip():
            continue
        text = _decode(raw)
        if text is None:
            b.reject(n, raw, "parse: line is neither UTF-8 nor Windows-1252 text")
        else:
            reason = _pnnl_row(b, n, raw, next(csv.reader([text]), []))
            if reason:
                b.reject(n, raw, f"parse: {reason}")
        if len(b) >= ctx.batch_rows:
            yield b.result(tz, "%m/%d/%Y %H:%M", "%m/%d/%Y")
            b = _Batch()
    if len(b):
        yield b.result(tz, "%m/%d/%Y %H:%M", "%m/%d/%Y")


def _pnnl_row(b: _Batch, n: int, raw: bytes, f: list[str]) -> str | None:
    if len(f) < 5 or len(f) > 6 or (len(f) == 6 and f[5].strip()):
        return f"expected 5 comma-separated fields, got {len(f)}"
    date, ident, what, desc, action = (x.strip() for x in f[:5])
    if not _PNNL_DATE.match(date):
        return f"Date {date[:40]!r} is not m/d/yyyy[ h:mm]"
    m = re.fullmatch(r"node\s+(\d{1,6})", ident, flags=re.IGNORECASE)
    if m:
        node, purpose = f"pnnl-mpp2-n{int(m.group(1))}", "compute"
    else:
        slug = _SLUG.sub("-", ident.lower()).strip("-")
        if not slug:
            return f"Hardware Identifier {ident[:40]!r} names no component"
        node, purpose = f"pnnl-mpp2-{slug}"[:63].rstrip("-"), slug.split("-")[0]
    b.add(
        n, raw, date, None,
        system="pnnl-mpp2",
        node=node,
        purpose=purpose,
        downtime_s=None,
        category=_pnnl_category(what),
        cause=desc or None,
        fru=what or None,
        action=action or None,
        system_nodes=None,
        same_event=None,
        source_format="pnnl",
    )
    return None


def sniff_pnnl(head: bytes) -> float:
    """1.0 if the first line is the PNNL event-trace header."""
    first = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].decode("utf-8", "replace").lower()
    return 1.0 if first.startswith("date,hardware identifier,what failed") else 0.0


SOURCES = [
    SourceSpec(
        name="failures",
        table=FAILURES,
        formats=(
            Format("lanl", parse_lanl, sniff_lanl, "LANL failure records 1996-2005 (LA-UR-05-7318 CSV)"),
            Format("pnnl", parse_pnnl, sniff_pnnl, "PNNL MPP2 hardware event trace CSV"),
        ),
        node_column="node",
        help=(
            "Failure/interrupt records: LANL 1996-2005 (LA-UR-05-7318 CSV, node numbers become "
            "lanl-s<system>-n<node>) and the PNNL MPP2 event trace (node N becomes pnnl-mpp2-n<N>). "
            "Times are local site time; pass --tz to override the site's zone."
        ),
    )
]
