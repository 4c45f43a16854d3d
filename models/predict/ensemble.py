"""Frank's lead-time ensemble (thesis sec. 4.2.3, 4.3): six feed-forward networks, unanimous or LSTM voting.

Reference configuration (sec. 4.3): each network has 70 inputs (7 features x 10 metrics), 52 ``tanh``
hidden neurons and two softmax outputs (failure, ok); the decision of a network is the ``argmax`` of
its outputs (sec. 4.3.1, "argmax ... as a classification decision function"). The six networks are
trained independently (different random initial weights, each on the windows of its own lead time);
here they are one batched model (weights stacked on a leading "network" axis, ``torch.bmm``), so one
optimiser step trains all six.

Voting:

* **unanimous** (Fig. 4.4): a sequence is a positive prediction only if every network in it
  classifies positive; the first ``k`` networks (7, 6, ... minutes) give the ``kNN`` rows of
  Table 4.1 c) (:func:`unanimous`);
* **LSTM** (Fig. 4.5): the thesis's LSTM has "six inputs (one per base NN), 4 hidden neurons and two
  output neurons"; we feed it the six networks' failure probabilities as a sequence in lead order
  (7 -> 2 minutes, one per step, as the networks classify one after the other), 4 hidden units and a
  two-way softmax on the last state (:class:`LSTMVoter`). Its threshold is chosen from its ROC on
  validation data (sec. 4.3.1 picks the point ``fpr = 4e-5``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

HIDDEN = 52
"""Hidden ``tanh`` neurons of each network (sec. 4.2.3)."""
VOTER_HIDDEN = 4
"""Hidden units of the LSTM voter (sec. 4.3)."""


class BatchedMLP(nn.Module):
    """``L`` independent ``F -> H (tanh) -> 2`` networks evaluated together: input (L, N, F) -> logits (L, N, 2)."""

    def __init__(self, n_nets: int, n_in: int, hidden: int = HIDDEN, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        b1, b2 = 1.0 / np.sqrt(n_in), 1.0 / np.sqrt(hidden)
        self.w1 = nn.Parameter((torch.rand(n_nets, n_in, hidden, generator=g) * 2 - 1) * b1)
        self.b1 = nn.Parameter((torch.rand(n_nets, 1, hidden, generator=g) * 2 - 1) * b1)
        self.w2 = nn.Parameter((torch.rand(n_nets, hidden, 2, generator=g) * 2 - 1) * b2)
        self.b2 = nn.Parameter((torch.rand(n_nets, 1, 2, generator=g) * 2 - 1) * b2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (L, N, 2) for inputs (L, N, F)."""
        return torch.baddbmm(self.b2, torch.tanh(torch.baddbmm(self.b1, x, self.w1)), self.w2)


