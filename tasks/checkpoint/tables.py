"""Failure-aware checkpoint-interval tables for the job shapes users run (Frank, ch. 3).

For every job shape (from :func:`nodewatch.tasks.checkpoint.shapes.job_shapes` on the jobs table, plus a default grid of
1-8192 nodes x 1-72 h) x checkpoint cost x failure model, the table holds the interval of Young,
Daly (first order as quoted by Frank, and Daly's higher-order form) and the aware interval
(Algorithm 1 over eq. 3.8, with Young's and Daly's intervals added to its candidates), the expected
cost ``E_C`` (eq. 3.8) and expected makespan (runtime, which includes the checkpoints, + expected lost
work + restart) of each, and the saving of aware vs
Daly and vs Young in % of ``E_C`` and in node-hours (per job and weighted by the shape's job count).

A job on ``N`` nodes has the MTBF of eq. 3.14 (``MTBF_node / N``) and the failure model's Weibull
shape. Output: ``tables/checkpoint/<run_id>/{table.zarr, table.csv, table.md, plots/*.png}``; the
caller swaps ``tables/checkpoint/CURRENT`` after the run finished.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.models.checkpoint.intervals import (
    MIN_CKPT_COST_H,
    aware_interval,
    cost_grid,
    daly_first_order_interval,
    daly_interval,
    expected_cost,
    expected_makespan,
    failure_cdf,
    young_interval,
)
from nodewatch.tasks.checkpoint.shapes import SHAPE_COLUMNS

AREA = "tables/checkpoint"
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


# --------------------------------------------------------------------------- outputs

SAVING_COLUMNS = (
    "saving_vs_daly_pct",
    "saving_vs_young_pct",
    "saving_vs_daly_node_hours",
    "saving_vs_young_node_hours",
    "saving_vs_daly_node_hours_weighted",
    "saving_vs_young_node_hours_weighted",
)
"""Saving columns of the flat table: aware vs Daly / Young in %, node-hours per job and weighted by job count."""


def table_frame(ds: xr.Dataset) -> pd.DataFrame:
    """Long table: one row per shape x ckpt cost x failure model, one column per method value."""
    base = ds[
        [
            "ckpt_cost_h",
            "job_mtbf_h",
            "p_fail",
            "never_checkpoint",
            "checkpointable",
            *SAVING_COLUMNS,
        ]
    ]
    df = base.to_dataframe().reset_index()
    for var, prefix in (("interval_h", "interval"), ("expected_cost_h", "cost"), ("expected_makespan_h", "makespan")):
        wide = (
            ds[var]
            .to_dataframe()
            .reset_index()
            .pivot_table(index=["shape", "ckpt_cost", "failure_model"], columns="method", values=var, dropna=False)
        )
        wide.columns = [f"{prefix}_{m}_h" for m in wide.columns]
        df = df.merge(wide.reset_index(), on=["shape", "ckpt_cost", "failure_model"], how="left")
    keep = [
        "shape",
        "shape_source",
        "nodes_lo",
        "nodes_hi",
        "nodes",
        "runtime_lo_h",
        "runtime_hi_h",
        "runtime_h",
        "jobs",
        "node_hours",
        "ckpt_cost",
        "ckpt_cost_h",
        "failure_model",
        "mtbf_node_h",
        "weibull_shape",
        "job_mtbf_h",
        "p_fail",
        "checkpointable",
        "never_checkpoint",
    ]
    keep += [f"{p}_{m}_h" for p in ("interval", "cost", "makespan") for m in METHODS]
    keep += list(SAVING_COLUMNS)
    return df[keep].sort_values(["failure_model", "ckpt_cost", "shape"], kind="stable").reset_index(drop=True)


def _fmt_h(x: float) -> str:
    if not np.isfinite(x):
        return "never" if x == np.inf else "-"
    return f"{x:.2f}"


def summary_rows(ds: xr.Dataset) -> list[dict[str, Any]]:
    """Per (failure model, ckpt cost): checkpointable shapes, mean saving % and weighted node-hours saved."""
    out = []
    for fm in ds.failure_model.values:
        for ck in ds.ckpt_cost.values:
            sel = ds.sel(failure_model=fm, ckpt_cost=ck)
            ok = sel.checkpointable.values
            js = ok & (sel.shape_source.values == "jobs")
            w_d, w_y = sel.saving_vs_daly_node_hours_weighted.values, sel.saving_vs_young_node_hours_weighted.values
            out.append(
                {
                    "failure_model": str(fm),
                    "ckpt_cost": str(ck),
                    "checkpointable_shapes": int(ok.sum()),
                    "never_checkpoint_shapes": int(sel.never_checkpoint.values[ok].sum()),
                    "mean_saving_vs_daly_pct": round(float(np.nanmean(sel.saving_vs_daly_pct.values[ok])), 3)
                    if ok.any()
                    else None,
                    "mean_saving_vs_young_pct": round(float(np.nanmean(sel.saving_vs_young_pct.values[ok])), 3)
                    if ok.any()
                    else None,
                    "job_node_hours_saved_vs_daly": round(float(np.nansum(w_d[js])), 3),
                    "job_node_hours_saved_vs_young": round(float(np.nansum(w_y[js])), 3),
                }
            )
    return out


def markdown(ds: xr.Dataset, run_id: str, top: int = 15) -> str:
    """Human summary: models, totals, the default-grid interval table and the most-used job shapes."""
    lines = [
        f"# Checkpoint intervals — run `{run_id}`",
        "",
        "Intervals are compute hours between checkpoints (Frank ch. 3); cost = expected checkpoint + "
        "lost-work hours E_C (eq. 3.8); saving = aware vs Daly's higher-order interval.",
        "",
        "| failure model | node MTBF (h) | Weibull shape | source |",
        "|---|---|---|---|",
    ]
    for fm in ds.failure_model.values:
        r = ds.sel(failure_model=fm)
        lines.append(f"| {fm} | {float(r.mtbf_node_h):,.0f} | {float(r.weibull_shape):.3f} | {r.model_source.item()} |")
    lines += [
        "",
        "## Totals",
        "",
        "| failure model | ckpt cost | shapes | never | mean saving vs Daly % | vs Young % "
        "| job node-h saved vs Daly | vs Young |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in summary_rows(ds):
        lines.append(
            f"| {r['failure_model']} | {r['ckpt_cost']} | {r['checkpointable_shapes']} | {r['never_checkpoint_shapes']} "
            f"| {r['mean_saving_vs_daly_pct']} | {r['mean_saving_vs_young_pct']} "
            f"| {r['job_node_hours_saved_vs_daly']:,.1f} | {r['job_node_hours_saved_vs_young']:,.1f} |"
        )
    grid = ds.shape_source.values == "grid"
    ck = ds.ckpt_cost.values[len(ds.ckpt_cost) // 2]
    if grid.any():
        for fm in ds.failure_model.values:
            sel = ds.sel(failure_model=fm, ckpt_cost=ck).isel(shape=np.flatnonzero(grid))
            runtimes = sorted(set(sel.runtime_h.values.tolist()))
            lines += [
                "",
                f"## Default grid, {fm}, checkpoint cost {ck}: aware interval h (saving vs Daly %)",
                "",
                "| nodes \\ runtime | " + " | ".join(f"{r:g} h" for r in runtimes) + " |",
                "|---" * (len(runtimes) + 1) + "|",
            ]
            for n in sorted(set(sel.nodes.values.tolist())):
                cells = []
                for r in runtimes:
                    i = np.flatnonzero((sel.nodes.values == n) & (sel.runtime_h.values == r))[0]
                    one = sel.isel(shape=i)
                    if not bool(one.checkpointable):
                        cells.append("-")
                        continue
                    aware = float(one.interval_h.sel({"method": "aware"}))
                    cells.append(f"{_fmt_h(aware)} ({float(one.saving_vs_daly_pct):.1f}%)")
                lines.append(f"| {n} | " + " | ".join(cells) + " |")
    jobs = ds.shape_source.values == "jobs"
    if jobs.any():
        fm = ds.failure_model.values[0]
        sel = ds.sel(failure_model=fm, ckpt_cost=ck).isel(shape=np.flatnonzero(jobs))
        order = np.argsort(-sel.node_hours.values, kind="stable")[:top]
        lines += [
            "",
            f"## Most-used job shapes ({fm}, checkpoint cost {ck})",
            "",
            "| nodes | runtime h | jobs | P(fail) | aware | Daly | Young | saving vs Daly % | node-h saved |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for i in order:
            one = sel.isel(shape=int(i))
            iv = one.interval_h
            lines.append(
                f"| {int(one.nodes_lo)}-{int(one.nodes_hi)} | {float(one.runtime_h):.2f} | {int(one.jobs):,} "
                f"| {float(one.p_fail):.3f} "
                f"| {_fmt_h(float(iv.sel({'method': 'aware'})))} | {_fmt_h(float(iv.sel({'method': 'daly'})))} "
                f"| {_fmt_h(float(iv.sel({'method': 'young'})))} | {float(one.saving_vs_daly_pct):.1f} "
                f"| {float(one.saving_vs_daly_node_hours_weighted):,.1f} |"
            )
    return "\n".join(lines) + "\n"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]


def plot_cost_curves(ds: xr.Dataset, path: Path, n_shapes: int = 4, restart_h: float = 0.0) -> Path:
    """PNG: expected cost (eq. 3.8) vs interval for a few shapes, with each method's interval marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fm, ck = ds.failure_model.values[0], ds.ckpt_cost.values[len(ds.ckpt_cost) // 2]
    sel = ds.sel(failure_model=fm, ckpt_cost=ck)
    cand = np.flatnonzero(sel.checkpointable.values & ~sel.never_checkpoint.values)
    if cand.size == 0:
        cand = np.flatnonzero(sel.checkpointable.values)
    # spread over failure probability
    order = cand[np.argsort(sel.p_fail.values[cand], kind="stable")]
    picks = order[np.unique(np.linspace(0, order.size - 1, min(n_shapes, order.size)).round().astype(int))] if order.size else []
    fig, axes = plt.subplots(1, max(len(picks), 1), figsize=(4.2 * max(len(picks), 1), 3.4), squeeze=False)
    for ax, i in zip(axes[0], picks, strict=False):
        one = sel.isel(shape=int(i))
        t, tc = float(one.runtime_h), float(one.ckpt_cost_h)
        m, w = float(one.job_mtbf_h), float(one.weibull_shape)
        period, c = cost_grid(t, tc, m, w, restart_h)
        ax.plot(period - tc, c[0], lw=1, label="E_C (eq. 3.8)")
        for meth, mark in zip(METHODS, ("v", "^", "s", "o"), strict=True):
            tau = float(one.interval_h.sel({"method": meth}))
            if np.isfinite(tau) and tau + tc <= t:
                ax.plot([tau], [float(expected_cost(t, tau, tc, m, w, restart_h))], mark, label=meth)
        ax.axhline(float(one.expected_cost_h.sel({"method": "aware"})) if bool(one.never_checkpoint) else np.nan, ls=":", c="k")
        ax.set_title(f"{int(one.nodes)} nodes, {t:g} h, P(fail)={float(one.p_fail):.2f}", fontsize=9)
        ax.set_xscale("log")
        ax.set_xlabel("interval tau [h] (log)")
        ax.set_ylabel("expected cost [h]")
        ax.legend(fontsize=6)
    fig.suptitle(f"{fm}, checkpoint cost {ck}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_saving_heatmap(ds: xr.Dataset, fm: str, ck: str, path: Path) -> Path | None:
    """PNG heat map of the aware saving vs Daly (%) over the default grid (nodes x runtime)."""
    grid = np.flatnonzero(ds.shape_source.values == "grid")
    if grid.size == 0:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sel = ds.sel(failure_model=fm, ckpt_cost=ck).isel(shape=grid)
    nodes = sorted(set(sel.nodes.values.tolist()))
    runtimes = sorted(set(sel.runtime_h.values.tolist()))
    z = np.full((len(nodes), len(runtimes)), np.nan)
    for k in range(sel.sizes["shape"]):
        i, j = nodes.index(int(sel.nodes.values[k])), runtimes.index(float(sel.runtime_h.values[k]))
        z[i, j] = sel.saving_vs_daly_pct.values[k]
    fig, ax = plt.subplots(figsize=(6.5, 5))
    im = ax.imshow(z, origin="lower", aspect="auto", cmap="magma")
    fig.colorbar(im, ax=ax, label="E_C saving of aware vs Daly [%]")
    ax.set_xticks(range(len(runtimes)), [f"{r:g}" for r in runtimes])
    ax.set_yticks(range(len(nodes)), [str(n) for n in nodes])
    ax.set_xlabel("runtime [h]")
    ax.set_ylabel("nodes")
    ax.set_title(f"{fm}, checkpoint cost {ck}", fontsize=10)
    for i in range(len(nodes)):
        for j in range(len(runtimes)):
            if np.isfinite(z[i, j]):
                ax.text(j, i, f"{z[i, j]:.0f}", ha="center", va="center", fontsize=6, color="cyan")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def zarr_encoding(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """Explicit encoding: one chunk per variable, zstd for data, no compression for coordinates."""
    from zarr.codecs import ZstdCodec

    enc: dict[str, dict[str, Any]] = {}
    for name, var in ds.variables.items():
        e: dict[str, Any] = {"chunks": tuple(max(n, 1) for n in var.shape)}
        if name in ds.coords:
            e["compressors"] = None
        else:
            e["compressors"] = (ZstdCodec(level=3, checksum=False),)
            if var.dtype.kind == "f":
                e["fill_value"] = np.nan
        enc[str(name)] = e
    return enc


def write_outputs(
    store: Any,
    ds: xr.Dataset,
    run_id: str,
    restart_h: float = 0.0,
    fits: pd.DataFrame | None = None,
    fit_counts: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Write table.zarr, table.csv, table.md, plots (and fits.csv when models were fitted) under
    ``tables/checkpoint/<run_id>/``."""
    from nodewatch.schemas.names import check_path_token

    check_path_token(run_id, "run id")
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="nodewatch-ckpt-") as tmp:
        root = Path(tmp)
        ds.to_zarr(root / "table.zarr", mode="w", zarr_format=3, consolidated=False, encoding=zarr_encoding(ds))
        table_frame(ds).to_csv(root / "table.csv", index=False, float_format="%.6g")
        md = markdown(ds, run_id)
        if fits is not None and len(fits):
            fit_table(fits).to_csv(root / "fits.csv", index=False, float_format="%.6g")
            md += "\n".join(fits_markdown(fit_table(fits), fit_counts)) + "\n"
        (root / "table.md").write_text(md)
        plot_cost_curves(ds, root / "plots" / "cost_vs_interval.png", restart_h=restart_h)
        for fm in ds.failure_model.values:
            for ck in ds.ckpt_cost.values:
                name = f"saving_heatmap_{_safe(str(fm))}_{_safe(str(ck))}.png"
                plot_saving_heatmap(ds, str(fm), str(ck), root / "plots" / name)
        for p in sorted(root.rglob("*")):
            if p.is_file():
                rel = p.relative_to(root).as_posix()
                store.write_bytes(p.read_bytes(), AREA, run_id, rel)
        for name in ("table.zarr", "table.csv", "table.md"):
            out[name] = store.url_of(AREA, run_id, name)
        if (root / "fits.csv").exists():
            out["fits.csv"] = store.url_of(AREA, run_id, "fits.csv")
        out["plots"] = store.url_of(AREA, run_id, "plots")
    return out


def load_table(store: Any, run_id: str | None = None) -> xr.Dataset:
    """Open ``tables/checkpoint/<run_id>/table.zarr`` (default: the CURRENT run)."""
    rid = run_id or store.current(AREA)
    if rid is None:
        raise FileNotFoundError(f"no checkpoint table in {store.url} (run `nodewatch checkpoint tables` first)")
    return xr.open_zarr(store.url_of(AREA, rid, "table.zarr"), zarr_format=3, consolidated=False)


def remove_run_dir(store: Any, run_id: str) -> None:
    """Delete a failed run's partial output directory (never the CURRENT one)."""
    p = store.path(AREA, run_id)
    if store.current(AREA) != run_id and store.fs.exists(p):
        store.fs.rm(p, recursive=True)


# --------------------------------------------------------------------------- inputs and the run
def load_jobs(store: Any, spec: str, system: str | None = None) -> pd.DataFrame:
    """Jobs for the shapes: ``"staged"`` (all staged jobs) or a run id (the staged parts that run wrote)."""
    import pyarrow.parquet as pq

    from nodewatch.schemas.names import check_path_token

    cols = ["system", "step", "start_time", "nodes", "elapsed_s"]
    if spec == "staged":
        t = store.read_staged("jobs", columns=cols)
        if t is None:
            raise FileNotFoundError(f"no staged jobs in {store.url} (run `nodewatch ingest jobs ...` first)")
    else:
        rid = check_path_token(spec, "run id")
        files = [f for f in store.staged_files("jobs") if f.rsplit("/", 1)[-1] == f"part-{rid}.parquet"]
        if not files:
            raise FileNotFoundError(
                f"run {rid!r} staged no jobs in {store.url} (use 'staged' or a run id from `nodewatch runs list`)"
            )
        parts = []
        for f in files:
            with store.fs.open(f, "rb") as fh:
                parts.append(pq.read_table(fh, columns=cols))
        import pyarrow as pa

        t = pa.concat_tables(parts)
    df = t.to_pandas()
    if system is not None:
        df = df[df["system"] == system]
        if df.empty:
            raise ValueError(f"no jobs of system {system!r} in the selected jobs")
    return df


def failure_events_for_fits(df: pd.DataFrame, shadowed: Sequence[str] | None = None) -> tuple[pd.DataFrame, dict[str, int]]:
    """Rows of staged ``failure_events`` (SaNSA DOWN episodes) that count as job-killing failures for the fits.

    Unshadowed episodes always count; of the shadowed ones (``shadowed_by``, paper Sec. II-B/II-C) those
    whose overlay is in ``shadowed`` (default :data:`nodewatch.schemas.states.FIT_SHADOWED_BY`: UNSCHEDULED_RESV,
    an unscheduled outage kills the running jobs) count too, ADMIN_RESV ones (planned maintenance
    reboots, no job is running) do not. A frame staged before ``shadowed_by`` existed has every row
    unshadowed. Returns the kept rows and counts ``shadowed_<overlay>_kept`` / ``_excluded``.
    """
    from nodewatch.schemas.states import FIT_SHADOWED_BY

    keep_overlays = set(FIT_SHADOWED_BY if shadowed is None else shadowed)
    if "shadowed_by" not in df.columns:
        return df, {}
    sb = df["shadowed_by"].astype(object).where(df["shadowed_by"].notna(), None)
    keep = np.array([v is None or v in keep_overlays for v in sb], bool)
    counts: dict[str, int] = {}
    for v, k in zip(sb, keep, strict=True):
        if v is not None:
            key = f"shadowed_{str(v).lower()}_{'kept' if k else 'excluded'}"
            counts[key] = counts.get(key, 0) + 1
    return df[keep], counts


def models_from_failures(
    store: Any,
    systems: Sequence[str],
    machine_nodes: int | None,
    plots_dir: Path | None = None,
    purpose: str | None = "compute",
    table: str = "failures",
    group_by: str = "system",
    window: tuple[Any, Any] | None = None,
    shadowed: Sequence[str] | None = None,
) -> tuple[list[FailureModel], pd.DataFrame, dict[str, Any]]:
    """Fit exponential + Weibull per system (or per ``group_by`` value within each system) from the staged
    ``failures`` (or ``failure_events``) table, with right-censoring at the end of the observation window.

    ``failure_events`` (derived from node states) has no system column: all its rows are one machine,
    labelled with the single name in ``systems``. ``purpose`` keeps only records whose node purpose
    contains it (``None``: all; ignored for tables without a purpose column). ``window`` is the
    observation window ``(start, end)`` (timestamps or ISO strings, either may be None); without an end
    the window of each system is its first..last record (+ one minute; the sources carry no observation
    period of their own), see :func:`nodewatch.tasks.checkpoint.fits.fit_groups`. Of ``failure_events`` the episodes
    shadowed by ADMIN_RESV are left out, unshadowed and UNSCHEDULED_RESV-shadowed ones fitted
    (``shadowed``, see :func:`failure_events_for_fits`; counted as ``<system>.shadowed_*``).

    The machine size for eq. 3.14 is, for ``group_by="system"``, the records' ``system_nodes`` (LANL), else
    ``machine_nodes``; a system with neither is an error. For any other grouping it is the number of
    distinct nodes of the group in the records (a lower bound of the group's size). Models are named
    ``<system>-<dist>`` (by system) or ``<system>-<group>-<dist>``. Returns the models (two per group),
    the fit table (with ``machine_nodes`` and the window) and the prep counts and windows per system.
    """
    from nodewatch.tasks.checkpoint.fits import failure_model_from_fit, failures_frame, fit_groups, observation_window, qq_plot

    t = store.read_staged(table)
    if t is None:
        raise FileNotFoundError(f"no staged {table} in {store.url} (run `nodewatch ingest failures ...` first)")
    df = t.to_pandas()
    shadow_counts: dict[str, int] = {}
    if table == "failure_events":
        df, shadow_counts = failure_events_for_fits(df, shadowed)
    if "system" not in df.columns:  # failure_events (node states) cover one machine: one group, named by the caller
        if len(systems) != 1:
            raise ValueError(f"staged {table} has no system column: give exactly one --failures NAME for the machine")
        df = df.assign(system=systems[0])
    if group_by not in df.columns:
        cols = ", ".join(c for c in df.columns if df[c].dtype == object or str(df[c].dtype).startswith("string"))
        raise ValueError(f"cannot group {table} by {group_by!r}: no such column; text columns: {cols}")
    models: list[FailureModel] = []
    fits_all = []
    counts: dict[str, Any] = {}
    for sys_name in systems:
        part = df[df["system"] == sys_name]
        if part.empty:
            known = ", ".join(sorted(map(str, df["system"].dropna().unique()))[:20])
            raise ValueError(f"no {table} records of system {sys_name!r}; known: {known}")
        fr = failures_frame(part, group_by=group_by, purpose=purpose if "purpose" in part.columns else None)
        given = window or (None, None)
        fits, gaps, c = fit_groups(fr, window=observation_window(fr, *given))
        c.window_source = "given" if given[1] is not None else "first..last record + 1 min"
        if fits.empty:
            raise ValueError(f"system {sys_name!r}: no group with 10 or more failures after cleaning, cannot fit")
        n_machine = None
        if group_by == "system":
            if "system_nodes" in part.columns and part["system_nodes"].notna().any():
                n_machine = int(part["system_nodes"].max())  # the records know their machine
            n_machine = n_machine or machine_nodes
            if n_machine is None:
                raise ValueError(f"system {sys_name!r}: machine node count unknown; pass --machine-nodes")
            sizes = dict.fromkeys(fits["group"], n_machine)
        else:
            sizes = {str(g): int(v) for g, v in fr.groupby("group")["node"].nunique().items()}
        for _, row in fits.iterrows():
            name = f"{sys_name}-{row['dist']}" if group_by == "system" else f"{sys_name}-{row['group']}-{row['dist']}"
            models.append(failure_model_from_fit(row, max(sizes[row["group"]], 1), name=name))
        fits = fits.assign(system=sys_name, group_by=group_by, machine_nodes=fits["group"].map(sizes))
        fits_all.append(fits)
        for k in ("rows_in", "kept", "duplicates", "outside_window", "missing_time", "out_of_order"):
            counts[f"{sys_name}.{k}"] = int(getattr(c, k))
        for k, v in shadow_counts.items():
            counts[f"{sys_name}.{k}"] = v
        counts[f"{sys_name}.n_censored"] = int(fits.loc[fits["dist"] == "weibull", "n_censored"].sum())
        for k in ("window_start", "window_end", "window_source"):
            counts[f"{sys_name}.{k}"] = getattr(c, k)
        if plots_dir is not None:
            for g in fits["group"].unique():
                stem = _safe(sys_name) if group_by == "system" else f"{_safe(sys_name)}_{_safe(str(g))}"
                qq_plot(
                    *gaps[g],
                    fits[fits["group"] == g],
                    plots_dir / f"qq_{stem}.png",
                    f"{sys_name} {g}: failure inter-arrival times",
                )
    return models, pd.concat(fits_all, ignore_index=True), counts


def fit_table(fits: pd.DataFrame) -> pd.DataFrame:
    """The fit report (``fits.csv``): per system/group and distribution shape, scale, MTBF with 95 % CIs,
    KS, AIC, n failures and n censored gaps, machine nodes and the observation window."""
    from nodewatch.tasks.checkpoint.fits import FIT_COLUMNS

    cols = ["system", *FIT_COLUMNS, "nodes_seen", "machine_nodes", "window_start", "window_end"]
    return fits[[c for c in cols if c in fits.columns]].reset_index(drop=True)


def fits_markdown(fits: pd.DataFrame, counts: dict[str, Any] | None = None) -> list[str]:
    """Markdown lines of the fit table and the cleaning counts (for ``table.md``)."""
    lines = [
        "",
        "## Failure fits (censored MLE; 95 % CIs)",
        "",
        "| system | group | dist | shape (CI) | scale h | MTBF h (CI) | KS D | AIC | n | n censored | nodes | window |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in fits.iterrows():
        win = f"{pd.Timestamp(r['window_start']):%Y-%m-%d %H:%M} .. {pd.Timestamp(r['window_end']):%Y-%m-%d %H:%M}"
        lines.append(
            f"| {r.get('system', r['group'])} | {r['group']} | {r['dist']}{' (best AIC)' if r['best_aic'] else ''} "
            f"| {r['shape']:.3f} ({r['shape_lo']:.3f}-{r['shape_hi']:.3f}) | {r['scale_h']:.3f} "
            f"| {r['mtbf_h']:.3f} ({r['mtbf_lo_h']:.3f}-{r['mtbf_hi_h']:.3f}) | {r['ks_stat']:.3f} | {r['aic']:.1f} "
            f"| {int(r['n_failures'])} | {int(r['n_censored'])} | {int(r['machine_nodes'])} | {win} |"
        )
    if counts:
        systems = sorted({k.split(".", 1)[0] for k in counts})
        lines += [
            "",
            "| system | rows in | kept | duplicates | outside window | missing time | out of order | window from |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for sname in systems:
            g = {k.split(".", 1)[1]: v for k, v in counts.items() if k.split(".", 1)[0] == sname}
            lines.append(
                f"| {sname} | {g.get('rows_in')} | {g.get('kept')} | {g.get('duplicates')} "
                f"| {g.get('outside_window')} | {g.get('missing_time')} | {g.get('out_of_order')} "
                f"| {g.get('window_source')} |"
            )
    return lines


def build_shapes(jobs: pd.DataFrame | None, grid: bool) -> tuple[pd.DataFrame, list[str]]:
    """Shapes from the jobs (via :func:`nodewatch.tasks.checkpoint.shapes.job_shapes`) followed by the default grid."""
    from nodewatch.tasks.checkpoint.shapes import job_shapes

    frames, src = [], []
    if jobs is not None:
        js = job_shapes(jobs)
        frames.append(js)
        src += ["jobs"] * len(js)
    if grid:
        g = default_shape_grid()
        frames.append(g)
        src += ["grid"] * len(g)
    if not frames:
        raise ValueError("no shapes: give jobs or keep the default grid")
    return pd.concat(frames, ignore_index=True), src


def run_checkpoint_tables(
    store: Any,
    *,
    jobs: str | None = None,
    system: str | None = None,
    failure_models: Sequence[FailureModel] = (),
    failure_systems: Sequence[str] = (),
    failure_table: str = "failures",
    machine_nodes: int | None = None,
    group_by: str = "system",
    purpose: str | None = "compute",
    window: tuple[Any, Any] | None = None,
    ckpt_costs: Sequence[CkptCost] | None = None,
    grid: bool = True,
    restart_h: float = 0.0,
    parameters: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole run: shapes, failure models, table, outputs, manifest; CURRENT is swapped at the end.

    ``failure_systems`` are fitted per ``group_by`` value (default the system) on the records whose purpose
    contains ``purpose`` (None: all) within the observation ``window`` (see :func:`models_from_failures`).
    """
    from nodewatch.schemas.manifest import RowCounts
    from nodewatch.tasks.core.runs import RunRecorder

    params = parameters or {
        "jobs": jobs,
        "system": system,
        "failure_systems": list(failure_systems),
        "failure_models": [m.__dict__ for m in failure_models],
        "machine_nodes": machine_nodes,
        "ckpt_costs": [k.__dict__ for k in (ckpt_costs or [])],
        "grid": grid,
        "restart_h": restart_h,
        "group_by": group_by,
        "purpose": purpose,
        "window": [None if x is None else str(x) for x in (window or (None, None))],
    }
    rec = RunRecorder(store, "checkpoint_tables", params)
    rec.write()
    try:
        with tempfile.TemporaryDirectory(prefix="nodewatch-ckpt-fit-") as tmp:
            models = list(failure_models)
            fits: pd.DataFrame | None = None
            counts: dict[str, Any] | None = None
            if failure_systems:
                with rec.step("fit_failures"):
                    fitted, fits, counts = models_from_failures(
                        store,
                        failure_systems,
                        machine_nodes,
                        Path(tmp),
                        purpose=purpose,
                        table=failure_table,
                        group_by=group_by,
                        window=window,
                    )
                models += fitted
                rec.manifest.notes["failure_fits"] = fits.astype(object).where(fits.notna(), None).to_dict("records")
                rec.manifest.notes["failure_prep_counts"] = counts
                for p in sorted(Path(tmp).glob("*.png")):
                    store.write_bytes(p.read_bytes(), AREA, rec.run_id, "plots", p.name)
            if not models:
                raise ValueError("no failure model: give --mtbf-node (and --weibull-shape) or --failures SYSTEM")
            with rec.step("shapes"):
                job_df = load_jobs(store, jobs, system) if jobs else None
                shapes, src = build_shapes(job_df, grid)
                if job_df is not None:
                    rec.add_counts("jobs", RowCounts(rows_in=len(job_df), staged=len(job_df)))
            with rec.step("solve"):
                ds = compute_table(
                    shapes, list(ckpt_costs or [CkptCost.fixed(h) for h in DEFAULT_CKPT_COSTS_H]), models, src, restart_h
                )
            with rec.step("write"):
                outs = write_outputs(store, ds, rec.run_id, restart_h, fits, counts)
        for k, v in outs.items():
            rec.add_output(k, v)
        rec.manifest.notes["summary"] = summary_rows(ds)
        rec.manifest.notes["intervals"] = int(ds.checkpointable.sum())
        m = rec.finish()
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        remove_run_dir(store, rec.run_id)
        raise
    store.set_current(AREA, rec.run_id)
    return m.model_dump(mode="json")


# --------------------------------------------------------------------------- Table 3.1 method on a trace
def trace_runtimes(jobs: pd.DataFrame) -> pd.DataFrame:
    """(nodes, runtime_h) per job of a trace: the user's requested time (``timelimit_s``) where known, as in
    Frank sec. 3.4.3 ("expected runtime as given by the users"), else the elapsed time."""
    j = jobs
    if "step" in j.columns:
        j = j[j["step"].isna()]
    req = pd.to_numeric(j.get("timelimit_s"), errors="coerce") if "timelimit_s" in j.columns else None
    ela = pd.to_numeric(j["elapsed_s"], errors="coerce")
    rt = req.where(req > 0, ela) if req is not None else ela
    out = pd.DataFrame({"nodes": pd.to_numeric(j["nodes"], errors="coerce"), "runtime_h": rt / 3600.0})
    return out[(out.nodes >= 1) & (out.runtime_h > 0)].dropna().astype({"nodes": "int64"}).reset_index(drop=True)


def trace_savings(
    jobs: pd.DataFrame,
    machine_nodes: int,
    mtbf_machine_h: Sequence[float] = (36.0, 24.0),
    ckpt_costs_h: Sequence[float] = (0.5, 0.25, 0.1),
    shape: float = 0.8,
    mc_shapes: int = 0,
    mc_failures: int = 10_000,
    seed: int = 0,
    mtbf_error: float = 0.0,
) -> pd.DataFrame:
    """Frank's Table 3.1 method on a job trace: total expected checkpoint cost of all checkpointable jobs
    per method and the saving of the aware interval vs each, for every (system MTBF, t_c).

    Job MTBF by eq. 3.14 from the system MTBF; a job is checkpointable when ``t_c + tau_Daly < t``
    (sec. 3.4.3). Costs are eq. 3.8 expectations (what the thesis's 10,000-failure Monte-Carlo of eq. 3.1
    estimates), summed over jobs. With ``mc_shapes > 0`` the Daly/aware totals are also estimated by
    Monte-Carlo (``mc_failures`` failures per shape) on that many randomly drawn distinct job shapes.
    ``mtbf_error`` (e.g. -0.2) plans every interval with a wrong MTBF ``M (1 + error)`` while costs are
    evaluated with the true one (Table 3.1 rows c/d).
    """
    from nodewatch.models.checkpoint.mc import simulate_cost

    if machine_nodes < 1:
        raise ValueError(f"machine node count must be >= 1, got {machine_nodes}")
    too_big = int((jobs["nodes"] > machine_nodes).sum())
    if too_big:
        raise ValueError(f"{too_big} jobs use more than --machine-nodes={machine_nodes} nodes")
    uniq = jobs.groupby(["nodes", "runtime_h"]).size().rename("jobs").reset_index()
    n = uniq["nodes"].to_numpy(float)
    t = uniq["runtime_h"].to_numpy(float)
    cnt = uniq["jobs"].to_numpy(float)
    rows = []
    rng = np.random.default_rng(seed)
    for m_sys in mtbf_machine_h:
        m_job = m_sys * machine_nodes / n  # eq. 3.14
        for tc in ckpt_costs_h:
            m_plan = m_job * (1.0 + mtbf_error)
            tau_d = daly_interval(m_plan, tc)
            ok = tc + tau_d < t
            if not ok.any():
                continue
            tt, mm, mp = t[ok], m_job[ok], m_plan[ok]
            classic = np.stack([young_interval(mp, tc), daly_first_order_interval(mp, tc), tau_d[ok]], axis=1)
            cc = expected_cost(tt[:, None], classic, tc, mm[:, None], shape)
            aw = aware_interval(tt, tc, mp, shape, extra_tau_h=classic)
            aw_cost = aw.cost_h if mtbf_error == 0.0 else expected_cost(tt, aw.tau_h, tc, mm, shape)
            totals = {meth: float(np.sum(c * cnt[ok])) for meth, c in zip(METHODS, [*cc.T, aw_cost], strict=True)}
            row = {
                "mtbf_machine_h": m_sys,
                "ckpt_cost_h": tc,
                "weibull_shape": shape,
                "mtbf_error": mtbf_error,
                "jobs": int(cnt[ok].sum()),
                "shapes": int(ok.sum()),
                "never_checkpoint_jobs": int(cnt[ok][aw.never].sum()),
            }
            for meth in METHODS[:-1]:
                row[f"saving_vs_{meth}_pct"] = 100.0 * (totals[meth] - totals["aware"]) / totals[meth]
            row.update({f"total_cost_{k}_h": v for k, v in totals.items()})
            if mc_shapes > 0:
                pick = rng.choice(np.flatnonzero(ok), size=min(mc_shapes, int(ok.sum())), replace=False)
                idx = np.searchsorted(np.flatnonzero(ok), pick)
                sim_d = sim_a = ana_d = ana_a = 0.0
                for i, k in zip(pick, idx, strict=True):
                    taus = np.array([tau_d[i], aw.tau_h[k]])
                    mc = simulate_cost(t[i], taus, tc, m_job[i], shape, failures=mc_failures, seed=int(rng.integers(2**31)))
                    sim_d += mc.mean_h[0] * cnt[i]
                    sim_a += mc.mean_h[1] * cnt[i]
                    ana_d += cc[k, 2] * cnt[i]
                    ana_a += aw_cost[k] * cnt[i]
                row["mc_shapes"] = int(pick.size)
                row["mc_saving_vs_daly_pct"] = 100.0 * (sim_d - sim_a) / sim_d
                row["analytic_saving_vs_daly_pct_same_shapes"] = 100.0 * (ana_d - ana_a) / ana_d
            rows.append(row)
    return pd.DataFrame(rows)


def read_trace(path: Path) -> pd.DataFrame:
    """Parse a job trace file (any format of the ``jobs`` source, e.g. SWF or sacct) without staging it.

    Rows the parser rejects are not used (they are reported by ``nodewatch ingest jobs``); use the staged
    table (``--jobs staged``) for validated data.
    """
    import pyarrow as pa

    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.inputs import open_binary
    from nodewatch.tasks.ingest.pipeline import detect_format
    from nodewatch.tasks.ingest.registry import sources

    spec = sources().get("jobs")
    if spec is None:
        raise ValueError("no 'jobs' source is installed to parse the trace")
    fmt = detect_format(spec, Path(path))
    with open_binary(path) as fh:
        parts = [r.rows for r in fmt.parse(fh, ParseContext(name=Path(path).name))]
    if not parts:
        raise ValueError(f"{path}: no job rows")
    return pa.concat_tables(parts, promote_options="permissive").to_pandas()
