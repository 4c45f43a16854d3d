"""Stacked per-node networks: one independent model per node, all nodes computed as ONE batched op.

RUAD trains one model per compute node (Molan et al., Section 3.6). Training ~1000 tiny models one
by one is dominated by per-op overhead, and ``torch.vmap`` does not support ``nn.LSTM``. Here every
parameter carries a leading node axis ``[n_nodes, ...]`` and every matmul is a ``torch.bmm`` /
``torch.baddbmm`` over that axis, so node ``k``'s output depends only on node ``k``'s weights and
data. The LSTM recurrence is written out (gates stored in the order i, f, o, g so one sigmoid covers
three of them; ``torch.nn.LSTM`` uses i, f, g, o), so a stack built from per-node ``nn.LSTM`` weights
reproduces them exactly (:func:`load_node_from_reference`, checked in the tests).
"""

from __future__ import annotations

import math

import torch
from torch import nn


def _uniform(shape: tuple[int, ...], bound: float, gen: torch.Generator) -> nn.Parameter:
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound, generator=gen))


class BatchedLinear(nn.Module):
    """``y[k] = x[k] @ W[k] + b[k]`` for every node k; weights ``[n, in, out]`` (PyTorch default init)."""

    def __init__(self, n_nodes: int, n_in: int, n_out: int, gen: torch.Generator) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(n_in)
        self.weight = _uniform((n_nodes, n_in, n_out), bound, gen)
        self.bias = _uniform((n_nodes, 1, n_out), bound, gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x[n, B, in] -> [n, B, out]``."""
        return torch.baddbmm(self.bias, x, self.weight)

    def fm(self, xT: torch.Tensor) -> torch.Tensor:
        """Feature-major form: ``xT[n, in, B] -> [n, out, B]`` (same weights)."""
        return torch.baddbmm(self.bias.transpose(1, 2), self.weight.transpose(1, 2), xT)


class BatchedLSTM(nn.Module):
    """One LSTM layer per node (Hochreiter & Schmidhuber; RUAD Section 3.6 encoder), stacked.

    ``W_ih[n, I, 4H]``, ``W_hh[n, H, 4H]``, ``b[n, 1, 4H]`` (= ``b_ih + b_hh`` of ``nn.LSTM``).
    The input projection of all W steps is one bmm; the recurrence is W ``baddbmm`` calls.
    """

    def __init__(self, n_nodes: int, n_in: int, hidden: int, gen: torch.Generator) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(hidden)
        self.hidden = hidden
        self.w_ih = _uniform((n_nodes, n_in, 4 * hidden), bound, gen)
        self.w_hh = _uniform((n_nodes, hidden, 4 * hidden), bound, gen)
        self.bias = nn.Parameter(
            torch.empty(n_nodes, 1, 4 * hidden).uniform_(-bound, bound, generator=gen)
            + torch.empty(n_nodes, 1, 4 * hidden).uniform_(-bound, bound, generator=gen)
        )

    def project(self, xT: torch.Tensor) -> torch.Tensor:
        """Input projection in feature-major layout: ``xT[n, I, R] -> W_ih^T x + b``, ``[n, 4H, R]`` (one bmm)."""
        return torch.baddbmm(self.bias.transpose(1, 2), self.w_ih.transpose(1, 2), xT)

    def recur(self, steps: tuple[torch.Tensor, ...] | list[torch.Tensor], return_sequences: bool) -> list[torch.Tensor]:
        """LSTM recurrence over projected inputs ``steps[t][n, 4H, B]``; returns the hidden states
        ``[n, H, B]`` of every step (or only the last one).

        Feature-major layout: batch is the contiguous inner axis, so every gate slice is a dense
        ``[n, H, B]`` block (1.8x faster element-wise ops than ``[n, B, 4H]`` with H = 7, measured).
        """
        H = self.hidden
        w_hh_t = self.w_hh.transpose(1, 2)
        n, _, B = steps[0].shape
        c = steps[0].new_zeros(n, H, B)
        h = c
        outs = []
        for t, p_t in enumerate(steps):
            gates = p_t if t == 0 else torch.baddbmm(p_t, w_hh_t, h)
            sig_part, g_part = gates.split((3 * H, H), dim=1)
            i, f, o = torch.sigmoid(sig_part).split(H, dim=1)
            c = f * c + i * torch.tanh(g_part)
            h = o * torch.tanh(c)
            if return_sequences:
                outs.append(h)
        return outs if return_sequences else [h]


def windows_fm(proj: torch.Tensor, S: int, R: int, window: int) -> tuple[torch.Tensor, ...]:
    """Per-step inputs of all windows inside segments: ``proj[n, D, S*R]`` (rows of S segments of R
    consecutive rows) -> W tensors ``[n, D, S*(R-W+1)]``; step t of window j is row j+t.

    Every row is projected once and shared by the W windows containing it (instead of W times).
    """
    n, D, _ = proj.shape
    c = R - window + 1
    u = proj.view(n, D, S, R).unfold(3, window, 1)  # [n, D, S, c, W]
    return u.permute(0, 4, 1, 2, 3).reshape(n, window, D, S * c).unbind(1)


class BatchedRUADNet(nn.Module):
    """RUAD network per node (Section 3.6, Fig. 1b; sizes Section 4.3):
    LSTM(I->E1, sequences) -> LSTM(E1->L, last state) -> Dense(L->D1, ReLU) -> Dense(D1->I).

    Maps a window ``x_{t0-W+1..t0}`` to a reconstruction of ``x_{t0}`` (Eq. 7).
    """

    def __init__(self, n_nodes: int, n_features: int, sizes: tuple[int, int, int], seed: int = 0) -> None:
        super().__init__()
        e1, lat, d1 = sizes
        gen = torch.Generator().manual_seed(seed)
        self.lstm1 = BatchedLSTM(n_nodes, n_features, e1, gen)
        self.lstm2 = BatchedLSTM(n_nodes, e1, lat, gen)
        self.dec1 = BatchedLinear(n_nodes, lat, d1, gen)
        self.dec2 = BatchedLinear(n_nodes, d1, n_features, gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x[n, B, W, I] -> x_hat[n, B, I]``."""
        return self.forward_rows(x, x.shape[2])[:, :, 0]

    def forward_rows(self, rows: torch.Tensor, window: int) -> torch.Tensor:
        """Reconstruct the last vector of every window inside segments of consecutive rows:
        ``rows[n, S, R, I] -> x_hat[n, S, R-W+1, I]`` (output j belongs to the window ending at row j+W-1)."""
        n, S, R, F = rows.shape
        c = R - window + 1
        xT = rows.reshape(n, S * R, F).transpose(1, 2)
        h1 = self.lstm1.recur(windows_fm(self.lstm1.project(xT), S, R, window), return_sequences=True)
        seq = torch.stack(h1, dim=2)  # [n, E1, W, B]
        B = S * c
        steps2 = self.lstm2.project(seq.reshape(n, -1, window * B)).view(n, -1, window, B).unbind(2)
        z = self.lstm2.recur(steps2, return_sequences=False)[0]  # [n, L, B]
        out = self.dec2.fm(torch.relu(self.dec1.fm(z)))  # [n, I, B]
        return out.view(n, F, S, c).permute(0, 2, 3, 1)


class BatchedDenseNet(nn.Module):
    """Dense autoencoder per node (Borghesi et al. [5]; RUAD Section 3.5, Fig. 1a; sizes Section 4.3):
    I -> E1 (ReLU) -> L (linear latent) -> D1 (ReLU) -> I, reconstructing its input (Eq. 6)."""

    def __init__(self, n_nodes: int, n_features: int, sizes: tuple[int, int, int], seed: int = 0) -> None:
        super().__init__()
        e1, lat, d1 = sizes
        gen = torch.Generator().manual_seed(seed)
        self.enc1 = BatchedLinear(n_nodes, n_features, e1, gen)
        self.enc2 = BatchedLinear(n_nodes, e1, lat, gen)
        self.dec1 = BatchedLinear(n_nodes, lat, d1, gen)
        self.dec2 = BatchedLinear(n_nodes, d1, n_features, gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x[n, B, 1, I]`` (window of one step) ``-> x_hat[n, B, I]``."""
        return self.forward_rows(x[:, :, -1:])[:, :, 0]

    def forward_rows(self, rows: torch.Tensor, window: int = 1) -> torch.Tensor:
        """``rows[n, S, R, I] -> x_hat[n, S, R, I]`` (every row is its own input, W = 1)."""
        n, S, R, F = rows.shape
        xT = rows.reshape(n, S * R, F).transpose(1, 2)
        z = self.enc2.fm(torch.relu(self.enc1.fm(xT)))
        out = self.dec2.fm(torch.relu(self.dec1.fm(z)))
        return out.view(n, F, S, R).permute(0, 2, 3, 1)


class RUADNet(nn.Module):
    """Reference single-node RUAD network built from ``torch.nn.LSTM`` (the straightforward
    per-node baseline of ``benchmarks/train.py``); same architecture as :class:`BatchedRUADNet`."""

    def __init__(self, n_features: int, sizes: tuple[int, int, int]) -> None:
        super().__init__()
        e1, lat, d1 = sizes
        self.lstm1 = nn.LSTM(n_features, e1, batch_first=True)
        self.lstm2 = nn.LSTM(e1, lat, batch_first=True)
        self.dec1 = nn.Linear(lat, d1)
        self.dec2 = nn.Linear(d1, n_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x[B, W, I] -> x_hat[B, I]``."""
        seq, _ = self.lstm1(x)
        _, (h, _) = self.lstm2(seq)
        return self.dec2(torch.relu(self.dec1(h[-1])))


@torch.no_grad()
def load_node_from_reference(batched: BatchedRUADNet, k: int, ref: RUADNet) -> None:
    """Copy the weights of a reference :class:`RUADNet` into node ``k`` of a :class:`BatchedRUADNet`."""
    for bl, rl in ((batched.lstm1, ref.lstm1), (batched.lstm2, ref.lstm2)):
        H = bl.hidden
        order = torch.cat([torch.arange(0, 2 * H), torch.arange(3 * H, 4 * H), torch.arange(2 * H, 3 * H)])
        bl.w_ih[k] = rl.weight_ih_l0[order].T
        bl.w_hh[k] = rl.weight_hh_l0[order].T
        bl.bias[k, 0] = (rl.bias_ih_l0 + rl.bias_hh_l0)[order]
    for bl, rl in ((batched.dec1, ref.dec1), (batched.dec2, ref.dec2)):
        bl.weight[k] = rl.weight.T
        bl.bias[k, 0] = rl.bias
