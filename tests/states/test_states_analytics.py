"""models/states/analytics.py against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.states import analytics as sa

H = 3600 * 10**9


def _tl():
    # node 0: IDLE 0-6h, JOB 6-9h, JOB 9-10h (other evidence), DOWN 10-11h, BOOTING 11-12h
    # node 1: IDLE 0-12h
    node = np.array([0, 0, 0, 0, 0, 1])
    start = np.array([0, 6, 9, 10, 11, 0]) * H
    end = np.array([6, 9, 10, 11, 12, 12]) * H
    state = np.array([4, 5, 5, 1, 3, 4])
    return node, start, end, state


def test_percent_time_node_group_system():
    t = sa.state_time(*_tl(), n_nodes=2)
    assert t[0, 3] == 6 * H and t[0, 4] == 4 * H and t[1, 3] == 12 * H
    p = sa.percent_time(t)
    assert p[0].tolist() == pytest.approx([100 / 12, 0, 100 / 12, 50, 100 / 3, 0, 0, 0])
    sys_ = sa.percent_time(t, np.zeros(2, int), 1)[0]
    assert sys_[3] == pytest.approx(75.0) and sys_[0] == pytest.approx(100 / 24)
    assert sys_.sum() == pytest.approx(100.0)


def test_transitions_merge_same_state():
    p, c = sa.transition_probabilities(*_tl())
    assert c.sum() == 3  # IDLE->JOB, JOB->DOWN, DOWN->BOOTING (JOB->JOB with new evidence is not a transition)
    assert p[3, 4] == 1.0 and p[4, 0] == 1.0 and p[0, 2] == 1.0
    assert np.isnan(p[1]).all()


def test_time_between_table3():
    starts = np.array([0, 2, 2, 8, 20]) * H
    b = sa.time_between(starts)
    assert b.n_events == 4 and b.mean_h == pytest.approx(20 / 3) and b.median_h == pytest.approx(6)
    b2 = sa.time_between(starts, distinct=False)
    assert b2.mean_h == pytest.approx(5.0) and b2.median_h == pytest.approx(4.0)
    assert np.isnan(sa.time_between(np.array([5])).mean_h)


def test_state_starts_not_counted_when_uncovered_by_an_overlay():
    # node 0: DOWN 1-2h, UNSCHEDULED_RESV 2-4h, DOWN 4-5h (the same episode uncovered), IDLE 5-6h, DOWN 6-7h
    # node 1: UNSCHEDULED_RESV 0-3h, DOWN 3-4h (began inside the overlay: shadowed), BOOTING 4-5h, IDLE 5-6h
    node = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    start = np.array([0, 1, 2, 4, 5, 6, 0, 3, 4, 5]) * H
    end = np.array([1, 2, 4, 5, 6, 7, 3, 4, 5, 6]) * H
    state = np.array([4, 1, 8, 1, 4, 1, 8, 1, 3, 4])
    assert sorted(sa.state_starts(node, start, end, state, 1).tolist()) == [h * H for h in (1, 3, 4, 6)]
    got = sa.state_starts(node, start, end, state, 1, shadowed_after=(6, 8))
    assert sorted(got.tolist()) == [1 * H, 6 * H]


def test_gaussian_detector_finds_planted_outliers():
    rng = np.random.default_rng(0)
    n = 400
    pct = np.column_stack([rng.normal(0.3, 0.05, n), rng.normal(2, 0.3, n), rng.normal(25, 3, n), np.zeros(n)])
    pct[:, 3] = 100 - pct[:, :3].sum(axis=1)
    planted = [7, 42, 99, 200, 311]
    pct[7, 0] += 3.0  # much DOWN
    pct[42, 1] += 8.0  # connection loss
    pct[99, 2] += 40.0
    pct[200, 0] += 2.5
    pct[311, 1] += 6.0
    pct[planted, 3] = 100 - pct[planted, :3].sum(axis=1)
    a = sa.gaussian_anomalies(pct, target=5)
    assert sorted(a.anomalous.tolist()) == sorted(planted)
    assert a.log10_eps == int(a.log10_eps)
    # epsilon: 10^k with count closest to 5
    assert (a.log10_p < a.log10_eps).sum() == 5


def test_choose_epsilon_hand_values():
    lp = np.log(10.0) * np.array([-70.0, -65.5, -62.2, -61.5, -10, -9, -8, -3])
    # k=-61 -> 4 below; k=-9 -> 5 below (-70,-65.5,-62.2,-61.5,-10); closest to 5 is -9
    assert sa.choose_epsilon(lp, 5) == -9
    assert sa.choose_epsilon(lp, 4) == -61


def test_constant_feature_dropped():
    x = np.column_stack([np.arange(10.0), np.zeros(10)])
    lp, keep = sa.gaussian_log_density(x)
    assert keep.tolist() == [True, False] and np.isfinite(lp).all()


def test_underutilised_rack():
    days = 10
    gd = np.full((4, days), 0.7)
    gd[2, 2:7] = 0.3  # rack 2 gets under half the work for 5 days
    u = sa.underutilised_groups(gd, threshold=0.6, min_days=3)
    assert u.flagged == [(2, 2, 6, pytest.approx(0.3 / 0.7))]
    frac = np.array([[1.0, 0.0], [0.5, 0.5], [0.2, 0.2]])
    assert sa.group_daily_fraction(frac, np.array([0, 0, 1]), 2).tolist() == [[0.75, 0.25], [0.2, 0.2]]


def test_correlated_failures_racks():
    node = np.array([0, 1, 2, 3, 4, 5, 6])
    start = np.array([100, 100, 101, 102, 5000, 9000, 9001]) * 10**9
    end = start + H
    rack = np.array([0, 0, 1, 1, 2, 2, 2])
    ev = sa.correlated_failures(node, start, end, rack, window_ns=60 * 10**9, min_nodes=3)
    assert len(ev) == 1 and ev[0].nodes.tolist() == [0, 1, 2, 3] and ev[0].groups == {0: 2, 1: 2}
    # events given out of time order, node ids unrelated to event positions, a node failing twice
    ev2 = sa.correlated_failures(
        np.array([40, 9, 40, 17, 3]),
        np.array([102, 100, 101, 5000, 100]) * 10**9,
        np.full(5, 10**13),
        np.array([1, 0, 1, 2, 0]),
        window_ns=60 * 10**9,
        min_nodes=3,
    )
    assert len(ev2) == 1 and ev2[0].nodes.tolist() == [3, 9, 40] and ev2[0].groups == {0: 2, 1: 1}


def test_correlated_failures_report_keeps_unscheduled_leaves_admin_shadowed_out():
    """The correlated-rack-failures report counts episodes shadowed by UNSCHEDULED_RESV (an unscheduled rack outage),
    not those shadowed by ADMIN_RESV (maintenance reboots); failure_events staged without shadowed_by count."""
    import pandas as pd

    from nodewatch.tasks.states.report import build_report, correlated_failure_events

    day = 86400 * 10**9
    t0 = pd.Timestamp("2026-01-01", tz="UTC").value
    nodes = [f"cn{i:02d}" for i in range(8)]
    ns = pd.DataFrame(
        [{"node": n, "start": t0, "end": t0 + day, "state_code": 4, "overlay": ov} for n in nodes for ov in (True, False)]
    )
    racks = {n: ("r1" if i < 4 else "r2") for i, n in enumerate(nodes)}
    h = 3600 * 10**9
    fe = pd.DataFrame(
        {
            "node": nodes,
            "start": [t0 + h + i * 10**9 for i in range(4)] + [t0 + 5 * h + i * 10**9 for i in range(4)],
            "end": [t0 + 2 * h] * 4 + [t0 + 6 * h] * 4,
            "cause": "loss+boot",
            "shadowed_by": ["UNSCHEDULED_RESV", "UNSCHEDULED_RESV", None, "UNSCHEDULED_RESV"] + ["ADMIN_RESV"] * 4,
        }
    )
    assert list(correlated_failure_events(fe).node) == nodes[:4]
    assert len(correlated_failure_events(fe.drop(columns=["shadowed_by"]))) == 8
    items = {it.name: it for it in build_report(ns, fe, racks)}
    cf = items["correlated_failures"].table
    assert len(cf) == 1 and cf.nodes[0] == 4 and cf.racks[0] == "r1 4/4"
    # the same table staged before shadowed_by existed: both bursts are reported
    cf_old = {it.name: it for it in build_report(ns, fe.drop(columns=["shadowed_by"]), racks)}["correlated_failures"].table
    assert len(cf_old) == 2
