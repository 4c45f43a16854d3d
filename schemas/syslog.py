"""The staged ``syslog`` table: one row per log line of any syslog-like source.

Rows come from RFC 5424, RFC 3164 (with or without ``<PRI>``), the Loghub Blue Gene/L RAS log and
the Loghub LANL HPC event log (parsers in ``tasks/ingest/syslog_*.py``). Columns every consumer
relies on: ``time, node, facility, severity, app, pid, message, source_offset``; the nullable
``msgid``, ``alert_label`` and ``structured_data`` keep format-specific fields that would
otherwise be lost.

The pipeline adds the run-time checks: time not before 1990 and not in the future, inside the
ingest window, node in the staged topology.

Unique key: ``(node, time, app, pid, message)``. ``source_offset`` is deliberately *not* part of
it: the same line written twice (a duplicated line in one file, the same file shipped twice under
different names, overlapping rotations) is one event and must be counted as a duplicate, not
staged twice. Two genuinely distinct events with the same node, nanosecond, process and text are
indistinguishable anyway.
"""

from __future__ import annotations

import pyarrow as pa

from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, TableSchema

SOURCE_FORMATS = ("rfc5424", "rfc3164", "rsyslog", "bgl", "hpc", "cfdr")
"""Values of ``source_format``: the name of the parser format that produced the row."""

SYSLOG = TableSchema(
    name="syslog",
    description=(
        "System log lines from every node: RFC 5424 / RFC 3164 syslog, rsyslog RFC 3339 file format, Loghub BGL RAS and LANL HPC "
        "event logs, CFDR Thunderbird/Spirit/Liberty logs, normalised to UTC and canonical node names."
    ),
    time_column="time",
    unique_key=("node", "time", "app", "pid", "message"),
    columns=(
        Column("time", pa.timestamp("ns", tz="UTC"), nullable=False,
               description="event time in UTC (RFC 3164: local time in the source time zone, year inferred)"),
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN,
               description="canonical node name: lower-case, domain stripped, topology aliases applied"),
        Column("facility", pa.int8(), min=0, max=23, description="syslog facility (PRI // 8); null when the format has none"),
        Column("severity", pa.int8(), min=0, max=7,
               description="syslog severity 0=emerg..7=debug (PRI % 8; BGL level mapped, see tasks/ingest/syslog_loghub.py)"),
        Column("app", pa.string(), description="APP-NAME / tag / BGL component / HPC component"),
        Column("pid", pa.int64(), min=0, description="process id when numeric"),
        Column("message", pa.string(), nullable=False, description="free text of the line"),
        Column("msgid", pa.string(), description="RFC 5424 MSGID; HPC: the state field (e.g. state_change.unavailable)"),
        Column("alert_label", pa.string(),
               description="BGL/CFDR ground-truth alert category (e.g. KERNDTLB); null for non-alert lines and other formats"),
        Column("structured_data", pa.string(), description="RFC 5424 STRUCTURED-DATA as written (null for '-')"),
        Column("source_format", pa.string(), nullable=False, allowed=SOURCE_FORMATS, description="parser format name"),
        Column("source_offset", pa.int64(), nullable=False, min=1, description="1-based line number in the input file"),
    ),
)
"""Schema of ``staged/syslog``."""
