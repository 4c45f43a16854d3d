"""Re-staging a damaged staged part from ``raw/`` (``nodewatch store repair``).

A committed part that cannot be read (truncated, flipped bytes) is first un-published by a commit
that removes it (label ``repair``); then the input files of the run that wrote it (its manifest's
inputs, landed content-addressed under ``raw/<source>/``) have their ``ingested`` markers removed and
are ingested again under their original names by a new run. That run dedupes against the committed
parts: the rows of the part's days that are still committed count as duplicates, the lost ones are
staged again.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodewatch.tasks.core.commit import StagedCommit, run_of_file
from nodewatch.tasks.core.runs import ManifestError, load_manifest, new_run_id
from nodewatch.tasks.core.store import Store


@dataclass
class RepairPlan:
    """One damaged part and how to re-stage it."""

    key: str
    run_id: str
    source: str
    inputs: list[tuple[str, str, str]] = field(default_factory=list)
    """(sha256, original file name, format) of the run's ingested input files."""


def plan_repair(store: Store, keys: list[str]) -> tuple[list[RepairPlan], list[str]]:
    """Plans for the damaged part ``keys``, and a one-line reason for each part that cannot be re-staged."""
    plans, problems = [], []
    for key in keys:
        run = run_of_file(key.rsplit("/", 1)[1])
        try:
            m = load_manifest(store, run or "")
        except (ManifestError, FileNotFoundError, ValueError) as e:
            problems.append(f"{key}: the run that wrote it has no readable manifest ({e})")
            continue
        source = m.parameters.get("source")
        if not source or not m.flow.startswith(("ingest", "store_repair", "nightly")):
            problems.append(f"{key}: written by a {m.flow} run, not an ingest (rebuild it with that command)")
            continue
        ins = [(i.sha256, Path(i.path).name, i.format or "auto") for i in m.inputs if i.status == "ingested"]
        if not ins:
            problems.append(f"{key}: run {run} records no ingested input")
            continue
        plans.append(RepairPlan(key, str(run), str(source), ins))
    return plans, problems


def _raw_key(store: Store, source: str, sha: str) -> str | None:
    base = store.path("raw", source)
    if not store.fs.exists(base):
        return None
    for p in store.fs.ls(base, detail=False):
        name = p.rsplit("/", 1)[1]
        if name.startswith(sha) and not name.endswith(".ingested.json"):
            return p
    return None


def run_repair(store: Store, plan: RepairPlan, ingest: Callable[[str, list[str], str], dict[str, Any]]) -> dict[str, Any]:
    """Un-publish the part, forget its inputs' markers and ingest them again with ``ingest(source, paths, fmt)``."""
    c = StagedCommit(store, new_run_id("store_repair", {"part": plan.key}), "repair", fault="repair")
    c.remove(plan.key)
    c.commit()
    c.drop_removed()
    tmp = Path(tempfile.mkdtemp(prefix="nodewatch-repair-"))
    try:
        by_fmt: dict[str, list[str]] = {}
        for sha, name, fmt in plan.inputs:
            raw = _raw_key(store, plan.source, sha)
            if raw is None:
                continue
            d = tmp / sha[:16]
            d.mkdir()
            store.fs.get_file(raw, str(d / name))
            marker = store.path(store.ingested_marker(plan.source, sha))
            if store.fs.exists(marker):
                store.fs.rm(marker)
            by_fmt.setdefault(fmt, []).append(str(d / name))
        last: dict[str, Any] = {}
        for fmt, paths in by_fmt.items():
            last = ingest(plan.source, paths, fmt)
        return last
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
