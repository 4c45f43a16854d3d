"""Training loop for stacked per-node autoencoders (RUAD Sections 3.5-3.7, 3.2).

All nodes of a batch are trained together: each optimisation step draws, for every node, a
minibatch of that node's own windows, runs one batched forward pass and minimises the *sum* of
per-node mean losses. Because Adam is element-wise and node k's loss depends only on node k's
weights, this is exactly n independent trainings run in lock-step.

Minibatches are made of *segments*: runs of up to ``segment`` consecutive windows of one chunk
(the time-consistency filter guarantees windows never cross a gap, Section 3.7). The rows of a
segment are projected through the first layer once and shared by the W windows containing them
(:class:`nodewatch.models.anomaly.batched_lstm.LSTMRecurrence` reads them as strided views), which cuts the dominant
cost ~W-fold. Every window is still visited exactly once per epoch; segments are shuffled per node
and epoch.

Nodes have different numbers of windows (gaps, anomalies): segments are padded and masked, so a
node with fewer windows simply contributes nothing once its epoch is exhausted. Early stopping is
per node on a chronological validation tail of its training windows; each node keeps its best
weights. Nodes without windows or with a non-finite loss are reported in ``TrainResult.failed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn


@dataclass
class Segments:
    """Per-node segments of consecutive window ends, padded to ``[node, max_segments]``."""

    first_end: np.ndarray  # time index of the first window end of each segment
    length: np.ndarray  # windows in the segment (0 = padding)
    offset: np.ndarray  # position of the first window in the node's window-end list
    count: np.ndarray  # segments per node


def make_segments(ends: list[np.ndarray], segment: int) -> Segments:
    """Split each node's sorted window ends into runs of consecutive indices of at most ``segment`` windows."""
    per_node = []
    for e in ends:
        e = np.asarray(e, dtype=np.int64)
        if len(e) == 0:
            per_node.append((np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)))
            continue
        new_run = np.r_[True, np.diff(e) != 1]
        run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(e)), 0))
        brk = new_run | ((np.arange(len(e)) - run_start) % segment == 0)
        starts = np.flatnonzero(brk)
        per_node.append((e[starts], np.diff(np.r_[starts, len(e)]), starts))
    count = np.array([len(p[0]) for p in per_node], dtype=np.int64)
    width = max(int(count.max(initial=0)), 1)
    arrs = [np.zeros((len(ends), width), dtype=np.int64) for _ in range(3)]
    for k, p in enumerate(per_node):
        for a, v in zip(arrs, p, strict=True):
            a[k, : len(v)] = v
    return Segments(arrs[0], arrs[1], arrs[2], count)


def gather_segments(X: torch.Tensor, first_end: torch.Tensor, window: int, segment: int) -> torch.Tensor:
    """Rows ``[first_end - W + 1, first_end + segment - 1]`` of every node/segment, segment index fastest:
    ``X[n, T, F]``, ``first_end[n, S] -> [n, segment+W-1, S, F]`` (indices clamped to the series; padded
    rows are masked by the caller). One ``index_select`` on the flattened series (5x faster than
    advanced indexing, measured)."""
    n, T, F = X.shape
    t = (first_end[:, None, :] + torch.arange(-window + 1, segment)[None, :, None]).clamp(0, T - 1)
    t += (torch.arange(n) * T)[:, None, None]
    return X.reshape(n * T, F).index_select(0, t.view(-1)).view(n, segment + window - 1, -1, F)


def as_tensor(X: np.ndarray) -> torch.Tensor:
    """Float32 tensor of ``X`` with NaN (missing rows, never inside a window) set to 0."""
    Xt = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
    if bool(torch.isfinite(Xt.sum())):  # one vectorised pass, no [n, T, F] bool temporary; NaN makes the sum NaN
        return Xt
    return torch.nan_to_num(Xt, nan=0.0) if bool(torch.isnan(Xt).any()) else Xt


