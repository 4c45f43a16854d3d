"""``nodewatch server start``: a local Prefect server (UI + API) on 127.0.0.1 with SQLite.

It runs ``prefect server start`` in the foreground with the host/port given; the database is
``$PREFECT_HOME/prefect.db`` (SQLite) unless ``--database`` (env ``NODEWATCH_PREFECT_DATABASE``) or
``PREFECT_API_DATABASE_CONNECTION_URL`` points at PostgreSQL (production: see docs/operations.md,
infra/postgres.md); the password never appears in what this command prints. Other processes talk to it with
``PREFECT_API_URL=http://127.0.0.1:<port>/api``.

The ``prefect server`` child never outlives this process: SIGTERM, SIGHUP and Ctrl-C are passed on to it
(:func:`supervise`), and on Linux the child asks the kernel for a SIGTERM when its parent dies
(``prctl(PR_SET_PDEATHSIG)``, :func:`spawn`), so even ``kill -9`` of ``nodewatch server start``
stops the Prefect server.
"""

from __future__ import annotations

import os
import shutil
import signal
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


STOP_TIMEOUT_S = 20.0
"""How long a stopping ``nodewatch server start`` waits for the Prefect server before killing it."""


def spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start ``argv`` as a child that gets SIGTERM when this process dies
    (:func:`nodewatch.tasks.core.procs.parent_death_signal`).

    Call it before starting threads: ``preexec_fn`` runs between ``fork`` and ``exec``."""
    from nodewatch.tasks.core.procs import parent_death_signal

    preexec = parent_death_signal(signal.SIGTERM, os.getpid())
    return subprocess.Popen(argv, env=env, preexec_fn=preexec)  # noqa: PLW1509


def supervise(child: subprocess.Popen, timeout: float = STOP_TIMEOUT_S) -> int:
    """Wait for ``child`` and return its exit code (0 when this process was asked to stop and it did).

    SIGTERM and SIGHUP of this process are passed on as SIGTERM; after SIGINT (Ctrl-C reaches the whole
    foreground process group, the child included) the child gets ``timeout`` s before SIGTERM; after another
    ``timeout`` s it is killed."""
    stopping: list[int] = []
    escalations = [signal.SIGTERM, signal.SIGKILL]

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)
        if signum != signal.SIGINT and signal.SIGTERM in escalations and child.poll() is None:
            escalations.remove(signal.SIGTERM)
            child.send_signal(signal.SIGTERM)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    waited = 0.0
    try:
        while True:
            try:
                code = child.wait(1.0)
                break
            except subprocess.TimeoutExpired:
                waited = waited + 1.0 if stopping else 0.0
                if waited >= timeout and escalations:
                    child.send_signal(escalations.pop(0))
                    waited = 0.0
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 0 if stopping and code in (0, 130, 143, -signal.SIGTERM, -signal.SIGINT) else code


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
        """Start the Prefect server in the foreground (Ctrl-C or SIGTERM stops it; it never outlives this command)."""
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
        if reports_port and not 1 <= reports_port <= 65535:
            raise UserError(f"--reports-port must be 1-65535 (0: off), got {reports_port}")
        child = spawn(server_command(host, port), env)  # before the store view's thread (fork + preexec_fn)
        if reports_port:
            from nodewatch.flows.cli._reports import start_reports

            url = start_reports(reports_port)
            if url:
                console.print(f"store reports and Data Docs (read-only) on {url}/; other shells: export "
                              f"NODEWATCH_REPORTS_URL={url}", markup=False)
        raise SystemExit(supervise(child))
