"""RUAD: Recurrent Unsupervised Anomaly Detection (Molan et al., Section 3.6, Eq. 7, Fig. 1b).

One LSTM-encoder / dense-decoder autoencoder per compute node maps the window
``x_{t0-W+1}, ..., x_{t0}`` to a reconstruction of the last vector ``x_{t0}``. The anomaly
probability is the reconstruction error normalised by the maximum training error, capped at 1
(Section 3.2, Eq. 3). Trained unsupervised (all windows, the paper's *RUAD*) or semi-supervised
(anomalous timestamps removed before the time-consistency filter, *RUAD_semi*), Section 3.7.
All nodes of a batch are trained as one stacked computation (:mod:`nodewatch.models.anomaly.batched_training`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from nodewatch.models.anomaly.base import NodeEstimator, paper_layer_sizes, reconstruction_error
from nodewatch.models.anomaly.batched_lstm import BatchedRUADNet
from nodewatch.models.anomaly.batched_training import TrainResult, as_tensor, feature_errors, train_batched
from nodewatch.models.anomaly.preprocess import valid_rows, window_ends

MODES = ("unsupervised", "semi")


class AutoencoderEstimator(NodeEstimator):
    """Common fit/score logic of the per-node autoencoders (RUAD and the dense baseline)."""

    _net_class: type[torch.nn.Module] = BatchedRUADNet
    _windowed = True

    def __init__(
        self,
        window: int = 10,
        mode: str = "unsupervised",
        sizes: tuple[int, int, int] | None = None,
        epochs: int = 5,
        batch_size: int = 128,
        lr: float = 1e-3,
        loss: str = "mae",
        patience: int = 2,
        val_fraction: float = 0.1,
        segment: int = 32,
        threshold: float = 0.5,
        seed: int = 0,
    ) -> None:
        self.window = window
        self.mode = mode
        self.sizes = sizes
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.loss = loss
        self.patience = patience
        self.val_fraction = val_fraction
        self.segment = segment
        self.threshold = threshold
        self.seed = seed

    @property
    def _w(self) -> int:
        return self.window if self._windowed else 1

    def _validate_params(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not (isinstance(self.window, int) and self.window >= 1):
            raise ValueError(f"window must be a positive int, got {self.window!r}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs and batch_size must be >= 1")

    def fit(
        self, X: np.ndarray, y: np.ndarray | None = None, progress: Callable[[int, np.ndarray], None] | None = None
    ) -> AutoencoderEstimator:
        """Train one model per node on the training split ``X[node, time, feature]`` (Section 3.7):
        semi-supervised filter (``mode='semi'``), min-max scaler, time-consistency filter, Adam on
        the reconstruction loss, per-node early stopping; then ``max_error_`` over training windows."""
        self._validate_params()
        Xs, rows, _ = self._fit_scaler(X, y, semi=self.mode == "semi")
        sizes = tuple(self.sizes) if self.sizes is not None else paper_layer_sizes(self.n_features_)
        self.sizes_ = sizes
        ends = window_ends(rows, self._w)
        counts = np.array([len(e) for e in ends])
        self.net_ = self._net_class(self.n_nodes_, self.n_features_, sizes, seed=self.seed)
        Xt = as_tensor(Xs)
        self.history_: TrainResult = train_batched(
            self.net_, Xs, ends, self._w, epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
            loss=self.loss, patience=self.patience, val_fraction=self.val_fraction, segment=self.segment, seed=self.seed,
            progress=progress, Xt=Xt,
        )
        self.n_train_windows_ = counts
        self.failed_ = dict(self.history_.failed)
        errs = feature_errors(self.net_, Xs, ends, self._w, Xt=Xt)
        self.max_error_ = np.array(
            [float(reconstruction_error(e).max()) if len(e) else np.nan for e in errs], dtype=np.float64
        )
        for k in self.failed_:
            self.max_error_[k] = np.nan
        return self

    def _errors(self, Xs: np.ndarray) -> np.ndarray:
        ends = window_ends(valid_rows(Xs), self._w)
        errs = feature_errors(self.net_, Xs, ends, self._w)
        out = np.full(Xs.shape, np.nan, dtype=np.float32)
        for k, (e, v) in enumerate(zip(ends, errs, strict=True)):
            out[k, e] = v
        return out

    # ------------------------------------------------------------- per-node persistence
    def node_state(self, k: int) -> dict[str, np.ndarray]:
        """Learned state of node ``k`` as named arrays (weights, scaler, max training error)."""
        self._check_fitted()
        state = self._common_state(k)
        state.update({f"net.{name}": p.detach()[k].numpy().copy() for name, p in self.net_.named_parameters()})
        return state

    @classmethod
    def from_node_states(cls, states: list[dict[str, np.ndarray]], **params: object) -> AutoencoderEstimator:
        """Rebuild a fitted estimator for ``len(states)`` nodes from :meth:`node_state` outputs."""
        est = cls(**params)  # type: ignore[arg-type]
        est._restore_common(states)
        n_features = int(states[0]["scaler.min"].shape[0])
        sizes = tuple(est.sizes) if est.sizes is not None else paper_layer_sizes(n_features)
        est.sizes_ = sizes
        est.net_ = cls._net_class(len(states), n_features, sizes, seed=0)
        with torch.no_grad():
            for name, p in est.net_.named_parameters():
                stacked = np.stack([s[f"net.{name}"] for s in states])
                if stacked.shape != tuple(p.shape):
                    raise ValueError(f"weights {name} have shape {stacked.shape}, expected {tuple(p.shape)}")
                p.copy_(torch.from_numpy(stacked))
        return est


class RUAD(AutoencoderEstimator):
    """RUAD per-node LSTM autoencoder (Section 3.6; sizes Section 4.3: (W, I) -> LSTM E1 -> LSTM L ->
    Dense D1 -> Dense I, E1=16, L=8, D1=16 for I=462, scaled to I). ``window`` in {5, 10, 20, 40}
    in the paper (default 10, the best in Table 7); ``mode`` 'unsupervised' (RUAD) or 'semi' (RUAD_semi)."""

    _net_class = BatchedRUADNet
    _windowed = True


def errors_per_metric(feature_contrib: np.ndarray, feature_metric: np.ndarray, n_metrics: int) -> np.ndarray:
    """Sum per-feature contributions ``[..., F]`` into per-metric contributions ``[..., M]`` (the four stats
    of a metric add up), for explaining a score (Section 3.2 error is a sum over features)."""
    out = np.zeros((*feature_contrib.shape[:-1], n_metrics), dtype=np.float64)
    np.add.at(out, (..., feature_metric), np.nan_to_num(feature_contrib, nan=0.0))
    nan_rows = ~np.isfinite(feature_contrib).any(axis=-1)
    out[nan_rows] = np.nan
    return out

