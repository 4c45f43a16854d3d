"""Fan-out training of per-node anomaly models (RUAD and baselines) from ``cubes/telemetry.zarr``.

A run is planned once (:func:`plan_run`: nodes, node batches, run id, previous ``CURRENT``), then
every node batch is trained independently (:func:`train_batch`: load the batch's slice of the
cube, 80/20 chronological split, fit one batched estimator for all its nodes, write per-node
weights to the registry, score the test split), and finally :func:`finish_run` evaluates the
pooled test scores (RUAD Sections 4.4-4.6), carries over the previous model of every node that
failed, writes metrics/table/ROC and moves ``CURRENT``. :func:`run_training` chains the three
with a thread pool; ``flows/train.py`` maps :func:`train_batch` as Prefect tasks.

Each batch sets ``torch.set_num_threads(threads)`` (default 1): on a 2-core machine two workers
with one torch thread each use the cores; more threads per worker oversubscribe them (measured:
a 2-thread step under load was >10x slower than a 1-thread step).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nodewatch.models.anomaly.base import NodeEstimator
from nodewatch.models.anomaly.metrics import PAPER_THRESHOLDS, f1_at_thresholds, per_node_auc, pooled_auc, pooled_roc
from nodewatch.models.anomaly.preprocess import chronological_split, feature_names, features_from_stats
from nodewatch.models.anomaly.thresholds import calibrated_thresholds
from nodewatch.schemas.names import check_node_name
from nodewatch.tasks.anomaly.labels import LabelReport, label_grid, read_intervals
from nodewatch.tasks.anomaly.registry import ESTIMATORS, area, carry_over, estimator_params, kind_of, run_prefix, write_node
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.verify import checked

ProgressHook = Callable[[dict[str, Any]], None]
progress_hooks: list[ProgressHook] = []
"""Callbacks receiving progress events (``batch_start``, ``epoch``, ``batch_done``); the CLI's progress bar."""


def _emit(event: dict[str, Any]) -> None:
    for hook in list(progress_hooks):
        hook(event)


@dataclass
class TrainConfig:
    """What to train: model, mode, window and training hyper-parameters, fan-out sizes."""

    model: str = "ruad"
    mode: str = "unsupervised"
    window: int = 10
    epochs: int = 5
    batch_size: int = 128
    lr: float = 1e-3
    threshold: float = 0.5
    threshold_quantile: float | None = 0.99
    node_batch: int = 50
    workers: int = 2
    threads: int = 1
    seed: int = 0
    train_fraction: float = 0.8
    train_end: str | None = None
    compare: bool = False
    compare_windows: tuple[int, ...] = (5, 10, 20, 40)

    @property
    def kind(self) -> str:
        """Registry kind of the primary model."""
        return kind_of(self.model, self.mode)


def make_estimator(model: str, mode: str, window: int, cfg: TrainConfig) -> NodeEstimator:
    """Estimator for a model name with the run's hyper-parameters."""
    if model in ("ruad", "dense"):
        return ESTIMATORS[model](window=window, mode=mode, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,  # type: ignore[call-arg]
                                 threshold=cfg.threshold, seed=cfg.seed)
    if model == "exp":
        return ESTIMATORS["exp"](threshold=cfg.threshold)  # type: ignore[call-arg]
    return ESTIMATORS["clu"](threshold=cfg.threshold, seed=cfg.seed)  # type: ignore[call-arg]


def variant_name(model: str, mode: str, window: int) -> str:
    """Method names of the paper's Tables 4 and 7."""
    if model == "ruad":
        return f"RUAD{'_semi' if mode == 'semi' else ''} W={window}"
    if model == "dense":
        return "DENSE_semi" if mode == "semi" else "DENSE_un"
    return model.upper()


