"""The ``jobs`` ingest source: Slurm ``sacct -P`` dumps and Standard Workload Format traces.

``nodewatch ingest jobs FILES...`` detects the format of each file with the sniffers below (or takes
``--format swf|sacct``) and stages rows of :data:`schemas.jobs.JOBS`. The parsers live in
:mod:`tasks.ingest.jobs_swf` and :mod:`tasks.ingest.jobs_sacct`.
"""

from __future__ import annotations

from schemas.jobs import JOBS
from tasks.ingest.base import Format, SourceSpec
from tasks.ingest.jobs_sacct import parse_sacct, sniff_sacct
from tasks.ingest.jobs_swf import parse_swf, sniff_swf

SOURCES = [
    SourceSpec(
        name="jobs",
        table=JOBS,
        formats=(
            Format(
                "swf",
                parse_swf,
                sniff_swf,
                "Standard Workload Format trace (Parallel Workloads Archive): ';' header, 18 numbers per job",
            ),
            Format(
                "sacct",
                parse_sacct,
                sniff_sacct,
                "Slurm `sacct -P` dump: '|'-separated with a header line (JobID, Submit, Start, End, State, NNodes...)",
            ),
        ),
        node_column=None,
        help=(
            "Job records: Slurm `sacct -P --format=...` dumps (allocations and steps; times read in --tz) and "
            "SWF traces (.swf, optionally compressed). One row per job or step in the staged `jobs` table."
        ),
    )
]