class _WindowLoss(torch.autograd.Function):
    """Weighted sum of per-window mean reconstruction errors (L1 or squared) per node.

    ``x_hat, target[n, c, S, F]``, ``weight[n, c, S]`` -> ``(node_loss[n], err[n, c, S])`` with
    ``err`` the per-window mean error (not differentiable) and ``node_loss = sum(weight * err)``.
    The gradient ``sign(d) * weight / F`` (or ``2 d weight / F``) is formed in the forward pass in
    place, so forward + backward make 5 passes over the reconstruction instead of autograd's ~9.
    """

    @staticmethod
    def forward(ctx, x_hat: torch.Tensor, target: torch.Tensor, weight: torch.Tensor, mse: bool):  # noqa: ANN001, ANN205
        """Per-node losses and per-window errors."""
        d = x_hat.detach() - target
        err = (d * d if mse else d.abs()).mean(dim=3)
        node_loss = (err * weight).sum(dim=(1, 2))
        scale = weight[..., None] * ((2.0 if mse else 1.0) / d.shape[3])
        ctx.save_for_backward((d if mse else d.sign_()).mul_(scale))
        ctx.mark_non_differentiable(err)
        return node_loss, err

    @staticmethod
    def backward(ctx, grad_node: torch.Tensor, _grad_err: torch.Tensor):  # noqa: ANN001, ANN205
        """``d loss / d x_hat``."""
        (g,) = ctx.saved_tensors
        return g * grad_node[:, None, None, None], None, None, None


