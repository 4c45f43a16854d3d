"""The staged ``jobs`` table: one row per job allocation or job step, from SWF traces or ``sacct -P`` dumps.

Both job-record parsers (:mod:`nodewatch.tasks.ingest.jobs_swf`, :mod:`nodewatch.tasks.ingest.jobs_sacct`) produce rows of
this schema (plus ``source_offset``). Conventions:

* ``step`` is null for the allocation (the job itself) and holds the step name for job steps
  (``batch``, ``extern``, ``0``...). SWF traces only have allocation rows.
* Times are UTC. ``start_time``/``end_time`` are null for jobs that never started / have not ended
  (and ``start_time`` for SWF traces whose wait time is ``-1``: LLNL-Thunder has none at all).
* ``elapsed_s`` is the wall-clock run time in seconds; null when the job never ran (or a running job's
  source does not say).
* **Never started** (:func:`never_started`): ``start_time`` *and* ``elapsed_s`` null. Such a row is a
  valid record of a job cancelled (or failed, or still pending) in the queue, and is staged: SWF lines
  with run time ``-1`` (or run time 0 and no allocated processors), sacct rows with ``Start=Unknown``
  (and zero elapsed). Its state must be one of :data:`NOT_STARTED_STATES`, and only such a row may lack
  ``nodes`` (nothing was allocated and the source did not record the request); the row checks
  :data:`ROW_CHECKS` quarantine every other combination. Analyses that need a runtime (job shapes,
  checkpoint tables, trace savings) skip these jobs by rule and count them; the states build gives
  them no node.
* ``state`` is normalised to the Slurm job-state names below. SWF status codes map as
  1 → COMPLETED, 0 → FAILED, 5 → CANCELLED, anything else (2/3/4 partial executions, -1) → UNKNOWN.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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

NOT_STARTED_STATES: tuple[str, ...] = ("PENDING", "CANCELLED", "FAILED", "BOOT_FAIL", "DEADLINE", "REVOKED", "UNKNOWN")
"""States a job that never started may have: still queued, cancelled or failed in the queue, refused
at boot, past its deadline, revoked by a sibling cluster, or not said by the source (SWF status -1)."""

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
        Column("end_time", TS, description=(
                   "end time (UTC); null while running; a job that never started: when it left the queue if the "
                   "source says (sacct End), else null"
               )),
        Column("nodes", pa.int32(), min=1,
               description="allocated (or requested, if none yet) nodes; null only for a job that never started"),
        Column("cores", pa.int32(), min=1, description="allocated cores/CPUs (SWF: processors)"),
        Column("elapsed_s", pa.int64(), min=0, unit="s",
               description="wall-clock run time; null (with start_time) for a job that never started"),
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


def never_started(jobs: pa.Table | Any) -> np.ndarray:
    """Boolean mask of the rows of jobs that never started: ``start_time`` and ``elapsed_s`` both null.

    ``jobs`` is an Arrow table or a pandas frame with both columns (a frame without them has no such
    row: all False). A job whose start is unknown but which has a run time (SWF wait time -1) ran; a
    running job without an elapsed time (a dump without ``Elapsed``) has a start: both started.
    """
    names = jobs.column_names if isinstance(jobs, pa.Table) else list(jobs.columns)
    n = jobs.num_rows if isinstance(jobs, pa.Table) else len(jobs)
    if "start_time" not in names or "elapsed_s" not in names:
        return np.zeros(n, bool)
    if isinstance(jobs, pa.Table):
        mask = pc.and_(pc.is_null(jobs["start_time"]), pc.is_null(jobs["elapsed_s"], nan_is_null=True))
        return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
    return (jobs["start_time"].isna() & jobs["elapsed_s"].isna()).to_numpy(dtype=bool)


NODES_NULL_LABEL = "expect_column_values_to_not_be_null(nodes, job started)"
"""Quarantine reason: a job that started (has a start or a run time) lacks its node count."""
NOT_STARTED_STATE_LABEL = "expect_column_values_to_be_in_set(state, job never started)"
"""Quarantine reason: a job with neither start nor run time has a state of a job that ran (e.g. COMPLETED)."""


def check_never_started(rows: pa.Table) -> list[tuple[str, np.ndarray]]:
    """Row check of the never-started rule (``(label, failing mask)`` pairs, see ``SourceSpec.row_checks``).

    Fails rows whose ``nodes`` is null although the job started, and rows of never-started jobs whose
    state is not in :data:`NOT_STARTED_STATES`. GX cannot express these cross-column conditions per
    column, so they run as a vectorised row check after the suite.
    """
    ns = never_started(rows)
    out: list[tuple[str, np.ndarray]] = []
    if "nodes" in rows.column_names:
        no_nodes = np.asarray(pc.is_null(rows["nodes"]).to_numpy(zero_copy_only=False), dtype=bool)
        out.append((NODES_NULL_LABEL, no_nodes & ~ns))
    if "state" in rows.column_names:
        state = rows["state"]
        if pa.types.is_dictionary(state.type):
            state = state.cast(state.type.value_type)
        ok = pc.fill_null(pc.is_in(state, value_set=pa.array(NOT_STARTED_STATES, pa.string())), True)
        bad_state = ~np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
        out.append((NOT_STARTED_STATE_LABEL, bad_state & ns))
    return out


ROW_CHECKS = (check_never_started,)
"""Row checks of the ``jobs`` table (wired into the source by :mod:`nodewatch.tasks.ingest.jobs`)."""
