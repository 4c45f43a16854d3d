"""The product detector with the resource-allocation vicinity (``vicinity="job"``): the staged jobs' node lists make
the peer groups (Ghiasvand & Ciorba §II-A2), on a hand-made store."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
from syslog_cap_helpers import stage_syslog

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
