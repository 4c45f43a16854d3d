"""The read-only store view that ``nodewatch server start`` runs beside the Prefect server (tasks/alerts/webserve.py)."""

from __future__ import annotations


def start_reports(port: int) -> str | None:
    """Serve the store's reports, Data Docs, heat maps and checkpoint tables on 127.0.0.1:``port`` in a daemon
    thread; returns the base URL (``NODEWATCH_REPORTS_URL`` for the flows). A busy port is one warning line and
    ``None``: the Prefect server starts anyway."""
    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.tasks.alerts.webserve import serve_in_thread

    if not 1 <= port <= 65535:
        raise UserError(f"--reports-port must be 1-65535 (0: off), got {port}")
    store = get_store()
    try:
        _, url = serve_in_thread(store, "127.0.0.1", port)
    except OSError as e:
        from nodewatch.flows.cli import err_console
        from nodewatch.flows.cli._safe import safe

        err_console.print(f"[yellow]warning:[/yellow] --reports-port {port}: {safe(e.strerror)}; the store view is off "
                          "(choose another port)", highlight=False)
        return None
    return url
