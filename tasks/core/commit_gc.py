"""Removing what dead runs left in ``staged/`` and ``quarantine/`` (see :mod:`nodewatch.tasks.core.commit`).

A file no commit refers to is removed when it was replaced by a later commit, or when its run is
not running: its manifest is finished (``completed``/``partial``/``failed``), ``abandoned``, or
``running`` with an owner process on this host that is gone. A file whose run has no manifest is
removed once it is older than :data:`ORPHAN_AGE_S`. Parts of live runs (also runs of other hosts,
whose liveness cannot be told here) are kept.
"""

from __future__ import annotations

import logging
import time

from nodewatch.tasks.core.commit import Garbage, garbage
from nodewatch.tasks.core.runs import ManifestError, effective_status, load_manifest
from nodewatch.tasks.core.store import Store

log = logging.getLogger("nodewatch.commit")

ORPHAN_AGE_S = 3600.0
"""A file of a run without a manifest is garbage once it is this old."""


def run_is_running(store: Store, run_id: str | None) -> bool | None:
    """Whether ``run_id`` may still be writing: ``True``/``False``, ``None`` when it has no readable manifest."""
    if not run_id:
        return None
    try:
        return effective_status(load_manifest(store, run_id)) == "running"
    except (ManifestError, FileNotFoundError, ValueError):
        return None


def collectable(store: Store, keep_run: str | None = None, now: float | None = None) -> list[Garbage]:
    """The garbage files that may be deleted now (never those of ``keep_run`` or of a live run)."""
    now = time.time() if now is None else now
    out = []
    for g in garbage(store):
        if g.run_id == keep_run and not g.replaced:
            continue
        if g.replaced:
            out.append(g)
            continue
        running = run_is_running(store, g.run_id)
        if running is False or (running is None and g.mtime is not None and now - g.mtime > ORPHAN_AGE_S):
            out.append(g)
    return out


def clean_dead_parts(store: Store, keep_run: str | None = None) -> list[str]:
    """Delete the collectable garbage (see :func:`collectable`); returns the deleted keys (each logged)."""
    removed = []
    for g in collectable(store, keep_run):
        try:
            store.fs.rm(store.path(g.key))
        except FileNotFoundError:
            continue
        why = "replaced by a later commit" if g.replaced else f"run {g.run_id} ended without committing it"
        log.warning("removed %s (%s)", g.key, why)
        removed.append(g.key)
    return removed
