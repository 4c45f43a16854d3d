"""Prefect flow ``build_cubes(start, end)``: staged telemetry/syslog → Zarr cubes (thin wiring).

One Prefect task per cube kind calls :func:`nodewatch.tasks.cubes.build.build_days`, which builds and runs
the Dask graph (on a LocalCluster, or on ``dask_address``). Days whose coverage marker matches the
staged files present now are skipped unless ``force``; re-running a day rewrites the same chunks
with the same bytes. The run manifest (``runs/<run_id>.json``) lists every day built and timings.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import date
from typing import Any

from prefect import flow, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from nodewatch.flows.prefect_env import artifact_key
from nodewatch.flows.run_names import claim_run_id, flow_run_name
from nodewatch.schemas.cubes import CUBE_KINDS, check_step
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.settings import load_settings
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.build import DEFAULT_MAX_NODES, build_days, dask_client, day_complete, days_between


@task(retries=1, retry_delay_seconds=[5], task_run_name="build-{kind}-cube", cache_policy=NO_CACHE)
def build_kind(
    store: Store, kind: str, days: list[date], client: Any, step: str, node_batch: int, epoch: date | None, run_id: str,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> list[dict[str, Any]]:
    """Build ``days`` of cube ``kind`` (idempotent, so a retry is safe)."""
    res = build_days(store, kind, days, client, step=step, node_batch=node_batch, epoch=epoch, run_id=run_id,
                     max_nodes=max_nodes)
    return [
        {
            "cube": kind,
            "day": r.day.isoformat(),
            "status": r.status,
            "regions": r.regions,
            "seconds": round(r.seconds, 3),
            **{k: r.report.get(k) for k in ("rows_read", "rows_used", "nodes_with_data")},
        }
        for r in res
    ]


def _step(t: Any) -> Any:
    """The Prefect task ``t`` inside a flow run, else its plain function (no task run, no temporary server)."""
    from prefect.context import FlowRunContext

    return t if FlowRunContext.get() is not None else t.fn


def run_build(
    start: date,
    end: date,
    store: str | None = None,
    kinds: tuple[str, ...] = CUBE_KINDS,
    dask_address: str | None = None,
    step: str | None = None,
    epoch: date | None = None,
    force: bool = False,
    processes: bool = False,
    days: list[date] | None = None,
    dashboard: str | None = None,
) -> dict[str, Any]:
    """Body of :func:`build_cubes` (usable without Prefect: outside a flow run the steps are plain calls);
    returns the run manifest as a dict.

    ``days`` (within ``start..end``) restricts the build to those days, built whatever their markers say
    (the repair of damaged days); ``dashboard`` serves the LocalCluster's dashboard there (default: none).
    """
    settings = load_settings(store=store, dask_address=dask_address, step=step)
    check_step(settings.step)
    st = Store(settings.store)
    params = {
        "start": start,
        "end": end,
        "kinds": list(kinds),
        "step": settings.step,
        "epoch": epoch,
        "force": force,
        "dask_address": settings.dask_address,
    }
    rec = RunRecorder(st, "build_cubes", params, run_id=claim_run_id())
    rec.write()
    rows: list[dict[str, Any]] = []
    try:
        all_days = days_between(start, end) if days is None else sorted(set(days))
        force = force or days is not None
        with ExitStack() as stack:
            with rec.step("dask_start"):
                client = stack.enter_context(dask_client(settings.dask_address, settings.dask_workers, processes=processes,
                                                               dashboard=dashboard))
            for kind in kinds:
                todo = all_days if force else [d for d in all_days if not day_complete(st, d, kind)]
                rows += [{"cube": kind, "day": d.isoformat(), "status": "up-to-date"} for d in all_days if d not in todo]
                if todo:
                    with rec.step(f"build_{kind}"):
                        rows += _step(build_kind)(st, kind, todo, client, settings.step, settings.node_batch, epoch, rec.run_id,
                                           settings.max_cube_nodes)
                rec.add_output(f"{kind}_cube", st.url_of("cubes", f"{kind}.zarr"))
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.add_output("days", rows)
        rec.finish("failed")
        raise
    rec.add_output("days", sorted(rows, key=lambda r: (r["cube"], r["day"])))
    rec.add_output("days_built", sum(r["status"] == "built" for r in rows))
    return rec.finish().model_dump(mode="json")


@flow(name="build_cubes", flow_run_name=flow_run_name, log_prints=True)
def build_cubes(
    start: date,
    end: date,
    store: str | None = None,
    kinds: list[str] | None = None,
    dask_address: str | None = None,
    step: str | None = None,
    epoch: date | None = None,
    force: bool = False,
    processes: bool = False,
    dashboard: str | None = None,
) -> dict[str, Any]:
    """Aggregate staged telemetry and syslog of ``start``..``end`` (inclusive) into the Zarr cubes."""
    manifest = run_build(start, end, store, tuple(kinds or CUBE_KINDS), dask_address, step, epoch, force, processes,
                         dashboard=dashboard)
    days = manifest["outputs"].get("days", [])
    if days:
        create_table_artifact(
            days,
            key=artifact_key("cubes", str(start), str(end)),
            description=f"build_cubes {start}..{end}: run {manifest['run_id']}",
        )
    return manifest