def variants(cfg: TrainConfig, has_labels: bool) -> list[tuple[str, str, int]]:
    """(model, mode, window) to fit per batch: the primary model first, then the comparison set of Table 7."""
    out = [(cfg.model, cfg.mode, cfg.window)]
    if cfg.compare:
        cand = [("exp", "unsupervised", 1), ("clu", "unsupervised", 1), ("dense", "semi", 1), ("dense", "unsupervised", 1)]
        cand += [("ruad", m, w) for m in ("semi", "unsupervised") for w in cfg.compare_windows]
        for v in cand:
            needs_labels = v[0] == "clu" or v[1] == "semi"
            if v not in out and (has_labels or not needs_labels):
                out.append(v)
    return out


# ----------------------------------------------------------------------------- cube access
def open_cube(store: Store) -> Any:
    """``cubes/telemetry.zarr`` as a lazy xarray Dataset (dims node, time, metric)."""
    from nodewatch.tasks.cubes import open_telemetry_cube

    return open_telemetry_cube(store)


def period(start: date, end: date) -> tuple[np.datetime64, np.datetime64]:
    """``[start 00:00, end+1 00:00)`` as datetime64[ns] (``end`` inclusive)."""
    if end < start:
        raise ValueError(f"--end {end} is before --start {start}")
    return np.datetime64(datetime.combine(start, datetime.min.time()), "ns"), np.datetime64(
        datetime.combine(end + timedelta(days=1), datetime.min.time()), "ns")


def select_nodes(ds: Any, nodes: Iterable[str] | None) -> list[str]:
    """Cube nodes to train (all, or the requested ones; unknown or unsafe names are a one-line error)."""
    cube_nodes = [str(n) for n in ds["node"].values]
    if nodes is None:
        return [check_node_name(n) for n in cube_nodes]
    wanted = [check_node_name(n) for n in nodes]
    unknown = sorted(set(wanted) - set(cube_nodes))
    if unknown:
        raise ValueError(f"node(s) not in the telemetry cube: {', '.join(unknown[:10])}")
    return list(dict.fromkeys(wanted))


