"""Vicinity detector, filtering, evaluation and outage math (models/syslog) against hand-computed and paper values."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.syslog.evaluate import alarm_episodes, table_v_scores
from nodewatch.models.syslog.filtering import filtered_templates
from nodewatch.models.syslog.outages import outages, regular_failures
from nodewatch.models.syslog.vicinity import sg_matrix, two_means_1d, two_means_threshold

# Figure 5 of the paper (SG of nodes 1106..1114 in the 30 min before a failure of node 1110; 0 = non-responsive)
FIG5 = np.array([
    [11, 11, 11, 206, 214, 15, 15, 15, 15],
    [17, 16, 20, 306, 1681, 21, 21, 21, 21],
    [7, 7, 7, 7, 7, 7, 7, 7, 7],
    [10, 10, 10, 0, 341, 212, 11, 11, 11],
    [12, 6, 6, 1581, 1593, 9, 9, 9, 9],
])


def test_two_means_1d_by_hand():
    lo, hi, split, wcss = two_means_1d(np.array([[1.0, 2.0, 3.0, 10.0, 11.0]]))
    assert (lo[0], hi[0], split[0]) == (2.0, 10.5, 3.0)
    assert wcss[0] == pytest.approx(2.0 + 0.5)
    # all equal: one cluster; invalid entries take no part
    lo, hi, split, wcss = two_means_1d(np.array([[5.0, 5.0, 5.0, 99.0]]), np.array([[True, True, True, False]]))
    assert split[0] == np.inf and wcss[0] == 0 and lo[0] == hi[0] == 5.0


def test_two_means_1d_matches_sklearn_kmeans():
    from sklearn.cluster import KMeans

    g = np.random.default_rng(0)
    x = np.concatenate([g.poisson(8, (40, 40)), g.poisson(60, (40, 3))], axis=1).astype(float)
    x[:15] = g.lognormal(2, 1, (15, 43)).round()
    lo, hi, split, wcss = two_means_1d(x)
    same = 0
    for i in range(len(x)):
        km = KMeans(n_clusters=2, n_init=3, random_state=0).fit(x[i][:, None])
        assert wcss[i] <= km.inertia_ + 1e-6  # exact optimum: never worse than Lloyd's
        lab = km.labels_ == km.labels_[np.argmin(x[i])]
        same += np.array_equal(lab, x[i] <= split[i])
    assert same >= 0.85 * len(x)  # the rest: Lloyd's iterations stop in a local optimum (higher inertia)


def test_figure5_rows():
    ab, score = two_means_threshold(FIG5.astype(float), factor=3.0, min_sg=15.0)
    assert ab[0].tolist() == [False] * 3 + [True, True] + [False] * 4  # 1109 and 1110 depart from the rack
    assert ab[1, 4]  # 1681: the 306 of 1109 joins the majority cluster here (2-means puts 1681 alone)
    assert not ab[2].any()  # everybody equal: nobody abnormal
    assert ab[3, 4] and ab[3, 5] and not ab[3, 3]  # the silent node (0) is never abnormal here
    assert ab[4, 3] and ab[4, 4] and ab[4].sum() == 2
    assert score[0, 4] > score[0, 0]


def test_min_sg_and_small_vicinities():
    quiet = np.array([[1.0, 1, 1, 1, 4]])
    assert not two_means_threshold(quiet, factor=1.0, min_sg=15.0)[0].any()
    assert two_means_threshold(quiet, factor=1.0, min_sg=0.0)[0][0, 4]
    assert not two_means_threshold(np.array([[1.0, 100.0]]), factor=1.0, min_sg=0.0)[0].any()


def test_sg_matrix_bins_and_drops_out_of_range():
    w = 1800 * 10**9
    t = np.array([0, 1, w - 1, w, 3 * w, -5], np.int64)
    n = np.array([0, 0, 1, 1, 1, 0])
    m = sg_matrix(t, n, 2, 0, w, 2)
    assert m.tolist() == [[2, 0], [1, 1]]


def test_filtering_frequent_common_periodic():
    s = 10**9
    tid, node, tm = [], [], []
    for nd in range(10):  # template 1: every node, every 60 s exactly (cron-like) -> common / periodic
        for k in range(30):
            tid.append(1)
            node.append(nd)
            tm.append(k * 60 * s + nd)
    g = np.random.default_rng(1)
    for _k in range(10):  # template 2: one node, Poisson arrivals -> kept
        tid.append(2)
        node.append(3)
        tm.append(int(g.uniform(0, 1800)) * s)
    for k in range(6):  # template 3: one node, clockwork -> periodic
        tid.append(3)
        node.append(4)
        tm.append(k * 300 * s)
    f = filtered_templates(np.array(tid), np.array(node), np.array(tm), share=0.95, max_cv=0.5, node_share=0.5)
    assert f == {1: "common", 3: "periodic"}
    f = filtered_templates(np.array(tid), np.array(node), np.array(tm), share=0.5, node_share=1.0)
    assert f[1] == "frequent" and 2 not in f
    assert filtered_templates(np.array([-1] * 10), np.arange(10), np.arange(10)) == {}


def test_alarm_episodes_and_table_v_scores():
    flags = np.zeros((3, 10), bool)
    flags[0, 2:4] = True  # episode before node 0's failure at window 5
    flags[1, 7] = True  # false alarm
    flags[2, 0] = True  # false alarm
    assert alarm_episodes(flags) == [(0, 2, 3), (1, 7, 7), (2, 0, 0)]
    w = 60 * 10**9
    wend = (np.arange(10) + 1) * w
    s = table_v_scores(flags, wend, np.array([0, 2]), np.array([5 * w + 10, 9 * w]), horizon_ns=3 * w,
                       leads_ns=(0, 2 * w))
    assert s["precision"] == pytest.approx(1 / 3)
    assert s["recall@0min"] == 0.5 and s["recall@2min"] == 0.5  # node 0 flagged at window end 3w: lead 2w+10ns
    assert s["median_lead_min"] == pytest.approx((2 * w + 10) / 60e9)
    # at the failure moment: node 0 fails at 5w+10 -> last window ending before is index 4 (end 5w): not flagged;
    # node 2 fails at 9w -> window index 8 (end 9w): not flagged; flag both moments -> 1.0
    assert s["recall@moment"] == 0.0
    flags[0, 4] = flags[2, 8] = True
    s2 = table_v_scores(flags, wend, np.array([0, 2]), np.array([5 * w + 10, 9 * w]), horizon_ns=3 * w)
    assert s2["recall@moment"] == 1.0


def test_outage_rule_and_regular_failures():
    s = 10**9
    # node 0: lines, then a boot sequence (2 lines) -> outage at its last line before the boot
    # node 1: busy until t=100 s then silent until the end -> silent outage
    # node 2: boots as its first line (data starts there) -> no outage
    node = np.array([0, 0, 0, 0, 0] + [1] * 12 + [2, 2])
    t = np.array([10, 20, 30, 500, 501] + list(range(0, 120, 10)) + [5, 6]) * s
    boot = np.array([0, 0, 0, 1, 1] + [0] * 12 + [1, 0], bool)
    n, ot, bt, kind = outages(node, t, boot, end_ns=20_000 * s, silent_ns=3600 * s)
    assert n.tolist() == [0, 1] and ot.tolist() == [30 * s, 110 * s] and bt.tolist() == [500 * s, -1]
    assert kind.tolist() == [0, 1]
    ok = regular_failures(n, ot, maint=[(1, 0, 200 * s)], completed=[(0, 40 * s)], tol_ns=5 * s)
    assert ok.tolist() == [True, False]
    assert regular_failures(n, ot, maint=[], completed=[(0, 40 * s)], tol_ns=20 * s).tolist() == [False, True]
