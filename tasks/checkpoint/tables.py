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

This module is the run (:func:`run_checkpoint_tables`: inputs, failure fits, outputs, manifest) and
:func:`load_table`; the table math is :mod:`nodewatch.tasks.checkpoint.compute`, its csv/markdown/plot
renderings :mod:`nodewatch.tasks.checkpoint.render` and the Table 3.1 savings on a trace
:mod:`nodewatch.tasks.checkpoint.savings`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.tasks.checkpoint.compute import DEFAULT_CKPT_COSTS_H, CkptCost, compute_table, default_shape_grid
from nodewatch.tasks.checkpoint.render import (
    _safe,
    fit_table,
    fits_markdown,
    markdown,
    plot_cost_curves,
    plot_saving_heatmap,
    summary_rows,
    table_frame,
    zarr_encoding,
)

AREA = "tables/checkpoint"


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
        import pyarrow as pa

        try:  # the requested time too (trace-savings uses it); parts staged without the column lack it
            t = store.read_staged("jobs", columns=[*cols, "timelimit_s"])
        except (pa.ArrowException, RuntimeError):  # missing column (a truly unreadable part fails again below)
            t = store.read_staged("jobs", columns=cols)
        if t is None:
            raise FileNotFoundError(f"no staged jobs in {store.url} (run `nodewatch ingest jobs ...` first)")
    else:
        rid = check_path_token(spec, "run id")
        files = store.staged_files("jobs", run_id=rid)  # every bounded part of the run (part-<rid>[-<k>].parquet)
        if not files:
            raise FileNotFoundError(
                f"run {rid!r} staged no jobs in {store.url} (use 'staged' or a run id from `nodewatch runs list`)"
            )
        parts = []
        for f in files:
            with store.fs.open(f, "rb") as fh:
                pf = pq.ParquetFile(fh)
                parts.append(pf.read(columns=[c for c in [*cols, "timelimit_s"] if c in pf.schema_arrow.names]))
        import pyarrow as pa

        t = pa.concat_tables(parts, promote_options="permissive")
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


def usable_jobs(jobs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The jobs whose elapsed time the tables can model, and how many were left out and why.

    A job (``step`` null) that ran longer than one year (:data:`~nodewatch.models.checkpoint.intervals.MAX_RUNTIME_H`,
    e.g. a sentinel in the trace) would stop the whole table; it is skipped and counted as
    ``runtime_over_one_year`` instead. A job that never started (:func:`nodewatch.schemas.jobs.never_started`,
    e.g. cancelled in the queue) has no runtime to model: skipped and counted as ``never_started``. Other
    rows go to :func:`nodewatch.tasks.checkpoint.shapes.job_shapes` unchanged (it ignores steps).
    """
    from nodewatch.models.checkpoint.intervals import MAX_RUNTIME_H
    from nodewatch.schemas.jobs import never_started

    ela = pd.to_numeric(jobs["elapsed_s"], errors="coerce").astype("float64") / 3600.0  # nullable ints: NA -> NaN
    alloc = jobs["step"].isna().to_numpy() if "step" in jobs.columns else np.ones(len(jobs), bool)
    too_long = (ela > MAX_RUNTIME_H).to_numpy(copy=True) & alloc
    never = never_started(jobs) & alloc
    skipped = {k: int(m.sum()) for k, m in (("never_started", never), ("runtime_over_one_year", too_long)) if m.any()}
    return jobs[~(too_long | never)], skipped


def build_shapes(jobs: pd.DataFrame | None, grid: bool) -> tuple[pd.DataFrame, list[str]]:
    """Shapes from the jobs (via :func:`nodewatch.tasks.checkpoint.shapes.job_shapes`) followed by the default grid.

    Jobs longer than one year are left out (see :func:`usable_jobs`, which reports how many).
    """
    from nodewatch.tasks.checkpoint.shapes import job_shapes

    frames, src = [], []
    if jobs is not None:
        js = job_shapes(usable_jobs(jobs)[0])
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
    predictor: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole run: shapes, failure models, table, outputs, manifest; CURRENT is swapped at the end.

    ``predictor`` (PredictorSpec fields) adds the "with predictor" variables to table.zarr and writes
    ``with_predictor.parquet`` (:func:`nodewatch.tasks.checkpoint.predictor.add_predictor_column`).

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
                    skipped = usable_jobs(job_df)[1]
                    n_skip = sum(skipped.values())
                    rec.add_counts("jobs", RowCounts(rows_in=len(job_df), staged=len(job_df) - n_skip, quarantined=n_skip))
                    rec.manifest.notes["jobs_skipped"] = skipped
            with rec.step("solve"):
                ds = compute_table(
                    shapes, list(ckpt_costs or [CkptCost.fixed(h) for h in DEFAULT_CKPT_COSTS_H]), models, src, restart_h
                )
            pred_df = None
            if predictor is not None:
                from nodewatch.tasks.checkpoint.predictor import PredictorSpec, add_predictor_column, predictor_summary

                with rec.step("with_predictor"):
                    ds, pred_df = add_predictor_column(ds, PredictorSpec(**predictor))
                rec.manifest.notes["predictor"] = {"label": predictor["label"], "summary": predictor_summary(pred_df)}
            with rec.step("write"):
                outs = write_outputs(store, ds, rec.run_id, restart_h, fits, counts)
                if pred_df is not None:
                    store.write_bytes(pred_df.to_parquet(index=False), AREA, rec.run_id, "with_predictor.parquet")
                    outs["with_predictor.parquet"] = store.url_of(AREA, rec.run_id, "with_predictor.parquet")
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
