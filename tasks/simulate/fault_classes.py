"""FINJ fault classes for the simulated cluster (Netti et al.: leak, memeater, ddot, dial, cpufreq, pagefail,
ioerr, copy), with signatures measured on a real campaign on this kind of machine.

``fault_signatures.json`` (next to this module) holds, per fault class, the ratio of each catalogue metric
during the fault to the same campaign's healthy seconds, and the memory slope; it is written by
``nodewatch finj signatures`` from a campaign staged through the product's ingest (provenance inside).

Each per-node anomaly of the simulator (``anomalies.py``) whose type has FINJ counterparts gets a
``fault_class`` label: the candidate classes of its type (:data:`CANDIDATES`, the classes whose measured
signature moves the metrics the simulator's type moves) are drawn with equal probability from their own
random stream (:func:`class_rng`: its own SeedSequence spawn key, outside ``rng.STREAMS``), so adding the
label changes no other simulated value.
Types without a FINJ counterpart (thermal, network, rack misconfiguration) get an empty label.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

CANDIDATES: dict[str, tuple[str, ...]] = {
    "memory_leak": ("leak", "memeater", "pagefail"),
    "cpu_hog": ("ddot", "dial", "cpufreq"),
    "disk_slowdown": ("copy", "ioerr"),
}
"""Simulator anomaly type -> FINJ fault classes that show the same kind of change (memory, CPU, disk)."""

SIGNATURES_FILE = Path(__file__).with_name("fault_signatures.json")
_STREAM = 1019
"""SeedSequence spawn key of the fault-class stream (not one of ``rng.STREAMS``: those streams stay unchanged)."""


def class_rng(seed: int, node: int) -> np.random.Generator:
    """The fault-class random stream of one node."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed), spawn_key=(_STREAM, int(node)))))


@lru_cache(maxsize=1)
def signatures() -> dict[str, Any]:
    """The measured signatures (empty ``classes`` if the file is absent)."""
    try:
        return json.loads(SIGNATURES_FILE.read_text())
    except (OSError, ValueError):
        return {"classes": {}}


def signature(fault: str) -> dict[str, Any] | None:
    """Signature of one fault class (``ratio_to_healthy`` per metric, memory slope), ``None`` if not measured."""
    return signatures().get("classes", {}).get(fault)


def assign(types: list[str], g: np.random.Generator) -> list[str]:
    """A fault class for each anomaly type (empty string when the type has no FINJ counterpart)."""
    out = []
    for t in types:
        cands = CANDIDATES.get(t)
        out.append(str(cands[int(g.integers(len(cands)))]) if cands else "")
    return out
