"""Per-node event bundles: the schedule restricted to one node, as the renderers consume it.

Shared by :mod:`.schedule` (which builds them) and :mod:`.telemetry` / :mod:`.syslog` (which render
them), so neither of those imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nodewatch.tasks.simulate.precursors import PrecursorShape

JOB_LEVELS = ("util", "mem", "net", "ib", "disk_r", "disk_w", "lustre")
"""Per-job utilisation levels carried by each job (columns of ``Jobs.table``)."""


@dataclass
class NodeEvents:
    """The schedule restricted to one node (small arrays)."""

    job_start: np.ndarray
    job_end: np.ndarray
    job_levels: np.ndarray  # (J, len(JOB_LEVELS))
    job_ids: np.ndarray
    anomalies: list[tuple[float, float, str, float]]
    precursors: list[tuple[float, float, str]]
    down: list[tuple[float, float]]  # crash/shutdown .. up (no telemetry)
    boots: np.ndarray  # t_up times (counter resets)
    outages: list[tuple[float, float]]
    precursor_shape: PrecursorShape = PrecursorShape()  # how precursors show in telemetry (SimConfig knobs)
    syslog_precursors: list[tuple[float, float, str]] | None = None  # syslog bursts; None = ``precursors``
