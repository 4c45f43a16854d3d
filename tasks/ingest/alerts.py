"""The ``alerts`` (Nagios) and ``tickets`` sources, and the RUAD label join between them.

Formats
-------
``nagios`` — the Nagios/Icinga main log (``nagios.log``)::

    [1700000000] SERVICE ALERT: cn001;CPU Load;CRITICAL;HARD;3;CRITICAL - load average 91.2
    [1700000000] HOST ALERT: cn001;DOWN;HARD;1;PING CRITICAL - Packet loss = 100%

Only ``SERVICE ALERT`` and ``HOST ALERT`` lines are alerts. Every other line of a Nagios log
(notifications, ``CURRENT ... STATE`` at log rotation, external commands, start-up messages) is
rejected with the reason ``parse: not an alert line (Nagios '<type>')`` so it is counted, never
silently dropped. Host alerts get ``service = "HOST"``. The plugin output keeps any ``;``.

``alerts_csv`` — a CSV export with header ``time,node,service,state,state_type,attempt,output``
(+ optional ``alert_id``); ``time`` is epoch seconds or ISO 8601 (naive = ``ctx.tz``).

``tickets_csv`` — operator tickets, header with at least ``ticket_id,node,false_positive,opened``
and either ``alert_id`` or ``alert_time`` (+ optional ``service``, default ``HOST``), optional
``closed,summary``. ``false_positive`` accepts true/false, yes/no, 1/0 (any case).

Alert ids: a source id is kept; otherwise :func:`nodewatch.schemas.alerts.alert_id` derives it from
``(node, service, time)`` identically in both tables, so tickets join alerts on ``alert_id``.
:func:`ruad_label_intervals` builds the RUAD anomaly intervals from the two staged tables.

These sources are small (thousands of lines a day), so they are parsed line by line in bounded
batches rather than vectorised.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import BinaryIO
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa

from nodewatch.schemas.alerts import (
    ALERT_STATES,
    ALERTS,
    CRITICAL_STATES,
    HOST_SERVICE,
    HOST_STATES,
    SERVICE_STATES,
    TICKETS,
    alert_id,
)
from nodewatch.schemas.names import normalise_node
from nodewatch.tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec, rejects_table
from nodewatch.tasks.ingest.inputs import InputError, iter_lines
from nodewatch.tasks.ingest.syslog_blocks import MAX_EPOCH_S
from nodewatch.tasks.ingest.syslog_rfc3164 import sniff_share

_NS = 1_000_000_000
_ALERTS_SCHEMA = ALERTS.arrow_schema()
_TICKETS_SCHEMA = TICKETS.arrow_schema()
_TRUNC = b"\x00<truncated>"
_MAX_RECORD = 1 << 20


def _text(raw: bytes) -> str:
    """UTF-8, or Latin-1 for lines that are not valid UTF-8 (no byte lost)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


class _Batcher:
    """Collects rows and rejects and cuts :class:`ParseResult` batches of ``ctx.batch_rows``."""

    def __init__(self, schema: pa.Schema, ctx: ParseContext) -> None:
        self.schema, self.ctx = schema, ctx
        self.rows: list[dict] = []
        self.rej: tuple[list[int], list[str], list[str]] = ([], [], [])
        self.any_row = False
        self.first_rejects: list[tuple[int, str]] = []

    def row(self, r: dict) -> None:
        self.rows.append(r)
        self.any_row = True

    def reject(self, line_no: int, raw: str, reason: str) -> None:
        self.rej[0].append(line_no)
        self.rej[1].append(raw)
        self.rej[2].append(reason)
        if not self.any_row and len(self.first_rejects) < 1000:
            self.first_rejects.append((line_no, reason))

    def full(self) -> bool:
        return len(self.rows) + len(self.rej[0]) >= self.ctx.batch_rows

    def flush(self) -> ParseResult:
        rows = pa.Table.from_pylist(self.rows, schema=self.schema) if self.rows else self.schema.empty_table()
        out = ParseResult(rows, rejects_table(*self.rej))
        self.rows, self.rej = [], ([], [], [])
        return out


