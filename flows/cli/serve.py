"""``nodewatch serve``: register and serve the nightly/train/backfill deployments (Prefect ``serve()``)."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command."""

    @app.command("serve")
    def serve_cmd(
        inbox: Annotated[str | None, typer.Option(help="inbox directory passed to nightly/backfill runs")] = None,
        demo: Annotated[bool, typer.Option(help="nightly runs simulate the next day (demo cluster in the inbox)")] = False,
        timezone: Annotated[str, typer.Option(help="time zone of the cron schedules")] = "UTC",
        limit: Annotated[int, typer.Option(help="flow runs executed at the same time")] = 2,
        paused: Annotated[bool, typer.Option(help="register the schedules paused (runs only when triggered)")] = False,
    ) -> None:
        """Serve deployments nightly (02:00), train (Sunday 03:00) and backfill (on demand) to PREFECT_API_URL."""
        import os

        from nodewatch.flows.cli import console, settings
        from nodewatch.flows.cli._safe import safe
        from nodewatch.flows.deployments import serve_deployments

        api = os.environ.get("PREFECT_API_URL")
        if not api:
            from prefect.settings import PREFECT_API_URL

            api = PREFECT_API_URL.value()
        console.print(f"serving nightly/train/backfill to {safe(api or 'an ephemeral API (set PREFECT_API_URL!)')}; "
                      f"store {safe(settings().store)}")
        serve_deployments(store=settings().store, inbox=inbox, demo=demo, timezone=timezone, limit=limit, paused=paused)
