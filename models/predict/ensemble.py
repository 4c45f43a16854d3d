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
  output neurons"; we feed it the six networks' outputs as a sequence in lead order (7 -> 2 minutes, one
  per step, as the networks classify one after the other), 4 hidden units and a two-way softmax on the
  last state (:class:`LSTMVoter`). The outputs enter as log-odds (:func:`voter_inputs`), not as
  probabilities: float32 probabilities saturate at exactly 1.0, so every strong positive and every
  persistent false alarm gave the voter the same input and the same score, and a threshold above that
  tied score (needed for a tiny validation fpr) gave tpr 0 on test. Its threshold is chosen from its ROC
  on validation data split by node-day (sec. 4.3.1 picks the point ``fpr = 4e-5``).
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

    def fit(self, x: np.ndarray, chunk: int = 50_000) -> Scaler:
        """Learn mean/std over samples of ``x`` (N, L, F); NaN-safe; constant features get std 1.

        Chunks of ``chunk`` samples are merged with Chan et al.'s pairwise update (no float64 copy of all of ``x``).
        """
        n = np.zeros(x.shape[1:])
        mean = np.zeros(x.shape[1:])
        m2 = np.zeros(x.shape[1:])
        for lo in range(0, len(x), chunk):
            c = np.asarray(x[lo : lo + chunk], np.float64)
            k = np.sum(~np.isnan(c), axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                cm = np.where(k > 0, np.nansum(c, axis=0) / np.maximum(k, 1), 0.0)
                c2 = np.nansum((c - cm) ** 2, axis=0)
            tot = n + k
            d = cm - mean
            mean = np.where(tot > 0, mean + d * k / np.maximum(tot, 1), mean)
            m2 = m2 + c2 + d**2 * n * k / np.maximum(tot, 1)
            n = tot
        sd = np.sqrt(np.where(n > 0, m2 / np.maximum(n, 1), np.nan))
        self.mean_ = np.where(n > 0, mean, 0.0)
        self.std_ = np.where(np.isfinite(sd) & (sd > 1e-12), sd, 1.0)
        return self

    def transform(self, x: np.ndarray, chunk: int = 50_000, out: np.ndarray | None = None) -> np.ndarray:
        """Standardise (N, L, F), NaN -> 0 (the training mean), clipped to +-20 sd; float32, in chunks.

        ``out`` (float32, shape of ``x``) receives the result; it may be ``x`` itself (each chunk is read before it
        is written), which standardises a float32 array in place without a second copy.
        """
        if out is None:
            out = np.empty(x.shape, np.float32)
        elif out.shape != x.shape or out.dtype != np.float32:
            raise ValueError(f"out must be float32 of shape {x.shape}, got {out.dtype} {out.shape}")
        for lo in range(0, len(x), chunk):
            z = (np.asarray(x[lo : lo + chunk], float) - self.mean_) / self.std_
            out[lo : lo + chunk] = np.clip(np.nan_to_num(z, nan=0.0, posinf=20.0, neginf=-20.0), -20, 20)
        return out


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
    strata_share: float = 0.5
    """Share of each epoch's negatives drawn from the hard strata (``fit(strata=...)``), split equally over them."""
    seed: int = 0
    scaler_: Scaler | None = None
    net_: BatchedMLP | None = None

    def fit(
        self, x: np.ndarray, y: np.ndarray, strata: np.ndarray | None = None, overwrite_x: bool = False
    ) -> LeadTimeEnsemble:
        """Train all networks at once (full-batch Adam on cross-entropy); ``x`` (N, L, F), ``y`` (N,).

        ``strata`` (N,) optionally names a stratum (>= 0) for hard negatives and -1 for the rest: each epoch's
        10:1 sample then takes ``strata_share`` of its negatives equally from every stratum
        (:func:`epoch_negatives`) instead of at the strata's share of all negatives. Without ``strata`` the
        epoch sample is uniform over the negatives (the same draws as before strata existed).

        ``overwrite_x``: a writable float32 ``x`` the caller no longer needs is standardised in place (same result,
        one copy of the training set in memory instead of two; several machines' rows are GBs).
        """
        _check_xy(x, y)
        n, lead, f = x.shape
        self.scaler_ = Scaler().fit(x)
        in_place = overwrite_x and isinstance(x, np.ndarray) and x.dtype == np.float32 and x.flags.writeable
        z = torch.from_numpy(self.scaler_.transform(x, out=x if in_place else None))
        yt = torch.from_numpy(np.asarray(y, np.int64))
        pos = np.flatnonzero(y == 1)
        neg = np.flatnonzero(y == 0)
        rng = np.random.default_rng(self.seed)
        self.net_ = BatchedMLP(lead, f, self.hidden, self.seed)
        opt = torch.optim.Adam(self.net_.parameters(), lr=self.lr)
        k = min(len(neg), self.neg_per_pos * len(pos))
        if strata is not None and len(strata) != len(y):
            raise ValueError(f"strata must have one entry per sample, got {len(strata)} for {len(y)}")
        rest, pools = stratum_pools(neg, None if strata is None else np.asarray(strata)[neg])
        for _ in range(self.epochs):
            idx = np.concatenate([pos, epoch_negatives(rng, k, rest, pools, self.strata_share)])
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

    def predict_logodds(self, x: np.ndarray, batch: int = 200_000) -> np.ndarray:
        """Log-odds of failure of each network for each sequence (logit of "failure" minus logit of "ok"): (N, L).

        The softmax of two outputs is ``sigmoid(log-odds)``; in float32 it is exactly 1.0 from a log-odds of ~17 on,
        so every strongly positive sequence would look the same to the LSTM voter: it reads log-odds instead.
        """
        self._check()
        out = []
        with torch.no_grad():
            for lo in range(0, len(x), batch):
                z = torch.from_numpy(self.scaler_.transform(x[lo : lo + batch])).transpose(0, 1)
                logits = self.net_(z)
                out.append((logits[..., 1] - logits[..., 0]).T.numpy())
        return np.concatenate(out) if out else np.zeros((0, self.net_.w1.shape[0]), np.float32)

    def predict_proba(self, x: np.ndarray, batch: int = 200_000) -> np.ndarray:
        """Failure probability of each network for each sequence: (N, L) (softmax of the two outputs)."""
        return logodds_to_proba(self.predict_logodds(x, batch))

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


def stratum_pools(neg: np.ndarray, strata: np.ndarray | None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Split negative indices ``neg`` by ``strata`` (per negative; -1 = no stratum): ``(rest, [pool per stratum])``."""
    if strata is None:
        return neg, []
    st = np.asarray(strata, np.int64)
    if len(st) != len(neg):
        raise ValueError(f"strata must have one entry per negative, got {len(st)} for {len(neg)}")
    return neg[st < 0], [neg[st == s] for s in np.unique(st[st >= 0])]


def epoch_negatives(
    rng: np.random.Generator, k: int, rest: np.ndarray, pools: list[np.ndarray], share: float = 0.5
) -> np.ndarray:
    """Indices of ``k`` negatives for one epoch: uniform over ``rest``, or partly stratified over ``pools``.

    Frank sec. 4.2.2 trains on a 10:1 ok-to-failure sample and caps the events of any one application type
    ("the amount of events considered from each application type was limited to a chosen threshold of ten ...
    to avoid job type bias"). Drawn uniformly, a rare kind of ok event (a degraded network on a busy node) is a
    fraction of one sample per epoch, however many the training set holds. With ``pools`` (one index array per
    stratum, e.g. anomaly kind x node load, from :func:`stratum_pools`), ``round(share * k)`` negatives are split
    equally over the pools (with replacement where a pool is smaller than its part) and the rest are uniform over
    ``rest``; the total stays ``k``. Without pools this is ``rng.choice(rest, k, replace=False)``.
    """
    if not pools or not len(rest):
        allneg = np.concatenate([rest, *pools]) if pools else rest
        return rng.choice(allneg, size=min(k, len(allneg)), replace=False)
    per = max(1, int(round(share * k)) // len(pools))
    n_rest = min(len(rest), max(0, k - per * len(pools)))
    parts = [rng.choice(rest, size=n_rest, replace=False)]
    parts += [rng.choice(p, size=per, replace=per > len(p)) for p in pools]
    return np.concatenate(parts)


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


def logodds_to_proba(logodds: np.ndarray) -> np.ndarray:
    """``sigmoid`` of network log-odds = the failure output of the two-way softmax, float32."""
    return (0.5 * (1.0 + np.tanh(0.5 * np.asarray(logodds, np.float64)))).astype(np.float32)


VOTER_INPUT_SCALE = 10.0
"""The voter reads ``clip(log-odds, -30, 30) / 10``: unsaturated, of order 1 for the LSTM's gates."""


def voter_inputs(logodds: np.ndarray) -> np.ndarray:
    """LSTM-voter input from the networks' log-odds (N, L)."""
    return (np.clip(np.asarray(logodds, np.float32), -30.0, 30.0) / VOTER_INPUT_SCALE).astype(np.float32)


@dataclass
class VoterFit:
    """A trained LSTM voter and its decision threshold on P(failure).

    ``input`` is what the voter reads per step: ``"logodds"`` (:func:`voter_inputs`, the default) or ``"proba"``
    (the networks' P(failure), predictors registered before the log-odds fix).
    """

    model: LSTMVoter
    threshold: float
    input: str = "logodds"

    def score(self, logodds: np.ndarray) -> np.ndarray:
        """The voter's P(failure) for the networks' log-odds (N, L)."""
        inp = voter_inputs(logodds) if self.input == "logodds" else logodds_to_proba(logodds)
        return voter_scores(self.model, inp)


def _group_split(n: int, groups: np.ndarray | None, rng: np.random.Generator, share: float) -> tuple[np.ndarray, np.ndarray]:
    """Indices (fit, validation): by group when ``groups`` is given (a node-day or a failure is never cut)."""
    if groups is None:
        perm = rng.permutation(n)
        cut = int(share * n)
        return perm[:cut], perm[cut:]
    u = rng.permutation(np.unique(groups))
    fit_groups = u[: int(share * len(u))]
    m = np.isin(groups, fit_groups)
    return np.flatnonzero(m), np.flatnonzero(~m)


def threshold_at_fpr(scores_neg: np.ndarray, target_fpr: float) -> float:
    """Lowest threshold ``t`` (decision ``score >= t``) with ``fpr <= target_fpr`` on the negatives' scores.

    ``t`` is the next value above a score *in the scores' own precision*: float32 scores compared with a float64
    ``t`` one float64 ulp above them round it back to the score (NumPy casts the Python float to float32), so the
    negative meant to be excluded, and every score tied with it, fired (issue 18, sixth pass).
    """
    a = np.asarray(scores_neg)
    neg = np.sort(a.astype(a.dtype if a.dtype in (np.float32, np.float64) else np.float64))[::-1]
    allowed = int(np.floor(target_fpr * len(neg)))
    if allowed >= len(neg):
        return 0.0
    return float(np.nextafter(neg[allowed], neg.dtype.type(np.inf)))


def stratified_weights(y: np.ndarray, strata: np.ndarray, neg_per_pos: float = 10.0, share: float = 0.5) -> np.ndarray:
    """Per-sample loss weights equal in expectation to the networks' stratified 10:1 epoch sample (:func:`epoch_negatives`).

    The negatives carry ``neg_per_pos`` times the positives' total weight; ``share`` of the negatives' weight is
    split equally over the strata present (``strata >= 0``, e.g. anomaly kind x node load), each spread evenly over
    its samples, the rest evenly over the other negatives (``-1``); each positive weighs 1. The weights sum to
    ``n_pos * (1 + neg_per_pos)``. A full-batch loss with these weights is the expectation of the sampled epoch loss.
    """
    y = np.asarray(y, np.int64)
    st = np.asarray(strata, np.int64)
    if len(st) != len(y):
        raise ValueError(f"strata must have one entry per sample, got {len(st)} for {len(y)}")
    neg = y == 0
    n_pos = float((y == 1).sum())
    total_neg = neg_per_pos * n_pos
    w = np.where(neg, 0.0, 1.0)
    present = np.unique(st[neg & (st >= 0)])
    rest = neg & (st < 0)
    strata_mass = share * total_neg if len(present) and rest.any() else (total_neg if len(present) else 0.0)
    for s in present:
        m = neg & (st == s)
        w[m] = strata_mass / len(present) / m.sum()
    if rest.any():
        w[rest] = (total_neg - strata_mass) / rest.sum()
    return w


def fit_lstm_voter(
    logodds: np.ndarray,
    y: np.ndarray,
    target_fpr: float = 5e-5,
    epochs: int = 300,
    lr: float = 0.02,
    seed: int = 0,
    groups: np.ndarray | None = None,
    strata: np.ndarray | None = None,
    natural: np.ndarray | None = None,
) -> VoterFit:
    """Train the LSTM voter on the networks' log-odds (N, L) in sequence order; 60 % fit, 40 % pick the threshold.

    The split is by ``groups`` (failure event / ok node-day) when given, so the threshold is chosen on node-days
    the voter never saw, as it will be applied. The threshold is the lowest with validation ``fpr <= target_fpr``
    (sec. 4.3.1 reads it off the ROC); it is never chosen on test data. ``natural`` (per sample, default all True):
    False marks a hard negative (a node-day drawn *because* it holds an anomaly): it is always in the 60 % the voter
    learns from and never counted in the validation fpr (over-represented, so a rate on it is not the machine's).

    Without ``strata`` the loss weighs a positive ``n_neg / n_pos / 10`` (the 10:1 ratio of sec. 4.2.2). With
    ``strata`` (per sample, -1 outside a hard stratum) the loss uses :func:`stratified_weights`, the full-batch
    equivalent of the networks' stratified epoch sample.
    """
    z = voter_inputs(logodds)
    y = np.asarray(y, np.int64)
    if z.ndim != 2 or len(z) != len(y) or y.sum() < 2:
        raise ValueError("need network outputs (N, L) and labels with at least two failures")
    if np.isnan(z).any():
        raise ValueError("network outputs contain NaN: the voter cannot learn from them")
    rng = np.random.default_rng(seed)
    nat = np.ones(len(y), bool) if natural is None else np.asarray(natural, bool)
    idx = np.flatnonzero(nat)
    tr, va = _group_split(len(idx), None if groups is None else np.asarray(groups)[idx], rng, 0.6)
    if y[idx[tr]].sum() == 0 or y[idx[va]].sum() == 0 or (y[idx[va]] == 0).sum() == 0:
        tr, va = _group_split(len(idx), None, rng, 0.6)
    tr, va = (idx[tr] if nat.all() else np.sort(np.r_[idx[tr], np.flatnonzero(~nat)])), idx[va]
    model = LSTMVoter(seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    xt, yt = torch.from_numpy(z[tr]), torch.from_numpy(y[tr])
    if strata is None or not (np.asarray(strata)[tr] >= 0).any():  # no hard stratum: the plain 10:1 class weight
        w = torch.tensor([1.0, max(1.0, float((yt == 0).sum()) / max(float(yt.sum()), 1.0) / 10.0)])

        def loss_fn() -> torch.Tensor:
            return nn.functional.cross_entropy(model(xt), yt, weight=w)
    else:
        sw = torch.from_numpy(stratified_weights(y[tr], np.asarray(strata)[tr]).astype(np.float32))

        def loss_fn() -> torch.Tensor:
            return (nn.functional.cross_entropy(model(xt), yt, reduction="none") * sw).sum() / sw.sum()
    for _ in range(epochs):
        loss = loss_fn()
        opt.zero_grad()
        loss.backward()
        opt.step()
    s = voter_scores(model, z[va])
    return VoterFit(model=model, threshold=threshold_at_fpr(s[y[va] == 0], target_fpr))


def voter_scores(model: LSTMVoter, inputs: np.ndarray, batch: int = 500_000) -> np.ndarray:
    """P(failure) of the LSTM voter for its per-step inputs (N, L) (see :meth:`VoterFit.score`)."""
    out = []
    with torch.no_grad():
        for lo in range(0, len(inputs), batch):
            out.append(torch.softmax(model(torch.from_numpy(np.asarray(inputs[lo : lo + batch], np.float32))), -1)[:, 1].numpy())
    return np.concatenate(out) if out else np.zeros(0)
