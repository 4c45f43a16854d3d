"""One naming scheme for flows, flow runs and run manifests, and HTTP links for the UI's artifacts.

* **Flows** are named in ``snake_case`` and the Prefect flow name is the manifest's ``flow`` field, so the UI's
  flow list, ``nodewatch runs list --flow NAME`` and the ``nodewatch_last_run_timestamp_seconds{flow}``
  metric use the same names. An ingest is the flow ``ingest_<source>`` (:func:`ingest_flow_name`:
  ``ingest_jobs``, ``ingest_telemetry``, ``ingest_syslog`` …) wherever it runs: ``nodewatch ingest <source>``
  with or without Prefect, ``ingest_sources`` and the nightly flow's ingest step. Deployments are named by
  their schedule (``nightly``, ``train``, ``backfill``; the UI shows ``<flow>/<deployment>``).
  Manifests written before this scheme said ``ingest`` with ``parameters.source``: :func:`canonical_flow`
  reads them as ``ingest_<source>`` and :func:`flow_matches` lets ``--flow ingest`` select every ingest
  (both in :mod:`nodewatch.tasks.core.flow_names`, which the tasks use too).
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

from nodewatch.tasks.core.flow_names import FLOW_NAME, canonical_flow, flow_matches, ingest_flow_name

__all__ = ["FLOW_NAME", "RUN_ID", "artifact_link", "canonical_flow", "claim_run_id", "flow_matches", "flow_run_name",
           "ingest_flow_name", "log", "name_run", "reports_url"]

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
