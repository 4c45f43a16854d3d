"""``nodewatch jobs shapes``: job-shape table (node count × runtime) of staged job records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    import pyarrow as pa

    from nodewatch.tasks.core.store import Store

jobs_app = typer.Typer(help="Look at staged job records (Slurm sacct / SWF).", no_args_is_help=True)


def load_jobs(store: Store, run: str) -> tuple[pa.Table, str]:
    """Staged jobs written by ``run`` (a run id, ``latest`` job ingest run, or ``all``) and the run id
    (``latest`` resolved)."""
    from nodewatch.flows.cli import UserError
    from nodewatch.tasks.core.runs import load_manifest

    if run == "all":
        t = store.read_staged("jobs")
    else:
        if run == "latest":
            ids = [
                r
                for r in store.list_runs()
                if load_manifest(store, r).flow in ("ingest_jobs", "ingest", "ingest_jobs_demo")
                and "jobs" in load_manifest(store, r).counts
            ]
            if not ids:
                raise UserError(f"no job ingest run in {store.url}; run `nodewatch ingest jobs FILES…` first")
            run = ids[-1]
        if run not in store.list_runs():
            raise UserError(f"no run {run!r} in {store.url} (see `nodewatch runs list`)")
        t = store.read_staged("jobs", run_id=run)
    if t is None or t.num_rows == 0:
        raise UserError(f"no staged jobs for {run!r} in {store.url}")
    return t, run


@jobs_app.command("shapes")
def shapes(
    run: Annotated[str, typer.Argument(help="Run id of an ingest run, 'latest' or 'all' staged jobs.")] = "latest",
    system: Annotated[str | None, typer.Option(help="Only jobs of this system (SWF machine / Slurm cluster).")] = None,
    png: Annotated[Path | None, typer.Option(help="Write the node-hours heat map here (default: beside the store).")] = None,
) -> None:
    """Bucket jobs by node count (powers of two) × runtime (log-spaced): job counts and node-hours per bucket."""
    import pyarrow.compute as pc

    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.checkpoint.shapes import format_shapes_table, job_shapes, plot_shapes

    store = get_store()
    t, run = load_jobs(store, run)
    if system:
        t = t.filter(pc.equal(t.column("system"), system))
        if t.num_rows == 0:
            raise UserError(f"no jobs of system {system!r} in {run}")
    df = job_shapes(t)
    console.print(format_shapes_table(df, title=safe(f"Job shapes — {run}" + (f" ({system})" if system else ""))))
    out = png or store.report_dir("jobs") / f"shapes-{run}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    plot_shapes(df, out)
    console.print(f"heat map: {safe(out)}")


def register(app: typer.Typer) -> None:
    """Add the ``jobs`` group."""
    app.add_typer(jobs_app, name="jobs")
