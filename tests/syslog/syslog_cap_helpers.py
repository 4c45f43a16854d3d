"""Shared helpers of the syslog tests: stage syslog rows straight through the commit protocol."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from nodewatch.schemas.syslog import SYSLOG
from nodewatch.tasks.core.commit import StagedCommit
from nodewatch.tasks.core.runs import new_run_id
from nodewatch.tasks.core.store import Store


def stage_syslog(store: Store, rows: list[tuple[datetime, str, str, str]]) -> None:
    """Stage ``(time, node, app, message)`` rows as ``staged/syslog`` parts (one per date), one commit."""
    schema = SYSLOG.arrow_schema()
    run = new_run_id("test-stage", {})
    c = StagedCommit(store, run, "syslog")
    by_day: dict[str, list] = {}
    for i, (t, node, app, msg) in enumerate(rows):
        by_day.setdefault(t.astimezone(UTC).date().isoformat(), []).append((t, node, app, msg, i + 1))
    for day, rs in by_day.items():
        cols = {f.name: [None] * len(rs) for f in schema}
        cols["time"] = [r[0] for r in rs]
        cols["node"] = [r[1] for r in rs]
        cols["app"] = [r[2] for r in rs]
        cols["message"] = [r[3] for r in rs]
        cols["source_offset"] = [r[4] for r in rs]
        cols["source_format"] = ["rfc3164"] * len(rs)
        c.write_parquet(pa.table(cols, schema=schema), store.staged_key("syslog", day, run))
    c.commit()


def four_node_burst(t0: datetime) -> list[tuple[datetime, str, str, str]]:
    """8 nodes n01..n08 log one line every 10 min from 02:00 (24 ticks); n01..n04 add 9 lines at 03:00..03:08
    (one a minute): the vicinity-wide tests' day."""
    rows = [(t0 + timedelta(hours=2, minutes=10 * j), f"n{i:02d}", "app", f"tick {i}") for i in range(1, 9)
            for j in range(24)]
    rows += [(t0 + timedelta(hours=3, minutes=k), f"n{i:02d}", "kernel", f"EDAC MC0: CE error {k}")
             for i in range(1, 5) for k in range(9)]
    return rows
