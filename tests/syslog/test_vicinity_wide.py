"""Vicinity-wide events (models/syslog/dynamic.vicinity_wide, Eq. S3): a vicinity that departs as a whole is one
event, not node alarms; a single node's burst is still a node alarm. Hand-computed vicinities."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from nodewatch.models.syslog.dynamic import multi_window_detect, vicinity_wide
from nodewatch.tasks.syslog.settings import SyslogSettings

SHORT = [(2, 8.0)]  # 10-min window of 5-min bins, >= 8 lines

# one vicinity of 8 nodes, 4 five-minute bins: nodes 0-3 log one line per bin; nodes 4-6 start a burst at bin 2
# (4 then 5 lines), node 7 a stronger one (10 then 20): the rack-wide onset of a shared cause
ONSET = np.array([[1, 1, 1, 1]] * 4 + [[0, 0, 4, 5]] * 3 + [[0, 0, 10, 20]])
# the same vicinity where only node 7 bursts
SINGLE = np.array([[1, 1, 1, 1]] * 7 + [[0, 0, 10, 20]])


def test_rack_wide_onset_is_one_event_not_node_alarms():
    # bin 3, 10-min SG: 2 x4, 9 x3, 30. Exact 2-means: {2,2,2,2,9,9,9} (centre 5, SS 84) | {30} beats
    # {2 x4} | {9,9,9,30} (SS 330.75); rho = sqrt(84/7) = 3.46, node 7 scores 25/3.46 = 7.2 > 3 and 30 >= 8: flagged
    # without Eq. S3. Nodes at the floor (>= 8) at bins 2-3: 4 >= max(3, 0.25 x 8 live): the vicinity is wide at 3.
    # Bin 2 (SG 2 x4, 4 x3, 10): only node 7 has reached the floor (1 < 3): not wide, node 7 flagged (score
    # (10 - 20/7) / max(0.99, 1) = 7.1): the first node of a staggered onset cannot be told apart online.
    off, score, _ = multi_window_detect(ONSET, [np.arange(8)], SHORT, 3.0)
    assert np.argwhere(off).tolist() == [[7, 2], [7, 3]]
    assert score[7, 3] == pytest.approx(25 / np.sqrt(12))
    wide = vicinity_wide(ONSET, [np.arange(8)], SHORT, interval=2)
    assert wide.tolist() == [[False, False, False, True]]
    on, _, _ = multi_window_detect(ONSET, [np.arange(8)], SHORT, 3.0, wide)
    assert np.argwhere(on).tolist() == [[7, 2]]


def test_single_node_burst_stays_a_node_alarm():
    # bin 3: 10-min SG 2 x7 and 30: centre 2, rho 0 -> 1, score 28; one node at the floor: never wide
    wide = vicinity_wide(SINGLE, [np.arange(8)], SHORT, interval=2)
    assert not wide.any()
    flags, score, _ = multi_window_detect(SINGLE, [np.arange(8)], SHORT, 3.0, wide)
    assert np.argwhere(flags).tolist() == [[7, 2], [7, 3]]
    assert score[7, 3] == pytest.approx(28.0)


def test_count_share_interval_and_off():
    # 20 live nodes, 4 of them at the floor: need max(3, 0.25 x 20 = 5) nodes, not wide; 5 at the floor: wide
    quiet = [[1, 1, 1]] * 16
    four = np.array(quiet + [[0, 4, 5]] * 4)
    assert not vicinity_wide(four, [np.arange(20)], SHORT, interval=2).any()
    five = np.array(quiet[:15] + [[0, 4, 5]] * 5)
    assert vicinity_wide(five, [np.arange(20)], SHORT, interval=2)[0].tolist() == [False, False, True]
    # interval: a node that reached the floor one moment earlier still counts (10 min = 2 moments), not 2 earlier
    stag = np.array([[1, 1, 1, 1, 1, 1]] * 5 + [[9, 0, 0, 0, 0, 0], [0, 9, 0, 0, 0, 0], [0, 0, 9, 0, 0, 0]])
    # 10-min SG >= 8: node 5 at bins 0-1, node 6 at 1-2, node 7 at 2-3; within [t-1, t]: 1, 2, 3, 2, 1, 0 nodes
    assert vicinity_wide(stag, [np.arange(8)], SHORT, interval=2)[0].tolist() == [False, False, True, False,
                                                                                   False, False]
    assert not vicinity_wide(stag, [np.arange(8)], SHORT, interval=1).any()
    assert not vicinity_wide(ONSET, [np.arange(8)], SHORT, interval=0).any()


def test_booting_nodes_are_a_known_outage_not_a_vicinity_event():
    # nodes 4-6 boot (a row's maintenance reboots) at bins 2-3: their bursts are explained, they count neither as
    # departing nor as live; node 7 alone at the floor (1 < 3): not wide, node 7 flagged at 2 and 3 as without Eq. S3
    known = np.zeros(ONSET.shape, bool)
    known[4:7, 2:] = True
    wide = vicinity_wide(ONSET, [np.arange(8)], SHORT, interval=2, known=known)
    assert not wide.any()
    assert np.argwhere(multi_window_detect(ONSET, [np.arange(8)], SHORT, 3.0, wide)[0]).tolist() == [[7, 2], [7, 3]]


def test_settings():
    assert SyslogSettings().wide_bins() == 2
    assert SyslogSettings(wide_interval_min=0).wide_bins() == 0
    with pytest.raises(ValueError, match="wide_interval_min"):
        SyslogSettings(wide_interval_min=7)


def test_product_reports_a_vicinity_event_instead_of_node_alarms(tmp_path):
    # 8 nodes log one line every 10 min (02:00-06:00); n01..n04 each add 9 lines at 03:00..03:08 (one a minute).
    # 10-min window ending 03:10: 1 tick + 9 = 10 for the four, 1 for the others: 2-means {1 x4} | {10 x4}, tie ->
    # the low cluster is the majority (centre 1, rho 0 -> 1): scores 9 > 3, 10 >= 8: four node alarms without
    # Eq. S3. With it: 4 nodes at the floor >= max(3, 0.25 x 8): one global event at 03:10 and 03:15 (the interval
    # still holds 03:10), no abnormal row. The 30-min window never reaches 15 (3 ticks + 9 = 12).
    from syslog_cap_helpers import four_node_burst, stage_syslog

    from nodewatch.tasks.core.runs import new_run_id
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.syslog.detect import analyse_day

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    rows = four_node_burst(t0)
    st = Store(str(tmp_path / "store"))
    stage_syslog(st, rows)
    day = t0.date()
    off = analyse_day(st, day, new_run_id("t", {}),
                      SyslogSettings(filtered=False, extra_windows=[(10, 8.0)], wide_interval_min=0))
    assert sorted((r["node"], r["window_end"], r["sg"]) for r in off.abnormal.to_pylist()) == [
        (f"n{i:02d}", t0 + timedelta(hours=3, minutes=10), 10) for i in range(1, 5)]
    assert off.vicinity_events == []
    on = analyse_day(st, day, new_run_id("t", {}), SyslogSettings(filtered=False, extra_windows=[(10, 8.0)]))
    assert on.abnormal.num_rows == 0
    # peak 03:10 in the 10-min window (the 30-min one never reaches its floor): SG 10 x4, 1 x4 -> median 5.5
    assert on.vicinity_events == [{"vicinity": "global", "start": "2026-03-02T03:10:00+00:00",
                                   "end": "2026-03-02T03:15:00+00:00", "nodes": 4,
                                   "peak": "2026-03-02T03:10:00+00:00", "window_min": 10, "live": 8,
                                   "median_sg": 5.5, "max_sg": 10}]
    # stored per run through the commit protocol, with the abnormal rows; a re-run of the day replaces them
    ev = st.read_staged("syslog_vicinity_events", dates=["2026-03-02"]).to_pylist()
    assert [(e["vicinity"], e["kind"], e["start"], e["end"], e["nodes"], e["median_sg"], e["variant"]) for e in ev] == [
        ("global", "global", t0 + timedelta(hours=3, minutes=10), t0 + timedelta(hours=3, minutes=15), 4, 5.5, "raw")]
    assert on.counts["vicinity_events"] == 1
    assert on.shared()["vicinity_events"] == on.vicinity_events


def test_product_reboots_are_no_vicinity_event(tmp_path):
    # as above, but the four bursts are boots (first line "Linux version ..."): a known outage, no event, no alarm
    from syslog_cap_helpers import stage_syslog

    from nodewatch.tasks.core.runs import new_run_id
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.syslog.detect import analyse_day

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    rows = [(t0 + timedelta(hours=2, minutes=10 * j), f"n{i:02d}", "app", f"tick {i}") for i in range(1, 9)
            for j in range(24)]
    rows += [(t0 + timedelta(hours=3, minutes=k), f"n{i:02d}", "kernel",
              "Linux version 6.1.0-13-amd64 (gcc 12.2.0) #1 SMP" if k == 0 else f"EDAC MC0: CE error {k}")
             for i in range(1, 5) for k in range(9)]
    st = Store(str(tmp_path / "store"))
    stage_syslog(st, rows)
    res = analyse_day(st, t0.date(), new_run_id("t", {}), SyslogSettings(filtered=False, extra_windows=[(10, 8.0)]))
    assert res.abnormal.num_rows == 0
    assert res.vicinity_events == []
    assert st.read_staged("syslog_vicinity_events", dates=["2026-03-02"]).num_rows == 0


def test_events_and_alarms_are_published_together_or_not_at_all(tmp_path):
    # run A (default) publishes 1 global event and no alarm (the store of the test above); run B (rule off: 4 alarms,
    # no event) is SIGKILLed just before its syslog-detect commit (the 2nd "syslog" commit of the run, after the
    # templates'): readers still see A's event and A's empty alarms, never B's parts; run C (rule off) replaces A's.
    import os
    import signal
    import time

    from syslog_cap_helpers import four_node_burst, stage_syslog

    from nodewatch.tasks.core.faults import FAULT_ENV
    from nodewatch.tasks.core.runs import new_run_id
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.syslog.detect import analyse_day

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    rows = four_node_burst(t0)
    st = Store(str(tmp_path / "store"))
    stage_syslog(st, rows)
    day, ds = t0.date(), "2026-03-02"
    analyse_day(st, day, new_run_id("a", {}), SyslogSettings(filtered=False))
    off = SyslogSettings(filtered=False, wide_interval_min=0)
    run_b = new_run_id("b", {})
    pid = os.fork()
    if pid == 0:  # the child: run B, killed by the fault point before its detect commit
        try:
            os.environ[FAULT_ENV] = "syslog:before-commit:2"
            analyse_day(st, day, run_b, off)
        finally:
            os._exit(3)  # not reached when the fault point fires
    deadline = time.monotonic() + 120
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError("child run did not finish")
        time.sleep(0.05)
    assert os.WIFSIGNALED(done[1]) and os.WTERMSIG(done[1]) == signal.SIGKILL
    written = [str(p) for p in (tmp_path / "store" / "staged").rglob(f"*{run_b}*")]
    assert any("syslog_vicinity_events" in p for p in written) and any("syslog_abnormal" in p for p in written)
    assert st.read_staged("syslog_vicinity_events", dates=[ds]).num_rows == 1
    assert st.read_staged("syslog_abnormal", dates=[ds]).num_rows == 0
    analyse_day(st, day, new_run_id("c", {}), off)
    assert st.read_staged("syslog_vicinity_events", dates=[ds]).num_rows == 0
    assert st.read_staged("syslog_abnormal", dates=[ds]).num_rows == 4
