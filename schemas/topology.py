"""Staged ``topology`` table: where every node sits (rack, row, chassis, position), its architecture
and its host aliases. It is the source of the *known nodes* and of the alias map that the other
parsers apply (``nodewatch.tasks.ingest.topology.load_topology``).

Each ingested topology file is a complete snapshot valid from ``valid_from`` (the file's
modification time, ``ParseContext.reference_time``); the current topology is the snapshot staged by
the latest ingest run. ``rack``, ``row`` and ``chassis`` are labels (strings) because sites name
them (``r07``, ``A``), numbers are kept as written.

Besides the column rules, :data:`ROW_CHECKS` (vectorised, for ``SourceSpec.row_checks``) rejects
rows whose aliases are not valid node names, aliases that name another node or are claimed by two
nodes (``expect_aliases_unambiguous(aliases)``), and a node listed twice with different attributes
in one file (``expect_node_unique_in_snapshot(node)``; exact repeats are counted as duplicates).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.names import NODE_NAME_PATTERN
from nodewatch.schemas.table import Column, TableSchema

ALIAS_REGEX_LABEL = "expect_list_values_to_match_regex(aliases)"
ALIAS_AMBIGUOUS_LABEL = "expect_aliases_unambiguous(aliases)"
NODE_CONFLICT_LABEL = "expect_node_unique_in_snapshot(node)"

_LABEL = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$"

TOPOLOGY = TableSchema(
    name="topology",
    columns=(
        Column("node", pa.string(), nullable=False, regex=NODE_NAME_PATTERN, description="canonical node name"),
        Column("rack", pa.string(), nullable=False, regex=_LABEL, description="rack label"),
        Column("row", pa.string(), nullable=False, regex=_LABEL, description="row (aisle) label"),
        Column("chassis", pa.string(), regex=_LABEL, description="chassis label (optional)"),
        Column("position", pa.int32(), min=0, max=100_000, description="slot in the rack (optional)"),
        Column("architecture", pa.string(), nullable=False, regex=_LABEL, description="node type / partition"),
        Column("aliases", pa.list_(pa.string()), description="other host names of the node (checked by ROW_CHECKS)"),
        Column("valid_from", pa.timestamp("ns", tz="UTC"), nullable=False, description="snapshot time (file mtime)"),
        Column("source_offset", pa.int64(), nullable=False, min=1, description="1-based line number in the input file"),
    ),
    time_column="valid_from",
    unique_key=("node", "valid_from"),
    description="Machine-room topology snapshots; the latest run's snapshot defines the known nodes and aliases.",
)


NODE_NAME_RE2 = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$"
"""RE2 (pyarrow) form of ``NODE_NAME_PATTERN`` minus its look-ahead: combine with "no '..'" (:func:`node_name_mask`)."""


def node_name_mask(values: pa.Array) -> np.ndarray:
    """Vectorised :func:`nodewatch.schemas.names.is_valid_node_name` (True = valid) for a string array."""
    ok = pc.fill_null(pc.match_substring_regex(values, NODE_NAME_RE2), False)
    ok = pc.and_(ok, pc.invert(pc.fill_null(pc.match_substring(values, ".."), True)))
    ok = pc.and_(ok, pc.invert(pc.fill_null(pc.ends_with(values, "."), True)))
    return np.asarray(ok.to_numpy(zero_copy_only=False), bool)


def row_checks(table: pa.Table) -> list[tuple[str, np.ndarray]]:
    """Alias and per-snapshot uniqueness checks: ``[(label, failing_mask), ...]``."""
    n = table.num_rows
    aliases = table.column("aliases")
    flat = pc.list_flatten(aliases)
    parents = pc.list_parent_indices(aliases).to_numpy()
    bad_re = ~node_name_mask(flat)
    m_re = np.zeros(n, bool)
    m_re[parents[bad_re]] = True
    # ambiguity: an alias that is a node name, or the same alias on two different nodes
    nodes = table.column("node").to_pylist()
    flat_l = flat.to_pylist()
    owners: dict[str, set[str]] = {}
    for a, p in zip(flat_l, parents.tolist(), strict=True):
        owners.setdefault(a, set()).add(nodes[p])
    node_set = set(nodes)
    m_amb = np.zeros(n, bool)
    for a, p in zip(flat_l, parents.tolist(), strict=True):
        if a in node_set or len(owners[a]) > 1:
            m_amb[p] = True
    # a node listed twice with different attributes (identical repeats are duplicates, not conflicts)
    attrs = ["rack", "row", "chassis", "position", "architecture"]
    cols = [table.column(c).to_pylist() for c in attrs]
    al = [tuple(x or []) for x in aliases.to_pylist()]
    sig = [(nodes[i], *(c[i] for c in cols), al[i]) for i in range(n)]
    per_node = Counter(nodes)
    distinct = Counter(s[0] for s in set(sig))
    m_conf = np.array([per_node[x] > 1 and distinct[x] > 1 for x in nodes], bool) if n else np.zeros(0, bool)
    return [(ALIAS_REGEX_LABEL, m_re), (ALIAS_AMBIGUOUS_LABEL, m_amb), (NODE_CONFLICT_LABEL, m_conf)]


ROW_CHECKS = (row_checks,)
"""Topology row checks, for ``SourceSpec(row_checks=ROW_CHECKS)``."""
