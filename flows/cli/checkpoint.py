"""``nodewatch checkpoint tables|interval|show``: failure-aware checkpoint intervals (docs/checkpoint.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from nodewatch.flows.cli._json import JsonOpt
from nodewatch.flows.cli._json import print_json as _print_json
from nodewatch.flows.cli._modes import PrefectOpt

if TYPE_CHECKING:
    from rich.console import Console

checkpoint_app = typer.Typer(
    help="Failure-aware checkpoint intervals (Frank ch. 3): one recommendation, or tables for job shapes.",
    no_args_is_help=True,
)


def _out() -> Console:
    """The console for results: the shared one on a terminal; unwrapped (no 80-column wrap) when piped."""
    import sys

    from rich.console import Console

    from nodewatch.flows.cli import console

    if sys.stdout.isatty():
        return console
    return Console(soft_wrap=True, width=100_000, highlight=False)


def _dur(text: str, what: str) -> float:
    from nodewatch.flows.cli import UserError
    from nodewatch.tasks.checkpoint.fits import parse_duration_hours

    try:
        return parse_duration_hours(text, what)
    except ValueError as e:
        raise UserError(str(e)) from None


def _shapes(values: list[float], what: str) -> list[float]:
    from nodewatch.flows.cli import UserError

    for v in values:
        if not v > 0:
            raise UserError(f"{what} must be > 0, got {v}")
    return values


@checkpoint_app.command("interval")
def interval(
    nodes: Annotated[int, typer.Option(help="Nodes the job uses.")],
    hours: Annotated[
        float,
        typer.Option(help="Wall-clock runtime of the job in hours, including the checkpoints it writes (eq. 3.8's t)."),
    ],
    ckpt_cost: Annotated[str, typer.Option(help="Time to write one checkpoint, e.g. 10m, 0.25h.")],
    mtbf_node: Annotated[str | None, typer.Option(help="MTBF of one node, e.g. 5y (job MTBF = it / nodes, eq. 3.14).")] = None,
    mtbf_machine: Annotated[str | None, typer.Option(help="MTBF of the whole machine, e.g. 24h (needs --machine-nodes).")] = None,
    machine_nodes: Annotated[int | None, typer.Option(help="Nodes in the machine (with --mtbf-machine).")] = None,
    weibull_shape: Annotated[float, typer.Option(help="Weibull shape w of the failures (1 = Poisson).")] = 1.0,
    restart: Annotated[str | None, typer.Option(help="Restart cost after a failure, e.g. 5m (interval unchanged).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the aware checkpoint interval for one job with Daly's and Young's beside it."""
    import math

    from nodewatch.flows.cli import UserError
    from nodewatch.models.checkpoint.failures import job_mtbf
    from nodewatch.models.checkpoint.intervals import (
        aware_interval,
        daly_first_order_interval,
        daly_interval,
        expected_cost,
        expected_makespan,
        young_interval,
    )

    if nodes < 1:
        raise UserError(f"--nodes must be >= 1, got {nodes}")
    if not (math.isfinite(hours) and hours > 0):
        raise UserError(f"--hours must be > 0, got {hours}")
    tc = _dur(ckpt_cost, "--ckpt-cost")
    r = _dur(restart, "--restart") if restart else 0.0
    if (mtbf_node is None) == (mtbf_machine is None):
        raise UserError("give exactly one of --mtbf-node or --mtbf-machine (with --machine-nodes)")
    try:
        if mtbf_node is not None:
            m_job = _dur(mtbf_node, "--mtbf-node") / nodes
        else:
            if machine_nodes is None:
                raise UserError("--mtbf-machine needs --machine-nodes")
            m_job = float(job_mtbf(_dur(mtbf_machine, "--mtbf-machine"), machine_nodes, nodes))
        classic = [float(young_interval(m_job, tc)), float(daly_interval(m_job, tc)), float(daly_first_order_interval(m_job, tc))]
        res = aware_interval(hours, tc, m_job, weibull_shape, restart_h=r, extra_tau_h=[classic])
        costs = expected_cost(hours, classic, tc, m_job, weibull_shape, r)
        span = float(expected_makespan(hours, res.tau_h[0], tc, m_job, weibull_shape, r)[()])
    except (ValueError, ArithmeticError) as e:
        raise UserError(str(e)) from None
    tau = float(res.tau_h[0])
    aware_cost = float(res.cost_h[0])
    n = 0 if res.never[0] else math.floor(hours / (tau + tc))
    methods = {}
    for key, t, c in (
        ("young", classic[0], float(costs[0])),
        ("daly", classic[1], float(costs[1])),
        ("daly_first_order", classic[2], float(costs[2])),
    ):
        methods[key] = {
            "tau_h": t,
            "expected_cost_h": c,
            "no_checkpoint_fits": bool(t + tc > hours),
            "aware_saving_pct": 100 * (c - aware_cost) / c if c > 0 else 0.0,
        }
    if as_json:
        _print_json(
            {
                "job": {
                    "nodes": nodes,
                    "hours": hours,
                    "ckpt_cost_h": tc,
                    "restart_h": r,
                    "job_mtbf_h": m_job,
                    "weibull_shape": weibull_shape,
                    "p_fail": float(res.p_fail[0]),
                },
                "aware": {
                    "never_checkpoint": bool(res.never[0]),
                    "tau_h": None if res.never[0] else tau,
                    "period_h": None if res.never[0] else tau + tc,
                    "checkpoints": n,
                    "compute_h": hours - n * tc,
                    "expected_cost_h": aware_cost,
                    "expected_makespan_h": span,
                },
                "methods": methods,
            }
        )
        return
    out = _out()
    out.print(
        f"job: {nodes} nodes x {hours:g} h, checkpoint cost {tc * 60:.1f} min, job MTBF {m_job:,.2f} h "
        f"(Weibull w={weibull_shape:g}), P(failure before the end) = {float(res.p_fail[0]):.3f}"
    )
    if res.never[0]:
        out.print(f"[bold]aware: do not checkpoint[/bold]  expected cost {aware_cost:.3f} h")
    else:
        out.print(
            f"[bold]aware: checkpoint every {tau:.3f} h ({tau * 60:.0f} min of compute)[/bold], "
            f"{n} checkpoint(s) = {hours - n * tc:.3f} h of compute, expected cost {aware_cost:.3f} h"
        )
    out.print(f"expected makespan {span:.3f} h (runtime incl. checkpoints + expected lost work + restart)")
    for name, key in (("Daly", "daly"), ("Young", "young")):
        mt = methods[key]
        note = " (longer than the job: no checkpoint)" if mt["no_checkpoint_fits"] else ""
        out.print(
            f"{name}: every {mt['tau_h']:.3f} h{note}, expected cost {mt['expected_cost_h']:.3f} h; "
            f"aware saves {mt['aware_saving_pct']:.1f}%"
        )


