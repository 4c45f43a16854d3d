"""Renderings of a checkpoint table (:func:`nodewatch.tasks.checkpoint.compute.compute_table`): the flat
``table.csv`` frame, the ``table.md`` summary (with the failure-fit report), the plots and the Zarr
encoding. Writing them to the store is :func:`nodewatch.tasks.checkpoint.tables.write_outputs`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from nodewatch.models.checkpoint.intervals import cost_grid, expected_cost
from nodewatch.tasks.checkpoint.compute import METHODS

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
