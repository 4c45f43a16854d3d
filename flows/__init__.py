"""nodewatch flows: Prefect flows (thin wiring of tasks) and the ``nodewatch`` CLI.

Importing this package sets Prefect defaults for nodewatch processes before ``prefect`` is
imported: analytics off and a generous ephemeral-server start-up timeout (the first start migrates
SQLite and can take ~30 s on a 2-core machine). Values already set in the environment win.
"""

from __future__ import annotations

import os

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
    "GX_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}


def apply_process_defaults() -> None:
    """Set :data:`PREFECT_DEFAULTS` where the environment has no value (run at import, and again by the
    warm worker's command process after it took the client's environment)."""
    for k, v in PREFECT_DEFAULTS.items():
        os.environ.setdefault(k, v)
    # flow and task run logs (progress, per-file counts, prints of log_prints flows) reach the Prefect API and
    # its UI at INFO; the terminal shows what PREFECT_LOGGING_LEVEL asks for (WARNING and above by default)
    os.environ.setdefault("PREFECT_LOGGING_LOGGERS_PREFECT_FLOW_RUNS_LEVEL", "INFO")
    os.environ.setdefault("PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL", "INFO")
    if os.environ["PREFECT_LOGGING_LEVEL"].upper() in ("WARNING", "ERROR", "CRITICAL"):
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    if os.environ.get("PREFECT_HOME"):
        # Prefect's ephemeral server cannot create its SQLite file when PREFECT_HOME's parent is missing
        # (it then times out after PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)
        os.makedirs(os.path.expanduser(os.environ["PREFECT_HOME"]), exist_ok=True)


apply_process_defaults()
