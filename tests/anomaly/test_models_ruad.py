"""RUAD / dense autoencoder: batched per-node networks and the estimator API (paper Sections 3.2, 3.5-3.7)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nodewatch.models.anomaly.base import NotFittedError
from nodewatch.models.anomaly.batched_lstm import BatchedDenseNet, BatchedRUADNet, RUADNet, load_node_from_reference
from nodewatch.models.anomaly.batched_training import feature_errors, make_segments, train_batched, window_loss
from nodewatch.models.anomaly.dense_ae import DenseAutoencoder
from nodewatch.models.anomaly.metrics import pooled_auc
from nodewatch.models.anomaly.preprocess import chronological_split, features_from_stats
from nodewatch.models.anomaly.ruad import RUAD
from nodewatch.models.anomaly.synthetic_telemetry import make_synthetic_telemetry

torch.set_num_threads(1)


def test_batched_lstm_reproduces_per_node_nn_lstm():
    F, sizes, W = 6, (5, 3, 5), 4
    refs = [RUADNet(F, sizes) for _ in range(3)]
    net = BatchedRUADNet(3, F, sizes)
    for k, r in enumerate(refs):
        load_node_from_reference(net, k, r)
    x = torch.randn(3, 7, W, F)
    with torch.no_grad():
        out = net(x)
        for k, r in enumerate(refs):
            torch.testing.assert_close(out[k], r(x[k]), atol=1e-5, rtol=1e-5)


def test_forward_rows_equals_explicit_windows():
    F, W, R = 5, 3, 8
    net = BatchedRUADNet(2, F, (4, 2, 4), seed=1)
    rows = torch.randn(2, R, 3, F)  # [n, row, segment, F]
    with torch.no_grad():
        got = net.forward_rows(rows, W)  # [n, R-W+1, segment, F]
        wins = torch.stack([rows[:, j : j + W] for j in range(R - W + 1)], dim=1)  # [n, c, W, S, F]
        want = net(wins.transpose(2, 3).reshape(2, -1, W, F)).reshape(2, R - W + 1, 3, F)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    dense = BatchedDenseNet(2, F, (4, 2, 4))
    with torch.no_grad():
        torch.testing.assert_close(dense.forward_rows(rows), dense(rows.reshape(2, -1, 1, F)).reshape(2, R, 3, F))


def test_batched_gradients_equal_per_node_nn_lstm_gradients():
    """Forward and every parameter gradient of the batched net (segments, hand-written BPTT) equal those
    of per-node ``nn.LSTM`` networks on the same windows, with the same L1 loss."""
    F, sizes, W, R, S = 6, (5, 3, 5), 4, 9, 3
    torch.manual_seed(0)
    refs = [RUADNet(F, sizes).double() for _ in range(2)]
    net = BatchedRUADNet(2, F, sizes).double()
    for k, r in enumerate(refs):
        load_node_from_reference(net, k, r)
    rows = torch.rand(2, R, S, F, dtype=torch.float64)
    out = net.forward_rows(rows, W)
    (out - rows[:, W - 1 :]).abs().mean(dim=3).mean(dim=(1, 2)).sum().backward()
    for k, r in enumerate(refs):
        wins = torch.stack([rows[k, j : j + W] for j in range(R - W + 1)])  # [c, W, S, F]
        x = wins.permute(0, 2, 1, 3).reshape(-1, W, F)
        ref_out = r(x)
        torch.testing.assert_close(out[k].reshape(-1, F), ref_out)
        (ref_out - x[:, -1]).abs().mean().backward()
        for bl, rl in ((net.lstm1, r.lstm1), (net.lstm2, r.lstm2)):
            H = bl.hidden
            order = torch.cat([torch.arange(0, 2 * H), torch.arange(3 * H, 4 * H), torch.arange(2 * H, 3 * H)])
            torch.testing.assert_close(bl.w_ih.grad[k], rl.weight_ih_l0.grad[order].T)
            torch.testing.assert_close(bl.w_hh.grad[k], rl.weight_hh_l0.grad[order].T)
            torch.testing.assert_close(bl.bias.grad[k, 0], rl.bias_ih_l0.grad[order])
        for bl, rl in ((net.dec1, r.dec1), (net.dec2, r.dec2)):
            torch.testing.assert_close(bl.weight.grad[k], rl.weight.grad.T)
            torch.testing.assert_close(bl.bias.grad[k, 0], rl.bias.grad)


@pytest.mark.parametrize("loss", ["mae", "mse"])
def test_window_loss_matches_autograd_of_plain_formula(loss):
    g = torch.Generator().manual_seed(2)
    x_hat = torch.randn(3, 5, 2, 4, generator=g, dtype=torch.float64, requires_grad=True)
    target = torch.randn(3, 5, 2, 4, generator=g, dtype=torch.float64)
    mask = (torch.rand(3, 5, 2, generator=g) > 0.3).double()
    mask[2] = 0  # a node without windows in this minibatch
    node_loss, err = window_loss(x_hat, target, mask, loss)
    d = x_hat - target
    e = (d.abs() if loss == "mae" else d * d).mean(dim=3) * mask
    want = e.sum(dim=(1, 2)) / mask.sum(dim=(1, 2)).clamp_min(1.0)
    torch.testing.assert_close(node_loss, want)
    torch.testing.assert_close(err, e.detach())
    upstream = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    (got,) = torch.autograd.grad(node_loss, x_hat, upstream)
    (ref,) = torch.autograd.grad(want, x_hat, upstream)
    torch.testing.assert_close(got, ref)


def test_segments_follow_runs_of_consecutive_windows():
    seg = make_segments([np.array([3, 4, 5, 6, 7, 10, 11]), np.array([], dtype=np.int64)], segment=2)
    n = seg.count[0]
    assert seg.count.tolist() == [4, 0]
    assert seg.first_end[0, :n].tolist() == [3, 5, 7, 10]
    assert seg.length[0, :n].tolist() == [2, 2, 1, 2]
    assert seg.offset[0, :n].tolist() == [0, 2, 4, 5]


def _two_node_data(seed: int, T: int = 300, F: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.random((2, T, F), dtype=np.float32)


def test_nodes_train_independently_in_a_batch():
    """Node 0's trained weights do not depend on what node 1 sees (stacked weights, summed per-node losses)."""
    X1 = _two_node_data(0)
    X2 = X1.copy()
    X2[1] = np.random.default_rng(9).random(X2[1].shape)
    ends = [np.arange(3, 300)] * 2
    nets = []
    for X in (X1, X2):
        net = BatchedRUADNet(2, 4, (4, 2, 4), seed=3)
        train_batched(net, X, ends, 4, epochs=2, batch_size=32, lr=1e-2, segment=8, seed=5)
        nets.append(net)
    for (name, a), (_, b) in zip(nets[0].named_parameters(), nets[1].named_parameters(), strict=True):
        torch.testing.assert_close(a[0], b[0], msg=name)
        assert not torch.allclose(a[1], b[1]), name


