"""Slurm hostlist expressions for the simulator's writers: ``cn[0001-0004,0017]`` <-> node names.

Thin wrappers over :mod:`nodewatch.tasks.ingest.hostlist` (the same code that reads them back), so what the
simulator writes is exactly what the sacct/reservation parsers expand.
"""

from __future__ import annotations

from collections.abc import Iterable

from nodewatch.tasks.ingest.hostlist import compress_hostlist, expand_hostlist


def compress(names: Iterable[str]) -> str:
    """Compact hostlist of ``names`` (sorted first, so equal sets give equal strings)."""
    return compress_hostlist(sorted(set(names)))


def expand(expr: str) -> list[str]:
    """Node names of a hostlist expression (inverse of :func:`compress`)."""
    return expand_hostlist(expr)
