"""Small Prefect helpers shared by the flows."""

from __future__ import annotations

import re


def artifact_key(*parts: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes only)."""
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")[:100]
