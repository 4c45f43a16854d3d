"""The ``nodewatch`` command line (Typer + rich).

Every module in this package that defines ``register(app: typer.Typer) -> None`` is discovered
and registered, so a new command group is one new module, e.g. ``flows/cli/cubes.py``.
Errors meant for users are raised as :class:`UserError` (or one of the other exceptions :func:`main`
catches: input, unsafe-name, missing-file, settings, busy-lock and unreadable-manifest
errors) and printed as one line without a traceback.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from nodewatch.tasks.core.settings import Settings
    from nodewatch.tasks.core.store import Store

console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # a one-line error stays one line at any width

app = typer.Typer(
    name="nodewatch",
    help=(
        "nodewatch: validated, versioned HPC telemetry/syslog/job pipeline.\n\n"
        "Ingest sources into a store, build Zarr cubes, train per-node anomaly models, score nodes "
        "nightly, derive node states and publish failure-aware checkpoint-interval tables. "
        "Global options go before the command: nodewatch --store DIR ingest jobs FILES..."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


class UserError(Exception):
    """An error caused by user input: printed as one line, exit code 2."""


_STATE: dict[str, object] = {}


@app.callback()
def _root(
    store: Annotated[str | None, typer.Option(help="Store root (fsspec URL). Env: NODEWATCH_STORE.")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML settings file. Env: NODEWATCH_CONFIG.")] = None,
) -> None:
    """Global options shared by all commands."""
    from nodewatch.tasks.core.settings import set_default_config

    _STATE["store"] = store
    _STATE["config"] = config
    set_default_config(config)  # the flows this command runs read the same TOML file


def settings() -> Settings:
    """Settings built from the global options, env and TOML file."""
    from nodewatch.tasks.core.settings import load_settings

    return load_settings(_STATE.get("config"), store=_STATE.get("store"))  # type: ignore[arg-type]


def get_store() -> Store:
    """The store selected by global options / settings."""
    from nodewatch.tasks.core.store import Store

    return Store(settings().store)


def _discover() -> None:
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name.startswith("_"):
            continue
        m = importlib.import_module(f"{__name__}.{mod.name}")
        register = getattr(m, "register", None)
        if callable(register):
            register(app)


_discover()


def main() -> None:
    """Console-script entry point: run the app, turning user errors into one-line messages."""
    from nodewatch.schemas.names import UnsafeNameError
    from nodewatch.tasks.core.locks import LockBusyError
    from nodewatch.tasks.core.runs import ManifestError
    from nodewatch.tasks.core.settings import SettingsError
    from nodewatch.tasks.ingest.inputs import InputError

    try:
        app()
    except (UserError, InputError, UnsafeNameError, FileNotFoundError, SettingsError, LockBusyError, ManifestError) as e:
        err_console.print(f"[red]error:[/red] {e}", highlight=False)
        sys.exit(2)
