"""Discovery of ingest sources: every ``tasks/ingest/*.py`` module exposing ``SOURCES``.

A module that fails to import does not take the others down: its error is kept in
:func:`discovery_errors` (the CLI prints it, tests assert there is none).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path

from nodewatch.tasks.ingest.base import SourceSpec

_INFRA = {"base", "registry", "pipeline", "ingestor", "landing", "validation", "spool", "dedupe", "staging", "inputs", "run"}
_ERRORS: dict[str, str] = {}


@functools.cache
def sources() -> dict[str, SourceSpec]:
    """All known sources by name (sorted)."""
    found: dict[str, SourceSpec] = {}
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name.startswith("_") or mod.name in _INFRA:
            continue
        try:
            m = importlib.import_module(f"nodewatch.tasks.ingest.{mod.name}")
        except Exception as e:  # noqa: BLE001 - reported, not swallowed
            _ERRORS[mod.name] = f"{type(e).__name__}: {e}"
            continue
        for spec in getattr(m, "SOURCES", []):
            if spec.name in found:
                raise RuntimeError(f"source {spec.name!r} defined twice (tasks/ingest/{mod.name}.py)")
            found[spec.name] = spec
    return dict(sorted(found.items()))


def discovery_errors() -> dict[str, str]:
    """Modules under tasks/ingest that failed to import, with the error."""
    sources()
    return dict(_ERRORS)
