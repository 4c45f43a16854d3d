"""The paper's fault-classification network (Netti et al. Sec. 7.1: two hidden layers of 1000 neurons) in torch.

Same model as ``sklearn.neural_network.MLPClassifier(hidden_layer_sizes=(1000, 1000))`` (ReLU, softmax
cross-entropy, Adam with lr 1e-3, minibatches of 64), in float32 and with a fixed number of epochs: sklearn's
float64 implementation took 449 s for one fit of 660 windows x 3500 features on this shared 2-core machine
(load ~30), far too slow for 5-fold CV of a 2-h campaign. Inputs are standardised with the training set's mean
and standard deviation (Sec. 7.1: the NN and SVC need normalised data; a constant feature gets scale 1).
"""

from __future__ import annotations

import numpy as np


class TorchMLP:
    """sklearn-style classifier: ``fit(x, y)``, ``predict(x)``, ``predict_proba(x)``, ``classes_``."""

    def __init__(
        self,
        hidden: tuple[int, ...] = (1000, 1000),
        epochs: int = 30,
        batch: int = 64,
        lr: float = 1e-3,
        seed: int = 0,
        threads: int = 1,
    ) -> None:
        self.hidden, self.epochs, self.batch, self.lr, self.seed = hidden, epochs, batch, lr, seed
        self.threads = threads
        """torch intra-op threads while fitting (1: on a shared, loaded machine more threads spin; a small net
        fitted 4.6x slower with 2)."""

    def _net(self, n_in: int, n_out: int):
        import torch

        layers: list[torch.nn.Module] = []
        for h in self.hidden:
            layers += [torch.nn.Linear(n_in, h), torch.nn.ReLU()]
            n_in = h
        layers.append(torch.nn.Linear(n_in, n_out))
        return torch.nn.Sequential(*layers)

    def fit(self, x: np.ndarray, y: np.ndarray) -> TorchMLP:
        """Train on ``x`` (samples x features) and integer labels ``y``."""
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            return self._fit(x, y)
        finally:
            torch.set_num_threads(before)

    def _fit(self, x: np.ndarray, y: np.ndarray) -> TorchMLP:
        import torch

        torch.manual_seed(self.seed)
        self.classes_ = np.unique(y)
        idx = np.searchsorted(self.classes_, y)
        self.mu_ = x.mean(axis=0)
        sd = x.std(axis=0)
        self.sd_ = np.where(sd > 0, sd, 1.0)
        xt = torch.from_numpy(((x - self.mu_) / self.sd_).astype(np.float32))
        yt = torch.from_numpy(idx.astype(np.int64))
        self.net_ = self._net(x.shape[1], len(self.classes_))
        opt = torch.optim.Adam(self.net_.parameters(), lr=self.lr)
        loss_fn = torch.nn.CrossEntropyLoss()
        g = torch.Generator().manual_seed(self.seed)
        self.net_.train()
        for _ in range(self.epochs):
            perm = torch.randperm(len(yt), generator=g)
            for i in range(0, len(yt), self.batch):
                b = perm[i : i + self.batch]
                opt.zero_grad()
                loss = loss_fn(self.net_(xt[b]), yt[b])
                loss.backward()
                opt.step()
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities (softmax), columns in ``classes_`` order."""
        import torch

        self.net_.eval()
        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            with torch.no_grad():
                z = self.net_(torch.from_numpy(((x - self.mu_) / self.sd_).astype(np.float32)))
                return torch.softmax(z, dim=1).numpy().astype(np.float64)
        finally:
            torch.set_num_threads(before)  # the caller's thread count, as after fit

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Most probable class of each sample."""
        return self.classes_[self.predict_proba(x).argmax(axis=1)]