def load_batch(ds: Any, nodes: list[str], t0: np.datetime64, t1: np.datetime64,
               metrics: list[str] | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Features ``X[node, time, 4*metric]`` (RUAD Section 4.2) of ``nodes`` for ``[t0, t1)``, the times and metrics."""
    sub = ds.sel(node=nodes, time=slice(t0, t1 - np.timedelta64(1, "ns")))
    if metrics is not None:
        missing = sorted(set(metrics) - {str(m) for m in sub["metric"].values})
        if missing:
            raise ValueError(f"telemetry cube lacks metric(s) the models were trained on: {', '.join(missing[:10])}")
        sub = sub.sel(metric=metrics)
    sub = sub.transpose("node", "time", "metric")
    arrs = {v: np.asarray(sub[v].values) for v in ("mean", "min", "max", "std", "count")}
    X = features_from_stats(arrs["mean"], arrs["min"], arrs["max"], arrs["std"], arrs["count"])
    return X, np.asarray(sub["time"].values, dtype="datetime64[ns]"), [str(m) for m in sub["metric"].values]


# ----------------------------------------------------------------------------- plan / batch / finish
@dataclass
class RunPlan:
    """Everything a batch needs (JSON-serialisable, so it can travel to Prefect tasks / Dask workers)."""

    store_url: str
    run_id: str
    kind: str
    start: str
    end: str
    batches: list[list[str]]
    config: dict[str, Any]
    labels: str | None
    previous: str | None
    metrics: list[str] = field(default_factory=list)


def plan_run(store: Store, start: date, end: date, cfg: TrainConfig, nodes: list[str] | None = None,
             labels: str | None = None, run_id: str | None = None) -> tuple[RunPlan, RunRecorder]:
    """Validate inputs, split nodes into batches, open the run manifest and write ``params.json``."""
    if cfg.model not in ESTIMATORS:
        raise ValueError(f"unknown model {cfg.model!r}: choose one of {', '.join(ESTIMATORS)}")
    if cfg.model == "clu" and labels is None:
        raise ValueError("--model clu needs --labels: cluster probabilities are derived from labels (RUAD Section 3.4)")
    if cfg.mode == "semi" and labels is None:
        raise ValueError("--mode semi needs --labels (the semi-supervised filter removes labelled anomalies)")
    if labels is not None:
        read_intervals(labels)  # fail early with a one-line error
    ds = open_cube(store)
    sel = select_nodes(ds, nodes)
    t0, t1 = period(start, end)
    if cfg.train_end is not None:
        te = np.datetime64(cfg.train_end.replace("Z", ""), "ns")
        if not t0 < te < t1:
            raise ValueError(f"--train-end {cfg.train_end} is outside {start}..{end}")
    n_steps = int(((ds["time"] >= t0) & (ds["time"] < t1)).sum())
    if n_steps < 2:
        raise ValueError(f"the telemetry cube has {n_steps} time steps in {start}..{end}: nothing to train on")
    params = {"start": str(start), "end": str(end), "nodes": nodes, "labels": labels, **asdict(cfg)}
    rec = RunRecorder(store, "train", params, run_id=run_id)
    rec.write()
    batches = [sel[i : i + cfg.node_batch] for i in range(0, len(sel), cfg.node_batch)]
    metrics = [str(m) for m in ds["metric"].values]
    plan = RunPlan(store.url, rec.run_id, cfg.kind, str(start), str(end), batches, asdict(cfg), labels,
                   store.current(area(cfg.kind)), metrics)
    est = make_estimator(cfg.model, cfg.mode, cfg.window, cfg)
    store.write_json({
        "kind": cfg.kind, "model": cfg.model, "mode": cfg.mode, "hyper": estimator_params(est), "metrics": metrics,
        "features": feature_names(metrics), "start": str(start), "end": str(end), "train_fraction": cfg.train_fraction,
        "step": _step_of(ds),
        "run_id": rec.run_id, "previous": plan.previous,
    }, run_prefix(cfg.kind, rec.run_id), "params.json")
    return plan, rec


def split_index(times: np.ndarray, cfg: TrainConfig) -> int:
    """First test step: the 80/20 chronological split (RUAD Section 3.7) or the first step at/after ``train_end``."""
    if cfg.train_end is None:
        return chronological_split(len(times), cfg.train_fraction)
    sp = int(np.searchsorted(times, np.datetime64(cfg.train_end.replace("Z", ""), "ns")))
    if not 1 <= sp < len(times):
        raise ValueError(f"--train-end {cfg.train_end} leaves no train or no test steps in the period")
    return sp


def _step_of(ds: Any) -> str | None:
    t = ds["time"].values
    return str(np.asarray(t[1] - t[0]).astype("timedelta64[s]")) if len(t) > 1 else None


def train_batch(plan: RunPlan | dict[str, Any], index: int) -> dict[str, Any]:
    """Train node batch ``index`` of a plan: fit, write per-node models, score the test split.

    Never raises for a model problem: a batch that fails entirely lists all its nodes as failed
    with the reason (they keep their previous model in :func:`finish_run`).
    """
    import torch

    plan = plan if isinstance(plan, RunPlan) else RunPlan(**plan)
    cfg = TrainConfig(**{**plan.config, "compare_windows": tuple(plan.config.get("compare_windows", (5, 10, 20, 40)))})
    torch.set_num_threads(cfg.threads)
    nodes = plan.batches[index]
    store = Store(plan.store_url)
    t_start = time.perf_counter()
    _emit({"event": "batch_start", "batch": index, "nodes": len(nodes), "epochs": cfg.epochs})
    try:
        ds = open_cube(store)
        t0, t1 = period(date.fromisoformat(plan.start), date.fromisoformat(plan.end))
        X, times, _ = checked(lambda: load_batch(ds, nodes, t0, t1, plan.metrics), store, "telemetry.zarr")
        report = LabelReport()
        y = None
        if plan.labels is not None:
            step = times[1] - times[0] if len(times) > 1 else np.timedelta64(15, "m")
            y = label_grid(read_intervals(plan.labels), nodes, times, step, report)
        sp = split_index(times, cfg)
        frames, failed, curves = [], {}, {}
        for vi, (model, mode, window) in enumerate(variants(cfg, y is not None)):
            est = make_estimator(model, mode, window, cfg)
            kwargs = {}
            if vi == 0 and model in ("ruad", "dense"):
                kwargs["progress"] = lambda e, loss: _emit({"event": "epoch", "batch": index, "epoch": e,
                                                            "loss": float(np.nanmean(loss))})
            est.fit(X[:, :sp], None if y is None else y[:, :sp], **kwargs)  # type: ignore[call-arg]
            score = est.score_samples(X[:, sp:])
            name = variant_name(model, mode, window)
            frames.append(_score_frame(nodes, times[sp:], name, score, None if y is None else y[:, sp:]))
            if vi == 0:
                failed = {nodes[k]: reason for k, reason in est.failed_.items()}
                hist = getattr(est, "history_", None)
                thresholds = (
                    calibrated_thresholds(score, None if y is None else y[:, sp:], cfg.threshold, cfg.threshold_quantile)
                    if cfg.threshold_quantile
                    else np.full(len(nodes), cfg.threshold)
                )
                for k, node in enumerate(nodes):
                    if node in failed:
                        continue
                    extra = {"n_train_windows": int(est.n_train_windows_[k]), "train_start": str(times[0]),
                             "train_end": str(times[sp - 1]), "test_end": str(times[-1]),
                             "threshold": float(thresholds[k]), "threshold_rule": _threshold_rule(cfg)}
                    if hist is not None:
                        extra["curve"] = {"train_loss": hist.train_loss[k].tolist(), "val_loss": hist.val_loss[k].tolist(),
                                          "best_epoch": int(hist.best_epoch[k])}
                        curves[node] = extra["curve"]
                    write_node(store, plan.kind, plan.run_id, node, est, k, extra)
        store.write_parquet(pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False),
                            run_prefix(plan.kind, plan.run_id), "scores", f"batch-{index:05d}.parquet")
        out = {"batch": index, "nodes": nodes, "failed": failed, "seconds": time.perf_counter() - t_start,
               "labels": asdict(report) if plan.labels else None, "train_steps": int(sp), "test_steps": int(X.shape[1] - sp)}
    except Exception as e:  # noqa: BLE001 - a failed batch must not lose the other batches' work
        reason = f"batch failed: {type(e).__name__}: {str(e)[:500]}"
        out = {"batch": index, "nodes": nodes, "failed": dict.fromkeys(nodes, reason), "seconds": time.perf_counter() - t_start,
               "labels": None, "error": reason}
    _emit({"event": "batch_done", "batch": index, "failed": len(out["failed"])})
    return out


def _threshold_rule(cfg: TrainConfig) -> str:
    if not cfg.threshold_quantile:
        return f"T={cfg.threshold}"
    return f"max(T={cfg.threshold}, q{cfg.threshold_quantile} of held-out normal scores) (models/anomaly/thresholds.py)"


def _score_frame(nodes: list[str], times: np.ndarray, variant: str, score: np.ndarray, y: np.ndarray | None) -> pd.DataFrame:
    n, T = score.shape
    return pd.DataFrame({
        "node": np.repeat(np.array(nodes, dtype=object), T),
        "time": np.tile(times, n),
        "variant": variant,
        "score": score.astype(np.float32).ravel(),
        "label": (np.zeros(n * T, bool) if y is None else y.ravel()),
        "labelled": y is not None,
    })


def evaluate_scores(scores: pd.DataFrame) -> dict[str, Any]:
    """Pooled AUC (Table 7), F1 at the paper's thresholds (Table 8), per-node AUC and score
    distributions for every variant in a scores table (node, time, variant, score, label, labelled)."""
    out: dict[str, Any] = {}
    for variant, g in scores.groupby("variant", sort=False):
        s = g["score"].to_numpy(np.float64)
        finite = np.isfinite(s)
        dist = {f"q{int(q * 100):02d}": float(np.quantile(s[finite], q)) for q in (0.5, 0.9, 0.99)} if finite.any() else {}
        dist.update({"mean": float(s[finite].mean()) if finite.any() else None, "scored": int(finite.sum()),
                     "share_at_1": float((s[finite] >= 1).mean()) if finite.any() else None})
        res: dict[str, Any] = {"distribution": dist}
        if bool(g["labelled"].all()):
            y = g["label"].to_numpy(bool)
            res["pooled_auc"] = pooled_auc(s, y)
            res["f1"] = f1_at_thresholds(s, y)
            res["anomalous_share"] = float(y[finite].mean()) if finite.any() else None
            pivot_s = g.pivot(index="node", columns="time", values="score")
            pivot_y = g.pivot(index="node", columns="time", values="label").reindex_like(pivot_s)
            aucs = per_node_auc(pivot_s.to_numpy(np.float64), pivot_y.to_numpy(bool)).tolist()
            res["per_node_auc"] = dict(zip(pivot_s.index.astype(str), aucs, strict=True))
        out[str(variant)] = res
    return out


def methods_table(ev: dict[str, Any]) -> str:
    """Markdown tables like the paper's Table 7 (baselines; RUAD x W) and Table 8 (F1 at thresholds)."""
    def fmt(x: Any) -> str:
        return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.4f}"

    lines = ["| method | pooled AUC |", "|---|---|"]
    ruad = {}
    for name, r in ev.items():
        if name.startswith("RUAD"):
            m, w = name.split(" W=")
            ruad.setdefault(m, {})[int(w)] = r.get("pooled_auc")
        else:
            lines.append(f"| {name} | {fmt(r.get('pooled_auc'))} |")
    if ruad:
        ws = sorted({w for d in ruad.values() for w in d})
        lines += ["", "| RUAD / input sequence length | " + " | ".join(map(str, ws)) + " |", "|---|" + "---|" * len(ws)]
        for m, d in ruad.items():
            lines.append(f"| {m} | " + " | ".join(fmt(d.get(w)) for w in ws) + " |")
    labelled = {k: v for k, v in ev.items() if "f1" in v}
    if labelled:
        lines += ["", "F1 (anomaly class) at threshold T, class = P >= T (Eq. 4):", "",
                  "| method | " + " | ".join(str(t) for t in PAPER_THRESHOLDS) + " |", "|---|" + "---|" * len(PAPER_THRESHOLDS)]
        for name, r in labelled.items():
            lines.append(f"| {name} | " + " | ".join(f"{r['f1']['anomaly'][t]:.3f}" for t in PAPER_THRESHOLDS) + " |")
    lines += ["", "Score distribution on the test split (P of Eq. 3):", "",
              "| method | scored | median | q90 | q99 | share P=1 |", "|---|---|---|---|---|---|"]
    for name, r in ev.items():
        d = r["distribution"]
        lines.append(f"| {name} | {d['scored']} | {fmt(d.get('q50'))} | {fmt(d.get('q90'))} | {fmt(d.get('q99'))} | "
                     f"{fmt(d.get('share_at_1'))} |")
    return "\n".join(lines) + "\n"


