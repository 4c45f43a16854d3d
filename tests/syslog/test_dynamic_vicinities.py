"""Sliding SG windows, the resource-allocation (job) and time-of-failure vicinities (models/syslog/dynamic.py) and
late alarms in the Table V scoring, against hand-computed values."""

from __future__ import annotations

import numpy as np

from nodewatch.models.syslog.dynamic import (
    allocation_labels,
    failure_time_groups,
    label_detect,
    sliding_any,
    sliding_sg,
)
from nodewatch.models.syslog.evaluate import table_v_scores
from nodewatch.models.syslog.vicinity import two_means_threshold

# Figure 5 row 1 of the paper: nodes 1106..1114 in the 30 min before a failure of node 1110
ROW = np.array([11, 11, 11, 206, 214, 15, 15, 15, 15], float)


def test_sliding_sg_by_hand():
    b = np.array([[1, 2, 3, 4, 5, 6], [0, 0, 7, 0, 0, 0]])
    assert sliding_sg(b, 3).tolist() == [[1, 3, 6, 9, 12, 15], [0, 0, 7, 7, 7, 0]]
    assert sliding_sg(b, 1).tolist() == b.tolist()
    assert sliding_any(np.array([[0, 1, 0, 0, 0]], bool), 2).tolist() == [[False, True, True, False, False]]


def test_allocation_labels_by_hand():
    moments = np.array([10, 20, 30, 40])
    # node 0 runs job 7 on [15, 35); node 1 job 7 too; node 2 job 9 on [0, 100); later job 8 on node 0 from 35
    lab = allocation_labels(np.array([0, 1, 2, 0]), np.array([7, 7, 9, 8]), np.array([15, 15, 0, 35]),
                            np.array([35, 35, 100, 50]), 4, moments)
    assert lab.tolist() == [[-1, 7, 7, 8], [-1, 7, 7, -1], [9, 9, 9, 9], [-1, -1, -1, -1]]


def test_label_detect_is_two_means_inside_each_job():
    # 12 nodes x 2 moments: at moment 0, nodes 0..8 run job 5 with the SG of Figure 5; nodes 9..11 idle with a
    # huge SG (idle nodes take no part). At moment 1, two jobs of 3 nodes; a group of 2 is never judged.
    sg = np.zeros((12, 2))
    sg[:9, 0] = ROW
    sg[9:, 0] = 5000
    sg[:3, 1] = [10, 10, 90]
    sg[3:6, 1] = [10, 10, 11]
    sg[6:8, 1] = [1, 500]
    lab = np.full((12, 2), -1)
    lab[:9, 0] = 5
    lab[:3, 1], lab[3:6, 1], lab[6:8, 1] = 1, 2, 3
    flags, score = label_detect(sg, lab, factor=3.0, min_sg=15.0)
    want, want_score = two_means_threshold(ROW[None, :], 3.0, 15.0)
    assert flags[:9, 0].tolist() == want[0].tolist() == [False] * 3 + [True, True] + [False] * 4
    assert np.allclose(score[:9, 0], want_score[0])
    assert not flags[9:, 0].any()
    assert flags[:, 1].tolist() == [False, False, True] + [False] * 9
    # the same result whatever the chunking of the padded groups
    f2, s2 = label_detect(sg, lab, factor=3.0, min_sg=15.0, chunk=1)
    assert np.array_equal(f2, flags) and np.allclose(s2, score)


def test_failure_time_groups_chain_within_interval():
    t = np.array([0, 500, 1000, 5000, 100, 20_000]) * 10**9
    gs = failure_time_groups(np.arange(6), t, 600 * 10**9)
    assert [sorted(g.tolist()) for g in gs] == [[0, 1, 2, 4], [3], [5]]
    assert failure_time_groups(np.array([]), np.array([]), 1) == []


def test_table_v_late_alarm_is_true_with_window_length():
    ns = 60 * 10**9  # minutes
    wend = np.arange(1, 13) * 5 * ns  # sliding 30-min windows every 5 min
    flags = np.zeros((1, 12), bool)
    flags[0, 5] = True  # window (0, 30] min; the failure at 12 min lies inside it, before its last 5 min
    s_default = table_v_scores(flags, wend, np.array([0]), np.array([12 * ns]), 120 * ns)
    s_window = table_v_scores(flags, wend, np.array([0]), np.array([12 * ns]), 120 * ns, window_ns=30 * ns)
    assert s_default["precision"] == 0.0  # with the step only, the alarm looks as if it came after the failure
    assert s_window["precision"] == 1.0
    assert s_window["recall@0min"] == 0.0  # but it is no detection before the failure
