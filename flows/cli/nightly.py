"""``nodewatch nightly --date D`` and ``nodewatch backfill --start S --end E [--force]``."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

import typer


def _day(s: str | None, what: str) -> date | None:
    from nodewatch.flows.cli import UserError

    if s is None:
        return None
    try:
        return datetime.strptime(s, "%Y-%m-%d").date()
    except ValueError:
        raise UserError(f"{what} {s!r} is not a date (YYYY-MM-DD)") from None


def register(app: typer.Typer) -> None:
    """Add the ``nightly`` and ``backfill`` commands."""

    @app.command("nightly")
    def nightly_cmd(
        day: Annotated[str | None, typer.Option("--date", help="UTC day YYYY-MM-DD (default: yesterday)")] = None,
        demo: Annotated[bool, typer.Option(help="simulate the next day into the inbox first")] = False,
        inbox: Annotated[str | None, typer.Option(help="inbox directory (env NODEWATCH_INBOX)")] = None,
        model: Annotated[str, typer.Option(help="model kind whose CURRENT run scores")] = "ruad",
        truth: Annotated[str | None, typer.Option(help="simulator output with ground truth (precision/recall)")] = None,
        force: Annotated[bool, typer.Option(help="rebuild and rescore even if the day is complete")] = False,
    ) -> None:
        """Run the nightly flow for one day: ingest, validate, cubes, score, checkpoint tables, states, report."""
        from nodewatch.flows.cli import console, settings
        from nodewatch.flows.cli._safe import safe
        from nodewatch.flows.nightly import PartialRunError, nightly

        try:
            m = nightly(day=_day(day, "--date"), demo=demo, inbox=inbox, store=settings().store, model_kind=model,
                        truth=truth, force=force)
        except PartialRunError as e:
            from nodewatch.flows.cli import UserError

            raise UserError(str(e)) from None
        sc = m["outputs"].get("score", {})
        console.print(f"nightly {safe(m['parameters']['day'])}: {safe(m['status'])}; {safe(sc.get('scored'))} scored, "
                      f"{safe(sc.get('flagged'))} flagged; report {safe(m['outputs']['report']['report'])}")
        ev = m["outputs"]["report"].get("evaluation")
        if ev:
            console.print(f"vs ground truth: node precision {ev['node_precision']}, node recall {ev['node_recall']}")

    @app.command("backfill")
    def backfill_cmd(
        start: Annotated[str, typer.Option(help="first UTC day YYYY-MM-DD")],
        end: Annotated[str, typer.Option(help="last UTC day YYYY-MM-DD (inclusive)")],
        force: Annotated[bool, typer.Option(help="redo days that are complete")] = False,
        inbox: Annotated[str | None, typer.Option(help="ingest the days' files from this inbox first")] = None,
        model: Annotated[str, typer.Option(help="model kind whose CURRENT run scores")] = "ruad",
        workers: Annotated[int, typer.Option(help="parallel scoring tasks")] = 2,
    ) -> None:
        """Re-run days start..end in parallel (cubes + scores); complete days are skipped unless --force."""
        from nodewatch.flows.cli import UserError, console, settings
        from nodewatch.flows.cli._safe import safe
        from nodewatch.flows.nightly import PartialRunError, backfill

        s, e = _day(start, "--start"), _day(end, "--end")
        assert s is not None and e is not None
        if e < s:
            raise UserError(f"--end {e} is before --start {s}")
        try:
            m = backfill(start=s, end=e, force=force, inbox=inbox, store=settings().store, model_kind=model, workers=workers)
        except PartialRunError as err:
            raise UserError(str(err)) from None
        console.print(f"backfill {s}..{e}: {safe(m['status'])}; scored {safe(sorted(m['outputs'].get('days_scored', {})))}, "
                      f"skipped {safe(m['outputs'].get('days_skipped'))}")
