"""Fault classifiers and their evaluation (Netti et al., Sec. 7).

Models (Sec. 7.1): Random Forest, Decision Tree, linear Support Vector Classifier and a neural network with
two hidden layers of 1000 neurons (torch, ``mlp.py``; 10 epochs); SVC and NN get standardised inputs (RF/DT
need none, Sec. 7.1).
Evaluation: 5-fold cross-validation with folds in time order (``KFold(shuffle=False)``: each fold is one
contiguous stretch of the campaign, Fig. 9a) or shuffled (Fig. 9b); per-class and overall F-scores (F1,
the harmonic mean of precision and recall, footnote 8). Feature importance: the top features of a DT
(Sec. 7.4, Table 2).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MODELS = ("rf", "dt", "svc", "nn")


def make(name: str, seed: int = 0, n_jobs: int = 1):
    """An unfitted classifier: ``rf``, ``dt``, ``svc`` or ``nn`` (Sec. 7.1)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    if name == "rf":
        return RandomForestClassifier(n_estimators=50, random_state=seed, n_jobs=n_jobs, class_weight="balanced")
    if name == "dt":
        return DecisionTreeClassifier(random_state=seed, class_weight="balanced")
    if name == "svc":
        return make_pipeline(StandardScaler(), LinearSVC(C=0.1, max_iter=5000, random_state=seed, class_weight="balanced"))
    if name == "nn":
        try:
            import torch  # noqa: F401

            from nodewatch.models.finj.mlp import TorchMLP

            return TorchMLP(hidden=(1000, 1000), epochs=10, seed=seed)  # standardises its inputs itself
        except ImportError:  # torch missing: sklearn's float64 MLP (same architecture, much slower)
            return make_pipeline(
                StandardScaler(),
                MLPClassifier(hidden_layer_sizes=(1000, 1000), max_iter=60, early_stopping=False, random_state=seed),
            )
    raise ValueError(f"unknown model {name!r}: choose one of {', '.join(MODELS)}")


def folds(n: int, k: int = 5, shuffled: bool = False, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``k`` (train, test) index pairs: contiguous time blocks, or shuffled (Fig. 9)."""
    from sklearn.model_selection import KFold

    kf = KFold(n_splits=k, shuffle=shuffled, random_state=seed if shuffled else None)
    return [(tr, te) for tr, te in kf.split(np.arange(n))]


def cross_val_predict(name: str, x: np.ndarray, y: np.ndarray, k: int = 5, shuffled: bool = False, seed: int = 0) -> np.ndarray:
    """Out-of-fold predictions of model ``name`` (every sample predicted by the model not trained on it)."""
    pred = np.empty_like(y)
    for tr, te in folds(len(y), k, shuffled, seed):
        m = make(name, seed)
        m.fit(x[tr], y[tr])
        pred[te] = m.predict(x[te])
    return pred


def fscores(y: np.ndarray, pred: np.ndarray, classes: Sequence[int]) -> tuple[dict[int, float], float, float]:
    """``(per-class F1, weighted F1, macro F1)`` over ``classes`` (weights = class support)."""
    from sklearn.metrics import f1_score

    per = f1_score(y, pred, labels=list(classes), average=None, zero_division=0.0)
    w = f1_score(y, pred, labels=list(classes), average="weighted", zero_division=0.0)
    m = f1_score(y, pred, labels=list(classes), average="macro", zero_division=0.0)
    return {c: float(f) for c, f in zip(classes, per, strict=True)}, float(w), float(m)


def top_features(x: np.ndarray, y: np.ndarray, names: Sequence[str], n: int = 20, seed: int = 0) -> list[tuple[str, float]]:
    """The ``n`` features with the highest Gini importance in a DT fitted on all data (Sec. 7.4)."""
    m = make("dt", seed).fit(x, y)
    imp = m.feature_importances_
    order = np.argsort(-imp, kind="stable")[:n]
    return [(names[i], float(imp[i])) for i in order if imp[i] > 0]


def one_core_per_window(n_windows: int, n_cores: int, seed: int = 0) -> np.ndarray:
    """The core whose feature set represents each window (Sec. 7: one randomly selected core per time point)."""
    return np.random.default_rng(seed).integers(0, n_cores, n_windows)
