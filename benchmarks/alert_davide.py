"""Alert scores on real labelled data: one D.A.V.I.D.E. node (issue 15, ``../shared/data/telemetry/davide/``).

One node's power (5-min means) with six injected misconfiguration periods (CPU governor switched,
PROVENANCE.md). Aggregated to 15-min windows (mean/min/max/std), trained / referenced on the windows before
``--split`` (2018-04-07: before the first anomaly, 2018-04-12; the dead-sensor stretch 04-03..06 is missing),
scored on every window from the split on. Printed per method: pooled ROC AUC and best F1 (over all
thresholds) of the anomaly class against the window labels.

* ``verdicts (temporal)``: the own-history evidence of the node verdicts (``models/anomaly/vicinity.py``:
  log of window means with the per-metric offset, median and floored ``1.4826 x MAD`` of the reference,
  |z|) with the k-of-n persistence (2 of 3) of ``models/anomaly/verdicts.py``. One node has no peers: the
  job, rack and architecture vicinities cannot act here; this is the temporal half only.
* ``robust-z baseline``: DESIGN.md's plain per-node robust z (``log1p`` of window means, |z|).
* ``RUAD``, ``dense AE``, ``EXP``: the per-node models of ``models/anomaly`` (RUAD Eq. 3 probability) on the
  4 window statistics.

``ratio=``: AUC of the verdicts' temporal score over the AUC of RUAD (today's nightly model), same run.

Second table, ``--labelled-split`` (default 2018-04-21): the methods that need labels, and every other method on the
same windows. Training / reference = every window before it (holds 4 of the 6 labelled periods, 450 windows);
test = every window from it (the other 2 periods). ``CLU`` (k-means, cluster probability = labelled share,
Section 3.4 of the RUAD paper) and ``RUAD_semi`` / ``dense AE_semi`` (anomalous training windows removed,
Section 3.7) use the training labels; the unsupervised methods and the verdicts' temporal score ignore them
(with the first split the training part holds no labelled window, so CLU has nothing to learn and the semi
variants equal the unsupervised ones).

Run: ``nice .venv/bin/python benchmarks/alert_davide.py [--data ../shared/data/telemetry/davide --epochs 5]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "telemetry" / "davide"


def best_f1(scores: np.ndarray, labels: np.ndarray) -> float:
    """Largest F1 of the anomaly class over all thresholds (scores NaN ignored)."""
    from sklearn.metrics import precision_recall_curve

    s, y = np.asarray(scores, float).ravel(), np.asarray(labels, bool).ravel()
    ok = np.isfinite(s)
    p, r, _ = precision_recall_curve(y[ok], s[ok])
    f = np.where(p + r > 0, 2 * p * r / np.maximum(p + r, 1e-12), 0.0)
    return float(f.max())


def temporal_score(w: dict[str, np.ndarray], split: int) -> np.ndarray:
    """(time,) the verdicts' own-history evidence with 2-of-3 persistence (see the module docstring)."""
    from nodewatch.models.anomaly.verdicts import VerdictConfig, alert_score
    from nodewatch.models.anomaly.vicinity import conditioned_z, fit_reference, log_transform, metric_offsets

    cfg = VerdictConfig()
    off = metric_offsets(w["mean"][:, :split])
    x = log_transform(w["mean"], off)
    ref = fit_reference(x[:, :split], None, floor=cfg.scale_floor)
    z = np.abs(conditioned_z(x, None, ref))[..., 0]
    s = alert_score(z, cfg.k, cfg.n)
    return np.where(np.isfinite(z), s, np.nan)[0]


def baseline_score(w: dict[str, np.ndarray], split: int) -> np.ndarray:
    """(time,) DESIGN.md's robust |z| (``log1p`` of window means against the reference); NaN without data."""
    from nodewatch.models.anomaly.vicinity import own_history_max_z

    z = own_history_max_z(w["mean"][:, :split], w["mean"])[0]
    return np.where(np.isfinite(w["mean"][0, :, 0]), z, np.nan)


