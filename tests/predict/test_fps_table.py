"""The FPS table's two recalls (issue 18): over all failures and over failures with a precursor, both pooled."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nodewatch.tasks.predict.evaluate import fps_table
from nodewatch.tasks.predict.report import usability, usability_markdown
from nodewatch.tasks.predict.train import FPS_NOTE, fps_markdown


def _cv() -> pd.DataFrame:
    # two rounds of one scheme: 10 + 30 failures, 8 + 20 with a precursor, of which 6 + 10 caught; 2 without caught
    return pd.DataFrame([
        {"round": 0, "scheme": "lstm@6NN", "tp": 7, "fn": 3, "fp": 1, "tn": 999, "tpr": 0.7, "tpr_precursor": 6 / 8,
         "tp_precursor": 6, "precursor_failures": 8, "fpr": 1e-3, "ppv": 7 / 8},
        {"round": 1, "scheme": "lstm@6NN", "tp": 11, "fn": 19, "fp": 0, "tn": 1000, "tpr": 11 / 30,
         "tpr_precursor": 0.5, "tp_precursor": 10, "precursor_failures": 20, "fpr": 0.0, "ppv": 1.0},
    ])


def test_both_recalls_pooled_over_rounds() -> None:
    t = fps_table(_cv(), p_e=1e-6)
    ours = t[t.source.str.startswith("nodewatch")].iloc[0]
    assert np.isclose(ours.tpr, 18 / 40) and np.isclose(ours.tpr_precursor, 16 / 28)  # not the mean .625 of rounds
    assert np.isclose(ours.fpr, 1 / 2000)
    old = _cv().drop(columns=["tp_precursor", "precursor_failures"])  # rounds stored before the counts: mean of rates
    assert np.isclose(fps_table(old, p_e=1e-6).iloc[0].tpr_precursor, 0.625)


def test_thesis_recall_sits_in_the_precursor_column() -> None:
    t = fps_table(_cv(), p_e=1e-6)
    lstm = t[(t.source == "Frank Table 4.1 (MOGON I)") & (t.scheme == "lstm@6NN")].iloc[0]
    assert lstm.tpr_precursor == 0.7448 and lstm.tpr_all_failures_known is False
    md = fps_markdown(t)
    assert "| tpr (all failures) | tpr (failures with a precursor) |" in md and md.endswith(FPS_NOTE)
    assert "| lstm@6NN | Frank Table 4.1 (MOGON I) | NA | 0.7448 | 0.9992 |" in md
    assert "| lstm@6NN | nodewatch (simulator) | 0.4500 | 0.5714 |" in md
    rows = t.replace({np.nan: None}).to_dict(orient="records")
    u = usability({"fps": rows, "p_e": 1e-6}, site_nodes=1000)
    umd = usability_markdown(u, 1000)
    assert "| lstm@6NN | Frank Table 4.1 \\(MOGON I\\) | NA | 0.7448 | 4.00e-05 |" in umd  # md() escapes ( )
    assert "| lstm@6NN | nodewatch \\(simulator\\) | 0.4500 | 0.5714 |" in umd
