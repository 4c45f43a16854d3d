"""One naming scheme for Prefect flow runs, and HTTP links for the UI's artifacts.

* Every flow is declared with ``flow_run_name=flow_run_name``: the Prefect flow run is named by a fresh
  nodewatch run id (``20260123T000501.123456Z-ab12cd``), and the first run manifest the flow run opens
  takes that id (:func:`claim_run_id`), so ``nodewatch runs show ID`` and the UI's run page name the same
  run. Manifests opened later in the same flow run (an ingest inside the nightly flow) get their own ids.
  :func:`name_run` renames the flow run afterwards where the manifest is opened by a task.
* :func:`artifact_link` turns a store path into the URL under which ``nodewatch server start`` serves it
  (``NODEWATCH_REPORTS_URL``, else ``[alerts] report_base_url``), else a ``file://`` link as before.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import Any

RUN_ID = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{6}$")
_CLAIMED: set[str] = set()
_LOCK = threading.Lock()


def flow_run_name() -> str:
    """A new nodewatch run id for the flow run being started (Prefect's ``flow_run_name`` callable)."""
    from prefect.context import FlowRunContext

    from nodewatch.tasks.core.runs import new_run_id

    ctx = FlowRunContext.get()
    flow = ctx.flow.name if ctx and ctx.flow else "flow"
    params = dict(ctx.parameters or {}) if ctx else {}
    return new_run_id(flow, params)


def claim_run_id() -> str | None:
    """The current flow run's name when it is a nodewatch run id not yet taken by a manifest, else ``None``.

    Prefect is not imported by this (a run without Prefect stays without it: CLI start-up time)."""
    if "prefect.context" not in sys.modules:
        return None
    try:
        from prefect.context import FlowRunContext

        ctx = FlowRunContext.get()
    except Exception:  # noqa: BLE001 - no Prefect context: plain call
        return None
    if ctx is None or ctx.flow_run is None or not RUN_ID.match(str(ctx.flow_run.name or "")):
        return None
    with _LOCK:
        key = str(ctx.flow_run.id)
        if key in _CLAIMED:
            return None
        _CLAIMED.add(key)
    return str(ctx.flow_run.name)


def name_run(run_id: str) -> None:
    """Rename the current flow run to ``run_id`` (no-op outside a flow run; never fails the flow)."""
    try:
        from prefect.client.orchestration import get_client
        from prefect.context import FlowRunContext

        ctx = FlowRunContext.get()
        if ctx is None or ctx.flow_run is None or ctx.flow_run.name == run_id or not RUN_ID.match(run_id):
            return
        with get_client(sync_client=True) as client:
            client.set_flow_run_name(ctx.flow_run.id, run_id)
    except Exception:  # noqa: BLE001 - a name is not worth a failed run
        return


def reports_url() -> str | None:
    """Base URL of the store's served areas: ``NODEWATCH_REPORTS_URL``, else ``[alerts] report_base_url``."""
    env = os.environ.get("NODEWATCH_REPORTS_URL", "").strip()
    if env.startswith(("http://", "https://")):
        return env.rstrip("/")
    try:
        from nodewatch.tasks.alerts.config import alert_settings
        from nodewatch.tasks.core.settings import load_settings

        return alert_settings(load_settings()).report_base_url
    except Exception:  # noqa: BLE001 - a broken section is reported by the alerts step, not here
        return None


def artifact_link(store: Any, path: str) -> str:
    """HTTP link of a store path when served (see module doc), else its URL (``file://`` for local paths)."""
    from nodewatch.tasks.alerts.webserve import url_for

    url = url_for(reports_url(), store, path)
    if url:
        return url
    return path if "://" in path else f"file://{path}"


def log(msg: str, *args: Any) -> None:
    """INFO line in the current Prefect run's log (shown in the UI), else nothing (Prefect is not imported by this)."""
    if "prefect.context" not in sys.modules:
        return
    try:
        from prefect import get_run_logger

        get_run_logger().info(msg, *args)
    except Exception:  # noqa: BLE001 - outside a run (plain call, --no-prefect)
        return
