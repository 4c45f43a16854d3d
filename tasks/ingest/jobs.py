"""The ``jobs`` ingest source: Slurm ``sacct -P`` dumps and Standard Workload Format traces.

``nodewatch ingest jobs FILES...`` detects the format of each file with the sniffers below (or takes
``--format swf|sacct``) and stages rows of :data:`nodewatch.schemas.jobs.JOBS`. The parsers live in
:mod:`nodewatch.tasks.ingest.jobs_swf` and :mod:`nodewatch.tasks.ingest.jobs_sacct`.

User hashing (settings ``hash_users`` + ``hash_salt``, see :mod:`nodewatch.tasks.core.settings`): the columns
:data:`IDENTITY_COLUMNS` of every parsed batch are replaced by :func:`keyed_hash` of their values
(:func:`hash_identities`, applied by :func:`nodewatch.tasks.ingest.run.new_ingestor` before validation), so
neither the staged table nor the quarantined rows' JSON hold the names. The raw input bytes landed
under ``raw/jobs/`` and the raw text of unparseable lines in the quarantine still do: restrict
access to ``raw/`` and ``quarantine/`` accordingly. The same value gives the same hash with the same
salt, across runs and across the three columns (a user's personal group hashes like the user), and
an unrelated one with another salt; runs with different salts (or with and without hashing) do not
join, so keep one salt per store. A file ingested once is not ingested again (same bytes), whatever
the setting.
"""

from __future__ import annotations

import hashlib
import hmac

import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.jobs import JOBS, ROW_CHECKS
from nodewatch.tasks.ingest.base import Format, SourceSpec
from nodewatch.tasks.ingest.jobs_sacct import parse_sacct, sniff_sacct
from nodewatch.tasks.ingest.jobs_swf import parse_swf, sniff_swf

IDENTITY_COLUMNS: tuple[str, ...] = ("user", "group", "cancelled_by")
"""Columns of the ``jobs`` table that identify people (user/group names or ids; the uid that cancelled)."""

HASH_HEX_CHARS = 16
"""Length of a hashed value: the first 16 hex digits (64 bits) of the HMAC; among a million distinct
names the chance that two share a hash is about 3e-8."""


def keyed_hash(value: str, salt: str) -> str:
    """``hex(HMAC-SHA256(key=salt, msg=value))[:HASH_HEX_CHARS]`` (both UTF-8 encoded)."""
    return hmac.new(salt.encode(), value.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()[:HASH_HEX_CHARS]


def hash_column(col: pa.Array | pa.ChunkedArray, salt: str) -> pa.Array:
    """A string column with each value replaced by :func:`keyed_hash` (nulls stay null); each
    distinct value is hashed once."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    enc = pc.dictionary_encode(arr.cast(pa.string()))
    hashed = pa.array([keyed_hash(v, salt) for v in enc.dictionary.to_pylist()], pa.string())
    return pc.take(hashed, enc.indices) if len(hashed) else pa.nulls(len(arr), pa.string())


def hash_identities(rows: pa.Table, salt: str, columns: tuple[str, ...] = IDENTITY_COLUMNS) -> pa.Table:
    """``rows`` with its ``columns`` (those present) replaced by keyed hashes of their values."""
    if not salt:
        raise ValueError("hash_identities needs a non-empty salt")
    for name in columns:
        i = rows.schema.get_field_index(name)
        if i >= 0:
            rows = rows.set_column(i, rows.schema.field(i).with_type(pa.string()), hash_column(rows.column(i), salt))
    return rows


SOURCES = [
    SourceSpec(
        name="jobs",
        table=JOBS,
        identity_columns=IDENTITY_COLUMNS,
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
        row_checks=ROW_CHECKS,
        help=(
            "Job records: Slurm `sacct -P --format=...` dumps (allocations and steps; times read in --tz) and "
            "SWF traces (.swf, optionally compressed). One row per job or step in the staged `jobs` table."
        ),
    )
]
