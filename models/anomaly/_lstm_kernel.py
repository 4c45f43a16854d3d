"""Compiled (numba) forward and backward of the stacked per-node LSTM recurrence.

:class:`nodewatch.models.anomaly.batched_lstm.LSTMRecurrence` calls these: one pass per node over the W steps, all gate
math fused, no temporaries and no Python per step (the eager version issued ~20 small torch ops per
step and layer, whose dispatch cost dominated with H = 7 hidden units). Layouts are those of
``LSTMRecurrence``: gates ``[n, 4H, W, B]`` in the order i, f, o, g; states ``[n, H, W, B]``; step t
of node k reads ``proj[k, :, t*stride : t*stride + B]``.

float32 uses a rational tanh approximation (Eigen's ``generic_fast_tanh_float``; |error| <= 3.6e-7,
measured against float64 ``tanh`` on [-20, 20]) and ``sigmoid(x) = (1 + tanh(x/2)) / 2``, because
numba has no vectorised ``exp``/``tanh`` here (no SVML) and scalar libm calls would be slower than
torch. float64 (tests, gradcheck) uses the exact ``np.tanh``. Inner loops run over the batch axis
(contiguous) so LLVM vectorises them. ``cache=True`` stores the compiled code in ``__pycache__``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

_CLAMP = 7.90531110763549805


def _tanh(x):  # noqa: ANN001, ANN202
    """tanh: exact for float64, rational approximation for float32 (see module docstring)."""
    return np.tanh(x)


@overload(_tanh)
def _tanh_impl(x):  # noqa: ANN001, ANN202
    if isinstance(x, types.Float) and x.bitwidth == 32:

        def fast(x):  # noqa: ANN001, ANN202
            c = np.float32(_CLAMP)
            # written so that NaN passes through (comparisons with NaN are false)
            x = c if x > c else x
            x = -c if x < -c else x
            x2 = x * x
            p = np.float32(-2.76076847742355e-16)
            p = p * x2 + np.float32(2.00018790482477e-13)
            p = p * x2 + np.float32(-8.60467152213735e-11)
            p = p * x2 + np.float32(5.12229709037114e-08)
            p = p * x2 + np.float32(1.48572235717979e-05)
            p = p * x2 + np.float32(6.37261928875436e-04)
            p = p * x2 + np.float32(4.89352455891786e-03)
            q = np.float32(1.19825839466702e-06)
            q = q * x2 + np.float32(1.18534705686654e-04)
            q = q * x2 + np.float32(2.26843463243900e-03)
            q = q * x2 + np.float32(4.89352518554385e-03)
            return x * p / q

        return fast
    return lambda x: np.tanh(x)


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
def lstm_forward(proj, w_hh, stride, acts, cs, tcs, hs):  # noqa: ANN001, ANN201
    """``proj[n, 4H, P]``, ``w_hh[n, H, 4H]`` -> fills ``acts[n, 4H, W, B]`` (i, f, o sigmoid; g tanh),
    ``cs``, ``tcs = tanh(cs)`` and ``hs = o * tcs`` (all ``[n, H, W, B]``)."""
    n, G, W, B = acts.shape
    H = G // 4
    half = acts.dtype.type(0.5)
    for k in range(n):
        for t in range(W):
            off = t * stride
            for r in range(G):
                z = acts[k, r, t]
                src = proj[k, r]
                for b in range(B):
                    z[b] = src[off + b]
                if t > 0:
                    for j in range(H):
                        wv = w_hh[k, j, r]
                        hp = hs[k, j, t - 1]
                        for b in range(B):
                            z[b] += wv * hp[b]
                if r < 3 * H:
                    for b in range(B):
                        z[b] = half + half * _tanh(half * z[b])
                else:
                    for b in range(B):
                        z[b] = _tanh(z[b])
            for j in range(H):
                ii = acts[k, j, t]
                ff = acts[k, H + j, t]
                oo = acts[k, 2 * H + j, t]
                gg = acts[k, 3 * H + j, t]
                cc = cs[k, j, t]
                tc = tcs[k, j, t]
                hh = hs[k, j, t]
                if t > 0:
                    cp = cs[k, j, t - 1]
                    for b in range(B):
                        cc[b] = ff[b] * cp[b] + ii[b] * gg[b]
                else:
                    for b in range(B):
                        cc[b] = ii[b] * gg[b]
                for b in range(B):
                    tc[b] = _tanh(cc[b])
                    hh[b] = oo[b] * tc[b]


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy", fastmath={"reassoc", "contract"})
def lstm_backward(acts, cs, tcs, hs, w_hh, grad, seq, stride, dgates, d_proj, d_w):  # noqa: ANN001, ANN201
    """BPTT: ``grad`` is dL/dh ``[n, H, W, B]`` (``seq``) or ``[n, H, 1, B]`` (last step only). Fills
    ``dgates[n, 4H, W, B]`` (dL/d pre-activation) and ``d_w[n, H, 4H]`` (dL/dW_hh), and, if ``d_proj``
    is not empty, adds step t's gate gradients into ``d_proj[:, :, t*stride : t*stride + B]``
    (overlapping windows of rows). ``reassoc`` lets LLVM vectorise the dot products of ``d_w``."""
    n, G, W, B = acts.shape
    H = G // 4
    one = acts.dtype.type(1.0)
    accumulate = d_proj.shape[2] > 0
    dh = np.empty((H, B), dtype=acts.dtype)
    dc = np.empty((H, B), dtype=acts.dtype)
    for k in range(n):
        for j in range(H):
            for r in range(G):
                d_w[k, j, r] = 0
        last = W - 1 if seq else 0
        for j in range(H):
            for b in range(B):
                dh[j, b] = grad[k, j, last, b]
                dc[j, b] = 0
        for t in range(W - 1, -1, -1):
            for j in range(H):
                ii = acts[k, j, t]
                ff = acts[k, H + j, t]
                oo = acts[k, 2 * H + j, t]
                gg = acts[k, 3 * H + j, t]
                tc = tcs[k, j, t]
                di = dgates[k, j, t]
                df = dgates[k, H + j, t]
                do = dgates[k, 2 * H + j, t]
                dg = dgates[k, 3 * H + j, t]
                dhj = dh[j]
                dcj = dc[j]
                for b in range(B):
                    dcv = dcj[b] + dhj[b] * oo[b] * (one - tc[b] * tc[b])
                    di[b] = dcv * gg[b] * ii[b] * (one - ii[b])
                    do[b] = dhj[b] * tc[b] * oo[b] * (one - oo[b])
                    dg[b] = dcv * ii[b] * (one - gg[b] * gg[b])
                    dcj[b] = dcv * ff[b]
                    df[b] = dcv
                if t > 0:
                    cp = cs[k, j, t - 1]
                    for b in range(B):
                        df[b] = df[b] * cp[b] * ff[b] * (one - ff[b])
                else:
                    for b in range(B):
                        df[b] = 0
            if accumulate:
                off = t * stride
                for r in range(G):
                    src = dgates[k, r, t]
                    dst = d_proj[k, r]
                    for b in range(B):
                        dst[off + b] += src[b]
            if t > 0:
                for j in range(H):
                    hp = hs[k, j, t - 1]
                    for r in range(G):
                        src = dgates[k, r, t]
                        acc = d_w.dtype.type(0.0)
                        for b in range(B):
                            acc += hp[b] * src[b]
                        d_w[k, j, r] += acc
                for j in range(H):
                    row = dh[j]
                    if seq:
                        g_prev = grad[k, j, t - 1]
                        for b in range(B):
                            row[b] = g_prev[b]
                    else:
                        for b in range(B):
                            row[b] = 0
                    for r in range(G):
                        wv = w_hh[k, j, r]
                        src = dgates[k, r, t]
                        for b in range(B):
                            row[b] += wv * src[b]
