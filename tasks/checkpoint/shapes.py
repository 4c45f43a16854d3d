"""Job shapes: how many jobs (and node-hours) ran at each (node count × runtime) size.

The checkpoint tables are computed for the shapes users actually run, so the staged ``jobs`` table
is summarised into buckets:

* node count in powers of two: 1, 2, 3–4, 5–8, 9–16, ... (bucket upper bounds 1, 2, 4, 8, ...), or
  custom upper bounds ``node_edges``;
* runtime log-spaced, default edges (hours) 0, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, ∞ (powers of two from
  15 min to 64 h, plus the buckets below 15 min and from 64 h on): a bucket is ``[lo, hi)``, every
  finite bucket spans a factor of two, so the geometric-mean representative runtime is within a
  factor √2 of every job in it. The edges are deliberately *not* queue limits (24, 48, 72 h): jobs
  that run to a limit end a few seconds on either side of it (``TIMEOUT`` after the grace time), and
  an edge at the limit would split them between two buckets. Jobs on a 24 h or 48 h limit fall in
  [16, 32) or [32, 64), those on a 72 h limit and beyond in [64, ∞).

Only allocation rows (``step`` null) of jobs that ran are counted: a known runtime and either a start
time or a positive runtime (SWF traces with an unknown wait time have no start time but did run).
Jobs that never started (:func:`nodewatch.schemas.jobs.never_started`: cancelled or failed in the queue,
staged with no start and no run time) are skipped by rule and counted: the frame's
``attrs["skipped"]`` holds the counts per reason of :data:`SHAPE_SKIP_REASONS`, and
:func:`format_shapes_table` prints them in the caption.
Representative values per bucket: ``nodes_rep`` = the bucket's upper node bound (a power of two for
the default edges); ``runtime_rep_h`` = geometric mean of the bucket edges √(lo·hi), or, where that
is undefined (the first bucket with lo = 0 and the open last bucket with hi = ∞), the median runtime
of the bucket's jobs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from nodewatch.schemas.jobs import never_started

if TYPE_CHECKING:
    from rich.table import Table

DEFAULT_RUNTIME_EDGES_H: tuple[float, ...] = (0, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, math.inf)
"""Default runtime bucket edges in hours: 0, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, ∞ (log-spaced, see the module docstring)."""

SHAPE_COLUMNS: tuple[str, ...] = (
    "nodes_lo",
    "nodes_hi",
    "runtime_lo_h",
    "runtime_hi_h",
    "nodes_rep",
    "runtime_rep_h",
    "jobs",
    "node_hours",
    "share_node_hours",
)
"""Columns of the frame returned by :func:`job_shapes`."""

SHAPE_SKIP_REASONS: dict[str, str] = {
    "never_started": "never started (cancelled or failed in the queue)",
    "no_runtime_or_nodes": "no usable runtime or node count",
}
"""Why :func:`job_shapes` leaves a job (allocation row) out (keys of ``attrs["skipped"]``)."""


def _frame(jobs: pa.Table | pd.DataFrame) -> pd.DataFrame:
    cols = ["step", "start_time", "nodes", "elapsed_s"]
    if isinstance(jobs, pa.Table):
        missing = [c for c in cols if c not in jobs.column_names]
        if missing:
            raise ValueError(f"jobs table lacks column(s) {', '.join(missing)}")
        return jobs.select(cols).to_pandas()
    missing = [c for c in cols if c not in jobs.columns]
    if missing:
        raise ValueError(f"jobs table lacks column(s) {', '.join(missing)}")
    return jobs[cols]


def power_of_two_edges(max_nodes: int) -> list[int]:
    """Upper node bounds 1, 2, 4, ... up to the first power of two >= ``max_nodes``."""
    edges = [1]
    while edges[-1] < max_nodes:
        edges.append(edges[-1] * 2)
    return edges


def job_shapes(
    jobs: pa.Table | pd.DataFrame,
    node_edges: Sequence[int] | None = None,
    runtime_edges_h: Sequence[float] | None = None,
) -> pd.DataFrame:
    """Bucket jobs by node count × runtime; count jobs and node-hours per non-empty bucket.

    Args:
        jobs: rows of the staged ``jobs`` table (needs ``step``, ``start_time``, ``nodes``, ``elapsed_s``).
        node_edges: increasing bucket *upper* bounds; bucket i holds ``node_edges[i-1] < nodes <= node_edges[i]``
            (the first holds ``1 <= nodes <= node_edges[0]``). Default: powers of two up to the largest job.
        runtime_edges_h: increasing runtime edges in hours; bucket i is ``[e[i], e[i+1])``. Default
            :data:`DEFAULT_RUNTIME_EDGES_H`. Runtimes outside all buckets are not counted.

    Returns:
        One row per non-empty bucket, sorted by nodes then runtime, with :data:`SHAPE_COLUMNS`;
        ``share_node_hours`` sums to 1 over the rows (when there are node-hours at all).
    """
    df = _frame(jobs)
    elapsed = pd.to_numeric(df["elapsed_s"], errors="coerce")
    nodes = pd.to_numeric(df["nodes"], errors="coerce")
    ran = df["step"].isna() & elapsed.notna() & nodes.notna() & (nodes >= 1) & (elapsed >= 0)
    ran &= df["start_time"].notna() | (elapsed > 0)
    alloc = df["step"].isna().to_numpy(dtype=bool)
    never = never_started(df) & alloc
    other = alloc & ~never & ~ran.to_numpy(dtype=bool)
    skipped = {k: int(m.sum()) for k, m in (("never_started", never), ("no_runtime_or_nodes", other)) if m.any()}
    nodes_v = nodes[ran].to_numpy(dtype=np.int64)
    hours = elapsed[ran].to_numpy(dtype=np.float64) / 3600.0

    r_edges = np.asarray(runtime_edges_h if runtime_edges_h is not None else DEFAULT_RUNTIME_EDGES_H, dtype=float)
    if r_edges.ndim != 1 or r_edges.size < 2 or np.any(np.diff(r_edges) <= 0):
        raise ValueError("runtime_edges_h must be at least two strictly increasing values")
    if node_edges is None:
        n_edges = np.asarray(power_of_two_edges(int(nodes_v.max()) if nodes_v.size else 1), dtype=np.int64)
    else:
        n_edges = np.asarray(node_edges, dtype=np.int64)
        if n_edges.ndim != 1 or n_edges.size < 1 or n_edges[0] < 1 or np.any(np.diff(n_edges) <= 0):
            raise ValueError("node_edges must be strictly increasing upper bounds >= 1")

    n_idx = np.searchsorted(n_edges, nodes_v, side="left")  # nodes <= edge
    r_idx = np.searchsorted(r_edges, hours, side="right") - 1  # lo <= h < hi
    keep = (n_idx < n_edges.size) & (r_idx >= 0) & (r_idx < r_edges.size - 1)
    n_idx, r_idx, nodes_v, hours = n_idx[keep], r_idx[keep], nodes_v[keep], hours[keep]
    nh = nodes_v * hours
    total = float(nh.sum())

    rows = []
    for (ni, ri), grp in pd.DataFrame({"n": n_idx, "r": r_idx, "h": hours, "nh": nh}).groupby(["n", "r"], sort=True):
        lo_n = 1 if ni == 0 else int(n_edges[ni - 1]) + 1
        hi_n = int(n_edges[ni])
        lo_r, hi_r = float(r_edges[ri]), float(r_edges[ri + 1])
        # geometric mid of the edges; undefined for [0, hi) and [lo, inf): median runtime of the bucket's jobs
        rep_r = math.sqrt(lo_r * hi_r) if lo_r > 0 and math.isfinite(hi_r) else float(np.median(grp["h"]))
        node_hours = float(grp["nh"].sum())
        rows.append(
            {
                "nodes_lo": lo_n,
                "nodes_hi": hi_n,
                "runtime_lo_h": lo_r,
                "runtime_hi_h": hi_r,
                "nodes_rep": hi_n,
                "runtime_rep_h": rep_r,
                "jobs": int(len(grp)),
                "node_hours": node_hours,
                "share_node_hours": node_hours / total if total > 0 else 0.0,
            }
        )
    out = pd.DataFrame(rows, columns=list(SHAPE_COLUMNS))
    out = out.astype(
        {
            "nodes_lo": "int64",
            "nodes_hi": "int64",
            "nodes_rep": "int64",
            "jobs": "int64",
            "runtime_lo_h": "float64",
            "runtime_hi_h": "float64",
            "runtime_rep_h": "float64",
            "node_hours": "float64",
            "share_node_hours": "float64",
        }
    )
    out.attrs["skipped"] = skipped
    return out


def _node_label(lo: int, hi: int) -> str:
    return str(hi) if lo == hi else f"{lo}-{hi}"


def _hours_label(h: float) -> str:
    if math.isinf(h):
        return "inf"
    return f"{h:g}"


def _runtime_label(lo: float, hi: float) -> str:
    return f"{_hours_label(lo)}-{_hours_label(hi)} h"


def plot_shapes(df: pd.DataFrame, path: str | Path, title: str = "Job shapes: node-hours") -> Path:
    """Write a PNG heat map of node-hours per (node bucket × runtime bucket) to ``path``.

    Cells are coloured by node-hours (log scale) and annotated with the share of all node-hours.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    path = Path(path)
    n_keys = sorted({(int(a), int(b)) for a, b in zip(df["nodes_lo"], df["nodes_hi"], strict=True)})
    r_keys = sorted({(float(a), float(b)) for a, b in zip(df["runtime_lo_h"], df["runtime_hi_h"], strict=True)})
    grid = np.full((len(n_keys), len(r_keys)), np.nan)
    share = np.zeros_like(grid)
    for row in df.itertuples(index=False):
        i = n_keys.index((int(row.nodes_lo), int(row.nodes_hi)))
        j = r_keys.index((float(row.runtime_lo_h), float(row.runtime_hi_h)))
        grid[i, j] = row.node_hours
        share[i, j] = row.share_node_hours
    fig, ax = plt.subplots(figsize=(1.0 + 0.9 * max(len(r_keys), 1), 1.2 + 0.45 * max(len(n_keys), 1)))
    positive = grid[np.isfinite(grid) & (grid > 0)]
    if positive.size:
        im = ax.imshow(
            grid,
            origin="lower",
            aspect="auto",
            cmap="viridis",
            norm=LogNorm(vmin=positive.min(), vmax=max(positive.max(), positive.min() * 1.0001)),
        )
        fig.colorbar(im, ax=ax, label="node-hours")
    ax.set_xticks(range(len(r_keys)), [_runtime_label(a, b) for a, b in r_keys], rotation=45, ha="right")
    ax.set_yticks(range(len(n_keys)), [_node_label(a, b) for a, b in n_keys])
    ax.set_xlabel("runtime")
    ax.set_ylabel("nodes")
    ax.set_title(title)
    for i in range(len(n_keys)):
        for j in range(len(r_keys)):
            if np.isfinite(grid[i, j]) and share[i, j] >= 0.005:
                bright = positive.size and im.norm(grid[i, j]) > 0.6
                ax.text(
                    j, i, f"{100 * share[i, j]:.0f}%", ha="center", va="center", color="black" if bright else "white", fontsize=7
                )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def format_shapes_table(df: pd.DataFrame, title: str = "Job shapes") -> Table:
    """A rich table of :func:`job_shapes` output (one line per bucket, plus totals in the caption)."""
    from rich.table import Table

    table = Table(title=title)
    for name, justify in (
        ("nodes", "right"),
        ("runtime", "right"),
        ("rep nodes", "right"),
        ("rep runtime h", "right"),
        ("jobs", "right"),
        ("node-hours", "right"),
        ("share", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in df.itertuples(index=False):
        table.add_row(
            _node_label(int(row.nodes_lo), int(row.nodes_hi)),
            _runtime_label(float(row.runtime_lo_h), float(row.runtime_hi_h)),
            str(int(row.nodes_rep)),
            f"{row.runtime_rep_h:.3g}",
            f"{int(row.jobs):,}",
            f"{row.node_hours:,.1f}",
            f"{100 * row.share_node_hours:.1f}%",
        )
    n_jobs = int(df["jobs"].sum()) if len(df) else 0
    n_hours = float(df["node_hours"].sum()) if len(df) else 0.0
    caption = f"{n_jobs:,} jobs, {n_hours:,.1f} node-hours"
    for key, count in (df.attrs.get("skipped") or {}).items():
        caption += f"; skipped {count:,} job(s): {SHAPE_SKIP_REASONS.get(key, key)}"
    table.caption = caption
    return table
