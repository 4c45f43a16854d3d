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
    The input projection of all rows is one bmm; the recurrence is W ``baddbmm`` calls.
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
        """Input projection in feature-major layout: ``xT[n, I, P] -> W_ih^T x + b``, ``[n, 4H, P]`` (one bmm)."""
        return torch.baddbmm(self.bias.transpose(1, 2), self.w_ih.transpose(1, 2), xT)

    def recur(self, proj: torch.Tensor, window: int, stride: int, return_sequences: bool) -> torch.Tensor:
        """LSTM recurrence over projected inputs ``proj[n, 4H, P]``, step t reading columns
        ``[t*stride, t*stride + B)`` with ``B = P - (window-1)*stride``: hidden states ``[n, H, W, B]``
        (or the last one, ``[n, H, B]``), with the hand-written BPTT of :class:`LSTMRecurrence`."""
        return LSTMRecurrence.apply(proj, self.w_hh, window, stride, return_sequences)


def lstm_recurrence_reference(
    proj: torch.Tensor, w_hh: torch.Tensor, window: int, stride: int, return_sequences: bool
) -> torch.Tensor:
    """Same recurrence as :class:`LSTMRecurrence` written with plain autograd ops and ``torch.tanh`` (tests)."""
    n, G, P = proj.shape
    H = G // 4
    B = P - (window - 1) * stride
    c = proj.new_zeros(n, H, B)
    h = c
    outs = []
    for t in range(window):
        p = proj[:, :, t * stride : t * stride + B]
        gates = p if t == 0 else torch.baddbmm(p, w_hh.transpose(1, 2), h)
        i, f, o = torch.sigmoid(gates[:, : 3 * H]).split(H, dim=1)
        c = f * c + i * torch.tanh(gates[:, 3 * H :])
        h = o * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs, dim=2) if return_sequences else h


class LSTMRecurrence(torch.autograd.Function):
    """LSTM recurrence with stacked per-node weights and a hand-written backward pass (BPTT).

    Feature-major layout (gate order i, f, o, g; batch is the contiguous inner axis). Step t reads
    a *strided window* of the projected inputs, ``proj[:, :, t*stride : t*stride+B]``: with rows
    ordered (row, segment) and ``stride`` = number of segments, the W steps of all windows inside
    segments are plain views of the per-row projection (no gather, no copy); the second layer uses
    ``stride = B`` on the first layer's ``[n, H, W*B]`` output. States are kept as ``[n, H, W, B]``
    so that output is also a view.

    The step loops run in compiled kernels (:mod:`nodewatch.models.anomaly._lstm_kernel`, numba): with H = 7 the eager
    version spent most of its time dispatching ~20 tiny torch ops per step and layer. The kernel
    also accumulates the recurrent-weight gradient (vectorised dot products while the step's gate
    gradients are in cache, instead of a bmm re-reading all of them) and the input-projection
    gradient of overlapping windows.
    """

    @staticmethod
    def forward(ctx, proj: torch.Tensor, w_hh: torch.Tensor, window: int, stride: int, return_sequences: bool):  # noqa: ANN001, ANN205
        """``c_t = f*c_{t-1} + i*g``, ``h_t = o*tanh(c_t)`` with ``[i,f,o] = sigmoid``, ``g = tanh`` of
        ``proj_t + W_hh^T h_{t-1}`` (Hochreiter & Schmidhuber; as ``torch.nn.LSTM``)."""
        from nodewatch.models.anomaly._lstm_kernel import lstm_forward

        proj = proj.detach().contiguous()
        w_hh = w_hh.detach().contiguous()
        n, G, P = proj.shape
        H = G // 4
        B = P - (window - 1) * stride
        acts = proj.new_empty(n, G, window, B)
        cs, tcs, hs = (proj.new_empty(n, H, window, B) for _ in range(3))
        lstm_forward(proj.numpy(), w_hh.numpy(), stride, acts.numpy(), cs.numpy(), tcs.numpy(), hs.numpy())
        ctx.save_for_backward(acts, cs, tcs, hs, w_hh)
        ctx.shape = (stride, P, return_sequences)
        return hs if return_sequences else hs[:, :, -1].contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: ANN001, ANN205
        """Backpropagation through time over the W steps."""
        from nodewatch.models.anomaly._lstm_kernel import lstm_backward

        acts, cs, tcs, hs, w_hh = ctx.saved_tensors
        stride, P, seq = ctx.shape
        n, G, W, B = acts.shape
        H = G // 4
        grad = grad.contiguous() if seq else grad.contiguous().view(n, H, 1, B)
        dgates = acts.new_empty(n, G, W, B)
        disjoint = stride == B  # steps read disjoint columns: d_proj is dgates itself
        d_proj = dgates.view(n, G, P) if disjoint else acts.new_zeros(n, G, P)
        d_w = torch.empty_like(w_hh)
        lstm_backward(
            acts.numpy(), cs.numpy(), tcs.numpy(), hs.numpy(), w_hh.numpy(), grad.numpy(), seq, stride,
            dgates.numpy(), (acts.new_empty(n, G, 0) if disjoint else d_proj).numpy(), d_w.numpy(),
        )
        return d_proj, d_w, None, None, None


def rows_fm(rows: torch.Tensor) -> torch.Tensor:
    """``rows[n, R, S, F]`` (R consecutive rows of S segments, segment index fastest) as the
    feature-major view ``[n, F, R*S]`` the projections take (no copy)."""
    n, R, S, F = rows.shape
    return rows.reshape(n, R * S, F).transpose(1, 2)


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
        """``x[n, B, W, I] -> x_hat[n, B, I]`` (every window its own segment)."""
        return self.forward_rows(x.transpose(1, 2), x.shape[2])[:, 0]

    def forward_rows(self, rows: torch.Tensor, window: int) -> torch.Tensor:
        """Reconstruct the last vector of every window inside segments of consecutive rows:
        ``rows[n, R, S, I] -> x_hat[n, R-W+1, S, I]``; output ``[:, j, s]`` belongs to the window of
        segment s ending at row j+W-1. Each row is projected once and shared by the W windows containing it."""
        n, R, S, F = rows.shape
        c = R - window + 1
        B = c * S
        h1 = self.lstm1.recur(self.lstm1.project(rows_fm(rows)), window, S, return_sequences=True)  # [n, E1, W, B]
        proj2 = self.lstm2.project(h1.view(n, -1, window * B))  # [n, 4L, W*B]
        z = self.lstm2.recur(proj2, window, B, return_sequences=False)  # [n, L, B]
        out = self.dec2(torch.relu(self.dec1.fm(z)).transpose(1, 2))  # [n, B, I]
        return out.view(n, c, S, F)


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
        return self.forward_rows(x[:, :, -1:].transpose(1, 2))[:, 0]

    def forward_rows(self, rows: torch.Tensor, window: int = 1) -> torch.Tensor:
        """``rows[n, R, S, I] -> x_hat[n, R, S, I]`` (every row is its own input, W = 1)."""
        n, R, S, F = rows.shape
        z = self.enc2.fm(torch.relu(self.enc1.fm(rows_fm(rows))))
        out = self.dec2(torch.relu(self.dec1.fm(z)).transpose(1, 2))  # [n, R*S, I]
        return out.view(n, R, S, F)


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
