"""``--prefect/--no-prefect``: run a command's flow through Prefect or its plain body (docs/operations.md).

Default (neither flag): Prefect when a Prefect API is configured (:func:`nodewatch.flows.local.prefect_api_url`),
else the plain body, followed by the one-line note of :func:`nodewatch.flows.local.note` on stderr.
"""

from typing import Annotated

import typer

PREFECT_HELP = (
    "Run as a Prefect flow (--prefect) or the same steps without Prefect (--no-prefect: same manifest and "
    "row counts, artifacts as files under runs/artifacts/). Default: Prefect if a server is configured "
    "(PREFECT_API_URL or the Prefect profile), else without (no temporary-server start)."
)

PrefectOpt = Annotated[bool | None, typer.Option("--prefect/--no-prefect", help=PREFECT_HELP, show_default=False)]


def use_prefect(flag: bool | None) -> tuple[bool, str]:
    """Whether this command runs its Prefect flow, and why (see :func:`nodewatch.flows.local.use_prefect`)."""
    from nodewatch.flows.local import use_prefect as decide

    return decide(flag)


def print_note(reason: str, run_id: str, artifacts: list[str] | None = None) -> None:
    """The one-line "ran without Prefect" note, on stderr (stdout keeps the command's output)."""
    from nodewatch.flows.cli import err_console
    from nodewatch.flows.cli._safe import safe
    from nodewatch.flows.local import note

    err_console.print(f"[dim]{safe(note(reason, run_id, artifacts or []))}[/dim]", highlight=False)