def window_loss(x_hat: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, loss: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-node mean loss over the unmasked windows (differentiable) and the per-window errors
    (masked windows count 0): ``x_hat, target[n, c, S, F]``, ``mask[n, c, S]``."""
    weight = mask / mask.sum(dim=(1, 2), keepdim=True).clamp_min(1.0)
    node_loss, err = _WindowLoss.apply(x_hat, target, weight, loss == "mse")
    return node_loss, err * mask


def _segment_pass(
    net: nn.Module, Xt: torch.Tensor, first_end: torch.Tensor, length: torch.Tensor, window: int, segment: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Forward one batch of segments: returns (x_hat, target, mask) shaped ``[n, segment, S, (F)]``
    (window j of segment s at ``[:, j, s]``)."""
    rows = gather_segments(Xt, first_end, window, segment)
    x_hat = net.forward_rows(rows, window)  # type: ignore[operator]
    target = rows[:, window - 1 :]
    mask = (torch.arange(segment)[None, :, None] < length[:, None, :]).float()
    return x_hat, target, mask


@dataclass
class TrainResult:
    """Per-node training record: loss curves ``[node, epoch]`` (NaN after a node stopped), best epoch,
    the reason for every node that could not be trained, and the number of optimiser steps."""

    train_loss: np.ndarray
    val_loss: np.ndarray
    best_epoch: np.ndarray
    failed: dict[int, str] = field(default_factory=dict)
    steps: int = 0


def train_batched(
    net: nn.Module,
    X: np.ndarray,
    ends: list[np.ndarray],
    window: int,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    loss: str = "mae",
    patience: int = 2,
    val_fraction: float = 0.1,
    segment: int = 32,
    seed: int = 0,
    progress: Callable[[int, np.ndarray], None] | None = None,
    Xt: torch.Tensor | None = None,
) -> TrainResult:
    """Train a stacked per-node network in place (Adam; per-node masks, early stopping and best weights).

    ``X[n, T, F]`` scaled features; ``ends[k]`` the chronological window-end indices of node k
    (time-consistency filter applied). A minibatch holds ``batch_size // segment`` segments per node.
    ``progress(epoch, train_loss[n])`` is called after every epoch if given; ``Xt`` is ``X`` as
    returned by :func:`as_tensor` if the caller already has it.
    """
    if loss not in ("mae", "mse"):
        raise ValueError(f"loss must be 'mae' or 'mse', got {loss!r}")
    segment = max(1, min(segment, batch_size))
    per_step = max(1, batch_size // segment)
    n = X.shape[0]
    if Xt is None:
        Xt = as_tensor(X)
    counts = np.array([len(e) for e in ends])
    n_val = np.floor(counts * val_fraction).astype(np.int64)
    n_val = np.where(counts - n_val >= 1, n_val, 0)
    tr_ends = [e[: len(e) - v] for e, v in zip(ends, n_val, strict=True)]
    va_ends = [e[len(e) - v :] for e, v in zip(ends, n_val, strict=True)]
    seg = make_segments(tr_ends, segment)
    n_tr = counts - n_val
    failed: dict[int, str] = {int(k): "no training window (all data missing or filtered)" for k in np.flatnonzero(n_tr == 0)}
    active = n_tr > 0
    train_curve = np.full((n, epochs), np.nan)
    val_curve = np.full((n, epochs), np.nan)
    best_epoch = np.full(n, -1, dtype=np.int64)
    best_val = np.full(n, np.inf)
    wait = np.zeros(n, dtype=np.int64)
    params = list(net.parameters())
    best = [p.detach().clone() for p in params]
    opt = torch.optim.Adam(params, lr=lr, fused=True)  # one kernel per parameter (same update rule)
    rng = np.random.default_rng(seed)
    width = seg.first_end.shape[1]
    steps = 0
    for epoch in range(epochs):
        if not active.any():
            break
        keys = rng.random((n, width))
        keys[np.arange(width)[None, :] >= seg.count[:, None]] = np.inf
        perm = np.argsort(keys, axis=1, kind="stable")
        first = torch.from_numpy(np.take_along_axis(seg.first_end, perm, axis=1))
        length = torch.from_numpy(np.where(active[:, None], np.take_along_axis(seg.length, perm, axis=1), 0))
        act_t = torch.from_numpy(active)
        sums = torch.zeros(n, dtype=torch.float64)
        net.train()
        for s in range(0, int(seg.count[active].max(initial=0)), per_step):
            x_hat, target, mask = _segment_pass(net, Xt, first[:, s : s + per_step], length[:, s : s + per_step], window, segment)
            node_loss, err = window_loss(x_hat, target, mask, loss)
            opt.zero_grad(set_to_none=True)
            node_loss.sum().backward()
            opt.step()
            if not bool(act_t.all()):
                with torch.no_grad():
                    for p, b in zip(params, best, strict=True):
                        p[~act_t] = b[~act_t]
            sums += err.sum(dim=(1, 2)).double()
            steps += 1
        ep_train = sums.numpy() / np.maximum(n_tr, 1)
        ep_val = np.where(n_val > 0, mean_window_loss(net, X, va_ends, window, loss, Xt=Xt), ep_train)
        for k in np.flatnonzero(active):
            if not (np.isfinite(ep_train[k]) and np.isfinite(ep_val[k])):
                failed[int(k)] = f"non-finite loss at epoch {epoch}"
                active[k] = False
                continue
            train_curve[k, epoch] = ep_train[k]
            val_curve[k, epoch] = ep_val[k]
            if ep_val[k] < best_val[k]:
                best_val[k], best_epoch[k], wait[k] = ep_val[k], epoch, 0
                with torch.no_grad():
                    for p, b in zip(params, best, strict=True):
                        b[k] = p[k]
            else:
                wait[k] += 1
                active[k] = wait[k] < patience
        if progress is not None:
            progress(epoch, ep_train)
    with torch.no_grad():
        for p, b in zip(params, best, strict=True):
            p.copy_(b)
    return TrainResult(train_curve, val_curve, best_epoch, failed, steps)


@torch.no_grad()
def feature_errors(
    net: nn.Module, X: np.ndarray, ends: list[np.ndarray], window: int, segment: int = 64, per_step: int = 16,
    Xt: torch.Tensor | None = None,
) -> list[np.ndarray]:
    """Per-feature absolute reconstruction errors ``|x_hat - x|`` (RUAD Section 3.2) at each node's
    window ends: one ``[len(ends[k]), F]`` array per node, in the order of ``ends[k]``."""
    if Xt is None:
        Xt = as_tensor(X)
    seg = make_segments(ends, segment)
    counts = np.array([len(e) for e in ends], dtype=np.int64)
    start = np.r_[0, np.cumsum(counts)[:-1]]  # node k's windows at flat[start[k] : start[k] + counts[k]]
    flat = np.zeros((int(counts.sum()), X.shape[2]), dtype=np.float32)
    net.eval()
    first_all = torch.from_numpy(seg.first_end)
    len_all = torch.from_numpy(seg.length)
    for s in range(0, int(seg.count.max(initial=0)), per_step):
        x_hat, target, _ = _segment_pass(net, Xt, first_all[:, s : s + per_step], len_all[:, s : s + per_step], window, segment)
        err = x_hat.sub_(target).abs_().numpy()
        off = seg.offset[:, s : s + per_step]
        ln = seg.length[:, s : s + per_step]
        pos = start[:, None, None] + off[:, None, :] + np.arange(segment)[None, :, None]
        valid = np.arange(segment)[None, :, None] < ln[:, None, :]
        flat[pos[valid]] = err[valid]
    return np.split(flat, np.cumsum(counts)[:-1])


def mean_window_loss(
    net: nn.Module, X: np.ndarray, ends: list[np.ndarray], window: int, loss: str, Xt: torch.Tensor | None = None
) -> np.ndarray:
    """Mean training loss per node over the given windows (NaN for a node without windows)."""
    errs = feature_errors(net, X, ends, window, Xt=Xt)
    return np.array([np.nan if len(e) == 0 else float((e if loss == "mae" else e * e).mean()) for e in errs])
