"""The empirical cap of the temporal z (Eq. E1, E2 of models/anomaly/vicinity.py) against hand-computed values:
the 3.07 point mass of the node-day scores (docs/verdicts.md, issue 15) and what the cap does to it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nodewatch.models.anomaly.verdicts import DayInputs, VerdictConfig, evidence
from nodewatch.models.anomaly.vicinity import (
    conditioned_deviation,
    empirical_cap,
    empirical_levels,
    fit_reference,
    log_transform,
)

OFF = 1 / 60
"""metric_offsets of procs_blocked on the simulator: 5% of its median window mean 1/3"""
LOC = math.log(1 / 3 + OFF)


def _lattice(n_top: int = 0) -> np.ndarray:
    """100 15-min means of a gauge that is 0-1 blocked processes per 5-min sample (the seed-3 shares rounded):
    27 windows at 0, 43 at 1/3, 25 at 2/3, 5 at 1; ``n_top`` of the 2/3 windows replaced by 5 (an anomaly)."""
    v = [0.0] * 27 + [1 / 3] * 43 + [2 / 3] * (25 - n_top) + [1.0] * 5 + [5.0] * n_top
    return np.array(v)


def test_empirical_levels_inverted_cdf_by_hand() -> None:
    dev = np.array([[3.0, np.nan, 0, 1, 2, 4, 5, 6, 7, 8, 9]])  # 10 finite values 0..9
    q = empirical_levels(dev, axis=1, levels=(0.5, 0.3, 0.1))
    # ranks ceil(10 * 0.5) = 5, ceil(7) = 7, ceil(9) = 9 -> 4, 6, 8: 6/10 > 0.5, 4/10 > 0.3, 2/10 > 0.1 are >= them
    assert q[0].tolist() == [4.0, 6.0, 8.0]
    assert np.isnan(empirical_levels(np.full((1, 3), np.nan), axis=1, levels=(0.5,))).all()


def test_the_307_atom_and_its_cap_by_hand() -> None:
    h = log_transform(np.tile(_lattice(), (3, 1))[:, :, None], OFF)
    ref = fit_reference(h, None, empirical=True)
    # median 1/3; |dev|: 43 x 0, 25 x log(0.68333/0.35) = 0.66905, 5 x log(1.01667/0.35) = 1.06635,
    # 27 x log(0.35/0.016667) = log 21 = 3.04452 -> MAD = 0.66905 (50th, 51st), scale 1.4826 x 0.66905 = 0.99193
    # (the tail width 3.04452 / 3.2905 = 0.925 is smaller)
    assert ref.loc[0, 0, 0] == pytest.approx(LOC, rel=1e-5)
    assert ref.scale[0, 0, 0] == pytest.approx(1.4826 * math.log((2 / 3 + OFF) / (1 / 3 + OFF)), rel=1e-4)
    night = log_transform(np.array([[[0.0], [1 / 3], [2 / 3], [1.0], [5.0]]]), OFF)
    d, sc = conditioned_deviation(night, None, ref)
    z = (d / sc)[0, :, 0]
    # the point mass: a window at 0 scores log 21 / 0.99193 = 3.0693 without the cap
    assert z[0] == pytest.approx(-math.log(21) / (1.4826 * 0.669050), rel=1e-4)
    assert abs(z[0]) == pytest.approx(3.0693, abs=1e-3)
    cap = empirical_cap(d, None, ref)[0, :, 0]
    # lower side (-dev sorted: 5 x -1.07, 25 x -0.67, 43 x 0, 27 x 3.04): rank 80 (p = 0.2) is 3.04452, rank 70
    # (p = 0.3) is 0 -> a step to 0 is at most Phi^-1(1 - 0.2) = 0.8416 (27% of the windows take it)
    assert cap[0] == pytest.approx(0.841621, abs=1e-5)
    # upper side (dev sorted: 27 x -3.04, 43 x 0, 25 x 0.67, 5 x 1.07): q(0.2) = rank 80 = 0.66905 -> 0.8416;
    # 1.06635 first at rank 97 (p = 0.03) -> Phi^-1(0.97) = 1.8808; 5 (log(5.01667/0.35) = 2.6626) exceeds all
    assert cap[2] == pytest.approx(0.841621, abs=1e-5)
    assert cap[3] == pytest.approx(1.880794, abs=1e-5)
    assert np.isinf(cap[4])
    assert cap[1] == pytest.approx(0.0, abs=1e-6)  # d = 0 <= q(0.5) = rank 50 = 0 -> Phi^-1(0.5) = 0
    # in the verdicts' evidence the temporal z is min(|z|, cap), the sign kept: the 3.07 step scores 0.84,
    # a rise of the gauge to 5 keeps its z 2.6626 / 0.99193 = 2.684
    day = DayInputs(night, np.zeros((1, 5), bool), np.zeros((1, 5), bool), np.full((1, 5), -1),
                    np.array([""]), np.array([""]))
    ev = evidence(day, ref, VerdictConfig())
    assert ev.z[0, 0, 0] == pytest.approx(-0.841621, abs=1e-5)
    assert ev.z[0, 4, 0] == pytest.approx(math.log((5 + OFF) / (1 / 3 + OFF)) / 0.99193, rel=1e-3)
    off_ref = fit_reference(h, None)  # empirical=False: no levels, the scores of 4c11703
    assert off_ref.levels is None and np.isinf(empirical_cap(d, None, off_ref)).all()


def test_a_node_whose_history_holds_the_anomaly_is_not_blinded() -> None:
    # node 2 had 20 windows at 5 in its history: its own upper q(0.1) (rank 90) is 2.6626, which alone would cap
    # a window at 5 to Phi^-1(0.9) = 1.28; the levels are at most the median node's (0.66905): no cap
    hist = np.stack([_lattice(), _lattice(), _lattice(n_top=20)])
    h = log_transform(hist[:, :, None], OFF)
    own = empirical_levels(h[2:, :, 0] - LOC, axis=1)
    assert own[0, 3] == pytest.approx(math.log((5 + OFF) / (1 / 3 + OFF)), rel=1e-5)
    ref = fit_reference(h, None, empirical=True)
    night = log_transform(np.full((3, 1, 1), 5.0), OFF)
    d, _ = conditioned_deviation(night, None, ref)
    assert np.isinf(empirical_cap(d, None, ref)[:, 0, 0]).all()


def test_cap_uses_the_window_state_and_the_larger_level_in_transitions() -> None:
    # idle history: the lattice; busy history: 1/3 always but 1% at 0 -> busy lower levels 0 up to p = 0.02
    idle = _lattice()
    busy_vals = np.array([1 / 3] * 99 + [0.0])
    h = log_transform(np.concatenate([idle, busy_vals])[None, :, None], OFF)
    busy = np.concatenate([np.zeros(100, bool), np.ones(100, bool)])[None]
    ref = fit_reference(h, busy, empirical=True)
    night = log_transform(np.zeros((1, 3, 1)), OFF)  # three windows at 0: idle, busy, busy in a job start
    b = np.array([[False, True, True]])
    tr = np.array([[False, False, True]])
    d, _ = conditioned_deviation(night, b, ref, tr)
    cap = empirical_cap(d, b, ref, tr)[0, :, 0]
    assert cap[0] == pytest.approx(0.841621, abs=1e-5)
    # busy: -dev has one value 3.04 of 100: rank ceil(100 x 0.99) = 99 is 0 for every p >= 0.01 -> no cap
    assert np.isinf(cap[1])
    # transition: the envelope deviation (both medians are 1/3: 3.04) against the larger (idle) level -> 0.8416
    assert cap[2] == pytest.approx(0.841621, abs=1e-5)