def roc_png(scores: pd.DataFrame, path: str, store: Store) -> bool:
    """Pooled ROC curves of all labelled variants (Figs. 4-7) as PNG; False if nothing is labelled."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lab = scores[scores["labelled"]]
    if lab.empty or not lab["label"].any():
        return False
    fig, ax = plt.subplots(figsize=(5, 5))
    for variant, g in lab.groupby("variant", sort=False):
        fpr, tpr = pooled_roc(g["score"].to_numpy(np.float64), g["label"].to_numpy(bool))
        ax.plot(fpr, tpr, label=f"{variant} (AUC {pooled_auc(g['score'].to_numpy(np.float64), g['label'].to_numpy(bool)):.3f})")
    ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="random")
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    ax.set_title("Pooled ROC over all nodes (test split)")
    ax.legend(fontsize=7, loc="lower right")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    store.write_bytes(buf.getvalue(), path)
    return True


def _evaluate_run(store: Store, prefix: str) -> tuple[dict[str, Any], pd.DataFrame, str, bool]:
    """Read the run's test scores and write metrics.json, table.md and roc.png."""
    parts = []
    for p in store.iter_files(prefix, "scores"):
        if p.endswith(".parquet") and "/.tmp-" not in p:
            with store.fs.open(p, "rb") as f:
                parts.append(pq.read_table(f))
    scores = pd.concat([p.to_pandas() for p in parts], ignore_index=True) if parts else pd.DataFrame(
        columns=["node", "time", "variant", "score", "label", "labelled"])
    ev = evaluate_scores(scores) if len(scores) else {}
    table = methods_table(ev) if ev else "no scores\n"
    store.write_json(ev, prefix, "metrics.json")
    store.write_bytes(table.encode(), prefix, "table.md")
    has_roc = roc_png(scores, f"{prefix}/roc.png", store) if len(scores) else False
    return ev, scores, table, has_roc


