"""Topology source: ``nodewatch ingest topology topology.csv``, and :func:`load_topology` for the others.

Input: CSV with header ``node,rack,row,chassis,position,architecture[,aliases]`` (any column order;
``chassis``/``position`` may be empty; ``aliases`` is ``alias1;alias2``). Each file is a complete
snapshot valid from its modification time (``ParseContext.reference_time``). Staged as the
``topology`` table (``schemas/topology.py``).

The current topology is the snapshot of the latest ingest run that staged one;
:func:`load_topology` returns its known nodes and the alias -> node map that the telemetry and
syslog parsers apply and that the pipeline uses for its known-node expectation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nodewatch.schemas.names import normalise_node
from nodewatch.schemas.topology import ROW_CHECKS, TOPOLOGY
from nodewatch.tasks.core.commit import run_of_file
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest._vectorised import (
    csv_header,
    file_error,
    iter_csv_text,
    parse_float_strings,
    read_header,
    reject_table,
    split_list,
)
from nodewatch.tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec

REQUIRED = ("node", "rack", "row", "chassis", "position", "architecture")
OPTIONAL = ("aliases",)
ROW_SCHEMA = TOPOLOGY.arrow_schema()


def parse_topology_csv(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse a topology CSV into ``topology`` rows (see module doc)."""
    cols = read_header(stream, ctx)
    low = {c.lower(): c for c in cols}
    missing = [c for c in REQUIRED if c not in low]
    if missing:
        raise file_error(ctx, f"line 1: missing columns {missing} (header {cols[:12]}); expected {','.join(REQUIRED)}[,aliases]")
    use = [low[c] for c in REQUIRED + OPTIONAL if c in low]
    valid_from = pa.scalar(ctx.reference_time, pa.timestamp("ns", tz="UTC"))
    for dec, lines, rej in iter_csv_text(stream, ctx, cols, use):
        n = len(lines)
        get = {c: pc.utf8_trim_whitespace(dec[low[c]]) for c in REQUIRED}
        pos_raw = get["position"]
        pos_f = parse_float_strings(pc.if_else(pc.equal(pos_raw, ""), pa.scalar(None, pa.string()), pos_raw))
        pos_np = np.asarray(pc.fill_null(pos_f, np.nan).to_numpy(zero_copy_only=False), np.float64)
        given = np.asarray(pc.not_equal(pos_raw, "").to_numpy(zero_copy_only=False), bool)
        bad_pos = given & ~(np.isfinite(pos_np) & (pos_np == np.round(pos_np)) & (np.abs(pos_np) < 2**31))
        if bad_pos.any():
            bi = np.flatnonzero(bad_pos)
            rej.append(
                reject_table(
                    lines[bi],
                    [f"{dec[low['node']][i].as_py()},...,position={pos_raw[i].as_py()}" for i in bi.tolist()],
                    [f"parse: position {pos_raw[i].as_py()!r} is not an integer" for i in bi.tolist()],
                )
            )
        ok = ~bad_pos
        position = pa.array(np.where(given & ok, pos_np, 0).astype(np.int32), pa.int32(), mask=~given)
        aliases = split_list(dec[low["aliases"]]) if "aliases" in low else pa.array([[]] * n, pa.list_(pa.string()))
        chassis = pc.if_else(pc.equal(get["chassis"], ""), pa.scalar(None, pa.string()), get["chassis"])
        rows = pa.table(
            [
                get["node"],
                get["rack"],
                get["row"],
                chassis,
                position,
                get["architecture"],
                aliases,
                pa.array(np.full(n, valid_from.value, np.int64), pa.int64()).cast(valid_from.type),
                pa.array(lines, pa.int64()),
            ],
            schema=ROW_SCHEMA,
        )
        if not ok.all():
            rows = rows.filter(pa.array(ok))
        yield ParseResult(rows, pa.concat_tables(rej))


def sniff_topology_csv(head: bytes) -> float:
    """Header holding every required topology column."""
    cols = csv_header(head)
    return 1.0 if cols and set(REQUIRED) <= {c.lower() for c in cols} else 0.0


SOURCES = [
    SourceSpec(
        name="topology",
        table=TOPOLOGY,
        formats=(Format("topology-csv", parse_topology_csv, sniff_topology_csv, "CSV: " + ",".join(REQUIRED) + "[,aliases]"),),
        node_column=None,  # a new topology defines the known nodes: it is not checked against the old one
        row_checks=ROW_CHECKS,
        help=(
            "Machine-room topology CSV (node,rack,row,chassis,position,architecture[,aliases 'a1;a2']). Each file is "
            "a snapshot; the latest run's snapshot defines the known nodes and host aliases used by every other source."
        ),
    )
]


def _run_of(path: str) -> str:
    """The run that staged ``path`` (``part-<run>.parquet`` or one of its bounded parts ``part-<run>-<k>.parquet``)."""
    return run_of_file(path.rsplit("/", 1)[1]) or ""


def load_topology(store: Store) -> tuple[set[str], dict[str, str], pa.Table | None]:
    """Known nodes, alias -> node map and rows of the current (latest staged) topology snapshot.

    Node names are canonical (:func:`nodewatch.schemas.names.normalise_node`) and aliases keyed
    lower-case, so every source maps an alias, in any case, to the one name of its node.

    Returns ``(set(), {}, None)`` when no topology was staged.
    """
    files = store.staged_files(TOPOLOGY.name)
    if not files:
        return set(), {}, None
    latest = max(_run_of(p) for p in files)
    parts = []
    for p in files:
        if _run_of(p) == latest:
            with store.fs.open(p, "rb") as f:
                parts.append(pq.read_table(f))
    table = pa.concat_tables(parts, promote_options="permissive")
    latest_t = pc.max(table.column("valid_from"))
    table = table.filter(pc.equal(table.column("valid_from"), latest_t)) if len(parts) > 1 else table
    # canonical names (one name per node, :func:`normalise_node`), also for snapshots staged before the rule
    nodes = [normalise_node(n)[0] or n for n in table.column("node").to_pylist()]
    table = table.set_column(table.column_names.index("node"), "node", pa.array(nodes, pa.string()))
    aliases: dict[str, str] = {}
    for node, al in zip(nodes, table.column("aliases").to_pylist(), strict=True):
        for a in al or []:
            aliases[a.lower()] = node
    return set(nodes), aliases, table
