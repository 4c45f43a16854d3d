"""The LSTM voter over successive predictions (Frank sec. 4.3, Fig. 4.5: six inputs, one per network, per step).

By hand: which rows make a node's K successive predictions, how absent ones are filled, what a K-step voter learns
that a one-prediction voter cannot, and the bad inputs of the voter path (fewer steps than K, NaN outputs, all-equal
outputs, a day without failures, a wrong input shape), scoring and the registry round trip.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
import torch

from nodewatch.models.predict.ensemble import (
    LeadTimeEnsemble,
    VoterFit,
    fill_back,
    fit_lstm_voter,
    history_index,
    voter_sequences,
)
from nodewatch.tasks.predict.dataset import Sequences
from nodewatch.tasks.predict.evaluate import fit_ensemble_and_voter, held_out_rows, voter_inputs_of
from nodewatch.tasks.predict.registry import LoadedPredictor
from nodewatch.tasks.predict.score import score_node, voter_steps_input


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_history_index_by_hand() -> None:
    """Rows of the same node-day 60 s apart, oldest first; other groups, gaps and the day's start are absent (-1)."""
    group = np.array([-5, -5, -5, -5, -7, -7, 3])
    time_s = np.array([120.0, 0.0, 60.0, 240.0, 60.0, 120.0, 240.0])
    idx = history_index(group, time_s, 3, 60.0)
    assert idx.tolist() == [
        [1, 2, 0],  # t=120: 0, 60, 120
        [-1, -1, 1],  # t=0: nothing before
        [-1, 1, 2],  # t=60: one step before
        [0, -1, 3],  # t=240: 120 present, 180 a gap
        [-1, -1, 4],  # another group: t=0 of -5 is not its history
        [-1, 4, 5],
        [-1, -1, 6],  # a failure (one row per group)
    ]
    assert history_index(group, time_s, 1, 60.0).tolist() == [[i] for i in range(7)]
    with pytest.raises(ValueError):
        history_index(group, time_s, 0, 60.0)
    with pytest.raises(ValueError):
        history_index(group, time_s, 2, 0.0)


def test_fewer_steps_than_k_and_nan_outputs_repeat_the_next_newer_step() -> None:
    lo = np.array([[1.0] * 6, [2.0] * 6, [np.nan] * 6, [4.0] * 6], np.float32)
    seq = voter_sequences(lo, np.array([[-1, -1, 0], [0, 2, 3], [-1, 1, 3]]))
    assert seq[0, :, 0].tolist() == [1, 1, 1]  # a node with one prediction so far: it is repeated
    assert seq[1, :, 0].tolist() == [1, 4, 4]  # a NaN output in the middle: the newer step
    assert seq[2, :, 0].tolist() == [2, 2, 4]
    prev = np.array([[[9.0] * 6, [8.0] * 6]] * 3, np.float32)  # a failure's earlier steps computed elsewhere
    assert voter_sequences(lo, np.array([[-1, -1, 0]] * 3), prev)[0, :, 0].tolist() == [9, 8, 1]
    with pytest.raises(ValueError):
        voter_sequences(lo, np.array([[-1, -1, 0]]), prev)  # one row, prev for three
    f = fill_back(np.array([[[1.0, np.nan], [2.0, 3.0]]]))
    assert f.tolist() == [[[2.0, 3.0], [2.0, 3.0]]]  # one NaN makes the whole step absent


