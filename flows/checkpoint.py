"""Prefect flow ``checkpoint_tables`` (thin wiring of :mod:`nodewatch.tasks.checkpoint.tables`).

Builds the failure-aware checkpoint-interval table (Frank, ch. 3) for the job shapes of the jobs table
and/or the default shape grid, writes it to ``tables/checkpoint/<run_id>/`` (Zarr, CSV, markdown,
PNGs), swaps ``tables/checkpoint/CURRENT`` after the run finished and publishes a Prefect table
artifact (totals per failure model and checkpoint cost) and a markdown artifact (``table.md``).
"""

from __future__ import annotations

from typing import Any

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from nodewatch.flows.prefect_env import artifact_key
from nodewatch.flows.run_names import flow_run_name, name_run
from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.tasks.checkpoint.compute import CkptCost
from nodewatch.tasks.checkpoint.tables import AREA, run_checkpoint_tables
from nodewatch.tasks.core.escape import md_records
from nodewatch.tasks.core.settings import load_settings
from nodewatch.tasks.core.store import Store


def run_tables(
    store: str | None = None,
    jobs: str | None = None,
    system: str | None = None,
    models: list[dict[str, Any]] | None = None,
    failures: list[str] | None = None,
    failure_table: str = "failures",
    machine_nodes: int | None = None,
    group_by: str = "system",
    purpose: str | None = "compute",
    window_start: str | None = None,
    window_end: str | None = None,
    ckpt_costs_h: list[float] | None = None,
    ckpt_size_gib: float | None = None,
    fs_bandwidth_gib_s: float | None = None,
    grid: bool = True,
    restart_h: float = 0.0,
    predictor: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Body of :func:`checkpoint_tables` (usable without Prefect); returns the manifest as a dict.

    ``predictor`` (fields of :class:`~nodewatch.tasks.checkpoint.predictor.PredictorSpec`) adds the stored
    "with predictor" column (table.zarr variables ``with_predictor_*`` and ``with_predictor.parquet``).

    ``failures`` are fitted per ``group_by`` value on records whose purpose contains ``purpose`` (None:
    all), censored at ``window_end`` (ISO time; default: the records' first..last record, see
    docs/checkpoint.md).
    """
    st = Store(load_settings(store=store).store)
    fms = [FailureModel(**m) for m in (models or [])]
    costs = [CkptCost.fixed(h) for h in (ckpt_costs_h or [])]
    if ckpt_size_gib is not None or fs_bandwidth_gib_s is not None:
        if ckpt_size_gib is None or fs_bandwidth_gib_s is None:
            raise ValueError("give both the checkpoint size per node and the file-system bandwidth")
        costs.append(CkptCost.from_io(ckpt_size_gib, fs_bandwidth_gib_s))
    params = {
        "jobs": jobs,
        "system": system,
        "models": models or [],
        "failures": failures or [],
        "failure_table": failure_table,
        "machine_nodes": machine_nodes,
        "group_by": group_by,
        "purpose": purpose,
        "window_start": window_start,
        "window_end": window_end,
        "ckpt_costs_h": ckpt_costs_h,
        "ckpt_size_gib": ckpt_size_gib,
        "fs_bandwidth_gib_s": fs_bandwidth_gib_s,
        "grid": grid,
        "restart_h": restart_h,
        "predictor": predictor,
    }
    return run_checkpoint_tables(
        st,
        jobs=jobs,
        system=system,
        failure_models=fms,
        failure_systems=failures or [],
        failure_table=failure_table,
        machine_nodes=machine_nodes,
        group_by=group_by,
        purpose=purpose,
        window=(window_start, window_end) if (window_start or window_end) else None,
        ckpt_costs=costs or None,
        grid=grid,
        restart_h=restart_h,
        parameters=params,
        predictor=predictor,
    )


@task(task_run_name="checkpoint-tables", cache_policy=NO_CACHE)
def _tables(**kw: Any) -> dict[str, Any]:
    return run_tables(**kw)


@flow(name="checkpoint_tables", flow_run_name=flow_run_name, log_prints=True)
def checkpoint_tables(
    store: str | None = None,
    jobs: str | None = None,
    system: str | None = None,
    models: list[dict[str, Any]] | None = None,
    failures: list[str] | None = None,
    failure_table: str = "failures",
    machine_nodes: int | None = None,
    group_by: str = "system",
    purpose: str | None = "compute",
    window_start: str | None = None,
    window_end: str | None = None,
    ckpt_costs_h: list[float] | None = None,
    ckpt_size_gib: float | None = None,
    fs_bandwidth_gib_s: float | None = None,
    grid: bool = True,
    restart_h: float = 0.0,
    predictor: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Checkpoint-interval tables (Young, Daly, aware) for job shapes x checkpoint costs x failure models."""
    m = _tables(
        store=store,
        jobs=jobs,
        system=system,
        models=models,
        failures=failures,
        failure_table=failure_table,
        machine_nodes=machine_nodes,
        group_by=group_by,
        purpose=purpose,
        window_start=window_start,
        window_end=window_end,
        ckpt_costs_h=ckpt_costs_h,
        ckpt_size_gib=ckpt_size_gib,
        fs_bandwidth_gib_s=fs_bandwidth_gib_s,
        grid=grid,
        restart_h=restart_h,
        predictor=predictor,
    )
    name_run(m["run_id"])  # the manifest is opened inside the task: the flow run takes its id now
    create_table_artifact(
        md_records(m["notes"]["summary"]),
        key=artifact_key("checkpoint-tables-summary"),
        description=f"checkpoint tables run {m['run_id']}: savings of aware vs Daly/Young",
    )
    st = Store(load_settings(store=store).store)
    with st.fs.open(st.path(AREA, m["run_id"], "table.md"), "rb") as f:
        md = f.read().decode()
    create_markdown_artifact(md, key=artifact_key("checkpoint-tables"), description=f"run {m['run_id']}")
    return m
