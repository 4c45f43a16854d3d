"""Staged ``alerts`` (monitoring state changes) and ``tickets`` (operator verdicts on alerts).

RUAD (Molan et al.) trains semi-supervised on "normal" data and evaluates against labels taken
from the monitoring system: an anomaly is a node-time with a *critical* alert (service state
``CRITICAL`` or host state ``DOWN``) that operators did not close as a false positive. The two
tables are designed for exactly that join::

    labels = alerts[alerts.state in CRITICAL_STATES]  anti-join  tickets[tickets.false_positive] on alert_id

``alert_id`` is present in both tables. Sources that carry their own id keep it; otherwise it is
derived deterministically by :func:`alert_id` from ``(node, service, time)``, so a tickets file
that refers to an alert by node, service and alert time joins without any id in the input.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, TableSchema

SERVICE_STATES = ("OK", "WARNING", "CRITICAL", "UNKNOWN")
HOST_STATES = ("UP", "DOWN", "UNREACHABLE")
ALERT_STATES = SERVICE_STATES + HOST_STATES
CRITICAL_STATES = ("CRITICAL", "DOWN")
"""States that count as a critical alert (an anomaly label unless ticketed as a false positive)."""

HOST_SERVICE = "HOST"
"""``service`` value of host alerts (Nagios ``HOST ALERT`` lines have no service)."""


def alert_id(node: str, service: str, time: datetime | int) -> str:
    """Deterministic alert id ``<node>/<service>@<epoch seconds>``.

    ``time`` is an aware datetime or integer epoch seconds (Nagios resolution). Used when an input
    carries no id of its own, identically for alerts and tickets so that both tables join on it.
    """
    if isinstance(time, datetime):
        if time.tzinfo is None:
            raise ValueError("alert time must be timezone-aware")
        secs = int(time.astimezone(UTC).timestamp())
    else:
        secs = int(time)
    return f"{node}/{service}@{secs}"


ALERTS = TableSchema(
    name="alerts",
    description="Monitoring alerts (Nagios SERVICE ALERT / HOST ALERT state changes) per node.",
    time_column="time",
    unique_key=("alert_id",),
    columns=(
        Column("time", pa.timestamp("ns", tz="UTC"), nullable=False, description="time of the state change"),
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="canonical node name"),
        Column("service", pa.string(), nullable=False, description=f"service description; {HOST_SERVICE!r} for host alerts"),
        Column("state", pa.string(), nullable=False, allowed=ALERT_STATES, description="new state"),
        Column("state_type", pa.string(), nullable=False, allowed=("SOFT", "HARD"), description="Nagios state type"),
        Column("attempt", pa.int32(), min=1, description="check attempt number"),
        Column("output", pa.string(), description="plugin output"),
        Column("alert_id", pa.string(), nullable=False, description="source id or alert_id(node, service, time)"),
        Column("source_format", pa.string(), nullable=False, allowed=("nagios", "alerts_csv"), description="parser format"),
        Column("source_offset", pa.int64(), nullable=False, min=1, description="1-based line number in the input file"),
    ),
)
"""Schema of ``staged/alerts``."""

TICKETS = TableSchema(
    name="tickets",
    description="Operator tickets on alerts; false_positive marks alerts that were not real problems.",
    time_column="opened",
    unique_key=("ticket_id",),
    columns=(
        Column("ticket_id", pa.string(), nullable=False, regex=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}$", description="ticket id"),
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="canonical node name"),
        Column("service", pa.string(), nullable=False, description=f"service of the alert; {HOST_SERVICE!r} for host alerts"),
        Column("alert_time", pa.timestamp("ns", tz="UTC"), description="time of the alert the ticket is about"),
        Column("alert_id", pa.string(), nullable=False, description="id of the alert (given, or derived like alerts.alert_id)"),
        Column("false_positive", pa.bool_(), nullable=False, description="operators judged the alert a false positive"),
        Column("opened", pa.timestamp("ns", tz="UTC"), nullable=False, description="ticket opened"),
        Column("closed", pa.timestamp("ns", tz="UTC"), description="ticket closed (null while open)"),
        Column("summary", pa.string(), description="free text"),
        Column("source_offset", pa.int64(), nullable=False, min=1, description="1-based line number in the input file"),
    ),
)
"""Schema of ``staged/tickets``."""
