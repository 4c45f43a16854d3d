"""Benchmark (classification quality, issue 19): training variants of the time-ordered RF on one campaign.

Every variant is scored exactly like ``nodewatch finj train``'s headline figure: RF, *mode* labels, the same 5
time-ordered folds, the same core per window, every window of the test folds (ambiguous ones included, mode
labels); only the training side changes. Each variant runs with several forest seeds (``--seeds``), so a
difference can be read against the seed-to-seed spread, and per fold (a change that helps one fold only is
not kept). Variants (all principled, none tuned to a fold):

* ``base``: 50 trees, class weights balanced (the product);
* ``no_weights``: no class weights (the paper does not say it weighted classes);
* ``balanced_subsample``: class weights recomputed per bootstrap sample;
* ``trees200``: 200 trees (less variance, same model);
* ``label_share``: sample weight = the share of the window's seconds that carry its mode label (a window
  labelled ``leak`` with 31 s of leak counts 0.52, a clean one 1.0): ambiguous windows weigh less in training;
* ``train_unambiguous``: trained on unambiguous windows only (tested on all).

    nice .venv/bin/python benchmarks/finj_variants.py --campaign /tmp/nw-finj2/real [--seeds 5] [--without pagefail]

Prints a markdown table (mean, min, max weighted F1 over the seeds; macro F1; per-fold weighted F1 of seed 0)
and ``ratio=`` (the best variant's mean weighted F1 / ``base``'s, measured in the same run).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

VARIANTS = ("base", "no_weights", "balanced_subsample", "trees200", "label_share", "train_unambiguous")


def label_share(campaign: Path, ends: np.ndarray, mode: np.ndarray, window: int = 60) -> np.ndarray:
    """Per window: the fraction of its seconds whose per-second label is its mode label."""
    from nodewatch.tasks.finj.dataset import per_second_state, read_raw

    raw = read_raw(campaign)
    lab, _, _ = per_second_state(raw)
    idx = ends - raw.t0
    view = np.lib.stride_tricks.sliding_window_view(lab, window)[idx - (window - 1)]
    return (view == mode[:, None]).mean(axis=1)


def run(x: np.ndarray, y: np.ndarray, amb: np.ndarray, share: np.ndarray, variant: str, seed: int, k: int = 5):
    """Out-of-fold predictions of one variant, and per-fold weighted F1."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import f1_score

    from nodewatch.models.finj.classify import folds

    pred = np.empty_like(y)
    per_fold = []
    for tr, te in folds(len(y), k):
        cw = {"no_weights": None, "balanced_subsample": "balanced_subsample"}.get(variant, "balanced")
        rf = RandomForestClassifier(
            n_estimators=200 if variant == "trees200" else 50, random_state=seed, n_jobs=1, class_weight=cw
        )
        sw = share[tr] if variant == "label_share" else None
        trn = tr[~amb[tr]] if variant == "train_unambiguous" else tr
        rf.fit(x[trn], y[trn], sample_weight=None if sw is None else sw)
        pred[te] = rf.predict(x[te])
        per_fold.append(f1_score(y[te], pred[te], average="weighted", zero_division=0.0))
    return pred, per_fold


def main() -> None:
    """Run every variant with every seed on one campaign and print the table."""
    from nodewatch.models.finj.classify import fscores, one_core_per_window
    from nodewatch.tasks.finj.dataset import build, without_faults
    from nodewatch.tasks.finj.errors import instances

    p = argparse.ArgumentParser()
    p.add_argument("--campaign", type=Path, required=True)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--without", default="", help="comma list of faults whose windows are dropped")
    p.add_argument("--variants", default=",".join(VARIANTS))
    a = p.parse_args()
    ds = build(a.campaign)
    drop = [f for f in a.without.split(",") if f]
    if drop:
        ds = without_faults(ds, [(i.start, i.end) for i in instances(a.campaign) if i.is_fault and i.program in drop])
    core = one_core_per_window(len(ds.ends), ds.features.shape[1], 0)
    x, y = ds.features[np.arange(len(ds.ends)), core], ds.mode
    share = label_share(a.campaign, ds.ends, y)
    present = sorted(set(y.tolist()))
    print(f"campaign {a.campaign}{' without ' + ','.join(drop) if drop else ''}: {len(y)} windows, {x.shape[1]} features")
    print(f"load avg {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; seeds 0-{a.seeds - 1}")
    print()
    print("| variant | weighted F1 mean (min-max) | macro F1 mean | folds (seed 0) | s |")
    print("|---|---|---|---|---|")
    means = {}
    for v in a.variants.split(","):
        t0 = time.perf_counter()
        w, m, folds0 = [], [], None
        for s in range(a.seeds):
            pred, pf = run(x, y, ds.ambiguous, share, v, s)
            _, wf, mf = fscores(y, pred, present)
            w.append(wf)
            m.append(mf)
            folds0 = folds0 or pf
        means[v] = float(np.mean(w))
        print(
            f"| {v} | {np.mean(w):.3f} ({min(w):.3f}-{max(w):.3f}) | {np.mean(m):.3f} | "
            + " ".join(f"{f:.2f}" for f in folds0)
            + f" | {time.perf_counter() - t0:.0f} |",
            flush=True,
        )
    best = max(means, key=means.get)
    print(f"\nbest: {best}; ratio={means[best] / means['base']:.3f}")


if __name__ == "__main__":
    main()
