"""``nodewatch simulate``: write a simulated cluster (real formats + ground truth) day by day.

Examples::

    nodewatch simulate --nodes 1000 --start 2026-01-01 --days 30 --seed 1 --out sim/
    nodewatch simulate --out sim/ --append            # the next day of an existing cluster
    nodewatch simulate --out sim/ --day 12            # (re)render day 12 only, byte-identical
    nodewatch simulate --nodes 96 --set anomaly_share=0.05 --set ldms_racks=[0,1] --out sim/
    nodewatch simulate --config knobs.json --out sim/  # any SimConfig knob (docs/simulator.md)
    nodewatch simulate plot --out sim/ --node cn0042 --png docs/simulator-week.png

Precedence: defaults < --config FILE.json < the dedicated options given on the command line < --set key=value.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

sim_app = typer.Typer(help="Simulated 1000-node cluster writing real formats with ground truth.", invoke_without_command=True)


def _parse_step(step: str) -> int:
    from nodewatch.flows.cli import UserError

    units = {"s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600}
    for u in sorted(units, key=len, reverse=True):
        if step.endswith(u) and step[: -len(u)].isdigit():
            return int(step[: -len(u)]) * units[u]
    if step.isdigit():
        return int(step)
    raise UserError(f"--step {step!r}: use e.g. 1min, 30s, 5min")


@sim_app.callback(invoke_without_command=True)
def simulate_cmd(
    ctx: typer.Context,
    out: Annotated[Path | None, typer.Option(help="Output directory (created).")] = None,
    nodes: Annotated[int, typer.Option(help="Number of compute nodes (cn0001...).")] = 1000,
    start: Annotated[str, typer.Option(help="First simulated day (YYYY-MM-DD, UTC).")] = "2026-01-01",
    days: Annotated[int, typer.Option(help="Number of days to write, from --start.")] = 1,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, day, batch -> same bytes).")] = 1,
    step: Annotated[str, typer.Option(help="Telemetry step, e.g. 1min, 30s.")] = "1min",
    anomaly_share: Annotated[float, typer.Option(help="Share of node-time inside anomalies.")] = 0.01,
    mtbf_days: Annotated[float, typer.Option(help="Mean time between failures of a healthy node (days).")] = 200.0,
    weibull_shape: Annotated[float, typer.Option(help="Weibull shape of node time-between-failures.")] = 0.75,
    precursor_share: Annotated[float, typer.Option(help="Share of failures with precursors.")] = 0.7,
    precursor_shape: Annotated[
        str, typer.Option(help="How a precursor shows in telemetry: ramp, step or oscillation (docs/simulator.md).")
    ] = "ramp",
    precursor_strength: Annotated[float, typer.Option(help="Amplitude factor of precursors in telemetry (0 = none).")] = 1.0,
    load_scale: Annotated[float, typer.Option(help="Arrival-rate multiplier of the fitted workload.")] = 1.0,
    workers: Annotated[int, typer.Option(help="Dask workers.")] = 2,
    scheduler: Annotated[str, typer.Option(help="Dask scheduler: threads, processes or synchronous.")] = "threads",
    day: Annotated[int | None, typer.Option(help="Render only this day index (0 = --start) of the cluster in --out.")] = None,
    append: Annotated[bool, typer.Option("--append", help="Render the day after the last one written in --out.")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="JSON object of SimConfig knobs (docs/simulator.md).")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="KNOB=VALUE (repeatable; VALUE as JSON, e.g. ldms_racks=[0,1]).")
    ] = None,
) -> None:
    """Write telemetry (parquet + LDMS CSV), syslog, sacct/SWF, Nagios alerts, tickets, reservations, topology, truth."""
    if ctx.invoked_subcommand:
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from nodewatch.flows.cli import UserError, console
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.simulate.cluster import load_state, simulate
    from nodewatch.tasks.simulate.config import SimConfig

    if out is None:
        raise UserError("--out DIR is required")
    state = load_state(out)
    if append or day is not None:
        if state is None:
            raise UserError(f"{out}: no simulation.json (run `nodewatch simulate --out {out} ...` first)")
        cfg, written = state
        todo = [max(written) + 1 if written else 0] if append else [day]  # type: ignore[list-item]
        if todo[0] < 0:
            raise UserError(f"--day must be >= 0, got {todo[0]}")
    else:
        try:
            start_d = date.fromisoformat(start)
        except ValueError:
            raise UserError(f"--start {start!r}: expected YYYY-MM-DD") from None
        if days < 1:
            raise UserError(f"--days must be >= 1, got {days}")
        overrides: dict = {}
        if config is not None:
            try:
                overrides = json.loads(config.read_text())
            except (OSError, json.JSONDecodeError) as e:
                raise UserError(f"--config {config}: {e}") from None
            if not isinstance(overrides, dict):
                raise UserError(f"--config {config}: expected a JSON object of knobs")
        given = {k for k in ctx.params if getattr(ctx.get_parameter_source(k), "name", "") == "COMMANDLINE"}
        opt = {
            "nodes": ("n_nodes", nodes),
            "start": ("start", start_d),
            "seed": ("seed", seed),
            "anomaly_share": ("anomaly_share", anomaly_share),
            "mtbf_days": ("node_mtbf_days", mtbf_days),
            "weibull_shape": ("failure_weibull_shape", weibull_shape),
            "precursor_share": ("precursor_share", precursor_share),
            "precursor_shape": ("precursor_shape", precursor_shape),
            "precursor_strength": ("precursor_strength", precursor_strength),
            "load_scale": ("load_scale", load_scale),
            "workers": ("workers", workers),
            "scheduler": ("scheduler", scheduler),
        }
        for k, (knob, v) in opt.items():
            if k in given or knob not in overrides:
                overrides[knob] = v
        if "step" in given or "step_s" not in overrides:
            overrides["step_s"] = _parse_step(step)
        for item in set_ or []:
            k, eq, v = item.partition("=")
            if not eq or not k.strip():
                raise UserError(f"--set {item!r}: expected KNOB=VALUE")
            overrides[k.strip()] = v.strip()
        try:
            cfg = SimConfig.from_overrides(overrides)
        except (ValueError, TypeError) as e:
            raise UserError(str(e)) from None
        if state is not None and dataclasses.replace(state[0], workers=workers, scheduler=scheduler) != cfg:
            raise UserError(f"{out} holds a different simulated cluster (see {out}/simulation.json); use another --out")
        todo = list(range(days))
    cols = (TextColumn("[bold]simulate[/bold] {task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"))
    with Progress(*cols, TimeElapsedColumn(), console=console) as prog:
        task = prog.add_task(f"{cfg.n_nodes} nodes, days {todo[0]}..{todo[-1]}", total=None)

        def cb(stage: str, done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        res = simulate(cfg, out, todo, progress=cb)
    console.print(
        f"wrote {len(todo)} day(s) to {safe(out)}: {int(res.get('values', 0)):,} telemetry values, "
        f"{int(res.get('syslog_lines', 0)) + int(res.get('controller_lines', 0)):,} syslog lines, "
        f"{int(res.get('jobs_ended', 0)):,} jobs ended, {res['seconds']:.1f} s"
    )


@sim_app.command("plot")
def plot_cmd(
    out: Annotated[Path, typer.Option(help="Directory of a simulated cluster.")],
    png: Annotated[Path, typer.Option(help="PNG to write.")] = Path("docs/simulator-week.png"),
    node: Annotated[str | None, typer.Option(help="Node to plot (default: one with a failure and anomalies).")] = None,
) -> None:
    """Plot one node's week: jobs, metrics, anomalies, precursors and failures."""
    from nodewatch.flows.cli import UserError, console
    from nodewatch.flows.cli._safe import safe
    from nodewatch.schemas.names import check_node_name
    from nodewatch.tasks.simulate.plot import plot_node_week

    if node is not None:
        check_node_name(node)
    if not (out / "simulation.json").exists():
        raise UserError(f"{out}: not a simulated cluster (no simulation.json)")
    chosen = plot_node_week(out, png, node)
    console.print(f"wrote {safe(png)} ({safe(chosen)})")


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` group."""
    app.add_typer(sim_app, name="simulate")
