"""Shared estimator machinery for the per-node anomaly models (Molan et al., "RUAD").

Estimator API in the style of scikit-learn / PyOD: ``__init__`` only stores hyper-parameters,
``fit`` returns ``self``, learned state ends with ``_``, ``score_samples`` returns the anomaly
probability (Eq. 3), ``predict`` the class (Eq. 4). A fitted estimator holds *one model per node*
of a node batch: inputs are ``X[node, time, feature]`` (or ``[time, feature]`` for one node).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from nodewatch.models.anomaly.preprocess import MinMaxScaler, as_node_batch, valid_rows


class NotFittedError(RuntimeError):
    """Raised when ``score_samples``/``predict`` is called before ``fit``."""


def reconstruction_error(feature_errors: np.ndarray) -> np.ndarray:
    """``Error(t0) = sum_i |x_hat_i - x_i|`` over the N features (RUAD Section 3.2); input ``[..., F]``."""
    return np.asarray(feature_errors).sum(axis=-1)


def anomaly_probability(error: np.ndarray, max_train_error: np.ndarray | float) -> np.ndarray:
    """Eq. 3: ``P = min(Error / max(Error_train), 1)``; NaN stays NaN (no complete window)."""
    m = np.asarray(max_train_error, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.asarray(error, dtype=np.float64) / np.where(m > 0, m, np.finfo(np.float64).tiny)
    return np.minimum(p, 1.0)


def classify(probability: np.ndarray, threshold: float) -> np.ndarray:
    """Eq. 4: class 1 iff ``P >= T`` (NaN -> class 0: nothing to judge)."""
    p = np.asarray(probability)
    return np.where(np.isfinite(p), p >= threshold, False)


def paper_layer_sizes(n_features: int) -> tuple[int, int, int]:
    """Layer sizes (E1, L, D1) of Section 4.3 — 16, 8, 16 for 462 features — scaled to ``n_features``
    with the same compression ratios (at least 4, 2, 4 units)."""
    e1 = max(4, int(round(16 * n_features / 462)))
    lat = max(2, int(round(8 * n_features / 462)))
    return e1, lat, e1


class NodeEstimator:
    """Base class: hyper-parameter handling, input checks, scaler, Eq. 3/4 on top of ``_errors``."""

    threshold: float

    # ------------------------------------------------------------- sklearn-style params
    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters as given to ``__init__``."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {k: getattr(self, k) for k in names}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ------------------------------------------------------------- checks
    def _check_fitted(self) -> None:
        if not hasattr(self, "n_features_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit(X) first")

    def _check_X(self, X: np.ndarray) -> tuple[np.ndarray, bool]:
        X3, single = as_node_batch(X)
        if X3.shape[0] != self.n_nodes_ or X3.shape[2] != self.n_features_:
            raise ValueError(
                f"X has {X3.shape[0]} nodes x {X3.shape[2]} features, the model was fitted on "
                f"{self.n_nodes_} nodes x {self.n_features_} features"
            )
        return X3, single

    def _fit_scaler(self, X: np.ndarray, y: np.ndarray | None, semi: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Shared fit prologue (Section 3.7): checks, semi-supervised filter, min-max scaler on training rows."""
        X3, _ = as_node_batch(X)
        if y is not None:
            y = np.asarray(y, dtype=bool)
            if y.ndim == 1:
                y = y[None]
            if y.shape != X3.shape[:2]:
                raise ValueError(f"labels shape {y.shape} does not match X[node, time] {X3.shape[:2]}")
        if semi and y is None:
            raise ValueError("mode='semi' needs labels y[node, time] (True = anomaly) for the semi-supervised filter")
        # a metric a node never reports in training (e.g. no GPU) is a constant 0 for that node, so it
        # does not make every timestamp "missing"
        absent = np.isnan(X3).all(axis=1)
        self.absent_features_ = absent & ~absent.all(axis=1, keepdims=True)  # a node with no data stays missing
        X3 = self._fill_absent(X3)
        rows = valid_rows(X3, y, semi_supervised=semi)
        self.n_nodes_, _, self.n_features_ = X3.shape
        self.scaler_ = MinMaxScaler.fit(X3, rows)
        return self.scaler_.transform(X3), rows, y

    def _fill_absent(self, X3: np.ndarray) -> np.ndarray:
        absent = getattr(self, "absent_features_", None)
        if absent is None or not absent.any():
            return X3
        return np.where(absent[:, None, :], np.float32(0.0), X3)

    def _transform(self, X3: np.ndarray) -> np.ndarray:
        return self.scaler_.transform(self._fill_absent(X3))

    # ------------------------------------------------------------- persistence helpers
    def _common_state(self, k: int) -> dict[str, np.ndarray]:
        """Scaler, absent-feature mask and maximum training error of node ``k``."""
        self._check_fitted()
        return {
            "scaler.min": self.scaler_.min_[k],
            "scaler.max": self.scaler_.max_[k],
            "absent": self.absent_features_[k].astype(np.uint8),
            "max_error": np.array([self.max_error_[k]], dtype=np.float64),
        }

    def _restore_common(self, states: list[dict[str, np.ndarray]]) -> None:
        if not states:
            raise ValueError("no node states given")
        self.scaler_ = MinMaxScaler(np.stack([s["scaler.min"] for s in states]), np.stack([s["scaler.max"] for s in states]))
        self.absent_features_ = np.stack([s["absent"] for s in states]).astype(bool)
        self.max_error_ = np.array([float(s["max_error"][0]) for s in states])
        self.n_nodes_, self.n_features_ = len(states), int(states[0]["scaler.min"].shape[0])
        self.failed_ = {}

    # ------------------------------------------------------------- scoring
    def _errors(self, Xs: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """Per-feature errors ``[node, time, feature]`` of scaled data, NaN where there is no score."""
        raise NotImplementedError

    def feature_contributions(self, X: np.ndarray) -> np.ndarray:
        """Per-feature share of the normalised error: ``|x_hat_i - x_i| / max(Error_train)`` (Section 3.2),
        ``[node, time, feature]``; summing over features gives the uncapped normalised error."""
        self._check_fitted()
        X3, single = self._check_X(X)
        err = self._errors(self._transform(X3))
        with np.errstate(divide="ignore", invalid="ignore"):
            out = err / np.where(self.max_error_ > 0, self.max_error_, np.nan)[:, None, None]
        return out[0] if single else out

    def score_samples(self, X: np.ndarray) -> np.ndarray:
        """Anomaly probability per node and timestamp (Eq. 3), NaN where no score is defined."""
        self._check_fitted()
        X3, single = self._check_X(X)
        err = reconstruction_error(self._errors(self._transform(X3)))
        p = anomaly_probability(err, self.max_error_[:, None])
        p[~np.isfinite(self.max_error_)] = np.nan
        return p[0] if single else p

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Class per node and timestamp (Eq. 4 with ``self.threshold``)."""
        return classify(self.score_samples(X), self.threshold)
