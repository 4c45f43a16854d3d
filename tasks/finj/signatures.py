"""Fault-class signatures for the simulator, measured on a real campaign's staged telemetry.

For every fault class and every catalogue metric of the campaign: the median of the metric over the
seconds the fault ran, divided by the median over the healthy seconds of the same campaign block (the
application mix differs per block, Table 1), and the median per-second slope (for leaks). Written to
``tasks/simulate/fault_signatures.json`` by ``nodewatch finj signatures`` and read by
``tasks/simulate/fault_classes.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nodewatch.tasks.finj.catalog import FAULTS
from nodewatch.tasks.finj.dataset import CLASSES, Raw, per_second_state

METRICS = (
    "cpu0_user",
    "cpu0_sys",
    "cpu0_iowait",
    "cpu0_idle",
    "load1",
    "procs_running",
    "procs_blocked",
    "mem_used",
    "mem_free",
    "mem_cached",
    "ctx_switches_rate",
    "interrupts_rate",
    "disk_read_bytes_rate",
    "disk_write_bytes_rate",
    "disk_util",
)


def measure(raw: Raw, campaign: str = "") -> dict[str, Any]:
    """Signatures of every fault class present in ``raw`` (staged telemetry with the campaign's events)."""
    labels, _, _ = per_second_state(raw)
    col = {c: i for i, c in enumerate(raw.columns)}
    # a block = a stretch of the campaign between two healthy gaps longer than 20 min is not needed: use the
    # healthy seconds within +-10 min of each fault instance as its reference
    out: dict[str, Any] = {"campaign": campaign, "seconds": int(len(labels)), "classes": {}}
    change = np.flatnonzero(np.diff(labels) != 0) + 1
    bounds = np.concatenate([[0], change, [len(labels)]])
    for f in sorted(FAULTS):
        code = CLASSES.index(f)
        ratios: dict[str, list[float]] = {m: [] for m in METRICS if m in col}
        slopes: list[float] = []
        n_inst = 0
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if labels[a] != code or b - a < 20:
                continue
            n_inst += 1
            lo, hi = max(0, a - 600), min(len(labels), b + 600)
            ref = np.flatnonzero(labels[lo:hi] == 0) + lo
            if ref.size < 30:
                continue
            for m in ratios:
                v = raw.values[a:b, col[m]]
                r = raw.values[ref, col[m]]
                base = float(np.median(r))
                if abs(base) > 1e-9:
                    ratios[m].append(float(np.median(v)) / base)
            if "mem_used" in col:
                v = raw.values[a:b, col["mem_used"]]
                slopes.append(float(np.polyfit(np.arange(b - a), v, 1)[0]))
        if n_inst:
            out["classes"][f] = {
                "instances": n_inst,
                "ratio_to_healthy": {m: round(float(np.median(v)), 4) for m, v in ratios.items() if v},
                "mem_used_slope_bytes_per_s": round(float(np.median(slopes)), 1) if slopes else None,
            }
    return out
