"""The generic ingest pipeline used by every source.

``ingest_files`` takes files of one source through::

    land raw (sha256; same bytes twice = skipped) -> detect format -> parse (streaming batches)
      -> validate (GX suite from the table schema + run-time expectations + row checks)
      -> spool good rows by (date, node bucket) -> dedupe (within the run and against staged rows)
      -> write staged/<table>/date=D/part-<run_id>.parquet and quarantine/<table>/date=D/<run_id>.parquet

and accounts for every input row: ``rows_in = staged + quarantined + duplicates`` per file and
per table. Files that cannot be parsed at all go to ``quarantine/files/<source>/<sha>.json`` with
the error; rows read before a mid-file error (e.g. a truncated gzip) are kept.

Memory is bounded by one validation chunk (``VALIDATE_ROWS`` / ``VALIDATE_BYTES``) plus the spool
(``SPOOL_BYTES`` in memory, then one (date, bucket) partition at a time).

The stages live in one module each: :mod:`~nodewatch.tasks.ingest.landing` (format detection),
:mod:`~nodewatch.tasks.ingest.validation` (row checks, encoding, quarantine schema),
:mod:`~nodewatch.tasks.ingest.spool` (rows by date and node bucket),
:mod:`~nodewatch.tasks.ingest.dedupe` (sort + duplicates and conflicts),
:mod:`~nodewatch.tasks.ingest.staging` (writing staged parquet), wired per file and per run by
:class:`~nodewatch.tasks.ingest.ingestor.Ingestor`; this module holds :func:`ingest_files`, which
runs an ``Ingestor`` over a list of files, and :func:`known_nodes_and_aliases`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.base import SourceSpec
from nodewatch.tasks.ingest.ingestor import Ingestor, IngestResult


def ingest_files(
    store: Store,
    spec: SourceSpec,
    paths: Iterable[Path],
    recorder: RunRecorder,
    *,
    fmt: str = "auto",
    window: tuple[datetime | None, datetime | None] | None = None,
    tz: str = "UTC",
    known_nodes: set[str] | None = None,
    aliases: dict[str, str] | None = None,
    future_tolerance_s: int = 300,
    data_docs: bool = True,
) -> IngestResult:
    """Ingest ``paths`` of source ``spec`` into the store within the run of ``recorder``."""
    ing = Ingestor(
        store,
        spec,
        recorder,
        window=window,
        tz=tz,
        known_nodes=known_nodes,
        aliases=aliases,
        future_tolerance_s=future_tolerance_s,
    )
    for p in paths:
        ing.add_file(Path(p), fmt)
    return ing.finish(data_docs=data_docs)


def known_nodes_and_aliases(store: Store) -> tuple[set[str] | None, dict[str, str]]:
    """Known nodes and aliases from the staged topology (``(None, {})`` when there is none)."""
    try:
        from nodewatch.tasks.ingest.topology import load_topology  # provided by the topology source
    except ImportError:
        load_topology = None
    if load_topology is not None:
        known, aliases, _ = load_topology(store)
        return (set(known) if known else None), dict(aliases)
    t = store.read_staged("topology", columns=["node"])
    if t is None:
        return None, {}
    return set(t.column("node").to_pylist()), {}
