"""Several SG windows at the same moments, union of alarms (models/syslog/dynamic.multi_window_detect, Eq. S2),
against a hand-computed vicinity; the settings that feed it."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from nodewatch.models.syslog.dynamic import multi_window_detect
from nodewatch.models.syslog.evaluate import alarm_episodes
from nodewatch.tasks.syslog.settings import SyslogSettings

# one vicinity of 5 nodes, 8 five-minute bins; node 0 starts a burst at bin 4 (4-5 lines per bin), the others log
# about one line per bin
BINS = np.array([
    [0, 0, 0, 0, 4, 5, 4, 4],
    [1, 1, 1, 1, 1, 0, 1, 0],
    [1, 1, 1, 1, 0, 1, 0, 1],
    [1, 1, 1, 1, 1, 0, 1, 0],
    [2, 1, 1, 1, 0, 1, 0, 1],
])
LONG, SHORT = (6, 15.0), (2, 8.0)  # 30 min >= 15 lines; 10 min >= 8 lines


def test_short_window_flags_a_burst_the_long_window_dilutes():
    # bin 5, 30-min SG: 9, 5, 5, 5, 6 -> 2-means {5,5,5,6} | {9}: centre 5.25, rho 0.43 -> 1, score 3.75 > 3 but
    # 9 < 15 lines. 10-min SG: 9, 1, 1, 1, 1 -> centre 1, rho 0 -> 1, score 8 > 3 and 9 >= 8: abnormal.
    # bin 6: 10-min 9 vs 1s again (score 8); 30-min 13 < 15. bin 7: 10-min 8 vs 1s (score 7); 30-min 17 vs 4s
    # (score 13 >= 3, 17 >= 15): both windows flag, the higher score (13, the 30-min window) is kept.
    flags, score, which = multi_window_detect(BINS, [np.arange(5)], [LONG, SHORT], 3.0)
    assert np.flatnonzero(flags[0]).tolist() == [5, 6, 7]
    assert not flags[1:].any()
    assert score[0, 5:].tolist() == pytest.approx([8.0, 8.0, 13.0])
    assert which[0, 5:].tolist() == [1, 1, 0]
    long_only, long_score, _ = multi_window_detect(BINS, [np.arange(5)], [LONG], 3.0)
    assert np.flatnonzero(long_only[0]).tolist() == [7]
    assert long_score[0, 5] == pytest.approx(3.75)


def test_union_is_one_alarm_episode_not_one_per_window():
    flags, _, _ = multi_window_detect(BINS, [np.arange(5)], [LONG, SHORT], 3.0)
    # the 10-min window alone flags bins 5, 6, 7 and the 30-min window bin 7: one episode, 10 min earlier
    assert alarm_episodes(flags) == [(0, 5, 7)]
    assert alarm_episodes(multi_window_detect(BINS, [np.arange(5)], [LONG], 3.0)[0]) == [(0, 7, 7)]


def test_window_settings_are_whole_steps():
    assert SyslogSettings().windows() == [(6, 15.0), (2, 8.0)]
    assert SyslogSettings(extra_windows=[]).windows() == [(6, 15.0)]
    assert SyslogSettings(extra_windows=[(10, 8.0)]).windows() == [(6, 15.0), (2, 8.0)]
    with pytest.raises(ValidationError, match="multiple of step_min"):
        SyslogSettings(extra_windows=[(7, 3.0)])


def test_product_detector_uses_the_extra_window(tmp_path):
    # 8 nodes log one line every 10 min (02:00-06:00); n03 adds 9 lines at 03:00..03:08, one a minute. 30-min
    # window: at most 3 ticks + 9 = 12 < 15 lines, never abnormal. 10-min window ending 03:10: n03 1 tick + 9 = 10
    # against 1 for each peer: centre 1, rho 0 -> 1, score 9 > 3 and 10 >= 8; ending 03:05 / 03:15: 6 and 5 < 8.
    from datetime import UTC, date, datetime, timedelta

    from syslog_cap_helpers import stage_syslog

    from nodewatch.tasks.core.runs import new_run_id
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.syslog.detect import analyse_day

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    rows = [(t0 + timedelta(hours=2, minutes=10 * j), f"n{i:02d}", "app", f"tick {i}") for i in range(1, 9)
            for j in range(24)]
    rows += [(t0 + timedelta(hours=3, minutes=k), "n03", "kernel", f"EDAC MC0: CE error {k}") for k in range(9)]
    st = Store(str(tmp_path / "store"))
    stage_syslog(st, rows)
    day = date(2026, 3, 2)
    assert analyse_day(st, day, new_run_id("t", {}), SyslogSettings(filtered=False, extra_windows=[])).abnormal.num_rows == 0
    res = analyse_day(st, day, new_run_id("t", {}), SyslogSettings(filtered=False, extra_windows=[(10, 8.0)]))
    ab = res.abnormal.to_pylist()
    assert [(r["node"], r["window_end"], r["sg"]) for r in ab] == [("n03", t0 + timedelta(hours=3, minutes=10), 10)]
    assert ab[0]["score"] == pytest.approx(9.0)
    assert res.peer_median == [1.0] and res.peers == [8]
