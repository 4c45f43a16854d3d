"""The staged ``jobs`` table: one row per job allocation or job step, from SWF traces or ``sacct -P`` dumps.

Both job-record parsers (:mod:`nodewatch.tasks.ingest.jobs_swf`, :mod:`nodewatch.tasks.ingest.jobs_sacct`) produce rows of
this schema (plus ``source_offset``). Conventions:

* ``step`` is null for the allocation (the job itself) and holds the step name for job steps
  (``batch``, ``extern``, ``0``...). SWF traces only have allocation rows.
* Times are UTC. ``start_time``/``end_time`` are null for jobs that never started / have not ended
  (and for SWF traces whose wait/run time is ``-1``).
* ``elapsed_s`` is the wall-clock run time in seconds; it is nullable because SWF marks unknown run
  times with ``-1``.
* ``state`` is normalised to the Slurm job-state names below. SWF status codes map as
  1 → COMPLETED, 0 → FAILED, 5 → CANCELLED, anything else (2/3/4 partial executions, -1) → UNKNOWN.
"""

from __future__ import annotations

import pyarrow as pa

from nodewatch.schemas.table import Column, Expectation, TableSchema

JOB_STATES: tuple[str, ...] = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "RUNNING",
    "PENDING",
    "REQUEUED",
    "RESIZING",
    "REVOKED",
    "SUSPENDED",
    "UNKNOWN",
)
"""Allowed values of ``jobs.state`` (Slurm job-state names; ``UNKNOWN`` when the source does not say)."""

SOURCE_FORMATS: tuple[str, ...] = ("swf", "sacct")
"""Allowed values of ``jobs.source_format``."""

TS = pa.timestamp("ns", tz="UTC")

JOBS = TableSchema(
    name="jobs",
    description=(
        "Job records (allocations and job steps) from Standard Workload Format traces and Slurm "
        "`sacct -P` dumps, one row per job or step."
    ),
    columns=(
        Column("job_id", pa.string(), nullable=False,
               description='job id as the scheduler prints it: "4744528", array task "4744528_255", het component "123+0"'),
        Column("step", pa.string(), description='job step ("batch", "extern", "0"...); null for the allocation row'),
        Column("system", pa.string(), description="machine/cluster: sacct Cluster column, SWF file stem"),
        Column("user", pa.string(), description="user name or numeric id as given by the source"),
        Column("group", pa.string(), description="group name or numeric id as given by the source"),
        Column("submit_time", TS, nullable=False, description="submission time (UTC)"),
        Column("start_time", TS, description="start time (UTC); null if the job never started or the source does not say"),
        Column("end_time", TS, description="end time (UTC); null while running or never started"),
        Column("nodes", pa.int32(), nullable=False, min=1, description="allocated (or requested, if none yet) nodes"),
        Column("cores", pa.int32(), min=1, description="allocated cores/CPUs (SWF: processors)"),
        Column("elapsed_s", pa.int64(), min=0, unit="s", description="wall-clock run time"),
        Column("timelimit_s", pa.int64(), min=0, unit="s", description="requested wall-clock limit; null if unlimited/unknown"),
        Column("state", pa.string(), nullable=False, allowed=JOB_STATES, description="final or current job state"),
        Column("cancelled_by", pa.string(), description='uid from "CANCELLED by <uid>"'),
        Column("exit_code", pa.int32(), description="exit code (sacct ExitCode before the colon)"),
        Column("signal", pa.int32(), description="terminating signal (sacct ExitCode after the colon)"),
        Column("node_list", pa.list_(pa.string()), description="expanded host names the job ran on"),
        Column("partition", pa.string(), description="partition (SWF: partition name from the header, else its number)"),
        Column("source_format", pa.string(), nullable=False, allowed=SOURCE_FORMATS, description="input format"),
    ),
    time_column="submit_time",
    unique_key=("system", "job_id", "step"),
    extra_expectations=(
        Expectation(
            "ExpectColumnPairValuesAToBeGreaterThanB",
            {"column_A": "end_time", "column_B": "start_time", "or_equal": True, "ignore_row_if": "either_value_is_missing"},
        ),
    ),
)
"""Schema of the staged ``jobs`` table."""

PARSED_SCHEMA: pa.Schema = pa.schema(
    [pa.field(c.name, c.type, nullable=True) for c in JOBS.columns] + [pa.field("source_offset", pa.int64(), nullable=False)]
)
"""Schema of the row batches the job parsers yield: the JOBS columns (all nullable, so that rows violating
a not-null rule reach validation and are quarantined with the failed expectation) plus ``source_offset``."""
