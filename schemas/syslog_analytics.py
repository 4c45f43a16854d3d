"""Tables of the syslog analytics (issue 17; docs/syslog.md): templated rows, the per-run template catalogue,
the night's filtered templates, the abnormal (node, window) pairs and the vicinity-wide events of the vicinity
detector."""

from __future__ import annotations

import pyarrow as pa

from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, TableSchema

_TS = pa.timestamp("ns", tz="UTC")

SYSLOG_TEMPLATED = TableSchema(
    name="syslog_templated",
    description="Every staged syslog row with its template id and parameters (drain3 behind masking and dedupe).",
    time_column="time",
    unique_key=("node", "time", "app", "pid", "source_offset"),
    columns=(
        Column("time", _TS, nullable=False, description="event time (UTC), as in staged/syslog"),
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="canonical node name"),
        Column("app", pa.string(), description="app / tag, as in staged/syslog"),
        Column("pid", pa.int64(), min=0, description="process id, as in staged/syslog"),
        Column("source_offset", pa.int64(), min=1, description="line number in the input file, as in staged/syslog"),
        Column("template_id", pa.int64(), nullable=False, min=-1,
               description="template id, stable across runs; -1 = overflow (per-run template cap reached)"),
        Column("params", pa.list_(pa.string()),
               description="tokens at the template's <*> positions; null when truncated or token counts differ"),
    ),
)

SYSLOG_TEMPLATES = TableSchema(
    name="syslog_templates",
    description="The template catalogue after one run (one version per run; the newest is current).",
    time_column="first_run",
    unique_key=("template_id",),
    columns=(
        Column("template_id", pa.int64(), nullable=False, min=1, description="template id"),
        Column("template", pa.string(), nullable=False, description="template text, <*> = parameter"),
        Column("size", pa.int64(), nullable=False, min=0, description="distinct masked shapes merged into it, ever"),
        Column("lines_day", pa.int64(), nullable=False, min=0, description="lines of the run's day with this template"),
        Column("first_run", pa.string(), nullable=False, description="run that created the template"),
        Column("new", pa.bool_(), nullable=False, description="created by this run"),
    ),
)

SYSLOG_FILTERS = TableSchema(
    name="syslog_filters",
    description="Templates dropped before SG for one night: frequent, common (most nodes) or periodic.",
    time_column="template_id",
    unique_key=("template_id",),
    columns=(
        Column("template_id", pa.int64(), nullable=False, description="template id"),
        Column("template", pa.string(), description="template text"),
        Column("reason", pa.string(), nullable=False, allowed=("frequent", "common", "periodic"), description="why"),
        Column("lines", pa.int64(), nullable=False, min=0, description="lines of the night with this template"),
    ),
)

SYSLOG_ABNORMAL = TableSchema(
    name="syslog_abnormal",
    description="Abnormal (node, window) pairs of the vicinity detector (Ghiasvand & Ciorba, two-means threshold).",
    time_column="window_end",
    unique_key=("node", "window_end"),
    columns=(
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="node"),
        Column("window_end", _TS, nullable=False, description="end of the SG window (observation moment)"),
        Column("sg", pa.int64(), nullable=False, min=0, description="lines of the node in the window"),
        Column("score", pa.float64(), nullable=False, description="(SG - majority centre) / majority density"),
        Column("vicinity", pa.string(), nullable=False, description="the peer group, e.g. 'rack r03 / cpu'"),
        Column("variant", pa.string(), nullable=False, allowed=("raw", "filtered"), description="SG of which lines"),
    ),
)

SYSLOG_VICINITY_EVENTS = TableSchema(
    name="syslog_vicinity_events",
    description="Vicinity-wide events of the vicinity detector (Eq. S3): a rack/architecture/job departed as a whole.",
    time_column="start",
    unique_key=("vicinity", "start"),
    columns=(
        Column("vicinity", pa.string(), nullable=False, description="the vicinity, e.g. 'rack r03 / cpu', 'job 812'"),
        Column("kind", pa.string(), nullable=False, allowed=("rack", "arch", "rack_arch", "global", "job"),
               description="vicinity kind"),
        Column("start", _TS, nullable=False, description="first wide observation moment (window end)"),
        Column("end", _TS, nullable=False, description="last wide observation moment (window end)"),
        Column("peak", _TS, nullable=False, description="moment with the most nodes at the floor"),
        Column("window_min", pa.int64(), nullable=False, min=1, description="SG window of the peak (minutes)"),
        Column("nodes", pa.int64(), nullable=False, min=0, description="nodes at or above the window's floor at the peak"),
        Column("live", pa.int64(), nullable=False, min=0, description="live nodes (SG > 0) of the vicinity at the peak"),
        Column("median_sg", pa.float64(), nullable=False, min=0, description="median SG of the live nodes at the peak"),
        Column("max_sg", pa.int64(), nullable=False, min=0, description="highest SG of the vicinity at the peak"),
        Column("variant", pa.string(), nullable=False, allowed=("raw", "filtered"), description="SG of which lines"),
    ),
)
