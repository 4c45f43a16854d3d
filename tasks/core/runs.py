"""Run ids, code version and the run recorder that writes manifests.

Run ids sort by time: ``YYYYMMDDTHHMMSS.ffffffZ-<6 hex>`` (UTC start time to the microsecond +
short hash of flow, parameters and a nonce), so "latest" is well defined even for runs started
within the same second. A :class:`RunRecorder` accumulates inputs, counts, outputs and step
timings, and writes ``runs/<run_id>.json`` atomically when the run ends.

Dead runs: the manifest records its owner process (host, pid, process start time) while the run is
``running``. A ``running`` manifest whose owner (on this host) is gone reads as ``abandoned``
(:func:`effective_status`); the first :meth:`RunRecorder.write` of a run marks such manifests of the
same flow ``abandoned`` in the store (:func:`mark_abandoned`) and removes scratch directories left by
dead processes (:func:`nodewatch.tasks.core.owner.clean_dead_tempdirs`). A manifest that cannot be
read raises :class:`ManifestError` (one line).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from nodewatch.schemas.manifest import InputRecord, RowCounts, RunManifest
from nodewatch.tasks.core.owner import Owner, clean_dead_tempdirs, current_owner, owner_alive
from nodewatch.tasks.core.store import Store

_REPO_ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("nodewatch.runs")

RECENT_RUNS = 200
"""How many of the latest manifests a starting run checks for abandoned runs of its flow."""


class ManifestError(ValueError):
    """A run manifest that cannot be read (truncated, not JSON, not a manifest): one-line message."""


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
            owner=current_owner().to_dict(),
        )
        self._started = False
        self._after: list[Callable[[], None]] = []

    def after_finish(self, publish: Callable[[], None]) -> None:
        """Run ``publish`` once the manifest says ``completed`` or ``partial`` (e.g. move a ``CURRENT`` pointer).

        ``CURRENT`` pointers move only after their run finished (docs/store.md): a step inside a longer run
        (the nightly's syslog templating) hands its pointer move here, so a run killed after that step
        leaves the previous pointer. Not called for a failed run.
        """
        self._after.append(publish)

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
        """Write the manifest as it is now (status ``running`` until :meth:`finish`).

        The first call also cleans up after dead runs (see module doc); that never fails the run.
        """
        if not self._started:
            self._started = True
            self._clean_up_dead()
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
        if m.status in ("completed", "partial"):
            for publish in self._after:
                publish()
        self._after.clear()
        return m


    def _clean_up_dead(self) -> None:
        try:
            clean_dead_tempdirs()
        except OSError as e:
            log.warning("could not clean scratch directories of dead runs: %s", e)
        try:
            mark_abandoned(self.store, self.manifest.flow, by_run=self.run_id)
        except Exception as e:  # noqa: BLE001 - housekeeping must not fail the run
            log.warning("could not mark abandoned runs of %s: %s", self.manifest.flow, e)


def _reason(e: Exception) -> str:
    if isinstance(e, ValidationError):
        first = e.errors()[0]
        return f"not a run manifest ({'.'.join(map(str, first['loc'])) or 'manifest'}: {first['msg']})"
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")


def load_manifest(store: Store, run_id: str) -> RunManifest:
    """Read ``runs/<run_id>.json`` (status as written; see :func:`effective_status`).

    Raises:
        ManifestError: the file is truncated, not JSON or not a manifest.
        FileNotFoundError: there is no such manifest.
    """
    from nodewatch.schemas.names import check_path_token

    key = f"{check_path_token(run_id, 'run id')}.json"
    try:
        return RunManifest.model_validate(store.read_json("runs", key))
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError and ValidationError are ValueErrors
        raise ManifestError(f"unreadable manifest runs/{key}: {_reason(e)}") from None


def run_owner(m: RunManifest) -> Owner | None:
    """The process recorded as running ``m`` (``None`` for manifests written before owners were recorded)."""
    try:
        return Owner.from_dict(m.owner) if m.owner else None
    except ValueError:
        return None


def effective_status(m: RunManifest) -> str:
    """``m.status``, except ``abandoned`` for a ``running`` run whose owner process (this host) is gone.

    Runs of another host, and manifests without an owner, keep ``running`` (liveness unknown here).
    """
    if m.status != "running":
        return m.status
    owner = run_owner(m)
    return "abandoned" if owner is not None and owner_alive(owner) is False else "running"


def mark_abandoned(store: Store, flow: str | None = None, by_run: str | None = None,
                   recent: int = RECENT_RUNS) -> list[str]:
    """Rewrite the ``running`` manifests (of ``flow``, among the ``recent`` latest) whose owner is dead as
    ``abandoned``; returns their run ids. Unreadable manifests are skipped."""
    done: list[str] = []
    for rid in store.list_runs()[-recent:]:
        if rid == by_run:
            continue
        try:
            m = load_manifest(store, rid)
        except (ManifestError, FileNotFoundError):
            continue
        if (flow is not None and m.flow != flow) or effective_status(m) != "abandoned":
            continue
        owner = run_owner(m)
        m.status = "abandoned"
        m.errors.append(f"abandoned: its process ({owner.describe() if owner else 'unknown'}) is gone")
        m.notes["abandoned"] = {"detected_by_run": by_run, "at": datetime.now(UTC).isoformat(timespec="seconds")}
        store.write_json(m.model_dump(mode="json"), "runs", f"{rid}.json")
        log.warning("run %s (%s) was abandoned: %s is gone", rid, m.flow, owner.describe() if owner else "its process")
        done.append(rid)
    return done
