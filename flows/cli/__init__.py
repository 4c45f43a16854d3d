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


def _load_settings() -> Settings:
    from pydantic_settings import SettingsError as EnvSettingsError

    from nodewatch.tasks.core.settings import load_settings

    try:
        return load_settings(_STATE.get("config"), store=_STATE.get("store"))  # type: ignore[arg-type]
    except EnvSettingsError as e:  # a malformed NODEWATCH_* value (e.g. JSON that does not parse)
        cause = f": {e.__cause__}" if e.__cause__ else ""
        raise UserError(f"settings: {e}{cause}") from None


def settings() -> Settings:
    """Settings built from the global options, env and TOML file; the store is checked writable.

    Commands that run a flow call this first, so a bad setting, an unknown store protocol or an
    unwritable store is a one-line error before any flow starts.
    """
    from nodewatch.flows.cli._store_check import check_store

    s = _load_settings()
    check_store(s.store, write=True)
    return s


def get_store() -> Store:
    """The store selected by global options / settings (checked readable: known protocol, a directory)."""
    from nodewatch.flows.cli._store_check import check_store
    from nodewatch.tasks.core.store import Store

    url = _load_settings().store
    check_store(url, write=False)
    return Store(url)


def _discover() -> None:
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if mod.name.startswith("_"):
            continue
        m = importlib.import_module(f"{__name__}.{mod.name}")
        register = getattr(m, "register", None)
        if callable(register):
            register(app)
    from nodewatch.flows.cli._help import relabel

    relabel(app)  # click-style metavars (TEXT, DATE, PATH) in every --help


_discover()


def user_errors() -> tuple[type[BaseException], ...]:
    """The exception types that are user errors (one line, exit code 2, no traceback)."""
    from pydantic_settings import SettingsError as EnvSettingsError

    from nodewatch.schemas.names import UnsafeNameError
    from nodewatch.tasks.core.locks import LockBusyError
    from nodewatch.tasks.core.runs import ManifestError
    from nodewatch.tasks.core.settings import SettingsError
    from nodewatch.tasks.ingest.inputs import InputError
    from nodewatch.tasks.states.common import StatesError

    return (UserError, InputError, UnsafeNameError, FileNotFoundError, SettingsError, EnvSettingsError, LockBusyError,
            ManifestError, StatesError)


def main() -> None:
    """Console-script entry point: run the app, turning user errors into one-line messages.

    The message is printed through :func:`~nodewatch.flows.cli._safe.safe` (it may quote paths and values
    from input data); Prefect's log records of a flow that failed with a user error lose their
    traceback (:func:`~nodewatch.flows.cli._quiet.quiet_user_errors`).
    """
    from nodewatch.flows.cli._quiet import quiet_user_errors
    from nodewatch.flows.cli._safe import safe

    errors = user_errors()
    quiet_user_errors(errors)
    try:
        app()
    except errors as e:
        err_console.print(f"[red]error:[/red] {safe(_one_line(e))}", highlight=False)
        sys.exit(2)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__
