"""Writing staged parquet files: taking the deduplicated rows in slices and the writer options.

``WRITE_ROWS`` rows per slice (one row group each); :func:`_take_columns` gathers a slice in the
staged schema (dictionary-encoded strings written from their codes when :func:`_plain_read`
allows); :func:`_writer_options` and :func:`_dictionary_columns` choose compression, encodings
and statistics; :func:`_arrival_order` checks a spooled date is in arrival order before dedupe.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nodewatch.tasks.core.settings import SettingsError
from nodewatch.tasks.ingest.spool import ORDER
from nodewatch.tasks.ingest.validation import _DICT

WRITE_ROWS = 256 * 1024
"""Staged rows are gathered (sorted) and written in slices of this many rows (one row group each)."""
PART_MB = 128.0
"""Default bound of one staged part file (MB): a date whose staged rows compress to more is written as
several parts ``part-<run_id>-<k>.parquet`` published by the run's one commit (no single object of ~1 GB
on an object store). ``NODEWATCH_STAGED_PART_MB`` overrides it, ``NODEWATCH_STAGED_PART_ROWS`` caps rows per part."""


def part_bounds() -> tuple[int, int]:
    """``(max_bytes, max_rows)`` of one staged part: the file is closed once a slice takes it to ``max_bytes``
    (checked after each slice of at most ``min(WRITE_ROWS, max_rows)`` rows) or to ``max_rows`` rows.

    Raises :class:`~nodewatch.tasks.core.settings.SettingsError` (a user error: one line, exit code 2) naming
    the variable on a setting that is not a positive number.
    """
    out = []
    for var, default, scale in (("NODEWATCH_STAGED_PART_MB", PART_MB, 2**20), ("NODEWATCH_STAGED_PART_ROWS", 1 << 62, 1)):
        raw = os.environ.get(var, "").strip()
        try:
            value = float(raw) if raw else float(default)
        except ValueError:
            raise SettingsError(f"{var}={raw!r}: not a number") from None
        if not (math.isfinite(value) and value > 0) or int(value * scale) <= 0:
            raise SettingsError(f"{var}={raw!r}: must be a positive number")
        out.append(int(value * scale))
    max_bytes, max_rows = out
    return max_bytes, max_rows


def _dictionary_columns(t: pa.Table) -> list[str]:
    """Columns worth parquet dictionary encoding: dictionary-typed ones (written from their codes)
    and those with few distinct values in the first rows: trying it on a mostly-distinct column
    (messages, offsets) and falling back costs a third of the write."""
    probe = t.slice(0, 8192)
    out = []
    for name in probe.column_names:
        c = probe.column(name)
        if pa.types.is_nested(c.type):
            continue
        if pa.types.is_dictionary(c.type) or len(c) == 0 or pc.count_distinct(c, mode="all").as_py() <= max(1, len(c) // 4):
            out.append(name)
    return out


def _take_columns(t: pa.Table, rows: np.ndarray, shas: pa.Array, schema: pa.Schema, dictionaries: bool = False) -> pa.Table:
    """Rows ``rows`` of ``t`` as a table of ``schema``, ``source_sha256`` from the file order.

    Column by column: ``Table.take`` on a many-chunk table costs about twice as much. Rows that
    are already consecutive (input in staged order) are sliced, not gathered. ``dictionaries``:
    ``dictionary<int32, string>`` columns of string fields stay encoded and ``source_sha256`` is
    encoded over ``shas`` (the file is written with :func:`_writer_options` ``plain_read``: readers
    get plain strings); else they are decoded to the field types. Pass ``t`` through
    :func:`_combine_dictionaries` first (once for all slices), so a take gathers int32 codes of one
    dictionary."""
    n = len(rows)
    sl = None
    if n and int(rows[-1]) - int(rows[0]) == n - 1 and (n == 1 or bool(np.all(rows[1:] > rows[:-1]))):
        sl = int(rows[0])
    idx = pa.array(rows) if sl is None else None

    def pick(col: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
        return col.slice(sl, n) if sl is not None else col.take(idx)

    cols = []
    fields = []
    for f in schema:
        if f.name == "source_sha256":
            order = pick(t.column(ORDER))
            order = order.combine_chunks() if isinstance(order, pa.ChunkedArray) else order
            col = pa.DictionaryArray.from_arrays(order, shas) if dictionaries else pc.take(shas, order)
        else:
            col = pick(t.column(f.name))
            if not (dictionaries and col.type == _DICT and f.type == pa.string()):
                col = col.cast(f.type)
        cols.append(col)
        fields.append(f.with_type(col.type))
    return pa.table(cols, schema=pa.schema(fields, metadata=schema.metadata))


def _combine_dictionaries(t: pa.Table) -> pa.Table:
    """``t`` with each multi-chunk dictionary column as one chunk (one dictionary), once for all
    the slices taken from it."""
    if not any(pa.types.is_dictionary(c.type) and c.num_chunks > 1 for c in t.columns):
        return t
    cols = [c.combine_chunks() if pa.types.is_dictionary(c.type) and c.num_chunks > 1 else c for c in t.columns]
    return pa.table(cols, schema=t.schema)


@functools.cache
def _plain_read(schema: pa.Schema) -> bool:
    """Whether a parquet file of ``schema`` written without the stored Arrow schema
    (``store_schema=False``, the schema metadata as file key-value metadata) reads back as exactly
    ``schema`` (types, nullability, metadata). Then string columns can be written from their
    dictionary-encoded form (dictionary encoding is a storage detail: readers get ``string``)."""
    buf = pa.BufferOutputStream()
    with pq.ParquetWriter(buf, schema, store_schema=False) as w:
        w.write_table(schema.empty_table())
        if schema.metadata:
            w.add_key_value_metadata(schema.metadata)
    try:
        back = pq.read_schema(pa.BufferReader(buf.getvalue()))
    except (pa.ArrowException, OSError):
        return False
    return back.equals(schema, check_metadata=True)


def _writer_options(out: pa.Table, time_column: str, plain_read: bool) -> dict[str, Any]:
    """``ParquetWriter`` options for a staged file whose first slice is ``out``: zstd; dictionary
    encoding where it pays (:func:`_dictionary_columns`); statistics only for the time column (no
    reader prunes on the others; they cost a tenth of the write); ``source_offset`` (near-monotone
    within a node) delta-encoded (a third of the time and a fortieth of the size of plain + zstd);
    ``store_schema=False`` when ``plain_read`` (see :func:`_plain_read`)."""
    dictionary = _dictionary_columns(out)
    opts: dict[str, Any] = {
        "compression": "zstd",
        "use_dictionary": dictionary,
        "write_statistics": [time_column] if time_column in out.column_names else False,
    }
    offset = out.schema.field("source_offset") if "source_offset" in out.column_names else None
    if offset is not None and offset.name not in dictionary and pa.types.is_int64(offset.type):
        opts["column_encoding"] = {offset.name: "DELTA_BINARY_PACKED"}
    if plain_read:
        opts["store_schema"] = False
    return opts


def _arrival_order(t: pa.Table) -> pa.Table:
    """``t`` ordered by (file order, source offset): the spool keeps arrival order, so this only
    checks it (and sorts if a parser ever emits offsets out of order)."""
    o = t.column(ORDER).to_numpy()
    off = np.asarray(pc.fill_null(t.column("source_offset"), -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(o) < 2 or bool(np.all((o[1:] > o[:-1]) | ((o[1:] == o[:-1]) & (off[1:] >= off[:-1])))):
        return t
    return t.sort_by([(ORDER, "ascending"), ("source_offset", "ascending")])
