"""The run manifest: what every flow run writes to ``runs/<run_id>.json``.

A manifest is enough to reproduce a run: flow name, parameters, code version, the sha256 of
every input, row counts per table, outputs and step timings.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field


class RowCounts(BaseModel):
    """Row accounting for one table in one run. Invariant: ``rows_in == staged + quarantined + duplicates``."""

    rows_in: int = 0
    staged: int = 0
    quarantined: int = 0
    duplicates: int = 0

    @property
    def balanced(self) -> bool:
        """True if the accounting invariant holds."""
        return self.rows_in == self.staged + self.quarantined + self.duplicates

    def add(self, other: RowCounts) -> RowCounts:
        """Element-wise sum."""
        return RowCounts(
            rows_in=self.rows_in + other.rows_in,
            staged=self.staged + other.staged,
            quarantined=self.quarantined + other.quarantined,
            duplicates=self.duplicates + other.duplicates,
        )


class InputRecord(BaseModel):
    """One input file of a run."""

    path: str
    sha256: str
    bytes: int
    status: Literal["ingested", "skipped-duplicate-file", "quarantined-file", "error"] = "ingested"
    format: str | None = None
    message: str | None = None
    counts: RowCounts = Field(default_factory=RowCounts)


class RunManifest(BaseModel):
    """Everything about one flow run; written atomically to ``runs/<run_id>.json``."""

    run_id: str
    flow: str
    status: Literal["running", "completed", "failed", "partial", "abandoned"] = "running"
    """``abandoned``: the run's process died while ``running`` (set by a later run, or shown by readers)."""
    parameters: dict[str, Any] = Field(default_factory=dict)
    code_version: str = ""
    started: datetime = Field(default_factory=lambda: datetime.now(UTC))
    finished: datetime | None = None
    inputs: list[InputRecord] = Field(default_factory=list)
    counts: dict[str, RowCounts] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)
    notes: dict[str, Any] = Field(default_factory=dict)
    owner: dict[str, Any] | None = None
    """The process running it: host, pid, start_ticks/boot_id (process start), started (see tasks/core/owner.py)."""

    def add_counts(self, table: str, counts: RowCounts) -> None:
        """Accumulate row counts for ``table``."""
        self.counts[table] = self.counts.get(table, RowCounts()).add(counts)
