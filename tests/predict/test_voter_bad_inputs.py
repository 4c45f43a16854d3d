"""Bad inputs of the LSTM-voter path (issue 18, sixth pass): NaN outputs, all-equal outputs, a test day without
failures, a node with fewer samples than one prediction needs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nodewatch.models.predict.ensemble import LeadTimeEnsemble, fit_lstm_voter
from nodewatch.tasks.predict.dataset import Sequences
from nodewatch.tasks.predict.evaluate import held_out_rows
from nodewatch.tasks.predict.registry import LoadedPredictor
from nodewatch.tasks.predict.score import score_node

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def fitted() -> tuple[LeadTimeEnsemble, object]:
    g = np.random.default_rng(8)
    x = np.concatenate([g.normal(1.5, 1, (30, 6, 70)), g.normal(0, 1, (300, 6, 70))]).astype(np.float32)
    y = np.r_[np.ones(30), np.zeros(300)].astype(np.int64)
    ens = LeadTimeEnsemble(epochs=5).fit(x, y)
    return ens, fit_lstm_voter(ens.predict_logodds(x), y, target_fpr=1e-2, epochs=5)


def test_nan_outputs_are_refused_in_training_and_never_positive_in_scoring(fitted) -> None:
    g = np.random.default_rng(1)
    lo = g.normal(size=(200, 6)).astype(np.float32)
    y = np.r_[np.ones(20), np.zeros(180)].astype(np.int64)
    lo[5, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit_lstm_voter(lo, y, epochs=2)
    _, voter = fitted
    s = voter.score(lo[:10])
    assert np.isnan(s[5]) and not (s[5] >= voter.threshold) and np.isfinite(np.delete(s, 5)).all()


def test_all_equal_outputs_tie_and_fire_nowhere() -> None:
    """Every sequence gives the same outputs: one score for all; a small target fpr puts the threshold above it."""
    lo = np.zeros((300, 6), np.float32)
    y = np.r_[np.ones(30), np.zeros(270)].astype(np.int64)
    fit = fit_lstm_voter(lo, y, target_fpr=1e-3, epochs=5)
    s = fit.score(lo)
    assert np.ptp(s) == 0 and not (s >= fit.threshold).any()


def test_a_test_day_without_failures(fitted) -> None:
    """No failure on the test machine's day: every scheme still gets its fpr (this crashed: 0 rows gave (0, 0))."""
    ens, voter = fitted
    g = np.random.default_rng(2)
    assert ens.predict_logodds(np.zeros((0, 6, 70), np.float32)).shape == (0, 6)

    def seqs(n: int, y: int) -> Sequences:
        return Sequences(x=g.normal(size=(n, 6, 70)).astype(np.float32), y=np.full(n, y, np.int64),
                         group=-1 - np.arange(n) // 50, has_precursor=np.zeros(n, bool), node=np.zeros(n, np.int64),
                         time_s=60.0 * np.arange(n), anomaly=np.zeros(n, np.int8))

    rows = held_out_rows(ens, voter, seqs(0, 1), seqs(500, 0))
    lstm = next(r for r in rows if r["scheme"] == "lstm@6NN")
    assert lstm["tp"] == 0 and lstm["fn"] == 0 and lstm["fp"] + lstm["tn"] == 500 and np.isnan(lstm["tpr_precursor"])


def test_a_node_with_fewer_samples_than_one_prediction_needs(fitted) -> None:
    """11 minutes of telemetry make the first prediction (7-min lead + 4-min window): 8 minutes give no decision (no
    warning, confidence 0), no error."""
    ens, voter = fitted
    pred = LoadedPredictor("t", ens, voter, {"step_s": 15, "metrics": [f"m{i}" for i in range(10)]})
    g = np.random.default_rng(3)
    short = score_node(pred, pd.date_range("2026-01-01", periods=32, freq="15s"), g.normal(size=(10, 32)), False)
    assert not short["positive"].any() and (short["confidence"] == 0).all()
    ok = score_node(pred, pd.date_range("2026-01-01", periods=60, freq="15s"), g.normal(size=(10, 60)), False)
    assert len(ok) > 0 and np.isfinite(ok["confidence"]).all()
