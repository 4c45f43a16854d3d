"""Validation side of the ingest pipeline: what happens to parsed rows before they are spooled.

The chunking of parser batches for one validation call (``VALIDATE_ROWS`` / ``VALIDATE_BYTES``),
the node-list row check (:func:`_list_check`), the conforming of parsed columns to the staged
types and the dictionary encoding of low-cardinality strings (``_DICT``), the canonical node names
of every node column (:func:`canonical_node_columns`: one name per node, whatever the source), and
the schema of quarantined rows (``QUARANTINE_SCHEMA``). The GX suite itself runs in
:class:`nodewatch.tasks.core.validate.BatchValidator`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.names import NODE_NAME_PATTERN, canonical_nodes, node_name_mask
from nodewatch.schemas.table import TableSchema

VALIDATE_ROWS = 4_000_000
VALIDATE_BYTES = 192 * 2**20
"""Parser batches are concatenated and validated together up to this many rows or bytes (one GX
call per frame costs ~0.1 s of expectation-graph building whatever the size, and GX sees distinct
values, so bigger chunks are cheaper per row; the byte bound keeps memory bounded)."""
QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("source_sha256", pa.string()),
        pa.field("source_file", pa.string()),
        pa.field("source_offset", pa.int64()),
        pa.field("time", pa.timestamp("ns", tz="UTC")),
        pa.field("reason", pa.string()),
        pa.field("raw", pa.string()),
    ]
)


def _list_check(column: str, known: set[str] | None) -> Callable[[pa.Table], list[tuple[str, object]]]:
    """Row check: every name in a list<string> column matches the node pattern (and is known)."""

    def check(batch: pa.Table) -> list[tuple[str, object]]:
        col = batch.column(column)
        flat = pc.list_flatten(col)
        parents = pc.list_parent_indices(col).to_numpy()
        out: list[tuple[str, object]] = []
        bad = ~node_name_mask(flat)
        mask = np.zeros(batch.num_rows, bool)
        mask[parents[bad]] = True
        out.append((f"expect_list_values_to_match_regex({column})", mask))
        if known is not None:
            unknown = ~pc.is_in(flat, value_set=pa.array(sorted(known))).to_numpy(zero_copy_only=False)
            m2 = np.zeros(batch.num_rows, bool)
            m2[parents[unknown & ~bad]] = True
            out.append((f"expect_list_values_to_be_in_set({column} in known set of {len(known)})", m2))
        return out

    return check


def _low_cardinality_strings(t: pa.Table) -> set[str]:
    """String columns with few distinct values in their first rows (node, metric, app, ...)."""
    out = set()
    for name in t.column_names:
        c = t.column(name)
        if (pa.types.is_string(c.type) or pa.types.is_large_string(c.type) or c.type == _DICT) and len(c):
            probe = c.slice(0, 4096)
            if c.type == _DICT:
                probe = probe.cast(pa.string())
            if pc.count_distinct(probe, mode="all").as_py() <= max(1, len(probe) // 2):
                out.add(name)
    return out


def _encode_strings(t: pa.Table, columns: set[str]) -> pa.Table:
    """``columns`` dictionary-encoded: hashed once here, they are then validated, bucketed, sorted
    and taken as integer codes, and decoded only when the staged file is written."""
    if not columns and not any(f.type == _DICT for f in t.schema):
        return t
    cols = []
    for name, c in zip(t.column_names, t.columns, strict=True):
        if c.type == _DICT:  # encoded by the parser: kept (a column the spool has as strings: decoded)
            c = c.combine_chunks() if name in columns else c.cast(c.type.value_type)
        elif name in columns:
            c = pc.dictionary_encode(c.combine_chunks())
        cols.append(c)
    return pa.table(cols, names=t.column_names)


_DICT = pa.dictionary(pa.int32(), pa.string())


def _conform_column(col: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    """``col`` cast to ``typ``; a ``dictionary<int32, string>`` column of a string field stays
    encoded (a parser passes on an encoded input column instead of decoding it)."""
    if col.type == _DICT and typ == pa.string():
        return col
    return col.cast(typ)


def node_columns(schema: TableSchema) -> tuple[list[str], list[str]]:
    """``(scalar, list)`` columns of ``schema`` that hold node names: string columns validated with
    :data:`~nodewatch.schemas.names.NODE_NAME_PATTERN` and list columns named ``node_list``
    (a job's or reservation's expanded hosts)."""
    scalar = [c.name for c in schema.columns if c.regex == NODE_NAME_PATTERN]
    lists = [c.name for c in schema.columns if c.name == "node_list" and pa.types.is_list(c.type)]
    return scalar, lists


def canonical_node_columns(
    t: pa.Table, scalar: list[str], lists: list[str], aliases: Mapping[str, str], cache: dict[str, str] | None = None
) -> pa.Table:
    """``t`` with every node name of ``scalar`` and ``lists`` columns replaced by its canonical name
    (:func:`nodewatch.schemas.names.canonical_nodes`: case, domain, topology aliases; ``aliases``
    keyed lower-case). Names the rule refuses are kept for the validation to reject."""
    for name in scalar:
        if name in t.column_names:
            t = t.set_column(t.column_names.index(name), name, canonical_nodes(t.column(name), aliases, cache))
    for name in lists:
        if name not in t.column_names:
            continue
        col = t.column(name)
        chunks = []
        for ch in col.chunks:
            if len(ch.values):
                vals = canonical_nodes(ch.values, aliases, cache)
                if pa.types.is_dictionary(vals.type):
                    vals = vals.cast(pa.string())
                ch = pa.ListArray.from_arrays(ch.offsets, vals, type=ch.type, mask=ch.is_null() if ch.null_count else None)
            chunks.append(ch)
        t = t.set_column(t.column_names.index(name), name, pa.chunked_array(chunks, col.type))
    return t
