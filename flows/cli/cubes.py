"""``nodewatch cubes build|info|plot``: build the Zarr cubes, show what is in them, plot a node."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from nodewatch.flows.cli._modes import PrefectOpt

cubes_app = typer.Typer(help="Build and inspect the Zarr cubes (cubes/telemetry.zarr, cubes/syslog.zarr).", no_args_is_help=True)


def _day(value: str, what: str) -> date:
    from nodewatch.flows.cli import UserError

    try:
        return date.fromisoformat(value)
    except ValueError:
        raise UserError(f"--{what} {value!r} is not a date (YYYY-MM-DD)") from None


@cubes_app.command("build")
def build(
    start: Annotated[str, typer.Option(help="First day (YYYY-MM-DD, UTC).")],
    end: Annotated[str, typer.Option(help="Last day, inclusive (YYYY-MM-DD, UTC).")],
    dask_address: Annotated[str | None, typer.Option(help="Existing Dask scheduler (default: a LocalCluster).")] = None,
    kind: Annotated[list[str] | None, typer.Option(help="Cube(s) to build: telemetry, syslog (default both).")] = None,
    step: Annotated[str | None, typer.Option(help="Telemetry window (default from settings, 15min).")] = None,
    epoch: Annotated[str | None, typer.Option(help="First day of the time axis when creating a cube.")] = None,
    force: Annotated[bool, typer.Option(help="Rebuild days that are already complete.")] = False,
    processes: Annotated[bool, typer.Option(help="LocalCluster with worker processes instead of threads.")] = False,
    dashboard: Annotated[str | None, typer.Option(help="Serve the Dask dashboard at this address (':8787' binds "
                                                       "127.0.0.1; default: no dashboard).")] = None,
    prefect: PrefectOpt = None,
) -> None:
    """Aggregate staged telemetry/syslog of START..END into the cubes (idempotent per day)."""
    from nodewatch.flows.cli import UserError, console, settings
    from nodewatch.flows.cli._modes import print_note, use_prefect
    from nodewatch.flows.cubes import build_cubes, run_build
    from nodewatch.schemas.cubes import CUBE_KINDS

    s, e = _day(start, "start"), _day(end, "end")
    if e < s:
        raise UserError(f"--end {end} is before --start {start}")
    kinds = kind or list(CUBE_KINDS)
    for k in kinds:
        if k not in CUBE_KINDS:
            raise UserError(f"--kind {k!r}: expected one of {', '.join(CUBE_KINDS)}")
    with_prefect, reason = use_prefect(prefect)
    try:
        m = (build_cubes if with_prefect else run_build)(
            s,
            e,
            store=settings().store,
            kinds=kinds if with_prefect else tuple(kinds),
            dask_address=dask_address,
            step=step,
            epoch=_day(epoch, "epoch") if epoch else None,
            force=force,
            processes=processes,
            dashboard=dashboard,
        )
    except (ValueError, TimeoutError) as err:
        raise UserError(str(err)) from None
    if not with_prefect:
        print_note(reason, m["run_id"])
    from nodewatch.flows.cli._safe import cells, safe

    t = Table(title=safe(f"build_cubes run {m['run_id']} ({m['status']})"))
    for col in ("cube", "day", "status", "rows used", "nodes with data", "seconds"):
        t.add_column(col)
    for r in m["outputs"].get("days", []):
        t.add_row(*cells(
            r["cube"],
            r["day"],
            r["status"],
            f"{r.get('rows_used') or 0:,}",
            str(r.get("nodes_with_data") or ""),
            str(r.get("seconds") or ""),
        ))
    console.print(t)


@cubes_app.command("info")
def info(
    kind: Annotated[str, typer.Option(help="telemetry or syslog.")] = "telemetry",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Dims, chunks, size on disk and coverage per day of a cube."""
    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.schemas.cubes import CUBE_KINDS
    from nodewatch.tasks.cubes.info import cube_info

    if kind not in CUBE_KINDS:
        raise UserError(f"--kind {kind!r}: expected one of {', '.join(CUBE_KINDS)}")
    store = get_store()
    inf = cube_info(store, kind)
    if inf is None:
        raise UserError(f"no {kind} cube in {store.url}: run `nodewatch cubes build --start ... --end ...` first")
    if as_json:
        console.print_json(json.dumps(inf), ensure_ascii=True)
        return
    from nodewatch.flows.cli._safe import cells, safe

    console.print(
        f"[bold]{safe(inf['url'])}[/bold]  step={inf['step']}  epoch={inf['epoch']}  "
        f"allocated until {inf['allocated_until']}  nodes={inf['nodes']}  metrics={inf['metrics']}  "
        f"node chunk={inf['node_chunk']}  size={inf['size_bytes'] / 2**20:.2f} MiB"
    )
    tv = Table(title="variables")
    for col in ("variable", "dims", "shape", "chunks", "dtype"):
        tv.add_column(col)
    for name, v in inf["variables"].items():
        tv.add_row(*cells(name, ", ".join(v["dims"]), tuple(v["shape"]), tuple(v["chunks"]), v["dtype"]))
    console.print(tv)
    td = Table(title="coverage per day")
    for col in ("day", "status", "nodes with data", "windows with data", "rows used", "run"):
        td.add_column(col)
    for d in inf["days"]:
        cov = d.get("coverage")
        td.add_row(*cells(
            d["day"],
            d["status"],
            str(d.get("nodes_with_data", "")),
            "" if cov is None else f"{cov:.1%}",
            f"{d['rows_used']:,}" if d.get("rows_used") is not None else "",
            str(d.get("run_id") or ""),
        ))
    console.print(td)


