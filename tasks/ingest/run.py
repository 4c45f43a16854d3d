"""Helpers to set up an ingest run of one source (used by the ``ingest`` flows)."""

from __future__ import annotations

import functools
from datetime import datetime

from nodewatch.schemas.names import check_node_name
from nodewatch.tasks.core.owner import mark_owner
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.base import SourceSpec
from nodewatch.tasks.ingest.ingestor import Ingestor
from nodewatch.tasks.ingest.pipeline import known_nodes_and_aliases
from nodewatch.tasks.ingest.registry import sources


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

    ``hash_salt`` (settings ``hash_salt`` when ``hash_users`` is on; ``None`` = no hashing): the
    source's :func:`identity_columns` are replaced by keyed hashes before validation.
    """
    spec = get_source(source)
    transform = None
    if hash_salt is not None:
        if not hash_salt:
            raise ValueError("user hashing needs a non-empty salt (settings hash_salt)")
        if spec.identity_columns:
            from nodewatch.tasks.ingest.jobs import hash_identities  # the keyed hash (HMAC-SHA256) of identity columns

            transform = functools.partial(hash_identities, salt=hash_salt, columns=spec.identity_columns)
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