def scores(w: dict[str, np.ndarray], split: int, epochs: int, labelled: bool = False) -> dict[str, np.ndarray]:
    """Per-method (time,) scores of every window (training part included; the caller keeps the test part).
    ``labelled``: also CLU and the semi-supervised variants, trained with the labels of the training part."""
    from nodewatch.models.anomaly.clustering import KMeansClustering
    from nodewatch.models.anomaly.dense_ae import DenseAutoencoder
    from nodewatch.models.anomaly.exp_smoothing import ExpSmoothing
    from nodewatch.models.anomaly.preprocess import features_from_stats
    from nodewatch.models.anomaly.ruad import RUAD
    out = {"verdicts (temporal)": temporal_score(w, split), "robust-z baseline": baseline_score(w, split)}
    X = features_from_stats(w["mean"], w["min"], w["max"], w["std"], w["count"])
    y = np.asarray(w["label"], dtype=bool)[None, :split]
    models: list[tuple[str, object, bool]] = [("RUAD", RUAD(window=10, epochs=epochs), False),
                                              ("dense AE", DenseAutoencoder(epochs=epochs), False),
                                              ("EXP", ExpSmoothing(), False)]
    if labelled:
        models += [("RUAD_semi", RUAD(window=10, epochs=epochs, mode="semi"), True),
                   ("dense AE_semi", DenseAutoencoder(epochs=epochs, mode="semi"), True), ("CLU", KMeansClustering(), True)]
    for name, est, with_y in models:
        t0 = time.perf_counter()
        est.fit(X[:, :split], y if with_y else None)  # type: ignore[attr-defined]
        out[name] = np.asarray(est.score_samples(X), dtype=np.float64)[0]  # type: ignore[attr-defined]
        print(f"  {name}: fit + score {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def table(sc: dict[str, np.ndarray], split: int, y: np.ndarray) -> dict[str, tuple[float, float]]:
    """Print the markdown table (pooled AUC, best F1 on the windows from ``split``) and return it."""
    from nodewatch.models.anomaly.metrics import pooled_auc

    print("\n| method | pooled AUC | best F1 |\n|---|---|---|")
    res = {}
    for name, s in sc.items():
        st = s[split:]
        res[name] = (pooled_auc(st, y), best_f1(st, y))
        print(f"| {name} | {res[name][0]:.3f} | {res[name][1]:.3f} |")
    print(f"(best F1 of flagging every test window: {2 * y.mean() / (1 + y.mean()):.3f})")
    return res


def main() -> None:
    """Read, score, print the table and ``ratio=``."""
    from nodewatch.tasks.anomaly.davide import read_davide, windows

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT)
    ap.add_argument("--split", default="2018-04-07")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--labelled-split", default="2018-04-21")
    a = ap.parse_args()
    t_all = time.perf_counter()
    dv = read_davide(a.data)
    w = windows(dv)
    split = int(np.searchsorted(w["times"], pd.Timestamp(a.split, tz="UTC")))
    y = w["label"][split:]
    print(f"{len(dv.samples)} samples ({dv.dead_rows} dead-sensor readings missing, {dv.bad_rows} bad rows), "
          f"{w['times'].size} windows; reference/training {split} windows before {a.split}, "
          f"test {y.size} windows, {int(y.sum())} labelled anomalous")
    sc = scores(w, split, a.epochs)
    res = table(sc, split, y)
    split2 = int(np.searchsorted(w["times"], pd.Timestamp(a.labelled_split, tz="UTC")))
    y2 = w["label"][split2:]
    print(f"\nLabelled split {a.labelled_split}: training {split2} windows ({int(w['label'][:split2].sum())} labelled), "
          f"test {y2.size} windows ({int(y2.sum())} labelled)")
    table(scores(w, split2, a.epochs, labelled=True), split2, y2)
    print(f"\nratio={res['verdicts (temporal)'][0] / res['RUAD'][0]:.2f}  (AUC verdicts temporal / AUC RUAD)")
    print(f"total {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