@cubes_app.command("verify")
def verify(
    kind: Annotated[list[str] | None, typer.Option(help="Cube(s) to check: telemetry, syslog (default both).")] = None,
    repair: Annotated[bool, typer.Option(help="Rebuild the damaged days from the staged data.")] = False,
) -> None:
    """Read every chunk of the cubes; name damaged ones (variable, day, file); with --repair rebuild their days."""
    from nodewatch.flows.cli import UserError, console, get_store, settings
    from nodewatch.schemas.cubes import CUBE_KINDS
    from nodewatch.tasks.cubes import repo
    from nodewatch.tasks.cubes.verify import damage_error, find_damage

    kinds = kind or list(CUBE_KINDS)
    for k in kinds:
        if k not in CUBE_KINDS:
            raise UserError(f"--kind {k!r}: expected one of {', '.join(CUBE_KINDS)}")
    store = get_store()
    damaged: dict[str, list[date]] = {}
    for k in kinds:
        key = f"{k}.zarr"
        if not repo.exists(store, key):
            console.print(f"{key}: not built")
            continue
        try:
            dmg = find_damage(store, key)
        except (ValueError, OSError) as err:
            raise UserError(f"{key}: cannot open the cube ({err})") from None
        if not dmg:
            console.print(f"{key}: every chunk reads")
            continue
        console.print(str(damage_error(store, key, dmg)), markup=False, highlight=False, soft_wrap=True)
        days = sorted({date.fromisoformat(d.day) for d in dmg if d.day})
        damaged[k] = days
    if not damaged:
        return
    if not repair:
        raise UserError(f"damaged cube(s): {', '.join(damaged)}; run `nodewatch cubes verify --repair`")
    from nodewatch.flows.cubes import run_build

    for k, days in damaged.items():
        if not days:
            raise UserError(f"{k}.zarr: damage outside any day (coordinates); move the cube aside and rebuild it")
        try:
            m = run_build(min(days), max(days), settings().store, kinds=(k,), days=days)
        except (ValueError, TimeoutError) as err:
            raise UserError(str(err)) from None
        console.print(f"{k}.zarr: rebuilt {', '.join(d.isoformat() for d in days)} (run {m['run_id']})")
        left = find_damage(store, f"{k}.zarr", days)
        if left:
            raise UserError(str(damage_error(store, f"{k}.zarr", left)))


@cubes_app.command("plot")
def plot(
    node: Annotated[str, typer.Option(help="Node name.")],
    metric: Annotated[str, typer.Option(help="Metric name.")],
    out: Annotated[Path | None, typer.Option(help="PNG path (default cube-<node>-<metric>.png).")] = None,
    start: Annotated[str | None, typer.Option(help="First time shown (ISO).")] = None,
    end: Annotated[str | None, typer.Option(help="Last time shown (ISO).")] = None,
) -> None:
    """PNG of one node × metric: mean, mean ± std and min–max per window."""
    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.schemas.names import check_node_name, check_path_token
    from nodewatch.tasks.cubes.plot import plot_node_metric

    check_node_name(node)
    check_path_token(metric, "metric")
    for v, what in ((start, "start"), (end, "end")):
        if v is not None:
            try:
                datetime.fromisoformat(v)
            except ValueError:
                raise UserError(f"--{what} {v!r} is not an ISO time") from None
    target = out or Path(f"cube-{node}-{metric}.png")
    try:
        p = plot_node_metric(get_store(), node, metric, target, start, end)
    except ValueError as err:
        raise UserError(str(err)) from None
    from nodewatch.flows.cli._safe import safe

    console.print(f"wrote {safe(p)}")


def register(app: typer.Typer) -> None:
    """Add the ``cubes`` group."""
    app.add_typer(cubes_app, name="cubes")