def _guard_format(b: _Batcher, fmt: str) -> None:
    """Raise :class:`InputError` when the first batch has no row and no line is of this format at all."""
    garbage = ("parse: not a Nagios log line", "parse: NUL byte", "parse: line longer")
    if not b.any_row and b.first_rejects and all(r.startswith(garbage) for _, r in b.first_rejects):
        line, reason = b.first_rejects[0]
        raise InputError(f"{b.ctx.name}:{line}: {reason.removeprefix('parse: ')}; no line is {fmt} - wrong --format?")


# ------------------------------------------------------------------------------------- nagios

_NAGIOS_RE = re.compile(r"^\[(\d{1,11})\] ([A-Z][A-Z _]*?): ?(.*)$", re.S)


def parse_nagios(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse a Nagios main log into ``alerts`` rows (see module doc)."""
    b = _Batcher(_ALERTS_SCHEMA, ctx)
    aliases = {k.lower(): v for k, v in ctx.aliases.items()}
    checked = False
    for n, raw in iter_lines(stream):
        if not raw.strip():
            continue
        text = _text(raw)
        res = _nagios_line(raw, text, aliases)
        if isinstance(res, str):
            b.reject(n, text, res)
        else:
            res["source_offset"] = n
            b.row(res)
        if b.full():
            if not checked:
                _guard_format(b, "a Nagios log")
                checked = True
            yield b.flush()
    if not checked:
        _guard_format(b, "a Nagios log")
    yield b.flush()


def _nagios_line(raw: bytes, text: str, aliases: Mapping[str, str]) -> dict | str:
    """One Nagios log line -> alert row dict or reject reason."""
    if raw.endswith(_TRUNC) or len(raw) > _MAX_RECORD:
        return "parse: line longer than 1048576 bytes"
    if "\x00" in text:
        return "parse: NUL byte in line"
    m = _NAGIOS_RE.match(text)
    if not m:
        return "parse: not a Nagios log line (expected '[epoch] TYPE: fields')"
    epoch, kind, body = int(m[1]), m[2], m[3]
    if epoch > MAX_EPOCH_S:
        return f"parse: epoch {epoch} out of range (after 2262)"
    if kind == "SERVICE ALERT":
        f = body.split(";", 5)
        if len(f) < 6:
            return f"parse: SERVICE ALERT needs 6 ';'-separated fields, found {len(f)}"
        host, service, state, stype, attempt, output = f
        states = SERVICE_STATES
    elif kind == "HOST ALERT":
        f = body.split(";", 4)
        if len(f) < 5:
            return f"parse: HOST ALERT needs 5 ';'-separated fields, found {len(f)}"
        host, state, stype, attempt, output = f
        service, states = HOST_SERVICE, HOST_STATES
    else:
        return f"parse: not an alert line (Nagios {kind[:40]!r})"
    if state not in states:
        return f"parse: unknown {'host' if service == HOST_SERVICE else 'service'} state {state[:20]!r}"
    if stype not in ("SOFT", "HARD"):
        return f"parse: unknown state type {stype[:20]!r}"
    if not (attempt.isascii() and attempt.isdigit() and len(attempt) <= 9):
        return f"parse: attempt {attempt[:20]!r} is not a number"
    if not service.strip():
        return "parse: empty service name"
    node, why = normalise_node(host, aliases)
    if node is None:
        return why  # type: ignore[return-value]
    return {
        "time": epoch * _NS,
        "node": node,
        "service": service,
        "state": state,
        "state_type": stype,
        "attempt": int(attempt),
        "output": output,
        "alert_id": alert_id(node, service, epoch),
        "source_format": "nagios",
    }


_NAGIOS_SNIFF = re.compile(rb"^\[\d{9,11}\] [A-Z][A-Za-z _]+:")


def sniff_nagios(head: bytes) -> float:
    """Share of the first lines that look like Nagios log lines."""
    return sniff_share(head, _NAGIOS_SNIFF)


# -------------------------------------------------------------------------------- CSV helpers


def parse_time(value: str, tz: str) -> int | str:
    """Epoch seconds (int/float) or ISO 8601 (naive = ``tz``) -> epoch ns, or a reject reason."""
    v = value.strip()
    if not v:
        return "empty"
    if re.fullmatch(r"-?\d{1,11}(?:\.\d{1,9})?", v):
        whole, _, frac = v.partition(".")
        if abs(int(whole)) > MAX_EPOCH_S:
            return f"epoch {whole} out of range (before 1678 or after 2262)"
        return int(whole) * _NS + (int(frac.ljust(9, "0")) if frac else 0) * (-1 if v.startswith("-") else 1)
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00") if v.endswith("Z") else v)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=ZoneInfo(tz))
        return int(pd.Timestamp(dt).tz_convert("UTC").value)
    except (ValueError, OverflowError, pd.errors.OutOfBoundsDatetime):
        return f"bad time {v[:40]!r}"


def _csv_rows(stream: BinaryIO, ctx: ParseContext, required: set[str], one_of: tuple[set[str], ...] = ()
              ) -> Iterator[tuple[int, dict[str, str] | str, str]]:
    """Yield ``(line_no, record or reject reason, raw)`` of a CSV with a header.

    Raises :class:`InputError` when the header lacks required columns (wrong column set).
    """
    lines = iter_lines(stream)
    header_line = None
    for n, raw in lines:
        if raw.strip():
            header_line = (n, _text(raw))
            break
    if header_line is None:
        raise InputError(f"{ctx.name}: empty file (no CSV header)")
    hn, htext = header_line
    try:
        header = [h.strip().lower() for h in next(csv.reader([htext.lstrip("\ufeff")]))]
    except csv.Error as e:  # e.g. a binary first "line" of megabytes: a file error, not a traceback
        raise InputError(f"{ctx.name}:{hn}: not a CSV header ({e})") from None
    missing = sorted(required - set(header))
    for group in one_of:
        if not group & set(header):
            missing.append(" or ".join(sorted(group)))
    if missing:
        raise InputError(
            f"{ctx.name}:{hn}: header lacks column(s) {', '.join(missing)} (found {', '.join(header[:12]) or 'none'})"
        )
    if len(set(header)) != len(header):
        raise InputError(f"{ctx.name}:{hn}: duplicate column names in header {header[:12]}")
    pending: tuple[int, bytes] | None = None  # a record whose quoted field continues on the next line
    for n0, raw0 in lines:
        n, raw = n0, raw0
        if pending is not None:
            n, raw = pending[0], pending[1] + b"\n" + raw0
            pending = None
        if not raw.strip():
            continue
        if raw.count(b'"') % 2 == 1 and len(raw) < _MAX_RECORD and not raw.endswith(_TRUNC):
            pending = (n, raw)
            continue
        text = _text(raw)
        if raw.endswith(_TRUNC) or len(raw) > _MAX_RECORD:
            yield n, "parse: line longer than 1048576 bytes", text
            continue
        if "\x00" in text:
            yield n, "parse: NUL byte in line", text
            continue
        try:
            vals = next(csv.reader([text]))
        except csv.Error as e:
            yield n, f"parse: bad CSV ({e})", text
            continue
        if len(vals) != len(header):
            yield n, f"parse: {len(vals)} fields, header has {len(header)}", text
            continue
        yield n, dict(zip(header, vals, strict=True)), text
    if pending is not None:
        yield pending[0], "parse: unterminated quoted field at end of file", _text(pending[1])


# -------------------------------------------------------------------------------- alerts CSV

ALERTS_CSV_COLUMNS = {"time", "node", "service", "state", "state_type", "attempt", "output"}


def _parse_csv_records(
    stream: BinaryIO,
    ctx: ParseContext,
    schema: pa.Schema,
    required: set[str],
    record: Callable[[dict[str, str], ParseContext, Mapping[str, str]], dict | str],
    one_of: tuple[set[str], ...] = (),
) -> Iterator[ParseResult]:
    """Shared loop of the CSV parsers: each data line becomes ``record(...)`` (a row) or a reject reason."""
    b = _Batcher(schema, ctx)
    aliases = {k.lower(): v for k, v in ctx.aliases.items()}
    for n, rec, text in _csv_rows(stream, ctx, required, one_of):
        res = rec if isinstance(rec, str) else record(rec, ctx, aliases)
        if isinstance(res, str):
            b.reject(n, text, res)
        else:
            res["source_offset"] = n
            b.row(res)
        if b.full():
            yield b.flush()
    yield b.flush()


def parse_alerts_csv(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse the alerts CSV export (see module doc)."""
    yield from _parse_csv_records(stream, ctx, _ALERTS_SCHEMA, ALERTS_CSV_COLUMNS, _alert_record)


def _alert_record(r: dict[str, str], ctx: ParseContext, aliases: Mapping[str, str]) -> dict | str:
    t = parse_time(r["time"], ctx.tz)
    if isinstance(t, str):
        return f"parse: time: {t}"
    state, stype, service = r["state"].strip().upper(), r["state_type"].strip().upper(), r["service"].strip()
    if state not in ALERT_STATES:
        return f"parse: unknown state {r['state'][:20]!r}"
    if stype not in ("SOFT", "HARD"):
        return f"parse: unknown state type {r['state_type'][:20]!r}"
    att = r["attempt"].strip()
    if not (att.isascii() and att.isdigit() and len(att) <= 9):
        return f"parse: attempt {att[:20]!r} is not a number"
    if not service:
        return "parse: empty service name"
    node, why = normalise_node(r["node"].strip(), aliases)
    if node is None:
        return why  # type: ignore[return-value]
    given = (r.get("alert_id") or "").strip()
    return {
        "time": t, "node": node, "service": service, "state": state, "state_type": stype, "attempt": int(att),
        "output": r["output"], "alert_id": given or alert_id(node, service, t // _NS), "source_format": "alerts_csv",
    }


def sniff_alerts_csv(head: bytes) -> float:
    """1.0 if the first line is a header holding every alerts-CSV column."""
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff")
    cols = {c.strip().lower() for c in first.split(",")}
    return 1.0 if cols >= ALERTS_CSV_COLUMNS else 0.0


# ------------------------------------------------------------------------------------ tickets

TICKETS_REQUIRED = {"ticket_id", "node", "false_positive", "opened"}
_TRUE = {"true", "yes", "1", "t", "y"}
_FALSE = {"false", "no", "0", "f", "n"}


def parse_tickets_csv(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse a tickets CSV (see module doc)."""
    yield from _parse_csv_records(stream, ctx, _TICKETS_SCHEMA, TICKETS_REQUIRED, _ticket_record, ({"alert_id", "alert_time"},))


def _ticket_record(r: dict[str, str], ctx: ParseContext, aliases: Mapping[str, str]) -> dict | str:
    tid = r["ticket_id"].strip()
    if not tid:
        return "parse: empty ticket_id"
    fp = r["false_positive"].strip().lower()
    if fp not in _TRUE | _FALSE:
        return f"parse: false_positive {r['false_positive'][:20]!r} is not a boolean"
    opened = parse_time(r["opened"], ctx.tz)
    if isinstance(opened, str):
        return f"parse: opened: {opened}"
    closed = None
    if (r.get("closed") or "").strip():
        closed = parse_time(r["closed"], ctx.tz)
        if isinstance(closed, str):
            return f"parse: closed: {closed}"
    node, why = normalise_node(r["node"].strip(), aliases)
    if node is None:
        return why  # type: ignore[return-value]
    service = (r.get("service") or "").strip() or HOST_SERVICE
    atime = None
    if (r.get("alert_time") or "").strip():
        atime = parse_time(r["alert_time"], ctx.tz)
        if isinstance(atime, str):
            return f"parse: alert_time: {atime}"
    aid = (r.get("alert_id") or "").strip()
    if not aid:
        if atime is None:
            return "parse: neither alert_id nor alert_time given"
        aid = alert_id(node, service, atime // _NS)
    return {
        "ticket_id": tid, "node": node, "service": service, "alert_time": atime, "alert_id": aid,
        "false_positive": fp in _TRUE, "opened": opened, "closed": closed, "summary": r.get("summary"),
    }


def sniff_tickets_csv(head: bytes) -> float:
    """1.0 if the first line is a header holding the required ticket columns."""
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").lstrip("\ufeff")
    cols = {c.strip().lower() for c in first.split(",")}
    return 1.0 if cols >= TICKETS_REQUIRED and cols & {"alert_id", "alert_time"} else 0.0


# --------------------------------------------------------------------------------- RUAD join


def ruad_label_intervals(alerts: pa.Table, tickets: pa.Table | None, until: datetime) -> dict[str, np.ndarray]:
    """Node-anomaly intervals for RUAD labels (Molan et al., RUAD, Section 3.1).

    An interval opens at a critical alert (state ``CRITICAL`` or ``DOWN``, SOFT or HARD) of a
    (node, service) that is not already in a critical interval and closes at the next non-critical
    state change of that (node, service), or at ``until``. An interval is dropped when a ticket
    marks any of its critical alerts ``false_positive`` (joined on ``alert_id``; tickets usually
    refer to the HARD alert, which follows the SOFT one that opened the interval). Returns columns
    ``node, service, start, end, alert_id, severity`` (severity ``"critical"``; times UTC
    ``datetime64[ns]``), ready for :func:`nodewatch.models.anomaly.labels.labels_from_intervals` or
    :func:`nodewatch.models.anomaly.labels.critical_minus_false_positives`.
    """
    fp_ids: set[str] = set()
    if tickets is not None and tickets.num_rows:
        fp = tickets.filter(tickets.column("false_positive"))
        fp_ids = set(fp.column("alert_id").to_pylist())
    a = alerts.select(["time", "node", "service", "state", "alert_id"])
    t_ns = a.column("time").cast(pa.int64()).to_numpy()
    nodes, services = a.column("node").to_pylist(), a.column("service").to_pylist()
    states, ids = a.column("state").to_pylist(), a.column("alert_id").to_pylist()
    order = sorted(range(a.num_rows), key=lambda i: (nodes[i], services[i], t_ns[i]))
    until_ns = int(pd.Timestamp(until).tz_convert("UTC").value)
    out: dict[str, list] = {"node": [], "service": [], "start": [], "end": [], "alert_id": []}
    open_: tuple[str, str, int, str] | None = None
    members: list[str] = []  # alert ids of the critical alerts of the open interval

    def close(end_ns: int) -> None:
        node, service, start, aid = open_  # type: ignore[misc]
        if not fp_ids.intersection(members):
            for k, v in zip(("node", "service", "start", "end", "alert_id"), (node, service, start, end_ns, aid), strict=True):
                out[k].append(v)

    for i in order:
        key = (nodes[i], services[i])
        if open_ is not None and open_[:2] != key:
            close(until_ns)
            open_ = None
        critical = states[i] in CRITICAL_STATES
        if critical and open_ is None:
            open_ = (nodes[i], services[i], int(t_ns[i]), ids[i])
            members = [ids[i]]
        elif critical:
            members.append(ids[i])
        elif open_ is not None:
            close(int(t_ns[i]))
            open_ = None
    if open_ is not None:
        close(until_ns)
    return {
        "node": np.array(out["node"], dtype=object),
        "service": np.array(out["service"], dtype=object),
        "start": np.array(out["start"], dtype=np.int64).view("datetime64[ns]"),
        "end": np.array(out["end"], dtype=np.int64).view("datetime64[ns]"),
        "alert_id": np.array(out["alert_id"], dtype=object),
        "severity": np.full(len(out["node"]), "critical", dtype=object),
    }


SOURCES = [
    SourceSpec(
        name="alerts",
        table=ALERTS,
        formats=(
            Format("nagios", parse_nagios, sniff_nagios, "Nagios/Icinga main log: [epoch] SERVICE ALERT|HOST ALERT: ..."),
            Format("alerts_csv", parse_alerts_csv, sniff_alerts_csv, "CSV: time,node,service,state,state_type,attempt,output"),
        ),
        help="Monitoring alerts (Nagios SERVICE/HOST ALERT state changes); other Nagios log lines are counted as rejects.",
    ),
    SourceSpec(
        name="tickets",
        table=TICKETS,
        formats=(
            Format("tickets_csv", parse_tickets_csv, sniff_tickets_csv,
                   "CSV: ticket_id,node,false_positive,opened + alert_id or alert_time[,service,closed,summary]"),
        ),
        help="Operator tickets on alerts; false_positive=true removes the alert from the RUAD anomaly labels.",
    ),
]

