"""``nodewatch runs list|show``: inspect run manifests."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

runs_app = typer.Typer(help="Inspect run manifests (runs/<run_id>.json).", no_args_is_help=True)


@runs_app.command("list")
def list_runs(
    flow: Annotated[str | None, typer.Option(help="Only runs of this flow (ingest_jobs, nightly …; 'ingest': every "
                                                   "ingest_<source>).")] = None,
    last: Annotated[int, typer.Option(help="Show the last N runs.")] = 20,
) -> None:
    """List runs, newest first, with status and row counts (``abandoned``: its process is gone).

    Flows are shown by the naming scheme of :mod:`nodewatch.flows.run_names` (an old ``ingest`` manifest as
    ``ingest_<source>``). Unreadable manifests are skipped, each named in one line on stderr.
    """
    from nodewatch.flows.cli import console, err_console, get_store
    from nodewatch.flows.cli._safe import cells, safe
    from nodewatch.flows.run_names import canonical_flow, flow_matches
    from nodewatch.tasks.core.runs import ManifestError, effective_status, load_manifest

    store = get_store()
    t = Table(title=f"runs in {safe(store.url)}")
    for col in ("run id", "flow", "status", "rows in", "staged", "quarantined", "duplicates", "seconds"):
        t.add_column(col, justify="right" if col not in ("run id", "flow", "status") else "left")
    ids = store.list_runs()
    shown = 0
    for rid in ids[::-1]:
        try:
            m = load_manifest(store, rid)
        except (ManifestError, FileNotFoundError) as e:
            err_console.print(safe(f"skipped {e}" if isinstance(e, ManifestError) else f"skipped runs/{rid}.json: gone"),
                              highlight=False, soft_wrap=True)
            continue
        if flow and not flow_matches(flow, m.flow, m.parameters):
            continue
        c = {k: sum(getattr(v, k) for v in m.counts.values()) for k in ("rows_in", "staged", "quarantined", "duplicates")}
        secs = (m.finished - m.started).total_seconds() if m.finished else float("nan")
        name = canonical_flow(m.flow, m.parameters)
        t.add_row(*cells(rid, name, effective_status(m), *(f"{c[k]:,}" for k in c), f"{secs:.1f}"))
        shown += 1
        if shown >= last:
            break
    console.print(t)


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="Run id, or 'latest'.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw manifest JSON.")] = False,
) -> None:
    """Show one run manifest: parameters, inputs, counts per table, outputs, timings, errors."""
    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.flows.cli._safe import cells, safe
    from nodewatch.flows.run_names import canonical_flow
    from nodewatch.tasks.core.runs import ManifestError, effective_status, load_manifest, run_owner

    store = get_store()
    ids = store.list_runs()
    if run_id == "latest":
        if not ids:
            raise UserError(f"no runs in {store.url}")
        run_id = ids[-1]
    if run_id not in ids:
        raise UserError(f"no run {run_id!r} in {store.url} (see `nodewatch runs list`)")
    try:
        m = load_manifest(store, run_id)
    except ManifestError as e:
        raise UserError(str(e)) from None
    status = m.status = effective_status(m)  # type: ignore[assignment]  # a dead "running" run shows "abandoned"
    if as_json:
        console.print_json(json.dumps(m.model_dump(mode="json")), ensure_ascii=True)  # ESC, C1 -> \u001b, \u009b
        return
    name = canonical_flow(m.flow, m.parameters)
    console.print(f"[bold]{safe(m.run_id)}[/bold]  flow={safe(name)}  status={safe(status)}  code={safe(m.code_version)}")
    owner = run_owner(m)
    if status == "abandoned":
        console.print(f"abandoned: the run's process ({safe(owner.describe() if owner else 'unknown')}) is gone; it was "
                      "killed or crashed before it finished, its outputs may be incomplete", highlight=False)
    elif status == "running" and owner is not None:
        console.print(f"running in {safe(owner.describe())}", highlight=False)
    console.print(f"parameters: {safe(json.dumps(m.parameters, default=str))}")
    t = Table(title="row counts")
    for col in ("table", "rows in", "staged", "quarantined", "duplicates", "balanced"):
        t.add_column(col)
    for name, c in m.counts.items():
        t.add_row(*cells(name, f"{c.rows_in:,}", f"{c.staged:,}", f"{c.quarantined:,}", f"{c.duplicates:,}", c.balanced))
    console.print(t)
    if m.inputs:
        ti = Table(title="inputs")
        for col in ("path", "sha256", "status", "rows in", "message"):
            ti.add_column(col)
        for i in m.inputs:
            ti.add_row(*cells(i.path, i.sha256[:12], i.status, f"{i.counts.rows_in:,}", i.message or ""))
        console.print(ti)
    for k, v in m.outputs.items():
        console.print(f"output {safe(k)}: {safe(v)}")
    for k, v in m.timings.items():
        console.print(f"timing {safe(k)}: {v:.2f} s")
    for e in m.errors:
        console.print(f"[red]error[/red] {safe(e)}")


def register(app: typer.Typer) -> None:
    """Add the ``runs`` group."""
    app.add_typer(runs_app, name="runs")
