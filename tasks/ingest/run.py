"""Helpers to set up an ingest run of one source (used by the ``ingest`` flows)."""

from __future__ import annotations

from datetime import datetime

from tasks.ingest.pipeline import Ingestor, known_nodes_and_aliases
from tasks.ingest.registry import sources
from tasks.runs import RunRecorder
from tasks.store import Store


def get_source(name: str):  # noqa: ANN201 - returns SourceSpec
    """The source called ``name`` or a one-line error listing the known ones."""
    known = sources()
    if name not in known:
        raise ValueError(f"unknown source {name!r}; known sources: {', '.join(known) or 'none'}")
    return known[name]


def new_ingestor(
    store: Store,
    source: str,
    recorder: RunRecorder,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    tz: str = "UTC",
    future_tolerance_s: int = 300,
    check_known_nodes: bool = True,
) -> Ingestor:
    """An :class:`Ingestor` for ``source`` with known nodes/aliases from the staged topology."""
    spec = get_source(source)
    known, aliases = known_nodes_and_aliases(store) if (check_known_nodes and source != "topology") else (None, {})
    return Ingestor(
        store,
        spec,
        recorder,
        window=(start, end) if (start or end) else None,
        tz=tz,
        known_nodes=known,
        aliases=aliases,
        future_tolerance_s=future_tolerance_s,
    )