class LSTMVoter(nn.Module):
    """LSTM over the six failure probabilities (one per step, lead 7 -> 2 min), 4 hidden units, 2 outputs."""

    def __init__(self, hidden: int = VOTER_HIDDEN, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.lstm = nn.LSTM(input_size=1, hidden_size=hidden, batch_first=True)
        self.out = nn.Linear(hidden, 2)

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        """Logits (N, 2) for probabilities (N, L)."""
        h, _ = self.lstm(p.unsqueeze(-1))
        return self.out(h[:, -1])


@dataclass
class Scaler:
    """Per-network feature standardisation learnt on training data (sec. 4.2.2: "normalized features")."""

    mean_: np.ndarray = field(default_factory=lambda: np.zeros(0))
    std_: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def fit(self, x: np.ndarray) -> Scaler:
        """Learn mean/std over samples of ``x`` (N, L, F); NaN-safe; constant features get std 1."""
        self.mean_ = np.nanmean(x, axis=0)
        sd = np.nanstd(x, axis=0)
        self.std_ = np.where(np.isfinite(sd) & (sd > 1e-12), sd, 1.0)
        self.mean_ = np.where(np.isfinite(self.mean_), self.mean_, 0.0)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Standardise (N, L, F), NaN -> 0 (the training mean), clipped to +-20 sd."""
        z = (np.asarray(x, float) - self.mean_) / self.std_
        return np.clip(np.nan_to_num(z, nan=0.0, posinf=20.0, neginf=-20.0), -20, 20).astype(np.float32)


def _check_xy(x: np.ndarray, y: np.ndarray) -> None:
    if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
        raise ValueError(f"need x (N, L, F) and y (N,), got {x.shape} and {y.shape}")
    if not set(np.unique(y)).issubset({0, 1}) or y.sum() == 0 or y.sum() == len(y):
        raise ValueError("labels must be 0/1 with both classes present")


@dataclass
class LeadTimeEnsemble:
    """Six lead-time networks + scaler (scikit-learn style: ``fit`` returns self, learnt state ends in ``_``)."""

    hidden: int = HIDDEN
    epochs: int = 300
    lr: float = 0.01
    neg_per_pos: int = 10
    """Negatives per positive in each epoch's training sample (sec. 4.2.2: the 10:1 ratio)."""
    seed: int = 0
    scaler_: Scaler | None = None
    net_: BatchedMLP | None = None

    def fit(self, x: np.ndarray, y: np.ndarray) -> LeadTimeEnsemble:
        """Train all networks at once (full-batch Adam on cross-entropy); ``x`` (N, L, F), ``y`` (N,)."""
        _check_xy(x, y)
        n, lead, f = x.shape
        self.scaler_ = Scaler().fit(x)
        z = torch.from_numpy(self.scaler_.transform(x))
        yt = torch.from_numpy(np.asarray(y, np.int64))
        pos = np.flatnonzero(y == 1)
        neg = np.flatnonzero(y == 0)
        rng = np.random.default_rng(self.seed)
        self.net_ = BatchedMLP(lead, f, self.hidden, self.seed)
        opt = torch.optim.Adam(self.net_.parameters(), lr=self.lr)
        k = min(len(neg), self.neg_per_pos * len(pos))
        for _ in range(self.epochs):
            idx = np.concatenate([pos, rng.choice(neg, size=k, replace=False)])
            xb = z[idx].transpose(0, 1)  # (L, B, F)
            logits = self.net_(xb)
            loss = nn.functional.cross_entropy(logits.reshape(-1, 2), yt[idx].repeat(lead))
            opt.zero_grad()
            loss.backward()
            opt.step()
        return self

    def _check(self) -> None:
        if self.net_ is None or self.scaler_ is None:
            raise RuntimeError("LeadTimeEnsemble is not fitted: call fit() or load a registered model")

    def predict_proba(self, x: np.ndarray, batch: int = 200_000) -> np.ndarray:
        """Failure probability of each network for each sequence: (N, L)."""
        self._check()
        out = []
        with torch.no_grad():
            for lo in range(0, len(x), batch):
                z = torch.from_numpy(self.scaler_.transform(x[lo : lo + batch])).transpose(0, 1)
                out.append(torch.softmax(self.net_(z), dim=-1)[..., 1].T.numpy())
        return np.concatenate(out) if out else np.zeros((0, 0))

    def state(self) -> dict[str, np.ndarray]:
        """Arrays to persist (weights, scaler)."""
        self._check()
        st = {k: v.detach().numpy().copy() for k, v in self.net_.state_dict().items()}
        st["scaler.mean"] = self.scaler_.mean_.astype(np.float64)
        st["scaler.std"] = self.scaler_.std_.astype(np.float64)
        return st

    @classmethod
    def from_state(cls, st: dict[str, np.ndarray], hidden: int = HIDDEN) -> LeadTimeEnsemble:
        """Rebuild from :meth:`state` arrays (no pickle)."""
        lead, f, h = st["w1"].shape
        ens = cls(hidden=h)
        ens.net_ = BatchedMLP(lead, f, h)
        ens.net_.load_state_dict({k: torch.from_numpy(np.asarray(st[k])) for k in ("w1", "b1", "w2", "b2")})
        ens.scaler_ = Scaler(mean_=np.asarray(st["scaler.mean"]), std_=np.asarray(st["scaler.std"]))
        return ens


def unanimous(proba: np.ndarray, k: int | None = None, threshold: float = 0.5) -> np.ndarray:
    """Unanimous vote of the first ``k`` networks in sequence order (Fig. 4.4).

    ``proba`` (N, L) columns are in *sequence* order (first = longest lead, 7 min); each network's
    decision is ``argmax``, i.e. ``p > 0.5``.
    """
    p = np.asarray(proba)
    k = p.shape[1] if k is None else k
    if not 1 <= k <= p.shape[1]:
        raise ValueError(f"k must be in 1..{p.shape[1]}, got {k}")
    return np.all(p[:, :k] > threshold, axis=1)


@dataclass
class VoterFit:
    """A trained LSTM voter and its decision threshold on P(failure)."""

    model: LSTMVoter
    threshold: float


def fit_lstm_voter(
    proba: np.ndarray, y: np.ndarray, target_fpr: float = 5e-5, epochs: int = 300, lr: float = 0.02, seed: int = 0
) -> VoterFit:
    """Train the LSTM voter on network outputs (N, L) in sequence order; 60 % to fit, 40 % to pick the threshold.

    The threshold is the lowest with validation ``fpr <= target_fpr`` (sec. 4.3.1 reads it off the ROC).
    """
    p = np.asarray(proba, np.float32)
    y = np.asarray(y, np.int64)
    if p.ndim != 2 or len(p) != len(y) or y.sum() < 2:
        raise ValueError("need network outputs (N, L) and labels with at least two failures")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    cut = int(0.6 * len(y))
    tr, va = perm[:cut], perm[cut:]
    model = LSTMVoter(seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    xt, yt = torch.from_numpy(p[tr]), torch.from_numpy(y[tr])
    w = torch.tensor([1.0, max(1.0, float((yt == 0).sum()) / max(float(yt.sum()), 1.0) / 10.0)])
    for _ in range(epochs):
        loss = nn.functional.cross_entropy(model(xt), yt, weight=w)
        opt.zero_grad()
        loss.backward()
        opt.step()
    s = voter_scores(model, p[va])
    neg = np.sort(s[y[va] == 0])[::-1]
    allowed = int(np.floor(target_fpr * len(neg)))
    thr = float(neg[allowed]) if allowed < len(neg) else 0.0
    return VoterFit(model=model, threshold=float(np.nextafter(thr, 2.0)))


def voter_scores(model: LSTMVoter, proba: np.ndarray, batch: int = 500_000) -> np.ndarray:
    """P(failure) of the LSTM voter for network outputs (N, L)."""
    out = []
    with torch.no_grad():
        for lo in range(0, len(proba), batch):
            out.append(torch.softmax(model(torch.from_numpy(np.asarray(proba[lo : lo + batch], np.float32))), -1)[:, 1].numpy())
    return np.concatenate(out) if out else np.zeros(0)
