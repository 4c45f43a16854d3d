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

    def recur(self, proj: torch.Tensor, return_sequences: bool) -> torch.Tensor:
        """LSTM recurrence over projected inputs ``proj[n, W, 4H, B]``: hidden states ``[n, W, H, B]``
        (or the last one, ``[n, H, B]``), with the hand-written BPTT of :class:`LSTMRecurrence`."""
        return LSTMRecurrence.apply(proj.contiguous(), self.w_hh.transpose(1, 2), return_sequences)


def lstm_recurrence_reference(proj: torch.Tensor, w_hh_t: torch.Tensor, return_sequences: bool) -> torch.Tensor:
    """Same recurrence as :class:`LSTMRecurrence` written with plain autograd ops (used to test it)."""
    n, W, G, B = proj.shape
    H = G // 4
    c = proj.new_zeros(n, H, B)
    h = c
    outs = []
    for t in range(W):
        gates = proj[:, t] if t == 0 else torch.baddbmm(proj[:, t], w_hh_t, h)
        i, f, o = torch.sigmoid(gates[:, : 3 * H]).split(H, dim=1)
        c = f * c + i * torch.tanh(gates[:, 3 * H :])
        h = o * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs, dim=1) if return_sequences else h


class LSTMRecurrence(torch.autograd.Function):
    """LSTM recurrence with stacked per-node weights and a hand-written backward pass (BPTT).

    Feature-major layout ``[n, W, 4H, B]`` (gate order i, f, o, g): batch is the contiguous inner
    axis, so each gate is a dense ``[n, H, B]`` block (element-wise ops 1.8x faster than
    ``[n, B, 4H]`` with H = 7, measured). The backward computes all gate gradients in place
    into one buffer and the recurrent-weight gradient with a single bmm over all steps, instead
    of autograd's ~2x more small ops and one bmm per step.
    """

    @staticmethod
    def forward(ctx, proj: torch.Tensor, w_hh_t: torch.Tensor, return_sequences: bool) -> torch.Tensor:  # noqa: ANN001
        """``c_t = f*c_{t-1} + i*g``, ``h_t = o*tanh(c_t)`` with ``[i,f,o] = sigmoid``, ``g = tanh`` of
        ``proj_t + W_hh^T h_{t-1}`` (Hochreiter & Schmidhuber; as ``torch.nn.LSTM``)."""
        n, W, G, B = proj.shape
        H = G // 4
        acts = torch.empty_like(proj)
        cs = proj.new_empty(n, W, H, B)
        tcs = proj.new_empty(n, W, H, B)
        hs = proj.new_empty(n, W, H, B)
        for t in range(W):
            gates = proj[:, t] if t == 0 else torch.baddbmm(proj[:, t], w_hh_t, hs[:, t - 1])
            a = acts[:, t]
            torch.sigmoid(gates[:, : 3 * H], out=a[:, : 3 * H])
            torch.tanh(gates[:, 3 * H :], out=a[:, 3 * H :])
            i, f, o, g = a.split(H, dim=1)
            torch.mul(i, g, out=cs[:, t])
            if t > 0:
                cs[:, t].addcmul_(f, cs[:, t - 1])
            torch.tanh(cs[:, t], out=tcs[:, t])
            torch.mul(o, tcs[:, t], out=hs[:, t])
        ctx.save_for_backward(acts, cs, tcs, hs, w_hh_t)
        ctx.return_sequences = return_sequences
        return hs if return_sequences else hs[:, -1].clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:  # noqa: ANN001
        """Backpropagation through time over the W steps."""
        acts, cs, tcs, hs, w_hh_t = ctx.saved_tensors
        n, W, G, B = acts.shape
        H = G // 4
        d_proj = torch.empty_like(acts)
        w_hh = w_hh_t.transpose(1, 2)
        dh = grad[:, W - 1] if ctx.return_sequences else grad
        dc = torch.zeros_like(dh)
        for t in range(W - 1, -1, -1):
            if t < W - 1 and ctx.return_sequences:
                dh = dh + grad[:, t]
            a = acts[:, t]
            i, f, o, g = a.split(H, dim=1)
            tc = tcs[:, t]
            dc = torch.addcmul(dc, dh, o * (1 - tc * tc))
            dg = d_proj[:, t]
            d_i, d_f, d_o, d_g = dg.split(H, dim=1)
            torch.mul(dc, g, out=d_i)
            if t > 0:
                torch.mul(dc, cs[:, t - 1], out=d_f)
            else:
                d_f.zero_()
            torch.mul(dh, tc, out=d_o)
            torch.mul(dc, i, out=d_g)
            s = a[:, : 3 * H]
            dg[:, : 3 * H].mul_(s - s * s)
            d_g.mul_(1 - g * g)
            if t > 0:
                dc = dc * f
                dh = torch.bmm(w_hh, dg)
        if W > 1:
            d_gates = d_proj[:, 1:].permute(0, 2, 1, 3).reshape(n, G, (W - 1) * B)
            h_prev = hs[:, :-1].permute(0, 2, 1, 3).reshape(n, H, (W - 1) * B)
            d_w = torch.bmm(d_gates, h_prev.transpose(1, 2))
        else:
            d_w = torch.zeros_like(w_hh_t)
        return d_proj, d_w, None


def windows_fm(proj: torch.Tensor, S: int, R: int, window: int) -> torch.Tensor:
    """Per-step inputs of all windows inside segments: ``proj[n, D, S*R]`` (rows of S segments of R
    consecutive rows) -> ``[n, W, D, S*(R-W+1)]``; step t of window j is row j+t.

    Every row is projected once and shared by the W windows containing it (instead of W times).
    """
    n, D, _ = proj.shape
    c = R - window + 1
    u = proj.view(n, D, S, R).unfold(3, window, 1)  # [n, D, S, c, W]
    return u.permute(0, 4, 1, 2, 3).reshape(n, window, D, S * c)


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
        h1 = self.lstm1.recur(windows_fm(self.lstm1.project(xT), S, R, window), return_sequences=True)  # [n, W, E1, B]
        B = S * c
        seq = h1.permute(0, 2, 1, 3).reshape(n, -1, window * B)  # [n, E1, W*B]
        proj2 = self.lstm2.project(seq).view(n, -1, window, B).permute(0, 2, 1, 3)  # [n, W, 4L, B]
        z = self.lstm2.recur(proj2, return_sequences=False)  # [n, L, B]
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
