"""Bad-input corpus of the 10-min window (Eq. S2) and the vicinity-wide rule (Eq. S3, static and job vicinities):
degenerate inputs never crash and behave as documented in docs/syslog.md ("Degenerate inputs")."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from nodewatch.models.syslog.dynamic import (
    allocation_labels,
    failure_time_groups,
    label_detect,
    label_wide,
    line_counts,
    multi_window_detect,
    sliding_sg,
    vicinity_wide,
)
from nodewatch.models.syslog.vicinity import sg_matrix

WIN = [(6, 15.0), (2, 8.0)]  # the default: 30 min >= 15 lines and 10 min >= 8 lines, in 5-min bins


def _run(bins: np.ndarray, groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    wide = vicinity_wide(bins, groups, WIN, 2)
    return multi_window_detect(bins, groups, WIN, 3.0, wide)[0], wide


def test_vicinity_of_one_node_is_never_judged_nor_wide():
    # one node, a 100-line burst: the two-means needs two values, Eq. S3 needs max(3, ...) nodes
    bins = np.array([[1, 1, 100, 100, 1, 1]])
    flags, wide = _run(bins, [np.arange(1)])
    assert not flags.any() and not wide.any()
    lab = np.zeros(bins.shape, np.int64)  # a one-node job
    assert not label_wide(bins, lab, WIN, 2).any()
    assert not label_detect(sliding_sg(bins, 2), lab, 3.0, 8.0)[0].any()


def test_all_nodes_silent_and_all_nodes_bursting_alike():
    silent = np.zeros((8, 12), np.int64)
    flags, wide = _run(silent, [np.arange(8)])
    assert not flags.any() and not wide.any()
    # all 8 nodes burst alike from bin 4: the vicinity departs as a whole (8 >= max(3, 0.25 x 8)), no node alarm
    burst = np.array([[1] * 4 + [20] * 8] * 8)
    flags, wide = _run(burst, [np.arange(8)])
    assert not flags.any()
    assert wide[0].tolist() == [False] * 4 + [True] * 8
    assert label_wide(burst, np.zeros(burst.shape, np.int64), WIN, 2)[0].tolist() == [False] * 4 + [True] * 8


def test_nan_negative_and_fractional_bins_count_as_no_lines():
    # a bin that is not a count (NaN, inf, negative) is 0 lines; it never poisons the rest of the row
    assert line_counts(np.array([[1.0, np.nan, -3.0, np.inf, 2.7]])).tolist() == [[1, 0, 0, 0, 2]]
    assert line_counts(np.array([[4, -1]])).tolist() == [[4, 0]]
    clean = np.array([[1, 1, 1, 1, 1, 1]] * 7 + [[1, 1, 0, 30, 30, 1]], np.float64)
    bad = clean.copy()
    bad[0, 1], bad[1, 2], bad[7, 2] = np.nan, -50.0, -np.inf
    ref = clean.copy()
    ref[0, 1] = ref[1, 2] = 0.0
    for got, want in zip(_run(bad, [np.arange(8)]), _run(ref, [np.arange(8)]), strict=True):
        assert got.tolist() == want.tolist()
    assert _run(bad, [np.arange(8)])[0][7].any()  # node 7's burst is still found
    assert sliding_sg(bad, 2)[0].tolist() == [1, 1, 1, 2, 2, 2]


def test_window_and_interval_longer_than_the_day():
    # 4 moments, a 400-bin window: every moment sees the whole day so far (the cumulative count); interval 400
    bins = np.array([[1, 1, 1, 1]] * 5 + [[0, 9, 9, 9]] * 3)
    assert sliding_sg(bins, 400)[0].tolist() == [1, 2, 3, 4] and sliding_sg(bins, 400)[5].tolist() == [0, 9, 18, 27]
    # a window of 0 bins is one bin
    assert sliding_sg(bins, 0).tolist() == bins.tolist()
    long = [(400, 8.0)]
    wide = vicinity_wide(bins, [np.arange(8)], long, 400)
    assert wide[0].tolist() == [False, True, True, True]  # once 3 nodes reached the floor it stays wide all day
    assert not multi_window_detect(bins, [np.arange(8)], long, 3.0, wide)[0].any()


def test_duplicated_moments_and_lines():
    # two lines of one node at the same nanosecond both count (the ingest drops exact duplicate rows before)
    t0 = 1_700_000_000 * 10**9
    m = sg_matrix(np.array([t0, t0, t0 + 1]), np.array([0, 0, 1]), 2, t0, 300 * 10**9, 2)
    assert m.tolist() == [[2, 0], [1, 0]]
    # duplicated observation moments get the same job; duplicated failure times are one time-of-failure vicinity
    moments = np.array([10, 20, 20, 30])
    lab = allocation_labels(np.array([0, 1]), np.array([5, 6]), np.array([15, 20]), np.array([25, 31]), 2, moments)
    assert lab.tolist() == [[-1, 5, 5, -1], [-1, 6, 6, 6]]
    groups = failure_time_groups(np.array([0, 1, 2]), np.array([100, 100, 10**12]), 600 * 10**9)
    assert [g.tolist() for g in groups] == [[0, 1], [2]]


def test_product_on_a_day_long_window(tmp_path):
    # window_min = 1440, an extra 1440-min window and wide_interval_min = 1440 (the settings' upper bounds): the SG
    # is the day's lines so far; 8 nodes tick every 10 min from 02:00 (24 ticks), n01..n04 add 9 lines at 03:00..03:08.
    # Moment 03:05 (lines before 03:05): n01..n04 7 ticks + 5 = 12 >= 8, the others 7: 4 >= max(3, 0.25 x 8), the
    # vicinity turns wide and, the interval being the whole day, stays wide to the day's last moment (00:00 next
    # day), by when all 8 nodes reached 8 lines: one event, no node alarm
    from syslog_cap_helpers import four_node_burst, stage_syslog

    from nodewatch.tasks.core.runs import new_run_id
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.syslog.detect import analyse_day
    from nodewatch.tasks.syslog.settings import SyslogSettings

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    rows = four_node_burst(t0)
    st = Store(str(tmp_path / "store"))
    stage_syslog(st, rows)
    cfg = SyslogSettings(filtered=False, window_min=1440, extra_windows=[(1440, 8.0)], wide_interval_min=1440)
    res = analyse_day(st, t0.date(), new_run_id("t", {}), cfg)
    assert res.abnormal.num_rows == 0
    assert [(e["start"], e["end"], e["nodes"]) for e in res.vicinity_events] == [
        ("2026-03-02T03:05:00+00:00", "2026-03-03T00:00:00+00:00", 8)]
