"""The table math of the checkpoint tables: checkpoint costs, the default shape grid, and
:func:`compute_table` (Frank, ch. 3).

For every shape x checkpoint cost x failure model, :func:`compute_table` evaluates the intervals of
Young, Daly (first order and higher order) and the aware interval (Algorithm 1 over eq. 3.8), their
expected cost and makespan, and the savings of aware vs Daly and Young; the run that writes the table
is :func:`nodewatch.tasks.checkpoint.tables.run_checkpoint_tables`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.models.checkpoint.intervals import (
    MIN_CKPT_COST_H,
    aware_interval,
    daly_first_order_interval,
    daly_interval,
    expected_cost,
    expected_makespan,
    failure_cdf,
    young_interval,
)
from nodewatch.tasks.checkpoint.shapes import SHAPE_COLUMNS

METHODS: tuple[str, ...] = ("young", "daly_first_order", "daly", "aware")
DEFAULT_NODES: tuple[int, ...] = tuple(2**i for i in range(14))  # 1 .. 8192
DEFAULT_RUNTIMES_H: tuple[float, ...] = (1, 2, 4, 8, 12, 24, 48, 72)
DEFAULT_CKPT_COSTS_H: tuple[float, ...] = (0.1, 0.25, 0.5)


@dataclass(frozen=True)
class CkptCost:
    """A checkpoint cost: fixed ``hours``, or derived as ``nodes * size_gib / bandwidth_gib_s``.

    The derived form models a checkpoint of ``size_gib`` per node written to a shared file system of
    aggregate bandwidth ``bandwidth_gib_s`` (so it grows with the job's node count).
    """

    label: str
    hours: float | None = None
    size_gib: float | None = None
    bandwidth_gib_s: float | None = None

    def __post_init__(self) -> None:
        if self.hours is None:
            if not (self.size_gib and self.bandwidth_gib_s and self.size_gib > 0 and self.bandwidth_gib_s > 0):
                raise ValueError("checkpoint cost needs hours > 0, or size per node and bandwidth > 0")
        elif not (math.isfinite(self.hours) and self.hours > 0):
            raise ValueError(f"checkpoint cost must be > 0 hours, got {self.hours!r}")

    @classmethod
    def fixed(cls, hours: float) -> CkptCost:
        """A fixed cost, labelled like ``0.25h``; under one second (:data:`MIN_CKPT_COST_H`) is a one-line error.

        (A cost derived from I/O may still fall under one second for small jobs: those shapes are
        not checkpointable, see :func:`compute_table`.)
        """
        if not (np.isfinite(hours) and hours >= MIN_CKPT_COST_H):
            raise ValueError(f"checkpoint cost {hours:.3g} h is outside the supported range (at least one second)")
        return cls(label=f"{hours:g}h", hours=hours)

    @classmethod
    def from_io(cls, size_gib: float, bandwidth_gib_s: float) -> CkptCost:
        """A cost derived from per-node checkpoint size and file-system bandwidth."""
        return cls(
            label=f"{size_gib:g}GiB-per-node-at-{bandwidth_gib_s:g}GiBps", size_gib=size_gib, bandwidth_gib_s=bandwidth_gib_s
        )

    def hours_for(self, nodes: np.ndarray) -> np.ndarray:
        """Checkpoint cost in hours for jobs on ``nodes`` nodes."""
        n = np.asarray(nodes, float)
        if self.hours is not None:
            return np.full(n.shape, self.hours)
        return n * float(self.size_gib) / float(self.bandwidth_gib_s) / 3600.0


def default_shape_grid(nodes: Sequence[int] = DEFAULT_NODES, runtimes_h: Sequence[float] = DEFAULT_RUNTIMES_H) -> pd.DataFrame:
    """The default grid of shapes (nodes x runtime) in the :data:`~.shapes.SHAPE_COLUMNS` layout (no jobs)."""
    n, r = np.meshgrid(np.asarray(nodes, np.int64), np.asarray(runtimes_h, float), indexing="ij")
    n, r = n.ravel(), r.ravel()
    return pd.DataFrame(
        {
            "nodes_lo": n,
            "nodes_hi": n,
            "runtime_lo_h": r,
            "runtime_hi_h": r,
            "nodes_rep": n,
            "runtime_rep_h": r,
            "jobs": np.zeros(n.size, np.int64),
            "node_hours": np.zeros(n.size),
            "share_node_hours": np.zeros(n.size),
        }
    )[list(SHAPE_COLUMNS)]


def compute_table(
    shapes: pd.DataFrame,
    ckpt_costs: Sequence[CkptCost],
    models: Sequence[FailureModel],
    shape_source: Sequence[str] | None = None,
    restart_h: float = 0.0,
) -> xr.Dataset:
    """Intervals, expected costs/makespans and savings for every shape x ckpt cost x failure model x method.

    The runtime of a shape is eq. 3.8's ``t``: wall clock including the checkpoints the job writes; the
    makespan is :func:`nodewatch.models.checkpoint.intervals.expected_makespan` (``t`` + expected lost work + restart).
    Shapes whose checkpoint cost is not shorter than their runtime (or whose runtime is under one
    minute, or checkpoint cost under one second) are not checkpointable: their values are NaN (Frank,
    sec. 3.4.3 uses only jobs with ``t_c + tau < t``).
    """
    missing = [c for c in SHAPE_COLUMNS if c not in shapes.columns]
    if missing:
        raise ValueError(f"shapes lack columns {missing}")
    if not ckpt_costs or not models:
        raise ValueError("need at least one checkpoint cost and one failure model")
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"failure model names must be unique, got {names}")
    s, c, f = len(shapes), len(ckpt_costs), len(models)
    nodes = shapes["nodes_rep"].to_numpy(float)
    runtime = shapes["runtime_rep_h"].to_numpy(float)
    jobs = shapes["jobs"].to_numpy(float)
    tc = np.stack([k.hours_for(nodes) for k in ckpt_costs], axis=1)  # (S, C)
    mtbf = np.stack([m.job_mtbf(nodes) for m in models], axis=1)  # (S, F)
    shape_w = np.array([m.shape for m in models])
    T3 = np.broadcast_to(runtime[:, None, None], (s, c, f))
    tc3 = np.broadcast_to(tc[:, :, None], (s, c, f))
    m3 = np.broadcast_to(mtbf[:, None, :], (s, c, f))
    w3 = np.broadcast_to(shape_w[None, None, :], (s, c, f))
    ok = (tc3 < T3) & (T3 >= 1.0 / 60.0) & (tc3 >= MIN_CKPT_COST_H)
    interval = np.full((s, c, f, len(METHODS)), np.nan)
    cost = np.full_like(interval, np.nan)
    makespan = np.full_like(interval, np.nan)
    never = np.zeros((s, c, f), bool)
    if ok.any():
        t_, tc_, m_, w_ = T3[ok], tc3[ok], m3[ok], w3[ok]
        classic = np.stack([young_interval(m_, tc_), daly_first_order_interval(m_, tc_), daly_interval(m_, tc_)], axis=1)
        ccost = expected_cost(t_[:, None], classic, tc_[:, None], m_[:, None], w_[:, None], restart_h)
        aw = aware_interval(t_, tc_, m_, w_, restart_h=restart_h, extra_tau_h=classic)
        interval[ok] = np.column_stack([classic, aw.tau_h])
        cost[ok] = np.column_stack([ccost, aw.cost_h])
        never[ok] = aw.never
        makespan[ok] = expected_makespan(t_[:, None], interval[ok], tc_[:, None], m_[:, None], w_[:, None], restart_h)
    p_fail = failure_cdf(runtime[:, None], mtbf, shape_w[None, :])  # (S, F)
    i_y, i_d, i_a = METHODS.index("young"), METHODS.index("daly"), METHODS.index("aware")
    with np.errstate(invalid="ignore", divide="ignore"):
        save_d = cost[..., i_d] - cost[..., i_a]
        save_y = cost[..., i_y] - cost[..., i_a]
        pct_d = np.where(cost[..., i_d] > 0, 100.0 * save_d / cost[..., i_d], 0.0)
        pct_y = np.where(cost[..., i_y] > 0, 100.0 * save_y / cost[..., i_y], 0.0)
    pct_d[~ok], pct_y[~ok] = np.nan, np.nan
    nh_d = nodes[:, None, None] * save_d
    nh_y = nodes[:, None, None] * save_y
    dims3 = ("shape", "ckpt_cost", "failure_model")
    dims4 = (*dims3, "method")
    src = np.asarray(list(shape_source) if shape_source is not None else ["jobs"] * s, dtype=object)

    def v(data: np.ndarray, dims: tuple[str, ...], units: str, long_name: str) -> xr.Variable:
        return xr.Variable(dims, data, attrs={"units": units, "long_name": long_name})

    ds = xr.Dataset(
        {
            "interval_h": v(interval, dims4, "h", "compute time between checkpoints tau (inf: never checkpoint)"),
            "expected_cost_h": v(cost, dims4, "h", "expected checkpoint + lost-work cost E_C (Frank eq. 3.8)"),
            "expected_makespan_h": v(
                makespan, dims4, "h", "runtime + expected lost work + restart (runtime includes the checkpoints)"
            ),
            "never_checkpoint": v(never, dims3, "1", "aware method recommends not checkpointing"),
            "checkpointable": v(ok, dims3, "1", "1 s <= checkpoint cost < runtime and runtime >= 1 min"),
            "ckpt_cost_h": v(tc, ("shape", "ckpt_cost"), "h", "checkpoint cost t_c"),
            "job_mtbf_h": v(mtbf, ("shape", "failure_model"), "h", "job MTBF = node MTBF / nodes (Frank eq. 3.14)"),
            "p_fail": v(p_fail, ("shape", "failure_model"), "1", "probability the job fails before its end (eq. 3.13)"),
            "saving_vs_daly_pct": v(pct_d, dims3, "%", "E_C saving of aware vs Daly (higher order)"),
            "saving_vs_young_pct": v(pct_y, dims3, "%", "E_C saving of aware vs Young"),
            "saving_vs_daly_node_hours": v(nh_d, dims3, "node h", "node-hours saved per job vs Daly"),
            "saving_vs_young_node_hours": v(nh_y, dims3, "node h", "node-hours saved per job vs Young"),
            "saving_vs_daly_node_hours_weighted": v(
                nh_d * jobs[:, None, None], dims3, "node h", "node-hours saved vs Daly x jobs of the shape"
            ),
            "saving_vs_young_node_hours_weighted": v(
                nh_y * jobs[:, None, None], dims3, "node h", "node-hours saved vs Young x jobs of the shape"
            ),
        },
        coords={
            "shape": np.arange(s, dtype=np.int64),
            "ckpt_cost": np.array([k.label for k in ckpt_costs], dtype=object),
            "failure_model": np.array(names, dtype=object),
            "method": np.array(METHODS, dtype=object),
            "shape_source": ("shape", src),
            "nodes": ("shape", nodes.astype(np.int64)),
            "runtime_h": ("shape", runtime),
            "nodes_lo": ("shape", shapes["nodes_lo"].to_numpy(np.int64)),
            "nodes_hi": ("shape", shapes["nodes_hi"].to_numpy(np.int64)),
            "runtime_lo_h": ("shape", shapes["runtime_lo_h"].to_numpy(float)),
            "runtime_hi_h": ("shape", shapes["runtime_hi_h"].to_numpy(float)),
            "jobs": ("shape", shapes["jobs"].to_numpy(np.int64)),
            "node_hours": ("shape", shapes["node_hours"].to_numpy(float)),
            "mtbf_node_h": ("failure_model", np.array([m.mtbf_node_h for m in models])),
            "weibull_shape": ("failure_model", shape_w),
            "model_source": ("failure_model", np.array([m.source for m in models], dtype=object)),
        },
        attrs={
            "title": "Failure-aware checkpoint intervals (Frank, ch. 3)",
            "grid_step_h": 1.0 / 60.0,
            "restart_h": float(restart_h),
            "methods": "young: sqrt(2 M tc); daly_first_order: sqrt(2 M tc) + tc; daly: Daly 2006 higher order; "
            "aware: Algorithm 1 over eq. 3.8 (1-min grid + the classical intervals + never)",
        },
    )
    return ds
