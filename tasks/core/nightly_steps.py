"""Extra nightly steps contributed by capability folders (syslog, predict, finj, alerts ...).

A capability adds a step to the nightly flow without editing ``flows/nightly.py``: it defines a module
``nodewatch.tasks.<capability>.nightly_step`` with a module-level ``STEP = NightlyStep(...)``. The nightly
flow (:func:`nodewatch.flows.nightly.nightly`) calls :func:`discover` once, runs the enabled steps after the
``verdicts`` step, in ascending :attr:`NightlyStep.order` (ties by name), each inside
``rec.step(name)``, and puts the returned dict in the report's step table. A step that raises never
stops the night: its error is one line in the manifest and a ``FAILED`` row in the report (like the
states and checkpoint steps). A step that needs data the night does not have returns
``{"status": "skipped", "details": "<why>"}``.

Steps see what earlier steps returned (``ctx.steps``) and what earlier extra steps left for later
ones (``ctx.shared``, e.g. the fault class of a flagged node for the alert push at ``order`` 90).

Order bands: 10-49 analyses that read the day's staged data / cubes (syslog 10, predict 20, finj 30),
50-79 fusion into verdicts, 80-99 publishing (alerts push, metrics export).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.core.settings import Settings
    from nodewatch.tasks.core.store import Store


@dataclass
class StepContext:
    """What an extra nightly step gets: the store, the night, its recorder and the earlier results."""

    store: Store
    day: date
    settings: Settings
    rec: RunRecorder
    run_id: str
    truth: str | None = None
    """Simulator output with ground truth (demo/benchmarks), else ``None``."""
    steps: dict[str, Any] = field(default_factory=dict)
    """Rows of the report's step table so far (``{"status", "details"}`` per step)."""
    shared: dict[str, Any] = field(default_factory=dict)
    """Free-form results that earlier extra steps leave for later ones (key = the step's name)."""


@dataclass(frozen=True)
class NightlyStep:
    """One extra step of the nightly flow."""

    name: str
    """Step name in the manifest and the report (``[a-z_]+``)."""
    run: Callable[[StepContext], dict[str, Any]]
    """Does the work; returns at least ``{"status": str, "details": str}``; other keys go to the manifest outputs."""
    order: int = 50
    enabled: Callable[[Settings], bool] = lambda s: True
    """Whether the step runs with these settings (e.g. an opt-in publishing step)."""


def discover() -> list[NightlyStep]:
    """Every ``nodewatch.tasks.<capability>.nightly_step.STEP``, sorted by (order, name)."""
    import nodewatch.tasks as tasks_pkg

    found: list[NightlyStep] = []
    for mod in pkgutil.iter_modules(tasks_pkg.__path__):
        if not mod.ispkg or mod.name.startswith("_"):
            continue
        name = f"nodewatch.tasks.{mod.name}.nightly_step"
        if importlib.util.find_spec(name) is None:
            continue
        step = getattr(importlib.import_module(name), "STEP", None)
        if isinstance(step, NightlyStep):
            found.append(step)
    return sorted(found, key=lambda s: (s.order, s.name))
