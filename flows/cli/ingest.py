"""``nodewatch ingest <source> PATHS…``: one command per source found in ``tasks/ingest``.

``ingest <source>`` runs the Prefect flow ``ingest_<source>`` (``ingest_jobs``, ``ingest_syslog`` …); without a
configured Prefect server (or with ``--no-prefect``) the same body runs without Prefect
(:func:`nodewatch.flows.ingest_steps.run_local`, no temporary-server start).
(No ``from __future__ import annotations``: Typer evaluates the option annotations, whose help
texts use the enclosing function's ``formats``.)
"""

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from nodewatch.flows.cli._modes import PrefectOpt

if TYPE_CHECKING:
    from nodewatch.tasks.core.settings import Settings

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
    from nodewatch.flows.cli import console
    from nodewatch.flows.cli._safe import safe

    t = Table(title=safe(f"run {manifest['run_id']} — {manifest['status']}"))
    for col in ("file", "format", "status", "rows in", "staged", "quarantined", "duplicates"):
        t.add_column(col, justify="right" if col in ("rows in", "staged", "quarantined", "duplicates") else "left")
    for i in manifest["inputs"]:
        c = i["counts"]
        style = {"ingested": "", "skipped-duplicate-file": "dim", "quarantined-file": "red"}.get(i["status"], "")
        t.add_row(
            safe(Path(i["path"]).name),
            safe(i.get("format") or "-"),
            safe(i["status"]),
            f"{c['rows_in']:,}",
            f"{c['staged']:,}",
            f"{c['quarantined']:,}",
            f"{c['duplicates']:,}",
            style=style,
        )
    for name, c in manifest["counts"].items():
        t.add_row(
            f"[bold]total {safe(name)}[/bold]",
            "",
            "",
            f"{c['rows_in']:,}",
            f"{c['staged']:,}",
            f"{c['quarantined']:,}",
            f"{c['duplicates']:,}",
        )
    console.print(t)
    for e in manifest["errors"]:
        console.print(f"[red]•[/red] {safe(e)}", highlight=False)
    refused = manifest.get("notes", {}).get("refused_inputs", [])
    for r in refused[:10]:
        console.print(f"[yellow]refused input[/yellow] {safe(repr(r['path']))}: {safe(r['reason'])}", highlight=False)
    if len(refused) > 10:
        more = len(refused) - 10
        console.print(f"[yellow]… and {more} more refused inputs[/yellow] (nodewatch runs show {safe(manifest['run_id'])})")
    for k, v in manifest["outputs"].items():
        if k.startswith("data_docs_"):
            console.print(f"GX Data Docs: {safe(v)}")
    console.print(f"details: nodewatch runs show {safe(manifest['run_id'])}")


# Options shared by every ``ingest <source>`` command (the --format choices differ per source).
PathsArg = Annotated[list[str], typer.Argument(help="Files, directories or globs.")]
StartOpt = Annotated[datetime | None, typer.Option(help="Ingest window start (UTC); rows before are quarantined.")]
EndOpt = Annotated[datetime | None, typer.Option(help="Ingest window end (UTC, exclusive).")]
TzOpt = Annotated[str, typer.Option(help="Time zone of inputs whose timestamps carry none.")]
DataDocsOpt = Annotated[bool, typer.Option("--data-docs/--no-data-docs", help="Write GX Data Docs.")]
FollowOpt = Annotated[
    bool,
    typer.Option("--follow-symlinks", help="Take symlinks that resolve to regular files under the given paths "
                 "(default: refuse every link; setting follow_symlinks)."),
]
ReprocessOpt = Annotated[
    bool,
    typer.Option("--reprocess", help="Read these files again even if the same bytes were ingested before (e.g. "
                 "with a corrected --format after a misdetection); rows staged before count as duplicates."),
]


def _make_command(source: str, help_text: str, formats: list[str]) -> Callable[..., None]:
    def command(
        paths: PathsArg,
        fmt: Annotated[str, typer.Option("--format", help=f"auto or one of: {', '.join(formats)}.")] = "auto",
        start: StartOpt = None,
        end: EndOpt = None,
        tz: TzOpt = "UTC",
        data_docs: DataDocsOpt = True,
        follow_symlinks: FollowOpt = False,
        prefect: PrefectOpt = None,
        reprocess: ReprocessOpt = False,
    ) -> None:
        from nodewatch.flows.cli import settings

        s = settings()
        follow = True if follow_symlinks else None
        _preflight(source, paths, follow_symlinks or s.follow_symlinks, fmt, reprocess)
        kw = dict(fmt=fmt, start=_utc(start), end=_utc(end), store=s.store, tz=tz, data_docs=data_docs,
                  follow_symlinks=follow)
        _run(source, list(paths), kw, prefect)

    command.__doc__ = help_text
    return command


