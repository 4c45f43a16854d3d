"""Helpers to set up an ingest run of one source (used by the ``ingest`` flows)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import BinaryIO

import pyarrow as pa

from schemas.names import check_node_name
from tasks.ingest.base import ParseContext, Parser, ParseResult, SourceSpec
from tasks.ingest.pipeline import Ingestor, known_nodes_and_aliases
from tasks.ingest.registry import sources
from tasks.runs import RunRecorder
from tasks.store import Store

RowTransform = Callable[[pa.Table], pa.Table]
"""A function applied to every parsed batch of rows before validation (same columns and row count)."""


def get_source(name: str) -> SourceSpec:
    """The source called ``name`` or a one-line error listing the known ones."""
    known = sources()
    if name not in known:
        raise ValueError(f"unknown source {name!r}; known sources: {', '.join(known) or 'none'}")
    return known[name]


def identity_columns(source: str) -> tuple[str, ...]:
    """Columns of ``source``'s staged table that ``hash_users`` replaces by keyed hashes (none for most sources)."""
    if source == "jobs":
        from tasks.ingest.jobs import IDENTITY_COLUMNS

        return IDENTITY_COLUMNS
    return ()


def hashing_transform(source: str, salt: str) -> RowTransform | None:
    """The row transform that hashes ``source``'s identity columns with ``salt`` (``None`` if it has none)."""
    columns = identity_columns(source)
    if not columns:
        return None
    from tasks.ingest.jobs import hash_identities

    return functools.partial(hash_identities, salt=salt, columns=columns)


def _transformed(parse: Parser, transform: RowTransform) -> Parser:
    @functools.wraps(parse)
    def wrapped(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
        for res in parse(stream, ctx):
            yield ParseResult(transform(res.rows), res.rejects)

    return wrapped


def with_row_transform(spec: SourceSpec, transform: RowTransform) -> SourceSpec:
    """``spec`` whose parsers apply ``transform`` to every batch of rows they yield.

    (The pipeline has no row-transform hook; wrapping the parsers gives the same effect: the rows
    are transformed before validation, quarantine and staging, and the time counts as ``parse``.)
    """
    formats = tuple(dataclasses.replace(f, parse=_transformed(f.parse, transform)) for f in spec.formats)
    return dataclasses.replace(spec, formats=formats)


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
    service_hosts: tuple[str, ...] | list[str] = (),
    hash_salt: str | None = None,
) -> Ingestor:
    """An :class:`Ingestor` for ``source`` with known nodes/aliases from the staged topology.

    ``service_hosts`` (settings ``service_hosts``, env ``NODEWATCH_SERVICE_HOSTS``) are hosts that
    are not compute nodes but whose rows are wanted, e.g. the Slurm controller whose slurmctld
    lines report other nodes going DOWN: they count as known nodes for validation.

    ``hash_salt`` (settings ``hash_salt`` when ``hash_users`` is on; ``None`` = no hashing): the
    source's :func:`identity_columns` are replaced by keyed hashes before validation.
    """
    spec = get_source(source)
    if hash_salt is not None:
        if not hash_salt:
            raise ValueError("user hashing needs a non-empty salt (settings hash_salt)")
        transform = hashing_transform(source, hash_salt)
        if transform is not None:
            spec = with_row_transform(spec, transform)
    known, aliases = known_nodes_and_aliases(store) if (check_known_nodes and source != "topology") else (None, {})
    if known is not None and service_hosts:
        known = known | {check_node_name(h) for h in service_hosts}
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
