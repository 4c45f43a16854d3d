"""``nodewatch warm status|start|stop``: the warm worker that makes small commands fast (docs/operations.md)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

warm_app = typer.Typer(
    help="The warm worker: one background process per user and venv that has imported Great Expectations, "
    "so that small commands (ingest, runs, store, states, checkpoint, cubes, jobs) start in ~1 s. "
    "Off with NODEWATCH_WARM=0.",
    no_args_is_help=True,
)


@warm_app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False) -> None:
    """Whether this venv's worker runs (pid, preloaded modules); exit code 1 when none runs."""
    from nodewatch.flows.cli import console
    from nodewatch.flows.launch import warm_enabled
    from nodewatch.flows.warm import request

    answer = request("ping")
    if as_json:
        console.print_json(json.dumps({"running": answer is not None, "enabled": warm_enabled(), **(answer or {})}))
    elif answer is None:
        console.print(f"no warm worker runs for this venv ({'enabled' if warm_enabled() else 'disabled'}: "
                      "NODEWATCH_WARM)")
    else:
        console.print(f"warm worker {answer['pid']} runs ({answer['modules']} modules preloaded)")
    if answer is None:
        raise typer.Exit(1)


@warm_app.command("start")
def start(wait: Annotated[float, typer.Option(help="Seconds to wait until it answers (0: do not wait).")] = 120.0) -> None:
    """Start the worker in the background (a no-op when one runs)."""
    import time

    from nodewatch.flows.cli import UserError, console
    from nodewatch.flows.launch import start_worker
    from nodewatch.flows.warm import request

    if request("ping") is None:
        start_worker()
    t = time.monotonic()
    while wait > 0 and (answer := request("ping")) is None:
        if time.monotonic() - t > wait:
            raise UserError(f"the warm worker did not answer within {wait:g} s (its log is in the runtime directory)")
        time.sleep(0.5)
    if wait > 0:
        console.print(f"warm worker {answer['pid']} runs")


@warm_app.command("stop")
def stop() -> None:
    """Stop this venv's worker (commands then run in-process until the next one starts it)."""
    from nodewatch.flows.cli import console
    from nodewatch.flows.warm import request

    console.print("stopping the warm worker" if request("stop") is not None else "no warm worker runs")


def register(app: typer.Typer) -> None:
    """Add the ``warm`` group."""
    app.add_typer(warm_app, name="warm")
