"""Discovery of ingest sources: every ``tasks/ingest/*.py`` module exposing ``SOURCES``."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path

from tasks.ingest.base import SourceSpec


@functools.cache
def sources() -> dict[str, SourceSpec]:
    """All known sources by name (sorted)."""
    found: dict[str, SourceSpec] = {}
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name.startswith("_") or mod.name in ("base", "registry", "pipeline", "inputs"):
            continue
        m = importlib.import_module(f"tasks.ingest.{mod.name}")
        for spec in getattr(m, "SOURCES", []):
            if spec.name in found:
                raise RuntimeError(f"source {spec.name!r} defined twice (tasks/ingest/{mod.name}.py)")
            found[spec.name] = spec
    return dict(sorted(found.items()))
