"""Issue 15, the job-peer drop channel of disk_write_bytes (models/anomaly/job_peers.py, Eq. J1-J3): hand-computed
values on small arrays, and the channel through evidence / calibrate / verdicts. No simulation."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from nodewatch.models.anomaly.job_peers import in_node_units, peer_drop_z, peer_top, persistence_floor
from nodewatch.models.anomaly.verdicts import (
    DayInputs,
    Evidence,
    VerdictConfig,
    budget_thresholds,
    calibrate,
    evidence,
    persistent_score,
    verdicts,
)
from nodewatch.models.anomaly.vicinity import Reference, log_transform

EPS = np.array([0.0, 0.1, -0.1, 0.1, -0.1, 0.0])  # the six members' log offsets from their job's median
S = 1.4826 * 0.1  # Eq. J2 by hand: |residuals| of the 60 member-windows below: median 0.1 (see each test)
LN2 = math.log(2.0)


def _job(n_t: int = 10, members: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = (np.log(1e6) + EPS[:members, None] + np.zeros((members, n_t)))[:, :, None]
    return x, np.zeros((members, n_t), dtype=np.int32), np.zeros((members, n_t), dtype=bool)


def test_one_node_halving_in_a_six_node_job_fires_after_the_persistence() -> None:
    x, job, tr = _job()
    x[0, 5:, 0] -= LN2  # node 0 writes half from window 5 on
    z, s = peer_drop_z(x, job, tr)
    # windows 5-9: sorted members [-ln 2, -0.1, -0.1, 0, 0.1, 0.1], median -0.05; node 0's residual -ln 2 + 0.05.
    # All 60 residuals: |r| = 0 (10), 0.05 (15), 0.1 (20), 0.15 (10), 0.643 (5): median 0.1, centre 0 -> s = 0.14826
    assert s[0] == pytest.approx(S, rel=1e-5)
    assert z[0, 5:, 0] == pytest.approx(np.full(5, (LN2 - 0.05) / S), rel=1e-5)  # 4.338 robust sigma below
    assert z[0, :5, 0] == pytest.approx(np.zeros(5), abs=1e-6)
    assert z[1, 5, 0] == 0.0 and z[2, 5, 0] == pytest.approx(0.05 / S, rel=1e-5)  # one-sided: a rise is 0
    ps = persistent_score(z[0, :, 0], 2, 3)  # 2 of 3: the second low window fires, the first does not
    assert ps[5] == pytest.approx(0.0, abs=1e-6) and ps[6:] == pytest.approx(np.full(4, (LN2 - 0.05) / S), rel=1e-5)


def test_the_whole_job_halving_is_no_node_drop() -> None:
    x, job, tr = _job()
    x[:, 5:, 0] -= LN2
    z, s = peer_drop_z(x, job, tr)
    assert s[0] == pytest.approx(S, rel=1e-5)  # |r| = 0 (20), 0.1 (40): median 0.1
    assert np.nanmax(z) == pytest.approx(0.1 / S, rel=1e-5)  # the members 0.1 below the median: 0.674, every window
    assert z[0, :, 0] == pytest.approx(np.zeros(10), abs=1e-6)


def test_a_job_of_three_members_is_not_judged_nor_a_window_with_three() -> None:
    x, job, tr = _job(members=3)
    x[0, 5:, 0] -= LN2
    assert np.isnan(peer_drop_z(x, job, tr)[0]).all()
    x6, job6, tr6 = _job()
    x6[3:, 4, 0] = np.nan  # window 4: three members with data
    z, _ = peer_drop_z(x6, job6, tr6)
    assert np.isnan(z[:, 4]).all() and np.isfinite(z[:, 3]).all()
    assert np.isnan(peer_drop_z(x6, job6, tr6, min_members=7)[0]).all()
    with pytest.raises(ValueError):
        peer_drop_z(x6, job6, tr6, min_members=1)


def test_a_job_whose_members_write_steadily_different_amounts_is_judged_on_its_own_spread() -> None:
    x, job, tr = _job()
    x[0, 5:, 0] -= LN2
    wide = np.log(1e6) + np.array([0.0, 0.4, -0.4, 0.4, -0.4, 0.0])[:, None, None] + np.zeros((6, 10, 1))
    z, s = peer_drop_z(np.concatenate([x, wide]), np.concatenate([job, job + 1]), np.concatenate([tr, tr]))
    # 120 residuals: the tight job's 60 (|r| median 0.1) and the wide job's 0 (20), 0.4 (40): pooled median 0.1
    assert s[0] == pytest.approx(S, rel=1e-5)
    assert z[0, 5:, 0] == pytest.approx(np.full(5, (LN2 - 0.05) / S), rel=1e-5)  # the tight job: its own 0.1
    assert z[8, :, 0] == pytest.approx(np.full(10, 0.4 / (1.4826 * 0.4)), rel=1e-5)  # wide: s_J = 1.4826 x 0.4


def test_nan_and_zero_rates() -> None:
    rate = np.full((6, 4, 1), 1e6) * np.exp(EPS)[:, None, None]
    rate[5, 1, 0] = np.nan  # no data: neither judged nor a peer (5 members left)
    rate[0, 2, 0] = 0.0  # a node that writes nothing while its job writes: log(0 + offset), a large drop
    x = log_transform(rate, 1e3)
    z, _ = peer_drop_z(x, np.zeros((6, 4), np.int32), np.zeros((6, 4), bool))
    assert np.isnan(z[5, 1, 0]) and np.isfinite(z[:5, 1, 0]).all()
    assert z[0, 2, 0] > 20  # ln(1e6 / 1e3) = 6.9 below the median, scale ~0.15
    assert np.isfinite(z[:, 0]).all() and np.isfinite(z[:, 3]).all()
    none = np.zeros((6, 4), np.int32) - 1  # no job: nothing judged
    assert np.isnan(peer_drop_z(x, none, np.zeros((6, 4), bool))[0]).all()


def test_start_stop_windows_are_skipped_and_inferred_jobs_not_judged() -> None:
    x, job, tr = _job()
    x[0, 5:, 0] -= LN2
    tr[0, 5:7] = True  # node 0's job start/stop windows 5-6: not judged, no peer there
    tr[3, 8] = True
    z, _ = peer_drop_z(x, job, tr)
    assert np.isnan(z[0, 5:7]).all() and np.isnan(z[3, 8]).all()
    # window 5, five members [-0.1, -0.1, 0, 0.1, 0.1] (node 0 left out): median 0, node 2's residual -0.1
    assert np.isfinite(z[2, 5, 0]) and z[2, 5, 0] > 0
    assert np.isfinite(z[0, 7:, 0]).all() and (z[0, 7:, 0] > 4).all()
    assert np.isnan(peer_drop_z(x, job, tr, first_inferred=0)[0]).all()


def test_persistence_floor_and_node_units_by_hand() -> None:
    # k = 2 of n = 3, 96 windows, budget 10 per 1,000: p = sqrt(0.01 / (96 x 3)) = 5.8926e-3, Phi^-1(1 - p)
    p = math.sqrt(0.01 / 288)
    assert persistence_floor(10.0, 96, 2, 3) == pytest.approx(NormalDist().inv_cdf(1 - p), rel=1e-9)
    assert persistence_floor(10.0, 96, 2, 3) == pytest.approx(2.5192, abs=1e-3)
    assert persistence_floor(10.0, 96, 1, 1) == pytest.approx(NormalDist().inv_cdf(1 - 0.01 / 96), rel=1e-9)  # 3.71
    with pytest.raises(ValueError):
        persistence_floor(10.0, 96, 3, 2)
    u = in_node_units(np.array([[[2.0], [np.nan]]]), np.array([6.0]), 4.0)
    assert u[0, :, 0].tolist() == [3.0, 0.0]  # 2 x 6 / 4
    with pytest.raises(ValueError):
        in_node_units(u, np.array([6.0]), 0.0)


def test_channel_threshold_from_positive_held_back_scores_never_below_its_floor() -> None:
    rng = np.random.default_rng(3)
    cfg = VerdictConfig()

    def ev(z: np.ndarray) -> Evidence:
        return Evidence(z[..., 0], np.zeros(z.shape[:2] + (2,)), np.zeros(z.shape[:2]), io_peer=z, io_cols=np.array([0]))

    days = [np.maximum(rng.normal(0, 1, (20, 96, 1)), 0) for _ in range(7)]
    for d in days:
        d[:5] = np.nan  # 5 nodes without a judged window: no node-day score
    cal = calibrate([ev(d) for d in days], cfg)
    floor = persistence_floor(10.0 / 3, 96, 2, 3)  # one more channel beside the 2 fused ones
    assert cal.io_peer_day_scores.shape == (105,) and cal.io_peer >= floor
    pos = cal.io_peer_day_scores[cal.io_peer_day_scores > 0]
    assert cal.io_peer == pytest.approx(max(budget_thresholds(pos[None], 10.0 / 3, floor)[0], floor))
    few = np.full((2, 96, 1), np.nan)
    few[0, :3, 0] = 1.0
    cal1 = calibrate([ev(few)], cfg)
    assert cal1.io_peer_day_scores.tolist() == [1.0] and cal1.io_peer == floor
    top, judged = peer_top(few)
    assert judged.tolist() == [True, False] and np.isnan(top[1]).all() and top[0, 0] == 1.0


def _day(rng: np.random.Generator, drop: slice | None) -> DayInputs:
    n, t = 8, 96
    x = np.zeros((n, t, 2), dtype=np.float32)
    x[..., 0] = rng.normal(0, 0.1, (n, t))  # disk_write_bytes: the job's members within 0.1 of each other
    x[..., 1] = rng.normal(0, 1, (n, t))  # another metric: own-history noise
    if drop is not None:
        x[3, drop, 0] -= LN2  # node 3 writes half: 0.7 of its own (broad) history's sigma, ~7 below its peers
    busy = np.ones((n, t), dtype=bool)
    return DayInputs(x, busy, np.zeros_like(busy), np.zeros((n, t), np.int32), np.array(["r00"] * 4 + ["r01"] * 4),
                     np.array(["a"] * n), None, None, np.array([True, False]))


def test_the_channel_through_calibration_and_verdicts() -> None:
    rng = np.random.default_rng(11)
    ref = Reference(np.zeros((2, 8, 2)), np.ones((2, 8, 2)))  # own history: 0, scale 1
    held = [_day(rng, None) for _ in range(7)]
    night = _day(rng, slice(40, 52))
    names, times = [f"cn{i:04d}" for i in range(8)], np.arange(96)
    found = {}
    for on in (True, False):
        cfg = VerdictConfig(io_peer=on)
        cal = calibrate([evidence(d, ref, cfg) for d in held], cfg)
        assert np.isfinite(cal.io_peer) == on
        ev = evidence(night, ref, cfg)
        rows, flags = verdicts(ev, cal, night, names, ["disk_write_bytes", "other"], times, cfg)
        found[on] = {r["subject"] for r in rows if r["kind"] == "node"}
        if on:
            assert cal.io_peer >= persistence_floor(cfg.budget_per_1000 / 3, 96, 2, 3)
            assert np.nanmin(ev.io_peer[3, 40:52, 0]) > cal.io_peer
            row = next(r for r in rows if r["subject"] == "cn0003")
            assert row["top_metrics"][0] == "disk_write_bytes" and flags[3, 41:52].all() and not flags[3, :40].any()
    assert found[True] == {"cn0003"} and found[False] == set()
