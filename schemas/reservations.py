"""Staged ``reservations`` table: Slurm reservations (``scontrol show reservation``, flattened to CSV).

``node_list`` is the expanded Slurm hostlist (every name checked against the node-name rule by
:data:`ROW_CHECKS`, ``expect_list_values_to_match_regex(node_list)``), ``flags`` and ``users`` are
lists. A reservation must end after it starts (GX ``ExpectColumnPairValuesAToBeGreaterThanB(end,
start)``) and its flags must be Slurm-style tokens ``[A-Z][A-Z0-9_]*`` (checked by :data:`ROW_CHECKS`:
``expect_reservation_flags_to_match_regex(flags)``). Flags outside :data:`SLURM_FLAGS` are kept:
Slurm adds flags between versions and sites add their own, and quarantining a maintenance window
because of a new flag would lose it.
Maintenance windows are the reservations whose flags contain ``MAINT``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.table import Column, Expectation, TableSchema
from nodewatch.schemas.topology import node_name_mask

SLURM_FLAGS = frozenset(
    {
        "ANY_NODES", "DAILY", "FIRST_CORES", "FLEX", "HOURLY", "IGNORE_JOBS", "LICENSE_ONLY", "MAGNETIC", "MAINT",
        "NO_HOLD_JOBS_AFTER", "NO_HOLD_JOBS_AFTER_END", "NO_PURGE_COMP", "NO_USER_DELETE", "OVERLAP",
        "PART_NODES", "PURGE_COMP", "REPLACE", "REPLACE_DOWN", "SPEC_NODES", "STATIC_ALLOC", "TIME_FLOAT",
        "USER_DELETE", "WEEKDAY", "WEEKEND", "WEEKLY", "SKIP", "NO_MAINT", "NO_IGNORE_JOBS",
    }
)
"""Reservation flags known to Slurm (``scontrol create reservation`` ``Flags=``), for reference and docs."""

FLAGS_LABEL = "expect_reservation_flags_to_match_regex(flags)"
FLAG_RE2 = r"^[A-Z][A-Z0-9_]*$"
NODE_LIST_LABEL = "expect_list_values_to_match_regex(node_list)"

RESERVATIONS = TableSchema(
    name="reservations",
    columns=(
        Column("name", pa.string(), nullable=False, regex=r"^[^\x00-\x1f]{1,256}$", description="reservation name"),
        Column("start", pa.timestamp("ns", tz="UTC"), nullable=False, description="StartTime (UTC)"),
        Column("end", pa.timestamp("ns", tz="UTC"), nullable=False, description="EndTime (UTC)"),
        Column("node_list", pa.list_(pa.string()), description="expanded Nodes= hostlist"),
        Column("flags", pa.list_(pa.string()), description="Flags= (e.g. MAINT, IGNORE_JOBS)"),
        Column("users", pa.list_(pa.string()), description="Users="),
        Column("source_offset", pa.int64(), nullable=False, min=1, description="1-based line number in the input file"),
    ),
    time_column="start",
    unique_key=("name", "start"),
    description="Slurm reservations; rows with MAINT in flags are maintenance windows.",
    extra_expectations=(Expectation("ExpectColumnPairValuesAToBeGreaterThanB", {"column_A": "end", "column_B": "start"}),),
)


def row_checks(table: pa.Table) -> list[tuple[str, np.ndarray]]:
    """Malformed flags and invalid node names in ``node_list``: ``[(label, failing_mask), ...]``."""
    flags = table.column("flags")
    flat = pc.list_flatten(flags)
    parents = pc.list_parent_indices(flags).to_numpy()
    unknown = ~np.asarray(pc.fill_null(pc.match_substring_regex(flat, FLAG_RE2), False).to_numpy(zero_copy_only=False))
    mask = np.zeros(table.num_rows, bool)
    mask[parents[unknown]] = True
    nodes = table.column("node_list")
    bad_node = ~node_name_mask(pc.list_flatten(nodes))
    m_nodes = np.zeros(table.num_rows, bool)
    m_nodes[pc.list_parent_indices(nodes).to_numpy()[bad_node]] = True
    return [(FLAGS_LABEL, mask), (NODE_LIST_LABEL, m_nodes)]


ROW_CHECKS = (row_checks,)
"""Reservation row checks, for ``SourceSpec(row_checks=ROW_CHECKS)``."""
