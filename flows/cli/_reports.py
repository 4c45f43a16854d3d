"""The read-only store view that ``nodewatch server start`` runs beside the Prefect server (tasks/alerts/webserve.py)."""

from __future__ import annotations


def start_reports(port: int) -> str:
    """Serve the store's reports, Data Docs, heat maps and checkpoint tables on 127.0.0.1:``port`` in a daemon
    thread; returns the base URL (``NODEWATCH_REPORTS_URL`` for the flows). A busy port is a one-line error."""
    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.tasks.alerts.webserve import serve_in_thread

    if not 1 <= port <= 65535:
        raise UserError(f"--reports-port must be 1-65535 (0: off), got {port}")
    store = get_store()
    try:
        _, url = serve_in_thread(store, "127.0.0.1", port)
    except OSError as e:
        raise UserError(f"--reports-port {port}: {e.strerror}; choose another port or 0 (off)") from None
    return url
