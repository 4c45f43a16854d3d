"""``nodewatch ingest <source> PATHS…``: one command per source found in ``tasks/ingest``."""


from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

ingest_app = typer.Typer(
    help=(
        "Ingest input files (files, directories or globs; gzip/xz/bz2/zstd are detected) of one source: "
        "raw bytes are landed by sha256 (same bytes twice = no-op), rows are validated with Great "
        "Expectations, good rows staged as parquet by date, bad rows quarantined with the reason."
    ),
    no_args_is_help=True,
)


def print_summary(manifest: dict) -> None:
    """One-screen rich summary of an ingest run."""
    from flows.cli import console

    t = Table(title=f"run {manifest['run_id']} — {manifest['status']}")
    for col in ("file", "format", "status", "rows in", "staged", "quarantined", "duplicates"):
        t.add_column(col, justify="right" if col in ("rows in", "staged", "quarantined", "duplicates") else "left")
    for i in manifest["inputs"]:
        c = i["counts"]
        style = {"ingested": "", "skipped-duplicate-file": "dim", "quarantined-file": "red"}.get(i["status"], "")
        t.add_row(
            Path(i["path"]).name,
            i.get("format") or "-",
            i["status"],
            f"{c['rows_in']:,}",
            f"{c['staged']:,}",
            f"{c['quarantined']:,}",
            f"{c['duplicates']:,}",
            style=style,
        )
    for name, c in manifest["counts"].items():
        t.add_row(
            f"[bold]total {name}[/bold]",
            "",
            "",
            f"{c['rows_in']:,}",
            f"{c['staged']:,}",
            f"{c['quarantined']:,}",
            f"{c['duplicates']:,}",
        )
    console.print(t)
    for e in manifest["errors"]:
        console.print(f"[red]•[/red] {e}", highlight=False)
    for k, v in manifest["outputs"].items():
        if k.startswith("data_docs_"):
            console.print(f"GX Data Docs: {v}")
    console.print(f"details: nodewatch runs show {manifest['run_id']}")


def _make_command(source: str, help_text: str, formats: list[str]):  # noqa: ANN202
    def command(
        paths: Annotated[list[str], typer.Argument(help="Files, directories or globs.")],
        fmt: Annotated[str, typer.Option("--format", help=f"auto or one of: {', '.join(formats)}.")] = "auto",
        start: Annotated[datetime | None, typer.Option(help="Ingest window start (UTC); rows before are quarantined.")] = None,
        end: Annotated[datetime | None, typer.Option(help="Ingest window end (UTC, exclusive).")] = None,
        tz: Annotated[str, typer.Option(help="Time zone of inputs whose timestamps carry none.")] = "UTC",
        data_docs: Annotated[bool, typer.Option("--data-docs/--no-data-docs", help="Write GX Data Docs.")] = True,
    ) -> None:
        from flows.cli import console, settings
        from flows.ingest import ingest

        s = settings()
        with console.status(f"ingesting {source} …"):
            manifest = ingest(source, list(paths), fmt, _utc(start), _utc(end), s.store, tz, data_docs)
        print_summary(manifest)
        if manifest["status"] != "completed":
            raise typer.Exit(1)

    command.__doc__ = help_text
    return command


def _utc(t: datetime | None) -> datetime | None:
    from datetime import UTC

    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def register(app: typer.Typer) -> None:
    """Add ``ingest`` with one sub-command per discovered source."""
    from tasks.ingest.registry import discovery_errors, sources

    for name, spec in sources().items():
        fmts = [f.name for f in spec.formats]
        text = (spec.help or f"Ingest {name} files.") + f"\n\nFormats: {', '.join(fmts)}."
        ingest_app.command(name, help=text)(_make_command(name, text, fmts))
    for mod, err in discovery_errors().items():
        ingest_app.command(f"broken-{mod}", help=f"tasks/ingest/{mod}.py failed to import: {err}", hidden=True)(lambda: None)
    app.add_typer(ingest_app, name="ingest")
