"""Run ids, code version and the run recorder that writes manifests.

Run ids sort by time: ``YYYYMMDDTHHMMSS.ffffffZ-<6 hex>`` (UTC start time to the microsecond +
short hash of flow, parameters and a nonce), so "latest" is well defined even for runs started
within the same second. A :class:`RunRecorder` accumulates inputs, counts, outputs and step
timings, and writes ``runs/<run_id>.json`` atomically when the run ends.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodewatch.schemas.manifest import InputRecord, RowCounts, RunManifest
from nodewatch.tasks.core.store import Store

_REPO_ROOT = Path(__file__).resolve().parent.parent


def new_run_id(flow: str, parameters: dict[str, Any] | None = None, now: datetime | None = None) -> str:
    """Sortable run id: UTC time (µs) + 6 hex chars of a hash of flow, parameters and a nonce."""
    now = now or datetime.now(UTC)
    payload = json.dumps({"flow": flow, "p": parameters or {}, "n": uuid.uuid4().hex}, sort_keys=True, default=str)
    return now.strftime("%Y%m%dT%H%M%S.%f") + "Z-" + hashlib.sha256(payload.encode()).hexdigest()[:6]


@functools.cache
def code_version() -> str:
    """``<version>+g<commit>[.dirty]`` from git when available, else a hash of the package sources."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        base = version("nodewatch")
    except PackageNotFoundError:
        base = "0.0.0"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=10", "HEAD"], cwd=_REPO_ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        if commit:
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no", "--", "flows", "tasks", "schemas", "models"],
                cwd=_REPO_ROOT, capture_output=True, text=True, timeout=5,
            ).stdout.strip()
            return f"{base}+g{commit}" + (".dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    h = hashlib.sha256()
    for pkg in ("flows", "tasks", "schemas", "models"):
        for p in sorted((_REPO_ROOT / pkg).rglob("*.py")):
            h.update(p.read_bytes())
    return f"{base}+src{h.hexdigest()[:10]}"


class RunRecorder:
    """Collects what a run did and writes its manifest (also on failure)."""

    def __init__(self, store: Store, flow: str, parameters: dict[str, Any], run_id: str | None = None) -> None:
        self.store = store
        self.manifest = RunManifest(
            run_id=run_id or new_run_id(flow, parameters),
            flow=flow,
            parameters=parameters,
            code_version=code_version(),
        )

    @property
    def run_id(self) -> str:
        """The run id."""
        return self.manifest.run_id

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time a step; the elapsed seconds are added to ``timings[name]``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.manifest.timings[name] = self.manifest.timings.get(name, 0.0) + time.perf_counter() - t0

    def add_input(self, record: InputRecord) -> None:
        """Record one input file."""
        self.manifest.inputs.append(record)

    def add_counts(self, table: str, counts: RowCounts) -> None:
        """Accumulate row counts of ``table``."""
        self.manifest.add_counts(table, counts)

    def add_output(self, name: str, value: Any) -> None:
        """Record an output (path, URL, summary)."""
        self.manifest.outputs[name] = value

    def error(self, message: str) -> None:
        """Record a non-fatal error (the run becomes ``partial``)."""
        self.manifest.errors.append(message)

    def write(self) -> str:
        """Write the manifest as it is now (status ``running`` until :meth:`finish`)."""
        return self.store.write_json(self.manifest.model_dump(mode="json"), "runs", f"{self.run_id}.json")

    def finish(self, status: str | None = None) -> RunManifest:
        """Close the run: set status and end time, check the row invariant, write the manifest."""
        m = self.manifest
        m.finished = datetime.now(UTC)
        unbalanced = [t for t, c in m.counts.items() if not c.balanced]
        for t in unbalanced:
            m.errors.append(f"row counts of {t} do not add up: {m.counts[t]}")
        m.status = status or ("partial" if m.errors else "completed")  # type: ignore[assignment]
        self.write()
        return m


def load_manifest(store: Store, run_id: str) -> RunManifest:
    """Read ``runs/<run_id>.json``."""
    from nodewatch.schemas.names import check_path_token

    return RunManifest.model_validate(store.read_json("runs", f"{check_path_token(run_id, 'run id')}.json"))
