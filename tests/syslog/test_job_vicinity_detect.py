"""The product detector with the resource-allocation vicinity (``vicinity="job"``): the staged jobs' node lists make
the peer groups (Ghiasvand & Ciorba §II-A2), on a hand-made store."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa
from syslog_cap_helpers import stage_syslog

from nodewatch.models.syslog.dynamic import label_wide
from nodewatch.schemas.jobs import JOBS
from nodewatch.tasks.core.commit import StagedCommit
from nodewatch.tasks.core.runs import new_run_id
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.syslog.detect import analyse_day
from nodewatch.tasks.syslog.settings import SyslogSettings

DAY = date(2026, 3, 2)
T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _stage_jobs(store: Store, rows: list[tuple[str, datetime, datetime, list[str]]]) -> None:
    schema = JOBS.arrow_schema()
    run = new_run_id("test-jobs", {})
    c = StagedCommit(store, run, "jobs")
    cols = {f.name: [None] * len(rows) for f in schema}
    cols["job_id"] = [r[0] for r in rows]
    cols["submit_time"] = [r[1] - timedelta(hours=1) for r in rows]
    cols["start_time"] = [r[1] for r in rows]
    cols["end_time"] = [r[2] for r in rows]
    cols["node_list"] = [r[3] for r in rows]
    cols["state"] = ["COMPLETED"] * len(rows)
    cols["source_format"] = ["sacct"] * len(rows)
    c.write_parquet(pa.table(cols, schema=schema), store.staged_key("jobs", "2026-03-02", run))
    c.commit()


def test_job_vicinity_flags_the_node_that_departs_from_its_job(tmp_path):
    st = Store(str(tmp_path / "store"))
    # job A on n01..n06 from 02:00 to 06:00: every node logs a line every 10 min, n03 bursts 40 lines 03:00-03:20.
    # job B on n07..n12 at the same time logs 60 lines per node each half hour (a busy job, all alike).
    rows = []
    for i in range(1, 13):
        node = f"n{i:02d}"
        step = 10 if i <= 6 else 0.5
        t = T0 + timedelta(hours=2)
        while t < T0 + timedelta(hours=6):
            rows.append((t, node, "app", f"tick {i}"))
            t += timedelta(minutes=step)
    rows += [(T0 + timedelta(hours=3, seconds=30 * k), "n03", "kernel", f"EDAC MC0: CE error {k}") for k in range(40)]
    stage_syslog(st, rows)
    _stage_jobs(st, [("A", T0 + timedelta(hours=2), T0 + timedelta(hours=6), [f"n{i:02d}" for i in range(1, 7)]),
                     ("B", T0 + timedelta(hours=2), T0 + timedelta(hours=6), [f"n{i:02d}" for i in range(7, 13)])])
    cfg = SyslogSettings(vicinity="job", filtered=False)
    res = analyse_day(st, DAY, new_run_id("t", {}), cfg)
    ab = res.abnormal.to_pylist()
    assert ab and {r["node"] for r in ab} == {"n03"}
    assert {r["vicinity"] for r in ab} == {"job A"}
    best = res.shared()["abnormal"]["n03"]
    assert best["peers"] == 6 and best["peer_median_sg"] <= 4 and best["sg"] >= 15
    # the whole cluster as one vicinity: job B's 60 lines per half hour are the majority's spread, n03 hides in it
    res_g = analyse_day(st, DAY, new_run_id("t", {}), SyslogSettings(vicinity="global", filtered=False))
    assert "n03" not in {r["node"] for r in res_g.abnormal.to_pylist()}


def test_label_wide_by_hand():
    # 6 nodes, 3 moments, one window of 1 bin (floor 8), interval 1. Job 0 = nodes 0-3, job 1 = nodes 4-5.
    # t=1: nodes 0-2 at 9 >= 8: 3 >= max(3, 0.25 x 4 live) -> job 0 wide; job 1's two nodes at 9: 2 < 3, never wide
    bins = np.array([[1, 9, 1]] * 3 + [[1, 1, 1]] + [[9, 9, 9]] * 2)
    lab = np.array([[0, 0, 0]] * 4 + [[1, 1, 1]] * 2)
    win = [(1, 8.0)]
    assert label_wide(bins, lab, win, 1).tolist() == [[False, True, False], [False, False, False]]
    # share 1.0: at t=1 job 0 has 4 live nodes, 3 at the floor: not wide; node 3 idle at t=1 (label -1): 3 of 3
    assert not label_wide(bins, lab, win, 1, min_share=1.0).any()
    lab2 = lab.copy()
    lab2[3, 1] = -1
    assert label_wide(bins, lab2, win, 1, min_share=1.0).tolist() == [[False, True, False], [False, False, False]]
    # interval 2: the nodes that reached the floor at t=1 still count at t=2
    assert label_wide(bins, lab, win, 2)[0].tolist() == [False, True, True]
    # booting nodes (known outage) count neither as departing nor as live; interval 0: off; no labels at all
    known = np.zeros(bins.shape, bool)
    known[0, 1] = True
    assert not label_wide(bins, lab, win, 1, known=known).any()
    assert not label_wide(bins, lab, win, 0).any()
    assert label_wide(bins, np.full(bins.shape, -1), win, 1).shape == (0, 3)


def test_job_wide_burst_is_one_job_event_not_node_alarms(tmp_path):
    # job X on n01..n08 02:00-06:00, one line every 10 min; n01..n03 each add 20 lines 03:00..03:19 (one a minute).
    # 10-min window ending 03:10 ([03:00, 03:10)): 1 tick + 10 = 11 >= 8 for the three, 1 for the others: 2-means
    # {1 x5} | {11 x3}: rho 0 -> 1, score 10 > 3: three node alarms without Eq. S3. With it (label_wide): 3 nodes
    # at the floor >= max(3, 0.25 x 8 live) at once: one "job X" event, no abnormal row (the 30-min window reaches
    # 15 only at 03:15: 3 ticks + 15 lines, the same three nodes).
    st = Store(str(tmp_path / "store"))
    rows = [(T0 + timedelta(hours=2, minutes=10 * j), f"n{i:02d}", "app", f"tick {i}") for i in range(1, 9)
            for j in range(24)]
    rows += [(T0 + timedelta(hours=3, minutes=k), f"n{i:02d}", "kernel", f"Lustre: ost{k} timeout")
             for i in range(1, 4) for k in range(20)]
    stage_syslog(st, rows)
    _stage_jobs(st, [("X", T0 + timedelta(hours=2), T0 + timedelta(hours=6), [f"n{i:02d}" for i in range(1, 9)])])
    off = analyse_day(st, DAY, new_run_id("t", {}), SyslogSettings(vicinity="job", filtered=False, wide_interval_min=0))
    assert {r["node"] for r in off.abnormal.to_pylist()} == {"n01", "n02", "n03"}
    assert {r["vicinity"] for r in off.abnormal.to_pylist()} == {"job X"}
    first = min(r["window_end"] for r in off.abnormal.to_pylist())
    assert first == T0 + timedelta(hours=3, minutes=10) and off.vicinity_events == []
    on = analyse_day(st, DAY, new_run_id("t", {}), SyslogSettings(vicinity="job", filtered=False))
    assert on.abnormal.num_rows == 0
    # peak: the 30-min window (judged first) at 03:15 ([02:45, 03:15): 3 ticks + 15 lines = 18 for the three, 3 for
    # the five others): live 8, median 3, max 18
    assert [(e["vicinity"], e["start"], e["nodes"], e["peak"], e["window_min"], e["live"], e["median_sg"], e["max_sg"])
            for e in on.vicinity_events] == [("job X", "2026-03-02T03:10:00+00:00", 3, "2026-03-02T03:15:00+00:00",
                                              30, 8, 3.0, 18)]
    ev = st.read_staged("syslog_vicinity_events", dates=["2026-03-02"]).to_pylist()
    assert [(e["vicinity"], e["kind"], e["nodes"]) for e in ev] == [("job X", "job", 3)]