@checkpoint_app.command("tables")
def tables(
    jobs: Annotated[str | None, typer.Option(help="'staged' (all staged jobs) or the run id of a jobs ingest.")] = None,
    system: Annotated[str | None, typer.Option(help="Only jobs of this system.")] = None,
    failures: Annotated[list[str] | None, typer.Option(help="Fit models to staged failures of this system (repeat).")] = None,
    failure_table: Annotated[str, typer.Option(help="Table to fit: failures or failure_events.")] = "failures",
    machine_nodes: Annotated[int | None, typer.Option(help="Machine nodes if the records lack it (PNNL).")] = None,
    group_by: Annotated[str, typer.Option(help="Fit per value of this column (system, node...).")] = "system",
    purpose: Annotated[str, typer.Option(help="Only records of this node purpose ('all': all).")] = "compute",
    window_start: Annotated[
        str | None, typer.Option(help="Observation window start (ISO, UTC); earlier records are dropped and counted.")
    ] = None,
    window_end: Annotated[
        str | None,
        typer.Option(
            help="Observation window end (ISO, UTC); each group's gap from its last failure to it is censored. "
            "Default: last record + 1 min."
        ),
    ] = None,
    mtbf_node: Annotated[list[str] | None, typer.Option(help="Node MTBF, e.g. 5y (repeat; x each --weibull-shape).")] = None,
    weibull_shape: Annotated[list[float] | None, typer.Option(help="Weibull shape for --mtbf-node (repeat; default 1).")] = None,
    ckpt_cost: Annotated[list[str] | None, typer.Option(help="Checkpoint cost (repeat); default 6m, 15m, 30m.")] = None,
    ckpt_size_gib: Annotated[float | None, typer.Option(help="Checkpoint GiB per node (with --fs-bandwidth-gib-s).")] = None,
    fs_bandwidth_gib_s: Annotated[float | None, typer.Option(help="File-system write bandwidth in GiB/s.")] = None,
    no_grid: Annotated[bool, typer.Option("--no-grid", help="Only the jobs' shapes, no 1-8192 x 1-72 h grid.")] = False,
    restart: Annotated[str | None, typer.Option(help="Restart cost after a failure, e.g. 5m.")] = None,
    predictor: Annotated[
        str | None,
        typer.Option(
            help="Add a 'with predictor' column (Aupy et al. 2014): 'latest' (the trained failure predictor's rates, "
            "per node count via UC) or 'r=<recall>,p=<precision>[,cp=<proactive ckpt cost>]'."
        ),
    ] = None,
    prefect: PrefectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build the checkpoint-interval tables into tables/checkpoint/<run_id>/ and point CURRENT at them."""
    import contextlib
    import dataclasses
    import sys

    from nodewatch.flows.cli import UserError, settings

    models = []
    for text in mtbf_node or []:
        h = _dur(text, "--mtbf-node")
        for w in _shapes(weibull_shape or [1.0], "--weibull-shape"):
            kind = "poisson" if w == 1.0 else f"weibull{w:g}"
            models.append({"name": f"{kind}-node-mtbf-{text.strip()}", "mtbf_node_h": h, "shape": w})
    if weibull_shape and not mtbf_node:
        raise UserError("--weibull-shape needs --mtbf-node")
    if not models and not failures:
        raise UserError("give a failure model: --mtbf-node 5y [--weibull-shape 0.8] and/or --failures SYSTEM")
    if failure_table not in ("failures", "failure_events"):
        raise UserError(f"--failure-table must be failures or failure_events, got {failure_table!r}")
    spec = _predictor_spec(predictor) if predictor is not None else None
    for opt, val in (("--window-start", window_start), ("--window-end", window_end)):
        if val is not None:
            try:
                import pandas as pd

                pd.Timestamp(val)
            except (ValueError, TypeError):
                raise UserError(f"{opt}: cannot parse {val!r} as a time; use ISO, e.g. 2005-12-01 or 2005-12-01T00:00Z") from None
    kw = dict(
        store=settings().store,
        jobs=jobs,
        system=system,
        models=models,
        failures=failures or [],
        failure_table=failure_table,
        machine_nodes=machine_nodes,
        group_by=group_by,
        purpose=None if purpose.strip().lower() in ("", "all") else purpose,
        window_start=window_start,
        window_end=window_end,
        ckpt_costs_h=[_dur(c, "--ckpt-cost") for c in ckpt_cost] if ckpt_cost else None,
        ckpt_size_gib=ckpt_size_gib,
        fs_bandwidth_gib_s=fs_bandwidth_gib_s,
        grid=not no_grid,
        restart_h=_dur(restart, "--restart") if restart else 0.0,
        predictor=dataclasses.asdict(spec) if spec is not None else None,
    )
    from nodewatch.flows.cli._modes import print_note, use_prefect

    with_prefect, reason = use_prefect(prefect)
    try:
        # with --json nothing but the JSON document may reach stdout: anything printed on the way goes to stderr
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            if not with_prefect:
                from nodewatch.flows.checkpoint import run_tables

                m = run_tables(**kw)
            else:
                from nodewatch.flows.checkpoint import checkpoint_tables

                m = checkpoint_tables(**kw)
    except (ValueError, ArithmeticError) as e:
        raise UserError(str(e)) from None
    if not with_prefect:
        print_note(reason, m["run_id"])
    if spec is not None:
        m["predictor"] = {**m["notes"]["predictor"], "rows": _predictor_rows(m["run_id"])}
    if as_json:
        _print_json(m)
        return
    out = _out()
    out.print(
        f"run {m['run_id']} {m['status']}: {m['notes']['intervals']:,} checkpointable "
        f"(shape, cost, model) cells in {sum(m['timings'].values()):.1f} s"
    )
    for k, v in (m["notes"].get("jobs_skipped") or {}).items():
        out.print(f"  skipped {v:,} job(s): {_skip_reason(k)}")
    for r in m["notes"]["summary"]:
        out.print(
            f"  {r['failure_model']:<32} {r['ckpt_cost']:<10} mean saving vs Daly {r['mean_saving_vs_daly_pct']}%,"
            f" vs Young {r['mean_saving_vs_young_pct']}%;"
            f" job node-h saved vs Daly {r['job_node_hours_saved_vs_daly']:,.1f}"
        )
    for k, v in (m["notes"].get("failure_prep_counts") or {}).items():
        if k.endswith((".n_censored", ".outside_window", ".window_end")):
            out.print(f"  fit {k}: {v}")
    for k in ("table.md", "table.csv", "fits.csv", "table.zarr", "plots"):
        if k in m["outputs"]:
            out.print(f"{k}: {m['outputs'][k]}")
    if spec is not None:
        from nodewatch.flows.cli._safe import safe

        out.print(f"with predictor {safe(m['predictor']['label'])} (saving of its cost over Daly's):")
        for r in m["predictor"]["summary"]:
            why = f"; where it does not pay: {safe(r['does_not_pay_because'])}" if r["pays_in"] < r["cells"] else ""
            out.print(
                f"  {safe(r['failure_model']):<32} {safe(r['ckpt_cost']):<10} pays in {r['pays_in']}/{r['cells']} cells, "
                f"mean saving vs Daly {r['mean_saving_vs_daly_pct']}%, up to {r['max_nodes_where_it_pays']:,} nodes{why}"
            )


def _predictor_spec(text: str) -> Any:
    """Parse ``--predictor`` before anything runs (``latest`` reads the predictor registry)."""
    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.tasks.checkpoint.predictor import parse_predictor

    latest = None
    if text.strip().lower().startswith("latest"):
        from nodewatch.tasks.predict.registry import current_rates

        try:
            latest = current_rates(get_store())
        except ValueError as e:
            raise UserError(f"--predictor latest: {e}") from None
    try:
        return parse_predictor(text, latest)
    except ValueError as e:
        raise UserError(str(e)) from None


def _predictor_rows(run_id: str) -> list[dict[str, Any]]:
    """The stored 'with predictor' rows of the table run ``run_id`` (with_predictor.parquet)."""
    import pandas as pd

    from nodewatch.flows.cli import get_store
    from nodewatch.tasks.checkpoint.tables import AREA

    st = get_store()
    with st.fs.open(st.path(AREA, run_id, "with_predictor.parquet"), "rb") as f:
        return pd.read_parquet(f).to_dict(orient="records")


def _skip_reason(key: str) -> str:
    from nodewatch.tasks.checkpoint.savings import SKIP_REASONS

    return SKIP_REASONS.get(key, key)


@checkpoint_app.command("trace-savings")
def trace_savings_cmd(
    machine_nodes: Annotated[int, typer.Option(help="Nodes of the machine the trace comes from (eq. 3.14).")],
    trace: Annotated[str | None, typer.Option(help="A job trace file (SWF, sacct) parsed directly.")] = None,
    jobs: Annotated[str | None, typer.Option(help="Or 'staged' / a run id: jobs from the store.")] = None,
    system: Annotated[str | None, typer.Option(help="Only staged jobs of this system.")] = None,
    mtbf_machine: Annotated[list[str] | None, typer.Option(help="System MTBF (repeat); default 36h, 24h.")] = None,
    ckpt_cost: Annotated[list[str] | None, typer.Option(help="Checkpoint cost (repeat); default 30m, 15m, 6m.")] = None,
    weibull_shape: Annotated[float, typer.Option(help="Weibull shape (1 = Poisson).")] = 0.8,
    mc_shapes: Annotated[int, typer.Option(help="Also Monte-Carlo (10,000 failures) this many job shapes.")] = 0,
    mtbf_error: Annotated[float, typer.Option(help="Plan intervals with MTBF x (1 + this), e.g. -0.2 (Table 3.1 c/d).")] = 0.0,
    csv: Annotated[str | None, typer.Option(help="Write the table to this CSV file.")] = None,
    runtime: Annotated[
        str, typer.Option(help="Runtime of a job: 'requested' (the user's time limit, else elapsed) or 'elapsed'.")
    ] = "requested",
    checkpointable: Annotated[
        str,
        typer.Option(help="Jobs counted: 'daly' (t_c + Daly's interval < t) or 'aware' (the aware interval checkpoints too)."),
    ] = "daly",
    weight: Annotated[str, typer.Option(help="Sum costs per 'jobs' or per 'node-hours' (cost x nodes).")] = "jobs",
    as_json: JsonOpt = False,
) -> None:
    """Frank's Table 3.1 method on a job trace: saving of the aware interval vs Young/Daly over all jobs.

    Jobs the model cannot use (never ran, no node count, runtime over one year such as a sentinel
    requested time) are skipped and counted in the output.
    """
    from pathlib import Path

    from rich.table import Table

    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.tasks.checkpoint.savings import read_trace, trace_jobs, trace_savings
    from nodewatch.tasks.checkpoint.tables import load_jobs

    if (trace is None) == (jobs is None):
        raise UserError("give exactly one of --trace FILE or --jobs staged|RUN_ID")
    try:
        raw = read_trace(Path(trace)) if trace else load_jobs(get_store(), jobs, system)
        if trace and system:
            raw = raw[raw["system"] == system]
        used, skipped = trace_jobs(raw, runtime)
        res = trace_savings(
            used,
            machine_nodes,
            [_dur(m, "--mtbf-machine") for m in mtbf_machine] if mtbf_machine else (36.0, 24.0),
            [_dur(c, "--ckpt-cost") for c in ckpt_cost] if ckpt_cost else (0.5, 0.25, 0.1),
            weibull_shape,
            mc_shapes=mc_shapes,
            mtbf_error=mtbf_error,
            checkpointable=checkpointable,
            weight=weight,
        )
    except (ValueError, ArithmeticError) as e:
        raise UserError(str(e)) from None
    if res.empty:
        raise UserError("no checkpointable job (t_c + Daly's interval < runtime) in the trace")
    if csv:
        res.to_csv(csv, index=False, float_format="%.6g")
    jobs_read = int(raw["step"].isna().sum()) if "step" in raw.columns else len(raw)
    if as_json:
        _print_json(
            {
                "jobs_read": jobs_read,
                "jobs_used": len(used),
                "jobs_skipped": skipped,
                "skip_reasons": {k: _skip_reason(k) for k in skipped},
                "runtime": runtime,
                "checkpointable": checkpointable,
                "weight": weight,
                "weibull_shape": weibull_shape,
                "mean_saving_vs_daly_pct": float(res["saving_vs_daly_pct"].mean()),
                "mean_saving_vs_young_pct": float(res["saving_vs_young_pct"].mean()),
                "rows": res.to_dict("records"),
                "csv": csv,
            }
        )
        return
    out = _out()
    out.print(
        f"{jobs_read:,} jobs read, {len(used):,} used ({runtime} runtime; checkpointable by {checkpointable}; "
        f"costs summed per {weight})"
    )
    for k, v in skipped.items():
        out.print(f"skipped {v:,} job(s): {_skip_reason(k)}")
    t = Table(title=f"aware vs classical intervals, Weibull w={weibull_shape:g} (Frank Table 3.1 method)")
    cols = [
        "mtbf_machine_h",
        "ckpt_cost_h",
        "jobs",
        "never_checkpoint_jobs",
        "saving_vs_young_pct",
        "saving_vs_daly_first_order_pct",
        "saving_vs_daly_pct",
    ]
    if mc_shapes:
        cols += ["mc_saving_vs_daly_pct", "analytic_saving_vs_daly_pct_same_shapes"]
    for c in cols:
        t.add_column(c.replace("_", " "), justify="right")
    for _, r in res.iterrows():
        t.add_row(*(f"{int(r[c]):,}" if c.endswith("jobs") else f"{r[c]:.2f}" for c in cols))
    out.print(t)
    out.print(f"mean saving vs Daly {res['saving_vs_daly_pct'].mean():.2f}%, vs Young {res['saving_vs_young_pct'].mean():.2f}%")
    if csv:
        out.print(f"wrote {csv}")


@checkpoint_app.command("show")
def show(
    run_id: Annotated[str | None, typer.Argument(help="Run id (default: CURRENT).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the markdown summary of a checkpoint-table run (--json: run id, totals and the markdown)."""
    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.schemas.names import check_path_token
    from nodewatch.tasks.checkpoint.tables import AREA

    st = get_store()
    rid = run_id or st.current(AREA)
    if rid is None:
        raise UserError(f"no checkpoint tables in {st.url}; run `nodewatch checkpoint tables` first")
    if not st.exists(AREA, check_path_token(rid, "run id"), "table.md"):
        raise UserError(f"no checkpoint table run {rid!r} in {st.url}")
    with st.fs.open(st.path(AREA, rid, "table.md"), "rb") as f:
        md = f.read().decode()
    if as_json:
        from nodewatch.tasks.checkpoint.render import summary_rows
        from nodewatch.tasks.checkpoint.tables import load_table

        ds = load_table(st, rid)
        _print_json(
            {
                "run_id": rid,
                "current": st.current(AREA) == rid,
                "table": st.url_of(AREA, rid, "table.zarr"),
                "summary": summary_rows(ds),
                "markdown": md,
            }
        )
        return
    _out().print(md, markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``checkpoint`` group."""
    app.add_typer(checkpoint_app, name="checkpoint")
