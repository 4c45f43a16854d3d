"""Prefect flow ``train``: per-node anomaly models (RUAD or a baseline) fanned out over node batches.

Thin wiring of :mod:`nodewatch.tasks.anomaly.train`: plan the run, map
:func:`~nodewatch.tasks.anomaly.train.train_batch` over the node batches as Prefect tasks (thread pool of
``workers``; each batch trains all its nodes as one batched torch computation with ``threads`` torch threads),
then evaluate, move ``CURRENT`` and publish the evaluation as table/markdown/link artifacts. The run manifest
is ``runs/<run_id>.json``.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import flow, task, unmapped
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from nodewatch.flows.prefect_env import artifact_key
from nodewatch.flows.run_names import claim_run_id, flow_run_name
from nodewatch.tasks.anomaly.train import RunPlan, TrainConfig, finish_run, plan_as_dict, plan_run, train_batch
from nodewatch.tasks.core.settings import load_settings
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.cluster import fanout


@task(task_run_name="train-batch-{index}", cache_policy=NO_CACHE, retries=0)
def train_batch_task(plan: dict[str, Any], index: int, dask: str | None = None) -> dict[str, Any]:
    """One node batch (all its nodes trained together); with ``dask`` (a scheduler address) as one task there."""
    from nodewatch.tasks.cubes.cluster import run_on

    return run_on(dask, train_batch, plan, index)


@task(task_run_name="train-predictor", cache_policy=NO_CACHE, retries=0)
def train_predictor_task(store: str, start: date, end: date, run_id: str) -> dict[str, Any]:
    """The failure predictor from the same days, versioned in the registry (skips itself on 60-s telemetry)."""
    from nodewatch.tasks.predict.weekly import train_weekly

    return train_weekly(Store(store), start, end, run_id)


def _artifacts(out: dict[str, Any]) -> None:
    rows = []
    for name, r in out["metrics"].items():
        d = r["distribution"]
        rows.append({"method": name, "pooled_auc": r.get("pooled_auc"), "scored": d.get("scored"),
                     "median_score": d.get("q50"), "q99_score": d.get("q99"),
                     "f1_at_0.5": r["f1"]["anomaly"][0.5] if "f1" in r else None})
    key = artifact_key("train", out["kind"])
    create_table_artifact(rows, key=key, description=f"train run {out['run_id']}: pooled test metrics per method")
    failed = "".join(f"\n- `{n}`: {f['reason']} (kept model: {f['kept_model_from'] or 'none'})" for n, f in
                     list(out["failed"].items())[:50])
    create_markdown_artifact(
        f"# train {out['kind']} run `{out['run_id']}`\n\n{out['trained']} nodes trained, {len(out['failed'])} failed"
        f"{failed}\n\nCURRENT moved: {out['current_moved']}\n\n{out['table']}", key=f"{key}-summary")
    if out.get("roc_png"):
        create_link_artifact(f"file://{out['roc_png']}" if "://" not in out["roc_png"] else out["roc_png"],
                             link_text="pooled ROC", key=f"{key}-roc", description="pooled ROC over all nodes")


@flow(name="train", flow_run_name=flow_run_name, log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=2))
def train(
    start: date,
    end: date,
    model: str = "ruad",
    mode: str = "unsupervised",
    window: int = 10,
    epochs: int = 5,
    nodes: list[str] | None = None,
    labels: str | None = None,
    node_batch: int = 50,
    workers: int = 2,
    threads: int = 1,
    compare: bool = False,
    train_end: str | None = None,
    store: str | None = None,
    predictor: bool = True,
) -> dict[str, Any]:
    """Train one model per node for ``start``..``end`` (inclusive UTC days); returns the run summary.

    With ``predictor`` (and no ``nodes`` subset) the failure predictor is trained from the same days
    (:mod:`nodewatch.tasks.predict.weekly`; ``summary["predictor"]`` says ok or why it skipped).

    Batches run on the flow's thread pool (2 workers; use :func:`train_with_workers` for another
    count). ``workers`` is recorded in the run parameters.
    """
    st = Store(load_settings(store=store).store)
    cfg = TrainConfig(model=model, mode=mode, window=window, epochs=epochs, node_batch=node_batch, workers=workers,
                      threads=threads, compare=compare, train_end=train_end)
    plan, rec = plan_run(st, start, end, cfg, nodes, labels, run_id=claim_run_id())
    try:
        pd = plan_as_dict(plan)
        # NODEWATCH_DASK=slurm or a scheduler address: each batch runs as one task on that cluster
        with rec.step("train_batches"), fanout(None, workers) as dask_at:
            futures = train_batch_task.map(unmapped(pd), list(range(len(plan.batches))), unmapped(dask_at))
            results = [f.result() for f in futures]
        out = finish_run(st, RunPlan(**pd), results, rec)
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    _artifacts(out)
    print(f"train {out['kind']} run {out['run_id']}: {out['trained']} nodes trained, {len(out['failed'])} failed")
    if predictor and nodes is None:
        out["predictor"] = train_predictor_task(st.url, start, end, out["run_id"])
        print(f"failure predictor: {out['predictor']['status']}: {out['predictor']['details']}")
    return {k: v for k, v in out.items() if k != "manifest"}


def train_with_workers(workers: int) -> Any:
    """The ``train`` flow with a thread pool of ``workers`` concurrent node batches."""
    return train.with_options(task_runner=ThreadPoolTaskRunner(max_workers=max(1, workers)))