def finish_run(store: Store, plan: RunPlan, results: list[dict[str, Any]], rec: RunRecorder) -> dict[str, Any]:
    """Carry over failed nodes, evaluate, write metrics/table/ROC, move ``CURRENT``, close the manifest."""
    prefix = run_prefix(plan.kind, plan.run_id)
    failed: dict[str, dict[str, Any]] = {}
    for r in results:
        for node, reason in r["failed"].items():
            origin = carry_over(store, plan.kind, plan.run_id, node, plan.previous)
            failed[node] = {"reason": reason, "kept_model_from": origin}
            rec.error(f"node {node}: {reason}" + (f" (kept model of run {origin})" if origin else " (no previous model)"))
    store.write_json(failed, prefix, "failed.json")
    with rec.step("evaluate"):
        ev, scores, table, has_roc = _evaluate_run(store, prefix)
    n_nodes = sum(len(b) for b in plan.batches)
    trained = n_nodes - len(failed)
    kept = sum(1 for f in failed.values() if f["kept_model_from"])
    curves = [r["seconds"] for r in results]
    rec.add_output("registry", store.url_of(prefix))
    rec.add_output("nodes_trained", trained)
    rec.add_output("nodes_failed", len(failed))
    rec.add_output("nodes_kept_previous", kept)
    rec.add_output("batches", len(results))
    rec.add_output("batch_seconds_total", float(sum(curves)))
    primary = ev.get(next(iter(ev), ""), {}) if ev else {}
    rec.add_output("pooled_auc", primary.get("pooled_auc"))
    rec.manifest.notes["labels"] = [r.get("labels") for r in results if r.get("labels")][:1]
    moved = trained > 0  # a run that trained no node never becomes CURRENT (carried-over models are not news)
    if moved:
        store.set_current(area(plan.kind), plan.run_id)
    else:
        first = next(iter(failed.values()), {}).get("reason", "no node selected")
        rec.error(f"no node trained: CURRENT not moved (stays {plan.previous or 'unset'}); first failure: {first}")
    rec.add_output("current_moved", moved)
    m = rec.finish("failed" if not moved else None).model_dump(mode="json")
    return {"run_id": plan.run_id, "kind": plan.kind, "registry": store.url_of(prefix), "trained": trained,
            "failed": failed, "metrics": ev, "table": table, "roc_png": store.url_of(prefix, "roc.png") if has_roc else None,
            "manifest": m, "current_moved": moved}


def run_training(store: Store, start: date, end: date, cfg: TrainConfig, nodes: list[str] | None = None,
                 labels: str | None = None, mapper: Callable[..., Iterable[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Plan, train every node batch (``cfg.workers`` threads by default) and finish a run."""
    plan, rec = plan_run(store, start, end, cfg, nodes, labels)
    try:
        with rec.step("train_batches"):
            if mapper is None:
                with ThreadPoolExecutor(max(1, cfg.workers)) as ex:
                    results = list(ex.map(lambda i: train_batch(plan, i), range(len(plan.batches))))
            else:
                results = list(mapper(plan, range(len(plan.batches))))
        return finish_run(store, plan, results, rec)
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise


def plan_as_dict(plan: RunPlan) -> dict[str, Any]:
    """JSON form of a plan (Prefect task parameter)."""
    return json.loads(json.dumps(asdict(plan), default=str))