def test_ragged_nodes_and_node_without_windows():
    X = _two_node_data(1, T=200)
    X = np.concatenate([X, X[:1]], axis=0)
    ends = [np.arange(3, 200), np.arange(3, 40), np.array([], dtype=np.int64)]
    net = BatchedRUADNet(3, 4, (4, 2, 4))
    res = train_batched(net, X, ends, 4, epochs=3, batch_size=16, lr=1e-2, segment=8, patience=5)
    assert set(res.failed) == {2} and "no training window" in res.failed[2]
    assert np.isfinite(res.train_loss[:2]).all() and np.isnan(res.train_loss[2]).all()
    assert res.train_loss[0, -1] < res.train_loss[0, 0]
    errs = feature_errors(net, X, ends, 4)
    assert [e.shape for e in errs] == [(197, 4), (37, 4), (0, 4)]


def test_early_stopping_keeps_best_weights_per_node():
    X = _two_node_data(2)
    ends = [np.arange(3, 300)] * 2
    net = BatchedRUADNet(2, 4, (4, 2, 4))
    res = train_batched(net, X, ends, 4, epochs=6, batch_size=32, lr=0.5, segment=8, patience=1)  # huge lr: unstable
    for k in range(2):
        done = np.isfinite(res.val_loss[k])
        assert res.best_epoch[k] == int(np.nanargmin(res.val_loss[k]))
        assert done.sum() <= 6


@pytest.fixture(scope="module")
def synthetic():
    d = make_synthetic_telemetry(n_nodes=4, n_days=12, n_metrics=5, anomaly_rate=0.4, seed=3)
    X = features_from_stats(d.mean, d.min, d.max, d.std, d.count)
    return X, d.labels, chronological_split(X.shape[1])


def test_estimator_api(synthetic):
    X, y, sp = synthetic
    est = RUAD(window=5, epochs=2, batch_size=64)
    assert "window=5" in repr(est) and est.get_params()["epochs"] == 2
    with pytest.raises(NotFittedError, match="not fitted"):
        est.score_samples(X)
    assert est.fit(X[:, :sp]) is est
    s_train = est.score_samples(X[:, :sp])
    assert np.nanmax(s_train, axis=1) == pytest.approx(np.ones(4))  # Eq. 3: normalised by max training error
    s = est.score_samples(X[:, sp:])
    assert s.shape == y[:, sp:].shape and np.nanmin(s) >= 0 and np.nanmax(s) <= 1
    assert np.isnan(s[:, :4]).all()  # no complete window of W=5 yet at the start of the test split
    assert est.predict(X[:, sp:]).dtype == bool
    with pytest.raises(ValueError, match="features"):
        est.score_samples(X[:, sp:, :3])
    contrib = est.feature_contributions(X[:, sp:])
    below = np.isfinite(s) & (s < 1)  # Eq. 3 caps at 1; below the cap the contributions add up to the score
    np.testing.assert_allclose(np.nansum(contrib, axis=2)[below], s[below], rtol=1e-4)
    assert (np.nansum(contrib, axis=2)[s == 1] >= 1 - 1e-6).all()
    single = est.score_samples(X[:, :sp])[0]
    assert single.ndim == 1


