"""Flow names of run manifests (the naming scheme of :mod:`nodewatch.flows.run_names`), usable by the tasks.

Flows are named in ``snake_case``; the Prefect flow name is the manifest's ``flow`` field; an ingest is the flow
``ingest_<source>``. Manifests written before the scheme said ``ingest`` with ``parameters.source``.
"""

from __future__ import annotations

import re
from typing import Any

FLOW_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
"""A flow name of the scheme (snake_case)."""


def ingest_flow_name(source: str) -> str:
    """The flow name of an ingest of ``source``: ``ingest_<source>`` (``ValueError`` for a name outside the scheme)."""
    name = f"ingest_{source}"
    if not (FLOW_NAME.match(source) and FLOW_NAME.match(name)):
        raise ValueError(f"not a source name: {source!r} (expected lower-case letters, digits, _)")
    return name


def canonical_flow(flow: str, parameters: dict[str, Any] | None = None) -> str:
    """The flow name of a manifest in the current scheme: an old generic ``ingest`` manifest reads as
    ``ingest_<source>`` from its ``source`` parameter; every other name is returned as it is."""
    source = (parameters or {}).get("source")
    if flow == "ingest" and isinstance(source, str):
        try:
            return ingest_flow_name(source)
        except ValueError:
            return flow
    return flow


def flow_matches(query: str, flow: str, parameters: dict[str, Any] | None = None) -> bool:
    """Whether a manifest of ``flow`` is selected by ``runs list --flow query``: the same name in the scheme
    (old names too, see :func:`canonical_flow`), and ``ingest`` selects every ``ingest_<source>``."""
    name = canonical_flow(flow, parameters)
    q = canonical_flow(query)
    return name == q or (q == "ingest" and name.startswith("ingest_"))
