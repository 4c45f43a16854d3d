"""``nodewatch store verify|clean|repair``: check committed staged parts, remove dead runs' files, re-stage damaged parts."""

from __future__ import annotations

from typing import Annotated

import typer

store_app = typer.Typer(help="Check and repair the staged tables (commit protocol: docs/store.md).", no_args_is_help=True)


def _tables(store) -> list[str]:  # noqa: ANN001
    base = store.path("staged")
    if not store.fs.exists(base):
        return []
    names = [p.rstrip("/").rsplit("/", 1)[1] for p in store.fs.ls(base, detail=False)]
    return sorted(n for n in names if not n.startswith((".", "_")))


def damaged_parts(store) -> list[tuple[str, str]]:  # noqa: ANN001
    """``(key, reason)`` of every committed staged part that cannot be read whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = []
    for table in _tables(store):
        for key in store.live_keys("staged", table):
            try:
                with store.fs.open(store.path(key), "rb") as f:
                    pq.read_table(f)
            except (pa.ArrowException, OSError) as e:
                bad.append((key, f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"))
    return bad


@store_app.command("verify")
def verify() -> None:
    """Read every committed staged part; list unreadable ones and files of dead runs (exit 1 if a part is damaged)."""
    from nodewatch.flows.cli import console, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.core.commit_gc import collectable

    store = get_store()
    bad = damaged_parts(store)
    for key, why in bad:
        console.print(f"damaged {safe(key)}: {safe(why)}", highlight=False, soft_wrap=True)
    junk = collectable(store)
    console.print(f"{len(bad)} damaged part(s); {len(junk)} file(s) of dead runs or replaced parts "
                  f"({'`nodewatch store clean` removes them' if junk else 'nothing to clean'})", highlight=False)
    if bad:
        console.print("`nodewatch store repair` re-stages the damaged parts from raw/", highlight=False)
        raise typer.Exit(1)


@store_app.command("clean")
def clean() -> None:
    """Remove the files no commit refers to whose run is not running, and parts replaced by a later commit."""
    from nodewatch.flows.cli import console, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.core.commit_gc import clean_dead_parts

    store = get_store()
    removed = clean_dead_parts(store)
    for k in removed:
        console.print(f"removed {safe(k)}", highlight=False, soft_wrap=True)
    console.print(f"{len(removed)} file(s) removed", highlight=False)


@store_app.command("repair")
def repair(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be re-staged.")] = False,
) -> None:
    """Re-stage damaged staged parts from raw/: each is un-published by a commit, then the input files of the
    run that wrote it are ingested again (rows of other days are counted as duplicates, the lost ones staged)."""
    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.core.repair import plan_repair, run_repair

    store = get_store()
    bad = damaged_parts(store)
    if not bad:
        console.print("no damaged part", highlight=False)
        return
    plans, problems = plan_repair(store, [k for k, _ in bad])
    for p in problems:
        console.print(f"cannot repair {safe(p)}", highlight=False, soft_wrap=True)
    for p in plans:
        console.print(f"re-stage {safe(p.key)}: source {safe(p.source)}, {len(p.inputs)} input file(s) of run "
                      f"{safe(p.run_id)}", highlight=False, soft_wrap=True)
    if dry_run:
        return
    from nodewatch.flows.ingest_steps import run_source  # the plain body: no task runs, no temporary Prefect server

    for p in plans:
        m = run_repair(store, p, lambda src, paths, fmt: run_source(src, paths, fmt, store=store.url,
                                                                    flow_name="store_repair"))
        console.print(f"run {safe(m['run_id'])}: {m['status']}", highlight=False)
    if problems:
        raise UserError(f"{len(problems)} damaged part(s) could not be repaired (see above)")


def register(app: typer.Typer) -> None:
    """Add the ``store`` group."""
    app.add_typer(store_app, name="store")
