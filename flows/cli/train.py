"""``nodewatch train``: per-node anomaly models (RUAD and baselines), one progress bar per node batch."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

import typer

from nodewatch.flows.cli._modes import PrefectOpt


def _day(s: str) -> date:
    from nodewatch.flows.cli import UserError

    try:
        return date.fromisoformat(s)
    except ValueError:
        raise UserError(f"invalid date {s!r}: use YYYY-MM-DD") from None


def train_command(
    start: Annotated[str, typer.Option(help="First UTC day of the period (YYYY-MM-DD); 80% train, last 20% test.")],
    end: Annotated[str, typer.Option(help="Last UTC day, inclusive (YYYY-MM-DD).")],
    nodes: Annotated[list[str] | None, typer.Option("--nodes", help="Only these nodes (repeat or comma-separate).")] = None,
    model: Annotated[str, typer.Option(help="ruad | dense | exp | clu")] = "ruad",
    mode: Annotated[str, typer.Option(help="unsupervised | semi (semi needs --labels)")] = "unsupervised",
    window: Annotated[int, typer.Option(help="RUAD input sequence length W (paper: 5, 10, 20, 40).")] = 10,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 5,
    labels: Annotated[str | None, typer.Option(help="Anomaly intervals parquet file/dir (node, start, end[, type]).")] = None,
    node_batch: Annotated[int, typer.Option(help="Nodes trained together in one batched computation.")] = 50,
    workers: Annotated[int, typer.Option(help="Node batches trained concurrently.")] = 2,
    train_end: Annotated[str | None, typer.Option(help="First test timestamp (UTC ISO) instead of the 80/20 split.")] = None,
    compare: Annotated[bool, typer.Option(help="Also fit the paper's comparison set (EXP, CLU, DENSE, RUAD x W).")] = False,
    prefect: PrefectOpt = None,
) -> None:
    """Train one anomaly model per node from cubes/telemetry.zarr into models/<kind>/<run_id>/ (CURRENT moves at the end)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from nodewatch.flows.cli import UserError, console, settings
    from nodewatch.tasks.anomaly import train as T

    s, e = _day(start), _day(end)
    node_list = [n.strip() for item in (nodes or []) for n in item.split(",") if n.strip()] or None
    if model not in ("ruad", "dense", "exp", "clu"):
        raise UserError(f"unknown --model {model!r}: choose ruad, dense, exp or clu")
    if mode not in ("unsupervised", "semi"):
        raise UserError(f"unknown --mode {mode!r}: choose unsupervised or semi")
    if window < 1 or epochs < 1 or node_batch < 1 or workers < 1:
        raise UserError("--window, --epochs, --node-batch and --workers must be >= 1")
    store = settings().store
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                        TimeElapsedColumn(), console=console, transient=False)
    bars: dict[int, Any] = {}

    def hook(ev: dict[str, Any]) -> None:
        b = ev["batch"]
        if ev["event"] == "batch_start":
            bars[b] = progress.add_task(f"batch {b} ({ev['nodes']} nodes)", total=ev["epochs"], info="loading")
        elif ev["event"] == "epoch" and b in bars:
            progress.update(bars[b], completed=ev["epoch"] + 1, info=f"loss {ev['loss']:.4f}")
        elif ev["event"] == "batch_done" and b in bars:
            t = progress.tasks[bars[b]] if bars[b] < len(progress.tasks) else None
            progress.update(bars[b], completed=t.total if t else None, info=f"done, {ev['failed']} failed")

    from nodewatch.flows.cli._modes import print_note, use_prefect

    with_prefect, reason = use_prefect(prefect)
    T.progress_hooks.append(hook)
    try:
        with progress:
            try:
                if not with_prefect:
                    from nodewatch.tasks.core.store import Store

                    cfg = T.TrainConfig(model=model, mode=mode, window=window, epochs=epochs, node_batch=node_batch,
                                        workers=workers, compare=compare, train_end=train_end)
                    out = T.run_training(Store(store), s, e, cfg, node_list, labels)
                else:
                    from nodewatch.flows.train import train_with_workers

                    out = train_with_workers(workers)(start=s, end=e, model=model, mode=mode, window=window, epochs=epochs,
                                                      nodes=node_list, labels=labels, node_batch=node_batch, workers=workers,
                                                      threads=1, compare=compare, train_end=train_end, store=store)
            except ValueError as err:
                raise UserError(str(err)) from None
    finally:
        T.progress_hooks.remove(hook)
    from nodewatch.flows.cli._safe import safe

    if not with_prefect:
        print_note(reason, out["run_id"])
    console.print(safe(f"run {out['run_id']} ({out['kind']}): {out['trained']} nodes trained, {len(out['failed'])} failed; "
                       f"registry {out['registry']}; CURRENT moved: {out['current_moved']}"))
    for n, f in list(out["failed"].items())[:20]:
        console.print(safe(f"  failed {n}: {f['reason']} (kept model: {f['kept_model_from'] or 'none'})"), highlight=False)
    console.print(safe(out["table"], multiline=True), highlight=False)
    if not out["current_moved"]:
        first = next(iter(out["failed"].values()), {}).get("reason", "no node selected")
        raise UserError(f"train run {out['run_id']}: no node trained, CURRENT not moved; first failure: {first}")


def register(app: typer.Typer) -> None:
    """Add ``nodewatch train``."""
    app.command("train")(train_command)