def test_semi_needs_labels_and_bad_params(synthetic):
    X, y, sp = synthetic
    with pytest.raises(ValueError, match="labels"):
        RUAD(mode="semi").fit(X[:, :sp])
    with pytest.raises(ValueError, match="mode"):
        RUAD(mode="supervised").fit(X[:, :sp])
    with pytest.raises(ValueError, match="labels shape"):
        RUAD(mode="semi").fit(X[:, :sp], y[:, :10])
    with pytest.raises(ValueError, match="shaped"):
        RUAD().fit(np.zeros(5))


def test_state_roundtrip_gives_identical_scores(synthetic):
    X, y, sp = synthetic
    for cls in (RUAD, DenseAutoencoder):
        est = cls(window=5, epochs=1).fit(X[:, :sp])
        back = cls.from_node_states([est.node_state(k) for k in range(4)], window=5)
        np.testing.assert_array_equal(back.score_samples(X[:, sp:]), est.score_samples(X[:, sp:]))


def test_absent_metric_does_not_drop_the_node(synthetic):
    X, y, sp = synthetic
    X = X.copy()
    X[1, :, 0] = np.nan  # node 1 never reports feature 0
    est = DenseAutoencoder(epochs=1).fit(X[:, :sp])
    assert not est.failed_ and est.n_train_windows_[1] > 0
    assert np.isfinite(est.score_samples(X[:, sp:])[1]).any()


def test_all_missing_node_is_reported_not_fatal(synthetic):
    X, y, sp = synthetic
    X = X.copy()
    X[2, :sp] = np.nan  # no training data at all
    est = RUAD(window=5, epochs=1).fit(X[:, :sp])
    assert 2 in est.failed_
    assert np.isnan(est.score_samples(X[:, sp:])[2]).all()
    assert np.isfinite(est.score_samples(X[:, sp:])[0]).any()


@pytest.mark.parametrize("cls,mode", [(RUAD, "unsupervised"), (RUAD, "semi"), (DenseAutoencoder, "semi")])
def test_detects_synthetic_anomalies(synthetic, cls, mode):
    X, y, sp = synthetic
    est = cls(window=5, mode=mode, epochs=15, batch_size=64, lr=3e-3).fit(X[:, :sp], y[:, :sp])
    auc = pooled_auc(est.score_samples(X[:, sp:]), y[:, sp:])
    assert auc > 0.7, auc


@pytest.mark.parametrize("seq", [True, False])
@pytest.mark.parametrize("stride", [2, 7])  # overlapping windows of rows (layer 1) / disjoint steps (layer 2)
def test_hand_written_bptt_matches_autograd(seq, stride):
    from nodewatch.models.anomaly.batched_lstm import LSTMRecurrence, lstm_recurrence_reference

    g = torch.Generator().manual_seed(0)
    W, B = 5, 7
    proj = torch.randn(2, 12, (W - 1) * stride + B, generator=g, dtype=torch.float64, requires_grad=True)
    w = (0.5 * torch.randn(2, 3, 12, generator=g, dtype=torch.float64)).requires_grad_()
    out = LSTMRecurrence.apply(proj, w, W, stride, seq)
    ref = lstm_recurrence_reference(proj, w, W, stride, seq)
    torch.testing.assert_close(out, ref)
    upstream = torch.randn(out.shape, generator=g, dtype=torch.float64)
    got = torch.autograd.grad(out, (proj, w), upstream)
    want = torch.autograd.grad(ref, (proj, w), upstream)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(lambda p, ww: LSTMRecurrence.apply(p, ww, W, stride, seq), (proj, w))


def test_float32_recurrence_close_to_tanh_reference():
    """The sigmoid form of tanh used in float32 stays within float32 rounding of ``torch.tanh``."""
    from nodewatch.models.anomaly.batched_lstm import LSTMRecurrence, lstm_recurrence_reference

    g = torch.Generator().manual_seed(1)
    proj = 3 * torch.randn(3, 28, 9 * 4 + 32, generator=g)
    w = torch.randn(3, 7, 28, generator=g)
    torch.testing.assert_close(
        LSTMRecurrence.apply(proj, w, 10, 4, True), lstm_recurrence_reference(proj, w, 10, 4, True), atol=2e-6, rtol=1e-5
    )