def _make_jobs_command(help_text: str, formats: list[str]) -> Callable[..., None]:
    """``ingest jobs``: the ``ingest_jobs`` flow, with ``--hash-users``."""

    def command(
        paths: PathsArg,
        fmt: Annotated[str, typer.Option("--format", help=f"auto or one of: {', '.join(formats)}.")] = "auto",
        start: StartOpt = None,
        end: EndOpt = None,
        tz: TzOpt = "UTC",
        data_docs: DataDocsOpt = True,
        hash_users: Annotated[
            bool | None,
            typer.Option(
                "--hash-users/--no-hash-users",
                help="Replace user, group and cancelled_by by keyed hashes (default: on; setting hash_users, env "
                "NODEWATCH_HASH_USERS). The key is the store's own keys/user-hash.key, or the setting hash_salt when set.",
                show_default=False,
            ),
        ] = None,
        follow_symlinks: FollowOpt = False,
        prefect: PrefectOpt = None,
        reprocess: ReprocessOpt = False,
    ) -> None:
        from nodewatch.flows.cli import settings

        s = settings() if hash_users is None else _settings_with(hash_users=hash_users)
        _preflight("jobs", paths, follow_symlinks or s.follow_symlinks, fmt, reprocess)
        kw = dict(fmt=fmt, start=_utc(start), end=_utc(end), store=s.store, tz=tz, data_docs=data_docs,
                  hash_users=s.hash_users, follow_symlinks=True if follow_symlinks else None)
        _run("jobs", list(paths), kw, prefect)

    command.__doc__ = help_text
    return command


def _settings_with(**overrides: object) -> "Settings":
    """The CLI settings with ``overrides`` (checked now: e.g. --hash-users without a salt is refused here)."""
    from nodewatch.flows.cli import _STATE
    from nodewatch.tasks.core.settings import load_settings

    return load_settings(_STATE.get("config"), store=_STATE.get("store"), **overrides)  # type: ignore[arg-type]


def _preflight(source: str, paths: list[str], follow_symlinks: bool, fmt: str = "auto", reprocess: bool = False) -> None:
    """Refuse, before any flow starts and before anything lands (one-line error, exit 2): an unknown
    ``--format``, a missing or unsafe input argument (or one inside the store), a forced ``--format`` that
    none of a file's first lines match. With ``reprocess``, the files' earlier ingestion markers are
    flagged so the run reads them again (:func:`_flag_for_reprocessing`)."""
    from nodewatch.flows.cli import settings
    from nodewatch.tasks.ingest.discovery import discover_inputs, store_exclusions
    from nodewatch.tasks.ingest.landing import check_forced_format, check_format
    from nodewatch.tasks.ingest.registry import sources

    spec = sources()[source]
    check_format(spec, fmt)
    found = discover_inputs(paths, follow_symlinks=follow_symlinks, exclude=store_exclusions(settings().store))
    for f in found.files:
        check_forced_format(spec, f, fmt)
    if reprocess:
        _flag_for_reprocessing(source, found.files)


def _flag_for_reprocessing(source: str, files: list[Path]) -> None:
    """Mark the ingestion markers of ``files`` (same sha256) so the next run parses them again.

    The marker keeps its run id and gains ``failed_with_format: "--reprocess"``, a choice no run makes,
    so the pipeline's "same bytes = skip" rule does not apply; the run then writes a fresh marker.
    """
    import hashlib

    from nodewatch.flows.cli import settings
    from nodewatch.tasks.core.files import open_regular
    from nodewatch.tasks.core.store import Store

    st = Store(settings().store)
    for path in files:
        h = hashlib.sha256()
        with open(open_regular(path), "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        key = st.ingested_marker(source, h.hexdigest())
        if st.exists(key):
            marker = st.read_json(key)
            marker["failed_with_format"] = "--reprocess"
            st.write_json(marker, key)


def _run(source: str, paths: list[str], kw: dict, prefect: bool | None) -> None:
    """Run the ingest of ``paths`` as the Prefect flow ``ingest_<source>`` or, per ``prefect`` (``None``: whether a
    server is configured), without Prefect; print the summary (and the "ran without Prefect" note)."""
    from nodewatch.flows.cli import console
    from nodewatch.flows.cli._modes import print_note, use_prefect

    with_prefect, reason = use_prefect(prefect)
    written: list[str] = []
    with console.status(f"ingesting {source} …"):
        if with_prefect and source == "jobs":
            from nodewatch.flows.ingest import ingest_jobs

            manifest = ingest_jobs(paths, **kw)
        elif with_prefect:
            from nodewatch.flows.ingest import ingest

            manifest = ingest(source, paths, **kw)
        else:
            from nodewatch.flows.ingest_steps import run_local

            manifest, written = run_local(source, paths, **kw)
    print_summary(manifest)
    if not with_prefect:
        print_note(reason, manifest["run_id"], written)
    if manifest["status"] != "completed":
        raise typer.Exit(1)


def _utc(t: datetime | None) -> datetime | None:
    from datetime import UTC

    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def register(app: typer.Typer) -> None:
    """Add ``ingest`` with one sub-command per discovered source."""
    from nodewatch.tasks.ingest.registry import discovery_errors, sources

    for name, spec in sources().items():
        fmts = [f.name for f in spec.formats]
        text = (spec.help or f"Ingest {name} files.") + f"\n\nFormats: {', '.join(fmts)}."
        make = _make_jobs_command(text, fmts) if name == "jobs" else _make_command(name, text, fmts)
        ingest_app.command(name, help=text)(make)
    for mod, err in discovery_errors().items():
        ingest_app.command(f"broken-{mod}", help=f"tasks/ingest/{mod}.py failed to import: {err}", hidden=True)(lambda: None)
    app.add_typer(ingest_app, name="ingest")
