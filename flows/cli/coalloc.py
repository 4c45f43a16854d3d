"""``nodewatch coalloc pairs|replay``: co-allocation what-if from Frank ch. 2 (docs/coalloc.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from nodewatch.flows.cli._json import JsonOpt
from nodewatch.flows.cli._json import print_json as _print_json

coalloc_app = typer.Typer(
    help="Co-allocation what-if (Frank ch. 2): pair interference table and batch-queue replays with node sharing.",
    no_args_is_help=True,
)


def _out() -> Any:
    """The console for results: the shared one on a terminal; unwrapped when piped."""
    import sys

    from rich.console import Console

    from nodewatch.flows.cli import console

    return console if sys.stdout.isatty() else Console(soft_wrap=True, width=250, highlight=False)


def _section() -> Any:
    from nodewatch.flows.cli import _load_settings
    from nodewatch.tasks.coalloc.settings import coalloc_settings

    return coalloc_settings(_load_settings())


def _min_saving(v: float | None, default: float) -> float:
    import math

    from nodewatch.flows.cli import UserError

    if v is None:
        return default
    if not (math.isfinite(v) and -1.0 <= v <= 1.0):
        raise UserError(f"--min-saving must be a fraction in [-1, 1] (0.10 = 10 %), got {v}")
    return v


@coalloc_app.command("pairs")
def pairs(
    min_saving: Annotated[
        float | None, typer.Option(help="Derived twin rule: forbid a pair saving less than this fraction (default 0.10).")
    ] = None,
    ranks: Annotated[
        list[int] | None, typer.Option("--ranks", help="Also show the fitted model at this rank count (repeatable).")
    ] = None,
    png: Annotated[
        Path | None, typer.Option(help="Write the heat map here (default: tables/coalloc/pairs/pairs.png in the store).")
    ] = None,
    values: Annotated[
        str, typer.Option(help="Table shows 'saving' (per pair, Table 2.2) or 'slowdown' (per ordered pair, Table 2.1).")
    ] = "saving",
    as_json: JsonOpt = False,
) -> None:
    """Table 2.2 per pair and rank count: core hours, slowdowns, saving, twin rules; heat-map PNG."""
    from rich.table import Table

    from nodewatch.flows.cli import UserError
    from nodewatch.flows.cli._safe import safe
    from nodewatch.models.coalloc.frank_tables import PAIRS, RANKS
    from nodewatch.models.coalloc.interference import derived_forbidden_pairs, measured_savings
    from nodewatch.tasks.coalloc.pairs import fit_summary, pairs_table
    from nodewatch.tasks.coalloc.plots import pairs_heatmap

    ms = _min_saving(min_saving, _section().min_saving)
    if values not in ("saving", "slowdown"):
        raise UserError(f"--values {values!r}: use 'saving' or 'slowdown'")
    extra = list(ranks or [])
    for n in extra:
        if not 1 <= n <= 10**7:
            raise UserError(f"--ranks must be in 1..10000000, got {n}")
    df = pairs_table(ms, extra)
    forbidden = derived_forbidden_pairs(ms)
    image = pairs_heatmap(measured_savings(), forbidden)
    if png is not None:
        if png.is_dir() or not png.parent.is_dir():
            raise UserError(f"--png {png}: not a file path in an existing directory")
        if png.is_symlink():
            raise UserError(f"--png {png}: is a symbolic link; give a regular file path")
        png.write_bytes(image)
        where = str(png)
    else:
        from nodewatch.flows.cli import settings
        from nodewatch.tasks.core.store import Store

        where = Store(settings().store).write_bytes(image, "tables", "coalloc", "pairs", "pairs.png")
    fit = fit_summary()
    if as_json:
        _print_json({"pairs": df.to_dict(orient="records"), "forbidden_measured": sorted(forbidden),
                     "min_saving": ms, "fit": fit, "png": where})
        return
    if values == "slowdown":
        import numpy as np

        from nodewatch.models.coalloc.frank_tables import APPS
        from nodewatch.models.coalloc.interference import InterferenceModel, measured_slowdown

        model = InterferenceModel().fit()
        meas = measured_slowdown()
        tab = Table(title="Frank Table 2.1: slowdown of the application next to the partner (COA / STD runtime)")
        for c in ("application", "partner", *[str(n) for n in RANKS], *[f"{n} (fit)" for n in extra]):
            tab.add_column(c, justify="left" if c in ("application", "partner") else "right")
        for i, p in enumerate(APPS):
            for j, q in enumerate(APPS):
                fitted = [f"{float(model.slowdown(i, j, n)):.2f}" for n in extra]
                tab.add_row(p, q, *[f"{v:.2f}" for v in np.asarray(meas[i, j])], *fitted)
    else:
        tab = Table(title="Frank Table 2.2: core-hour saving of COA vs STD in % by ranks; "
                          f"measured rule forbids < {100 * ms:.0f} %")
        tab.add_column("pair")
        for n in [*RANKS, *extra]:
            tab.add_column(f"{n}{'' if n in RANKS else ' (fit)'}", justify="right")
        tab.add_column("no twins")
        tab.add_column("measured rule")
        for p, q in PAIRS:
            sub = df[(df["app"] == p) & (df["partner"] == q)]
            vals = [f"{100 * s:.1f}" for s in sub["saving"]]
            tab.add_row(f"{p}+{q}", *vals, "yes" if p != q else "no", "no" if (p, q) in forbidden else "yes")
    out = _out()
    out.print(tab)
    out.print(f"fit: {safe(fit['form'])}; slowdown error in-sample mean {100 * fit['slowdown_in_sample_mean']:.1f} %, "
                  f"leave-one-rank-out mean {100 * fit['slowdown_loo_mean']:.1f} % (max {100 * fit['slowdown_loo_max']:.1f} %)")
    out.print(f"heat map: {safe(where)}")


@coalloc_app.command("replay")
def replay(
    trace: Annotated[Path | None, typer.Option(help="SWF trace (.swf, .swf.gz) or job-list CSV to replay.")] = None,
    jobs: Annotated[str | None, typer.Option(help="'staged': replay the staged jobs table of the store.")] = None,
    system: Annotated[str | None, typer.Option(help="With --jobs staged: only this system (SWF file stem / cluster).")] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes of the machine (synthetic default 512; required for traces).")] = None,
    cores_per_node: Annotated[int | None, typer.Option(help="Physical cores per node (default 32).")] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(help="exclusive, naive, no_twins or measured (repeatable; default: the first three)."),
    ] = None,
    algorithm: Annotated[
        list[str] | None, typer.Option(help="backfill (FCFS + EASY) or firstfit (repeatable; default both).")
    ] = None,
    seeds: Annotated[int | None, typer.Option(help="Synthetic queues per setup, seeds 1..N (default 5).")] = None,
    n_jobs: Annotated[int | None, typer.Option(help="Jobs per synthetic queue (default 4096).")] = None,
    horizon: Annotated[
        float | None,
        typer.Option(help="Count jobs finished within this many seconds (synthetic default 3600; 0 = whole queue)."),
    ] = None,
    min_saving: Annotated[float | None, typer.Option(help="Twin rule of the 'measured' policy (default 0.10).")] = None,
    class_rule: Annotated[
        str, typer.Option(help="Traces: 'runtime' (runtime quintiles -> classes, one run) or 'random' (seeded, --seeds runs).")
    ] = "runtime",
    as_json: JsonOpt = False,
) -> None:
    """Replay a batch queue with exclusive and co-allocated nodes; write tables, PNG and manifest to the store."""
    import math
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from nodewatch.flows.cli import UserError, err_console, settings
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.coalloc.replay import Machine, check_choices, run_setups, summarise, synthetic
    from nodewatch.tasks.coalloc.trace import load_staged, load_trace
    from nodewatch.tasks.core.store import Store

    cfg = _section()
    if trace is not None and jobs is not None:
        raise UserError("give --trace FILE or --jobs staged, not both")
    if jobs is not None and jobs != "staged":
        raise UserError(f"--jobs {jobs!r}: only 'staged' is supported (or use --trace FILE)")
    if system is not None and jobs is None:
        raise UserError("--system needs --jobs staged")
    real = trace is not None or jobs is not None
    if real and nodes is None:
        raise UserError("--nodes is required with --trace/--jobs (the machine the trace is replayed on)")
    n_nodes = cfg.nodes if nodes is None else nodes
    cores = cfg.cores_per_node if cores_per_node is None else cores_per_node
    if not 1 <= n_nodes <= 1_000_000:
        raise UserError(f"--nodes must be in 1..1000000, got {n_nodes}")
    if not 1 <= cores <= 4096:
        raise UserError(f"--cores-per-node must be in 1..4096, got {cores}")
    pols = [p.strip() for item in (policy or ["exclusive", "naive", "no_twins"]) for p in item.split(",") if p.strip()]
    algs = [a.strip() for item in (algorithm or ["backfill", "firstfit"]) for a in item.split(",") if a.strip()]
    pols, algs = list(dict.fromkeys(pols)), list(dict.fromkeys(algs))  # a repeated name runs once
    try:
        check_choices(algs, pols)
    except ValueError as e:
        raise UserError(str(e)) from None
    if not pols or not algs:
        raise UserError("give at least one --policy and one --algorithm")
    n_seeds = cfg.seeds if seeds is None else seeds
    if not 1 <= n_seeds <= 1000:
        raise UserError(f"--seeds must be in 1..1000, got {n_seeds}")
    njobs = cfg.jobs if n_jobs is None else n_jobs
    if not 1 <= njobs <= 10_000_000:
        raise UserError(f"--n-jobs must be in 1..10000000, got {njobs}")
    if horizon is not None and not (math.isfinite(horizon) and horizon >= 0):
        raise UserError(f"--horizon must be >= 0 seconds (0 = whole queue), got {horizon}")
    hz = (cfg.horizon_s if not real else None) if horizon is None else (horizon or None)
    ms = _min_saving(min_saving, cfg.min_saving)
    if class_rule not in ("runtime", "random"):
        raise UserError(f"--class-rule {class_rule!r}: use 'runtime' or 'random'")
    if class_rule == "random" and not real:
        raise UserError("--class-rule applies to --trace/--jobs (the synthetic queue draws its classes itself)")
    if class_rule == "random" and trace is not None and ".csv" in trace.name.lower():
        raise UserError("--class-rule random: a job-list CSV names each job's class itself")
    store = Store(settings().store)
    t0 = time.perf_counter()
    if real:
        try:
            loaded = load_trace(trace, n_nodes, cores) if trace is not None else load_staged(store, n_nodes, cores, system)
        except ValueError as e:  # InputError is a ValueError too
            raise UserError(str(e)) from None
        if len(loaded.jobs) == 0:
            raise UserError(f"{loaded.source}: no job to replay ({loaded.counts.get('quarantined', 0)} quarantined)")
        if class_rule == "random":
            import dataclasses

            from nodewatch.models.coalloc.workload import classes_random

            base = loaded.jobs
            queue_of = lambda seed: dataclasses.replace(base, app=classes_random(len(base), seed))  # noqa: E731
            seed_list = list(range(1, n_seeds + 1))
        else:
            queue_of = lambda _seed: loaded.jobs  # noqa: E731
            seed_list = [0]
        source, quarantine, counts = loaded.source, loaded.quarantine, loaded.counts
    else:
        queue_of = synthetic(njobs, cores)
        seed_list = list(range(1, n_seeds + 1))
        source = f"synthetic {njobs} jobs (Frank §2.2.4)"
        import pandas as pd

        quarantine, counts = pd.DataFrame(), {"rows_in": njobs * n_seeds, "replayed": njobs * n_seeds, "quarantined": 0}
    t_load = time.perf_counter() - t0
    total = len(seed_list) * len(algs) * len(pols)
    with Progress(TextColumn("[bold]replay[/bold] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True, disable=as_json) as prog:
        task = prog.add_task(safe(source), total=total)

        def step(msg: str) -> None:
            prog.update(task, advance=1, description=safe(msg))

        t1 = time.perf_counter()
        runs = run_setups(queue_of, seed_list, algs, pols, Machine(n_nodes, cores, hz), ms, progress=step)
        t_replay = time.perf_counter() - t1
    summary = summarise(runs)
    params = {"trace": str(trace) if trace else None, "jobs": jobs, "system": system, "nodes": n_nodes,
              "cores_per_node": cores, "policies": pols, "algorithms": algs, "seeds": seed_list, "n_jobs": njobs,
              "horizon_s": hz, "min_saving": ms,
              "class_rule": class_rule if real else "synthetic"}
    from nodewatch.tasks.coalloc.publish import publish_replay

    m = publish_replay(store, runs, summary, quarantine, counts, params, source,
                       timings={"load": t_load, "replay": t_replay})
    publish_summary = {"run_id": m["run_id"], "status": m["status"], "source": source, "job_counts": counts,
                       "summary": summary.to_dict(orient="records"), "outputs": m["outputs"],
                       "timings_s": {"load": t_load, "replay": t_replay}}
    if as_json:
        _print_json(publish_summary)
        return
    tab = Table(title=f"co-allocation replay: {safe(source)} on {n_nodes} nodes × {cores} cores"
                      f"{f', {hz:g} s horizon' if hz else ''}")
    for c in ("algorithm", "policy", "E_util %", "E_comp %", "E_comp 95% CI", "E_sched %", "thesis E_comp/E_sched %",
              "makespan h", "mean wait h", "jobs done"):
        tab.add_column(c, justify="left" if c in ("algorithm", "policy") else "right")
    for _, r in summary.iterrows():
        ci = "" if math.isnan(r["e_comp_lo"]) else f"{100 * r['e_comp_lo']:.1f}-{100 * r['e_comp_hi']:.1f}"
        th = [r.get("thesis_e_comp"), r.get("thesis_e_sched")]
        th_s = "/".join("-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.0f}" for v in th)
        tab.add_row(r["algorithm"], r["policy"], f"{100 * r['e_util']:.1f}", f"{100 * r['e_comp']:.1f}", ci,
                    f"{100 * r['e_sched']:.1f}", th_s, f"{r['makespan_s'] / 3600:.2f}", f"{r['wait_mean_s'] / 3600:.2f}",
                    f"{r['jobs_finished']:.1f}")
    out = _out()
    out.print(tab)
    out.print("jobs: " + ", ".join(f"{safe(k)} {v:,}" for k, v in counts.items()))
    out.print(f"run {safe(m['run_id'])} {safe(m['status'])}: load {t_load:.1f} s, replay {t_replay:.1f} s; "
                  f"PNG {safe(m['outputs']['png'])}")


def register(app: typer.Typer) -> None:
    """Add the ``coalloc`` group."""
    app.add_typer(coalloc_app, name="coalloc")
