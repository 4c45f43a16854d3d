"""Deployments of the nodewatch flows: ``nightly`` (cron 02:00), ``train`` (Sunday 03:00), ``backfill`` (on demand).

Two ways to run them, both documented in docs/operations.md:

* ``nodewatch serve`` (:func:`serve_deployments`): one long-running process registers the three
  deployments with the Prefect server named by ``PREFECT_API_URL`` and runs their flow runs as
  subprocesses; schedules fire from the server, backfills are started from the UI ("Run" on the
  ``backfill`` deployment, with ``start``/``end``/``force`` as parameters) or through the API.
* ``infra/prefect.yaml``: the same deployments for a ``process`` work pool and ``prefect worker start``.

Schedules are in UTC unless ``timezone`` is given. Deployment parameters carry the store and inbox,
so the flow runs write where the operator configured, whatever directory the runner starts in.
"""

from __future__ import annotations

from typing import Any

from prefect.schedules import Cron

NIGHTLY_CRON = "0 2 * * *"
"""The nightly run: 02:00 every day (yesterday's files have arrived)."""
TRAIN_CRON = "0 3 * * 0"
"""The weekly retrain: Sunday 03:00."""


def deployments(store: str | None = None, inbox: str | None = None, demo: bool = False, timezone: str = "UTC",
                paused: bool = False) -> list[Any]:
    """The three ``RunnerDeployment`` objects (nightly, train, backfill) with their schedules and parameters."""
    from nodewatch.flows.nightly import backfill, nightly, train_weekly

    common: dict[str, Any] = {k: v for k, v in {"store": store}.items() if v is not None}
    box = {"inbox": inbox} if inbox else {}
    tags = ["nodewatch"]
    return [
        nightly.to_deployment(
            name="nightly", schedules=[Cron(NIGHTLY_CRON, timezone=timezone, active=not paused)],
            parameters={**common, **box, "demo": demo}, tags=tags,
            description="ingest -> validate -> cubes -> score -> checkpoint tables -> states -> report for yesterday (UTC)"),
        train_weekly.to_deployment(
            name="train", schedules=[Cron(TRAIN_CRON, timezone=timezone, active=not paused)], parameters=common, tags=tags,
            description="retrain the per-node models on the last 28 days; CURRENT moves when the run finished"),
        backfill.to_deployment(
            name="backfill", parameters={**common, **box}, tags=tags,
            description="re-run days start..end (inclusive); complete days are skipped unless force"),
    ]


def serve_deployments(store: str | None = None, inbox: str | None = None, demo: bool = False, timezone: str = "UTC",
                      limit: int | None = 2, paused: bool = False) -> None:
    """Register the deployments and run their flow runs in this process (blocks until interrupted)."""
    from prefect import serve

    serve(*deployments(store, inbox, demo, timezone, paused), limit=limit)
