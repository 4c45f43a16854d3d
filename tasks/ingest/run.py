"""Helpers to set up an ingest run of one source (used by the ``ingest`` flows)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from datetime import datetime
from typing import BinaryIO

import pyarrow as pa

from nodewatch.schemas.names import check_node_name
from nodewatch.tasks.core.keys import store_key
from nodewatch.tasks.core.owner import mark_owner
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.base import Format, ParseContext, ParseResult, SourceSpec
from nodewatch.tasks.ingest.ingestor import Ingestor
from nodewatch.tasks.ingest.pipeline import known_nodes_and_aliases
from nodewatch.tasks.ingest.registry import sources

USER_HASH_KEY = ("keys", "user-hash.key")
"""Store key of the per-store user-hashing key (32 random bytes as 64 hex digits, mode 0600)."""

REDACTED_RAW = "[withheld: hash_users is on; the line is in raw/{source}/ at source_offset]"
"""``raw`` text of a quarantined unparseable line of a source with identity columns when hashing is on."""


def user_hash_key(store: Store) -> str:
    """The store's user-hashing key, created at first use (``keys/user-hash.key``).

    On a local store the key file is created with mode 0600 in a 0700 directory, atomically and
    exclusively (written under a temporary name, then hard-linked into place: when two runs race, both
    use the one that won); a file found with looser permissions is tightened to 0600. On a remote
    store it is written once if absent (object stores have no modes: restrict the bucket). The key is
    returned to the caller only: it is never written to a manifest, log, report or artifact.
    """
    try:
        return store_key(store, *USER_HASH_KEY)
    except ValueError:
        raise ValueError(f"the store's user-hashing key {'/'.join(USER_HASH_KEY)} is damaged (too short); "
                         "restore it") from None


def _withhold_raw(spec: SourceSpec) -> SourceSpec:
    """``spec`` whose parsers replace the ``raw`` text of unparseable lines by :data:`REDACTED_RAW`
    (the raw line of a sacct dump holds the user and group names in clear)."""
    text = REDACTED_RAW.format(source=spec.name)

    def wrap(parse: object) -> object:
        def parse_withheld(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
            for res in parse(stream, ctx):  # type: ignore[operator]
                rej = res.rejects
                if rej.num_rows:
                    i = rej.schema.get_field_index("raw")
                    rej = rej.set_column(i, rej.schema.field(i), pa.repeat(pa.scalar(text, pa.string()), rej.num_rows))
                    res = ParseResult(res.rows, rej)
                yield res

        return parse_withheld

    formats = tuple(dataclasses.replace(f, parse=wrap(f.parse)) for f in spec.formats if isinstance(f, Format))
    return dataclasses.replace(spec, formats=formats)


def get_source(name: str) -> SourceSpec:
    """The source called ``name`` or a one-line error listing the known ones."""
    known = sources()
    if name not in known:
        raise ValueError(f"unknown source {name!r}; known sources: {', '.join(known) or 'none'}")
    return known[name]


def identity_columns(source: str) -> tuple[str, ...]:
    """Columns of ``source``'s staged table that ``hash_users`` replaces by keyed hashes (none for most sources)."""
    return get_source(source).identity_columns


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

    ``hash_salt`` (``None`` = no hashing, i.e. ``hash_users`` off; ``""`` = hash with the store's key
    :func:`user_hash_key`; else the configured settings ``hash_salt``): the source's
    :func:`identity_columns` are replaced by keyed hashes before validation, and the raw text of its
    unparseable lines is withheld from the quarantine (it stays in ``raw/``).
    """
    spec = get_source(source)
    transform = None
    if hash_salt is not None and spec.identity_columns:
        from nodewatch.tasks.ingest.jobs import hash_identities  # the keyed hash (HMAC-SHA256) of identity columns

        key = hash_salt or user_hash_key(store)
        transform = functools.partial(hash_identities, salt=key, columns=spec.identity_columns)
        spec = _withhold_raw(spec)
    known, aliases = known_nodes_and_aliases(store) if (check_known_nodes and source != "topology") else (None, {})
    if known is not None and service_hosts:
        known = known | {check_node_name(h) for h in service_hosts}
    ing = Ingestor(
        store,
        spec,
        recorder,
        window=(start, end) if (start or end) else None,
        tz=tz,
        known_nodes=known,
        aliases=aliases,
        future_tolerance_s=future_tolerance_s,
        row_transform=transform,
    )
    _mark_spool(ing)
    return ing


def _mark_spool(ing: Ingestor) -> None:
    """Record this process as the owner of the ingestor's spool directory (``/tmp/nodewatch-ingest-*``),
    so that the next run removes it if this process is killed (:func:`nodewatch.tasks.core.owner.clean_dead_tempdirs`)."""
    tmp = getattr(ing, "_tmp", None)
    name = getattr(tmp, "name", None)
    if isinstance(name, str):
        mark_owner(name)
