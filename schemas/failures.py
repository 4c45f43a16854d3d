"""The staged ``failures`` table: one row per failure/interrupt record of a node or component.

Sources: the LANL failure records 1996-2005 (LA-UR-05-7318) and the PNNL MPP2 hardware event trace
(parsers in :mod:`nodewatch.tasks.ingest.failures`). Node failures derived from node states arrive later as
``failure_events``; the fits (:mod:`nodewatch.tasks.checkpoint.fits`) take a plain (group, node, start) frame
so both feed them.

Conventions: ``start`` is when the problem started (UTC; the sources give local site time, see the
parser), ``end`` when it was fixed (null if unknown), ``downtime_s`` the source's down time.
``category`` is the blame category (LANL: Facilities, Hardware, Human Error, Network, Undetermined,
Software; PNNL: derived from "What Failed"), ``cause`` the detail text, ``fru`` the failing unit type.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, Expectation, TableSchema

OLDEST_FAILURE = datetime(1990, 1, 1, tzinfo=UTC)
"""Failure records before this are corrupt dates."""

CATEGORIES: tuple[str, ...] = ("Facilities", "Hardware", "Human Error", "Network", "Undetermined", "Software")
"""Allowed values of ``failures.category`` (LANL's blame categories; PNNL rows are mapped onto them)."""

SOURCE_FORMATS: tuple[str, ...] = ("lanl", "pnnl", "failure_events")
"""Allowed values of ``failures.source_format``."""

TS = pa.timestamp("ns", tz="UTC")

FAILURES = TableSchema(
    name="failures",
    description="Failure/interrupt records of nodes and components (LANL 1996-2005, PNNL MPP2 2003-2007).",
    columns=(
        Column("system", pa.string(), nullable=False, regex=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$",
               description='system/machine: "lanl-s<N>" for LANL system N, "pnnl-mpp2"'),
        Column("node", pa.string(), regex=NODE_NAME_PATTERN,
               description='node or component name, e.g. "lanl-s20-n13", "pnnl-mpp2-n521"; null if system-wide'),
        Column("purpose", pa.string(),
               description='node purpose (LANL: "compute", "graphics.fe"...; PNNL: "compute", "dtemp"...)'),
        Column("start", TS, nullable=False, min=OLDEST_FAILURE, description="problem started (UTC)"),
        Column("end", TS, description="problem fixed (UTC); null if unknown"),
        Column("downtime_s", pa.int64(), min=0, unit="s", description="down time as recorded by the source"),
        Column("category", pa.string(), allowed=CATEGORIES, description="blame category"),
        Column("cause", pa.string(), description="cause/description text"),
        Column("fru", pa.string(), description="failing field-replaceable unit type (LANL fru type, PNNL What Failed)"),
        Column("action", pa.string(), description="action taken (PNNL)"),
        Column("system_nodes", pa.int32(), min=1, description="nodes in the system (LANL 'nodes' column)"),
        Column("same_event", pa.bool_(), description="LANL 'Same Event': record belongs to an event already recorded"),
        Column("source_format", pa.string(), nullable=False, allowed=SOURCE_FORMATS, description="input format"),
    ),
    time_column="start",
    unique_key=("system", "node", "start", "fru", "cause"),
    extra_expectations=(
        Expectation(
            "ExpectColumnPairValuesAToBeGreaterThanB",
            {"column_A": "end", "column_B": "start", "or_equal": True, "ignore_row_if": "either_value_is_missing"},
        ),
    ),
)
"""Schema of ``staged/failures``."""
