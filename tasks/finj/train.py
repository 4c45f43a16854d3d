"""``nodewatch finj train``: campaign(s) -> feature sets -> cross-validated classifiers -> stored RF.

Evaluation (Netti et al. Sec. 7): for every window one randomly chosen core's feature set; 5-fold CV
with time-ordered and shuffled folds; RF, DT, linear SVC and the 2x1000 NN with *mode* labels in time
order (Fig. 10), RF with mode/recent x time/shuffled (Fig. 11) and without ambiguous windows (Fig. 12);
top-20 DT features (Table 2). The final RF is fitted on all windows and stored as arrays
(``models/finj/forest.py``) in ``models/finj/<run_id>/`` of the store: ``forest.safetensors`` and
``model.json`` (classes, feature layout, metrics, the sha256 of the weights, checked on load).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nodewatch.models.finj.classify import cross_val_predict, fscores, make, one_core_per_window, top_features
from nodewatch.models.finj.features import FeatureLayout
from nodewatch.models.finj.forest import ArrayForest, export
from nodewatch.tasks.finj.dataset import CLASSES, Dataset, build, build_raw, choose_layout, read_raw

AREA = "models/finj"
PAPER_OVERALL = {
    ("rf", "mode", "time"): 0.98,
    ("nn", "mode", "time"): 0.93,
    ("svc", "mode", "time"): 0.93,
    ("rf", "recent", "time"): 0.96,
    ("rf", "mode", "shuffled"): 0.99,
    ("rf", "recent", "shuffled"): 0.99,
    ("rf", "mode_unambiguous", "time"): 0.99,
    ("rf", "mode_unambiguous", "shuffled"): 0.99,
}
"""Overall F-scores quoted in the text of Netti et al. Sec. 7.1-7.3 (per-fault values are only in their figures)."""
PAPER_TABLE2 = (
    "cpu_freq_perc50",
    "active_der_perc5",
    "hw_cache_misses_perc50",
    "thp_split_std",
    "nr_active_file_der_perc25",
    "hw_branch_instructions_perc95",
    "mapped_der_avg",
    "nr_anon_pages_der_perc95",
    "sys_der_min",
    "nr_dirtied_der_std",
    "kernelstack_perc50",
    "numa_hit_perc5",
    "processes_der_std",
    "context_switches_der_perc25",
    "procs_running_perc5",
    "allocated_perc50",
    "nr_free_pages_der_min",
    "time_read_rate_der_perc95",
    "nr_kernel_stack_der_max",
    "hw_instructions_perc5",
)


class ModelFileError(ValueError):
    """A stored fault classifier is missing or does not match its recorded checksum (one line)."""


@dataclass
class Experiment:
    """One CV configuration and its scores."""

    model: str
    labels: str
    order: str
    per_class: dict[str, float]
    weighted: float
    macro: float
    n: int
    seconds: float
    confusion: list[list[int]] | None = None
    """Rows = true class, columns = predicted, in ``confusion_classes`` order."""
    confusion_classes: list[str] | None = None
    folds: list[dict[str, float]] | None = None
    """Time-ordered configurations: per fold (in time order) windows, weighted F1, accuracy, healthy F1 and the
    accuracy of always answering ``healthy`` (the majority-class baseline)."""


def combine(
    campaigns: Sequence[Path], source: str = "raw", store=None, levels: str = "all", view: str = "campaign"
) -> tuple[Dataset, list[int]]:
    """Feature sets of several campaigns with one layout (the first campaign's), concatenated in time order.

    ``source="raw"``: the sampler's ``raw.csv`` (every /proc field, per core, ``allocated``);
    ``source="staged"``: the campaign's telemetry as staged in ``store`` by ``nodewatch ingest telemetry``
    (catalogue metrics, no ``allocated``; see ``staged.py``). ``view``: ``dataset.campaign_view`` (raw source)."""
    if source == "staged":
        from nodewatch.tasks.finj.staged import campaign_span, raw_from_staged

        raws = []
        for c in campaigns:
            node, start, end, events = campaign_span(c)
            raws.append(raw_from_staged(store, node, start, end, events))
        layout = choose_layout(raws[0], allocated=False)
        parts = [build_raw(r, layout) for r in raws]
    elif source == "raw":
        layout = choose_layout(read_raw(campaigns[0], view=view), levels=levels)
        parts = [build(c, layout, view=view) for c in campaigns]
    else:
        raise ValueError(f"unknown source {source!r}: raw or staged")
    ds = parts[0]
    if len(parts) > 1:
        ds = Dataset(
            np.concatenate([p.features for p in parts]),
            ds.names,
            np.concatenate([p.ends for p in parts]),
            np.concatenate([p.mode for p in parts]),
            np.concatenate([p.recent for p in parts]),
            np.concatenate([p.ambiguous for p in parts]),
            layout,
        )
    return ds, [len(p.ends) for p in parts]


def evaluate(
    ds: Dataset,
    models: Sequence[str] = ("rf", "dt", "svc", "nn"),
    seed: int = 0,
    k: int = 5,
    progress: Callable[[str], None] | None = None,
    rf_variants: bool = True,
) -> tuple[list[Experiment], list[tuple[str, float]]]:
    """The experiments of Sec. 7 on ``ds`` (see module doc) and the top-20 DT features; ``rf_variants=False``
    keeps only each model's mode/time-ordered configuration (no RF recent/shuffled/unambiguous runs)."""
    core = one_core_per_window(len(ds.ends), ds.features.shape[1], seed)
    x = ds.features[np.arange(len(ds.ends)), core]
    present = sorted(set(ds.mode.tolist()) | set(ds.recent.tolist()))
    configs = [(m, "mode", "time") for m in models]
    if "rf" in models and rf_variants:
        configs += [
            ("rf", "recent", "time"),
            ("rf", "mode", "shuffled"),
            ("rf", "recent", "shuffled"),
            ("rf", "mode_unambiguous", "time"),
            ("rf", "mode_unambiguous", "shuffled"),
        ]
    out = []
    for model, labels, order in configs:
        if progress:
            progress(f"{model} {labels} {order}")
        y = ds.recent if labels == "recent" else ds.mode
        xs, ys = (x[~ds.ambiguous], y[~ds.ambiguous]) if labels == "mode_unambiguous" else (x, y)
        if len(ys) < k or len(set(ys.tolist())) < 2:
            if progress:
                progress(f"{model} {labels} {order}: skipped ({len(ys)} windows, {len(set(ys.tolist()))} classes)")
            continue
        t0 = time.perf_counter()
        pred = cross_val_predict(model, xs, ys, k, order == "shuffled", seed)
        per, w, mac = fscores(ys, pred, [c for c in present if (ys == c).any()])
        from sklearn.metrics import confusion_matrix

        cls = [c for c in present if (ys == c).any() or (pred == c).any()]
        per_fold = None
        if order == "time":
            from sklearn.metrics import f1_score

            from nodewatch.models.finj.classify import folds as cv_folds

            per_fold = [
                {
                    "windows": int(len(te)),
                    "weighted": float(f1_score(ys[te], pred[te], average="weighted", zero_division=0.0)),
                    "accuracy": float((pred[te] == ys[te]).mean()),
                    "healthy_f1": float(f1_score(ys[te] == 0, pred[te] == 0, zero_division=0.0)),
                    "majority_accuracy": float((ys[te] == 0).mean()),
                }
                for _, te in cv_folds(len(ys), k)
            ]
        out.append(
            Experiment(
                model,
                labels,
                order,
                {CLASSES[c]: f for c, f in per.items()},
                w,
                mac,
                len(ys),
                round(time.perf_counter() - t0, 2),
                confusion_matrix(ys, pred, labels=cls).tolist(),
                [CLASSES[c] for c in cls],
                per_fold,
            )
        )
    top = top_features(x, ds.mode, ds.names, 20, seed)
    return out, top


def stand_in_faults(campaigns: Sequence[Path]) -> tuple[list[str], list[tuple[float, float]]]:
    """The faults the campaigns ran as opt-in stand-ins (``availability.campaign_stand_ins``: the machine could
    not produce them with the paper's mechanism) and the (start, end) of every instance of them."""
    from nodewatch.tasks.finj.availability import campaign_stand_ins
    from nodewatch.tasks.finj.errors import instances

    names: set[str] = set()
    spans: list[tuple[float, float]] = []
    for c in campaigns:
        try:
            summary = json.loads((Path(c) / "summary.json").read_text())
        except (OSError, ValueError):
            summary = {}
        si = set(campaign_stand_ins(summary if isinstance(summary, dict) else {}))
        found = [i for i in instances(Path(c)) if i.is_fault and i.program in si]
        names |= {i.program for i in found}
        spans += [(i.start, i.end) for i in found]
    return sorted(names), spans


def fit_forest(ds: Dataset, seed: int = 0) -> tuple[dict[str, np.ndarray], list[int]]:
    """The deployed RF: fitted on all windows (one random core each, mode labels), as arrays."""
    core = one_core_per_window(len(ds.ends), ds.features.shape[1], seed)
    x = ds.features[np.arange(len(ds.ends)), core]
    rf = make("rf", seed).fit(x, ds.mode)
    return export(rf), [int(c) for c in rf.classes_]


def save_model(
    store, run_id: str, arrays: dict[str, np.ndarray], classes: list[int], layout: FeatureLayout, meta: dict[str, Any]
) -> str:
    """Write ``models/finj/<run_id>/{forest.safetensors,model.json}`` and point ``CURRENT`` at it."""
    from safetensors.numpy import save as st_save

    from nodewatch.schemas.names import check_path_token

    check_path_token(run_id, "run id")
    blob = st_save({k: np.ascontiguousarray(v) for k, v in arrays.items()})
    store.write_bytes(blob, AREA, run_id, "forest.safetensors")
    doc = {
        **meta,
        "classes": [CLASSES[c] for c in classes],
        "layout": {"node": list(layout.node), "core": list(layout.core), "counters": sorted(layout.counters)},
        "weights_sha256": hashlib.sha256(blob).hexdigest(),
        "weights_bytes": len(blob),
    }
    store.write_json(doc, AREA, run_id, "model.json")
    store.set_current(AREA, run_id)
    return store.path(AREA, run_id)


@dataclass
class LoadedModel:
    """A stored fault classifier ready to predict."""

    run_id: str
    forest: ArrayForest
    classes: list[str]
    layout: FeatureLayout
    meta: dict[str, Any]


def load_model(store, run_id: str | None = None) -> LoadedModel:
    """Load ``models/finj/<run_id>`` (default ``CURRENT``), checking the weights' sha256 (never unpickles)."""
    from safetensors.numpy import load as st_load

    from nodewatch.schemas.names import check_path_token

    rid = run_id or store.current(AREA)
    if rid is None:
        raise ModelFileError(f"no fault classifier in {AREA} (run 'nodewatch finj train' first)")
    check_path_token(rid, "run id")
    try:
        meta = store.read_json(AREA, rid, "model.json")
        with store.fs.open(store.path(AREA, rid, "forest.safetensors"), "rb") as fh:
            blob = fh.read(int(meta["weights_bytes"]) + 1)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ModelFileError(f"{AREA}/{rid}: unreadable model ({type(e).__name__})") from None
    if hashlib.sha256(blob).hexdigest() != meta.get("weights_sha256"):
        raise ModelFileError(f"{AREA}/{rid}/forest.safetensors does not match its recorded sha256 (truncated or changed)")
    try:
        forest = ArrayForest(st_load(blob))
        lay = meta["layout"]
        layout = FeatureLayout(tuple(lay["node"]), tuple(lay["core"]), frozenset(lay["counters"]))
    except (ValueError, KeyError, TypeError) as e:
        raise ModelFileError(f"{AREA}/{rid}: invalid model ({str(e)[:100]})") from None
    return LoadedModel(rid, forest, list(meta["classes"]), layout, meta)


def report_markdown(
    exps: Sequence[Experiment],
    top: Sequence[tuple[str, float]],
    info: dict[str, Any],
    producible: Sequence[Experiment] = (),
) -> str:
    """The F-score tables (overall and per fault, beside the paper's), the same over the faults the machine
    produces with their paper mechanism when some ran as stand-ins (``producible``), and the top-20 DT
    features beside Table 2."""
    lines = [
        f"# Fault classification: {info.get('campaigns', '')} "
        f"({info.get('source', 'raw')} features, levels: {info.get('levels', 'all')}, view: {info.get('view', 'node')})",
        "",
    ]
    lines += [
        f"{info.get('windows', 0)} windows (60 s, every 10 s), {info.get('ambiguous', 0)} ambiguous; "
        f"{info.get('features', 0)} features per core; classes: {info.get('class_counts', {})}",
        "",
    ]
    lines += [
        "## Overall F-score (5-fold CV)",
        "",
        "| model | labels | folds | weighted F1 | macro F1 | paper | windows | s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in exps:
        paper = PAPER_OVERALL.get((e.model, e.labels, e.order))
        lines.append(
            f"| {e.model} | {e.labels} | {e.order} | {e.weighted:.3f} | {e.macro:.3f} | "
            f"{'' if paper is None else f'{paper:.2f}'} | {e.n} | {e.seconds} |"
        )
    classes = [c for c in CLASSES if any(c in e.per_class for e in exps)]
    lines += [
        "",
        "## F-score per class",
        "",
        "| model | labels | folds | " + " | ".join(classes) + " |",
        "|---|---|---|" + "---|" * len(classes),
    ]
    for e in exps:
        lines.append(
            f"| {e.model} | {e.labels} | {e.order} | "
            + " | ".join(f"{e.per_class[c]:.2f}" if c in e.per_class else "" for c in classes)
            + " |"
        )
    if producible:
        pc = [c for c in CLASSES if any(c in e.per_class for e in producible)]
        lines += [
            "",
            f"## Over the faults this machine produces ({', '.join(info.get('stand_ins', []))} ran as a stand-in: "
            f"every window overlapping one of its instances dropped, {info.get('producible_windows', 0)} windows)",
            "",
            "| model | labels | folds | weighted F1 | macro F1 | " + " | ".join(pc) + " |",
            "|---|---|---|---|---|" + "---|" * len(pc),
        ]
        lines += [
            f"| {e.model} | {e.labels} | {e.order} | {e.weighted:.3f} | {e.macro:.3f} | "
            + " | ".join(f"{e.per_class[c]:.2f}" if c in e.per_class else "" for c in pc)
            + " |"
            for e in producible
        ]
    first = next((e for e in exps if e.confusion is not None), None)
    if first is not None:
        cc = first.confusion_classes or []
        lines += [
            "",
            f"## Confusion matrix: {first.model}, {first.labels} labels, {first.order} folds (rows true, columns predicted)",
            "",
            "| true / predicted | " + " | ".join(cc) + " |",
            "|---|" + "---|" * len(cc),
        ]
        lines += [f"| {c} | " + " | ".join(str(v) for v in row) + " |" for c, row in zip(cc, first.confusion, strict=True)]
    if first is not None and first.folds:
        lines += [
            "",
            f"## Per time-ordered fold: {first.model}, {first.labels} labels (majority = always 'healthy')",
            "",
            "| fold | windows | weighted F1 | accuracy | healthy F1 | majority accuracy |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {i + 1} | {f['windows']} | {f['weighted']:.3f} | {f['accuracy']:.2f} | {f['healthy_f1']:.2f} | "
            f"{f['majority_accuracy']:.2f} |"
            for i, f in enumerate(first.folds)
        ]
    lines += [
        "",
        "Paper (Netti et al. Fig. 10-12): per-fault values only in figures; the text says pagefail and ioerr are",
        "the hardest classes for every model.",
        "",
        "## Top-20 features by DT importance beside the paper's Table 2",
        "",
        "| rank | ours | importance | paper (Table 2) |",
        "|---|---|---|---|",
    ]
    for i in range(20):
        ours, imp = top[i] if i < len(top) else ("", 0.0)
        lines.append(f"| {i + 1} | {ours} | {imp:.3f} | {PAPER_TABLE2[i]} |")
    return "\n".join(lines) + "\n"


def train(
    campaigns: Sequence[Path],
    store,
    models: Sequence[str] = ("rf", "dt", "svc", "nn"),
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    source: str = "raw",
    levels: str = "all",
    view: str = "campaign",
    rf_variants: bool = True,
) -> dict[str, Any]:
    """Evaluate and store a fault classifier (see module doc); returns the summary (also in ``metrics.json``).
    ``rf_variants``: see :func:`evaluate`."""
    from nodewatch.tasks.core.runs import RunRecorder

    rec = RunRecorder(
        store,
        "finj_train",
        {
            "campaigns": [str(c) for c in campaigns],
            "models": list(models),
            "seed": seed,
            "source": source,
            "levels": levels,
            "view": view,
        },
    )
    rec.write()
    with rec.step("features"):
        ds, sizes = combine(campaigns, source, store, levels, view)
    counts = {CLASSES[c]: int(n) for c, n in enumerate(np.bincount(ds.mode, minlength=len(CLASSES))) if n}
    info = {
        "campaigns": ", ".join(Path(c).name for c in campaigns),
        "source": source,
        "levels": levels,
        "view": view,
        "windows": int(len(ds.ends)),
        "ambiguous": int(ds.ambiguous.sum()),
        "features": len(ds.names),
        "class_counts": counts,
        "sizes": sizes,
    }
    with rec.step("evaluate"):
        exps, top = evaluate(ds, models, seed, progress=progress, rf_variants=rf_variants)
    producible: list[Experiment] = []
    if source == "raw":
        stand_ins, spans = stand_in_faults(campaigns)
        if stand_ins:
            from nodewatch.tasks.finj.dataset import without_faults

            with rec.step("evaluate_producible"):
                sub = without_faults(ds, spans)
                producible, _ = evaluate(sub, models, seed, progress=progress, rf_variants=False)
            info["stand_ins"] = stand_ins
            info["producible_windows"] = int(len(sub.ends))
    with rec.step("fit"):
        arrays, classes = fit_forest(ds, seed)
    metrics = {
        **info,
        "experiments": [e.__dict__ for e in exps],
        "experiments_producible": [e.__dict__ for e in producible],
        "top20_dt": top,
    }
    path = save_model(
        store,
        rec.run_id,
        arrays,
        classes,
        ds.layout,
        {"seed": seed, "window": 60, "step": 10, "source": source, "metrics": metrics},
    )
    md = report_markdown(exps, top, info, producible)
    store.write_bytes(md.encode(), AREA, rec.run_id, "report.md")
    store.write_json(metrics, AREA, rec.run_id, "metrics.json")
    rec.add_output("model", path)
    rec.finish()
    return {"run_id": rec.run_id, "path": path, "report": md, **metrics}


def dump(obj: Any) -> str:
    """JSON for ``--json``."""
    return json.dumps(obj, indent=2, default=float)