def _persistence_data(g: np.random.Generator, n_pos: int, n_neg: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Failures: all six networks positive at every one of the K steps; ok: the same current step, but a transient
    (the earlier steps negative), or negative throughout. The current step alone cannot tell them apart."""
    cur = g.normal(6, 1, size=(n_pos + n_neg, 6))
    past = np.where(np.arange(n_pos + n_neg)[:, None, None] < n_pos, g.normal(6, 1, (n_pos + n_neg, k - 1, 6)),
                    g.normal(-6, 1, (n_pos + n_neg, k - 1, 6)))
    x = np.concatenate([past, cur[:, None]], axis=1).astype(np.float32)
    return x, np.r_[np.ones(n_pos), np.zeros(n_neg)].astype(np.int64)


def test_k_step_voter_rejects_transients_a_one_step_voter_cannot() -> None:
    g = np.random.default_rng(4)
    x, y = _persistence_data(g, 80, 800, 3)
    fit = fit_lstm_voter(x, y, target_fpr=2e-3, epochs=80, stride_s=60.0)
    assert fit.steps == 3 and fit.stride_s == 60.0 and fit.model.lstm.input_size == 6
    xt, yt = _persistence_data(np.random.default_rng(5), 100, 1000, 3)
    s = fit.score(xt)
    assert (s[yt == 1] >= fit.threshold).mean() > 0.9 and (s[yt == 0] >= fit.threshold).mean() < 0.01
    one = fit_lstm_voter(x[:, -1:], y, target_fpr=2e-3, epochs=80, stride_s=60.0)  # K = 1: the current step only
    s1 = one.score(xt[:, -1:])
    assert (s1[yt == 1] >= one.threshold).mean() < 0.5  # at fpr <= 0.2 % it cannot keep the failures


def test_voter_bad_inputs() -> None:
    g = np.random.default_rng(6)
    x, y = _persistence_data(g, 40, 400, 2)
    with pytest.raises(ValueError, match="NaN"):
        fit_lstm_voter(np.where(np.arange(440)[:, None, None] == 3, np.nan, x), y)
    with pytest.raises(ValueError):
        fit_lstm_voter(x, np.zeros(len(y), np.int64))  # a day without failures: nothing to learn
    fit = fit_lstm_voter(x, y, target_fpr=1e-2, epochs=10)
    with pytest.raises(ValueError, match="reads network outputs"):
        fit.score(x[:, -1])  # (N, 6) for a 2-step voter
    bad = x[:3].copy()
    bad[0, -1, 2] = np.nan  # the current prediction is NaN: no decision
    bad[1, 0] = np.nan  # an earlier one: repeats the newer step
    s = fit.score(bad)
    assert s[0] == 0.0 and np.isfinite(s).all()
    assert s[1] == pytest.approx(fit.score(np.repeat(x[1:2, -1:], 2, axis=1))[0])
    flat = np.zeros((300, 2, 6), np.float32)  # all-equal outputs: one score for all, threshold above it, no crash
    yf = np.r_[np.ones(30), np.zeros(270)].astype(np.int64)
    ff = fit_lstm_voter(flat, yf, target_fpr=1e-3, epochs=10)
    sf = ff.score(flat)
    assert np.ptp(sf) == 0 and not (sf >= ff.threshold).any()


def _seqs(g: np.random.Generator, n: int, y: int, group: np.ndarray, time_s: np.ndarray, shift: float) -> Sequences:
    return Sequences(x=g.normal(shift, 1.0, (n, 6, 70)).astype(np.float32), y=np.full(n, y, np.int64), group=group,
                     has_precursor=np.full(n, y == 1), node=np.zeros(n, np.int64), time_s=time_s,
                     anomaly=np.zeros(n, np.int8))


def test_fit_uses_k_steps_only_with_the_failures_earlier_steps() -> None:
    g = np.random.default_rng(7)
    pos = _seqs(g, 40, 1, np.arange(40), np.full(40, 7200.0), 1.5)
    neg = _seqs(g, 1200, 0, -1 - np.arange(1200) // 60, 60.0 * (np.arange(1200) % 60), 0.0)
    ens, v_old = fit_ensemble_and_voter(pos, neg, epochs=5, voter_steps=3)
    assert v_old.steps == 0  # no earlier steps of the failures (a store): the old voter
    pos.x_prev, pos.prev_stride_s = g.normal(1.5, 1.0, (40, 2, 6, 70)).astype(np.float32), 60.0
    pos.x_prev[0, 1] = np.nan  # a failure early in its telemetry: that step is absent
    ens, v = fit_ensemble_and_voter(pos, neg, epochs=5, voter_steps=(1, 3))
    assert v.steps in (1, 3) and set(v.selection) == {1, 3} and v.stride_s == 60.0
    ens, v = fit_ensemble_and_voter(pos, neg, epochs=5, voter_steps=3)
    inp = voter_inputs_of(ens, v, pos, ens.predict_logodds(pos.x))
    assert inp.shape == (40, 3, 6) and np.isfinite(inp).all() and np.array_equal(inp[0, 0], inp[0, 1])
    rows = held_out_rows(ens, v, pos, neg)  # a test machine
    assert {r["scheme"] for r in rows} >= {"lstm@6NN", "unanimous@6NN"}
    no_fail = _seqs(g, 0, 1, np.zeros(0, np.int64), np.zeros(0), 0.0)
    rows = held_out_rows(ens, v, no_fail, neg)  # a test day without failures: fpr only
    assert next(r for r in rows if r["scheme"] == "lstm@6NN")["tp"] == 0
    pos.prev_stride_s = 30.0
    with pytest.raises(ValueError, match="earlier steps"):
        voter_inputs_of(ens, v, pos, ens.predict_logodds(pos.x))


def test_scoring_a_node_with_fewer_steps_than_k() -> None:
    """Online: at 15-s telemetry a 3-step voter 60 s apart reads anchors i-8, i-4, i; the first anchors repeat."""
    lo = np.arange(12, dtype=np.float32)[:, None].repeat(6, axis=1)
    ok = np.ones(12, bool)
    ok[5] = False
    v = VoterFit(model=None, threshold=0.5, steps=3, stride_s=60.0)  # type: ignore[arg-type]
    inp = voter_steps_input(lo, ok, 15, v)
    a = inp[:, :, 0]
    assert a[9].tolist() == [1, 9, 9]  # anchor 5 is a gap: the newer step repeats
    assert a[0].tolist() == [0, 0, 0] and a[11].tolist() == [3, 7, 11] and a[4].tolist() == [0, 0, 4]
    assert a[5, :2].tolist() == [1, 1] and np.isnan(a[5, 2])  # not ok itself: never scored (score_node masks it)
    with pytest.raises(ValueError):
        voter_steps_input(lo, ok, 45, v)
    g = np.random.default_rng(8)
    ens = LeadTimeEnsemble(epochs=3).fit(g.normal(size=(200, 6, 70)), np.r_[np.ones(20), np.zeros(180)].astype(int))
    x, y = _persistence_data(g, 30, 300, 3)
    pred = LoadedPredictor("t", ens, fit_lstm_voter(x, y, epochs=5, stride_s=60.0),
                           {"step_s": 15, "metrics": [f"m{i}" for i in range(10)]})
    times = pd.date_range("2026-01-01", periods=60, freq="15s")  # 15 min: fewer steps than the sequences need
    dec = score_node(pred, times, g.normal(size=(10, 60)), cumulative=False)
    assert len(dec) and np.isfinite(dec["confidence"]).all()
