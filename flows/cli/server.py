"""``nodewatch server start``: a local Prefect server (UI + API) on 127.0.0.1 with SQLite.

It runs ``prefect server start`` in the foreground with the host/port given; the database is
``$PREFECT_HOME/prefect.db`` (SQLite) unless ``--database`` (env ``NODEWATCH_PREFECT_DATABASE``) or
``PREFECT_API_DATABASE_CONNECTION_URL`` points at PostgreSQL (production: see docs/operations.md,
infra/postgres.md); the password never appears in what this command prints. Other processes talk to it with
``PREFECT_API_URL=http://127.0.0.1:<port>/api``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer


def server_command(host: str, port: int) -> list[str]:
    """The ``prefect server start`` command line of this venv."""
    exe = Path(sys.executable).with_name("prefect")
    prefect = str(exe) if exe.exists() else (shutil.which("prefect") or "prefect")
    return [prefect, "server", "start", "--host", host, "--port", str(port)]


def register(app: typer.Typer) -> None:
    """Add the ``server`` command group."""
    server = typer.Typer(help="Local Prefect server (UI + API).", no_args_is_help=True)
    app.add_typer(server, name="server")

    @server.command("start")
    def start(
        host: Annotated[str, typer.Option(help="bind address (keep 127.0.0.1 unless behind a proxy with auth)")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="port of the UI and API")] = 4200,
        database: Annotated[str | None, typer.Option(
            envvar="NODEWATCH_PREFECT_DATABASE", show_default=False,
            help="Prefect database URL, e.g. postgresql+asyncpg://user:pw@127.0.0.1:5432/prefect (default: SQLite "
                 "in PREFECT_HOME, or PREFECT_API_DATABASE_CONNECTION_URL). Prefer the env variable: an option is "
                 "visible in ps.")] = None,
        reports_port: Annotated[int, typer.Option(
            help="port of the read-only view of the store's reports, Data Docs and heat maps on 127.0.0.1 "
                 "(0: off); the flows link their artifacts to it when NODEWATCH_REPORTS_URL is set")] = 4201,
    ) -> None:
        """Start the Prefect server in the foreground (Ctrl-C stops it)."""
        from nodewatch.flows.cli import UserError, console

        env = dict(os.environ)
        if database:
            if not database.startswith(("postgresql+asyncpg://", "sqlite+aiosqlite://")):
                raise UserError("--database: expected postgresql+asyncpg://user:password@host:port/db "
                                "(or sqlite+aiosqlite:///path)")
            env["PREFECT_API_DATABASE_CONNECTION_URL"] = database
        db = env.get("PREFECT_API_DATABASE_CONNECTION_URL")
        env.setdefault("PREFECT_UI_API_URL", f"http://{host}:{port}/api")  # else the UI calls the default port 4200
        home = env.get("PREFECT_HOME", str(Path.home() / ".prefect"))
        console.print(f"Prefect server on http://{host}:{port} (UI), API http://{host}:{port}/api; database "
                      f"{'Postgres/external: ' + db.split('@')[-1] if db else 'SQLite in ' + home}", markup=False)
        console.print(f"other shells: export PREFECT_API_URL=http://{host}:{port}/api", markup=False)
        if reports_port:
            from nodewatch.flows.cli._reports import start_reports

            url = start_reports(reports_port)
            if url:
                console.print(f"store reports and Data Docs (read-only) on {url}/; other shells: export "
                              f"NODEWATCH_REPORTS_URL={url}", markup=False)
        try:
            raise SystemExit(subprocess.call(server_command(host, port), env=env))
        except KeyboardInterrupt:
            raise SystemExit(0) from None
