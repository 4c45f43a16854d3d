"""Clock changes (issue 23): local times read with ``--tz Europe/Berlin`` across both DST transitions.

Fall-back (2025-10-26, 03:00 CEST -> 02:00 CET): the repeated hour is resolved by order, so a day of
1-minute samples written in local wall time stages every sample at its true UTC instant. Spring-forward
(2025-03-30, 02:00 CET -> 03:00 CEST): the skipped 02:xx times are quarantined with the reason.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.localtime import local_to_utc_ns, resolve_local_ns
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources

TZ = "Europe/Berlin"
BERLIN = ZoneInfo(TZ)


def _ingest(tmp_path: Path, source: str, path: Path):
    store = Store(str(tmp_path / "store"))
    res = ingest_files(store, sources()[source], [path], RunRecorder(store, "ingest", {}), tz=TZ, data_docs=False)
    return store, res


def _quarantine_reasons(store: Store, table: str) -> list[str]:
    files = sorted(Path(store.root, "quarantine", table).rglob("*.parquet"))
    return [r for f in files for r in pq.read_table(f).column("reason").to_pylist()]


def _fall_back_minutes() -> list[datetime]:
    """1,440 UTC minutes from local midnight of 2025-10-26 (the day has 25 local hours)."""
    t0 = datetime(2025, 10, 25, 22, 0, tzinfo=UTC)  # 00:00 CEST
    return [t0 + timedelta(minutes=i) for i in range(1440)]


def test_resolver_unit_order_and_gap():
    """Same wall times twice: the values after the step back are the later hour; a skipped time is flagged."""
    wall = ["2025-10-26T02:30", "2025-10-26T02:59", "2025-10-26T02:00", "2025-10-26T02:30", "2025-10-26T03:00"]
    local = pa.array(wall).cast(pa.timestamp("ns")).cast(pa.int64()).to_numpy()
    utc, gap = resolve_local_ns(local, TZ)
    got = [datetime.fromtimestamp(v / 1e9, UTC).strftime("%H:%M") for v in utc]
    assert got == ["00:30", "00:59", "01:00", "01:30", "02:00"] and not gap.any()
    spring = pa.array(["2025-03-30T01:59", "2025-03-30T02:30", "2025-03-30T03:00"]).cast(pa.timestamp("ns"))
    out = local_to_utc_ns(spring.cast(pa.int64()).to_numpy(), TZ)
    assert out[1] == np.iinfo(np.int64).min and out[0] != out[1] and out[2] - out[0] == 60 * 10**9


def test_telemetry_fall_back_keeps_every_sample(tmp_path):
    times = _fall_back_minutes()
    p = tmp_path / "fall.csv"
    lines = ["timestamp,node,metric,value"]
    lines += [f"{t.astimezone(BERLIN).strftime('%Y-%m-%d %H:%M:%S')},n001,load1,{i % 7}" for i, t in enumerate(times)]
    p.write_text("\n".join(lines) + "\n")
    store, res = _ingest(tmp_path, "telemetry", p)
    assert (res.counts.staged, res.counts.quarantined, res.counts.duplicates) == (1440, 0, 0), res.counts
    t = store.read_staged("telemetry")
    staged = sorted(v.replace(tzinfo=UTC) if v.tzinfo is None else v for v in t.column("time").to_pylist())
    assert staged == times
    hour = pc.and_(pc.greater_equal(t.column("time"), pa.scalar(datetime(2025, 10, 26, 1, tzinfo=UTC))),
                   pc.less(t.column("time"), pa.scalar(datetime(2025, 10, 26, 2, tzinfo=UTC))))
    assert pc.sum(hour.cast(pa.int64())).as_py() == 60  # UTC 01:00-02:00 is not empty
    # values follow their sample: the i-th UTC minute has value i % 7
    by_time = dict(zip(t.column("time").to_pylist(), t.column("value").to_pylist(), strict=True))
    assert all(by_time[tm] == i % 7 for i, tm in enumerate(times))


def test_telemetry_spring_forward_quarantines_skipped_times(tmp_path):
    p = tmp_path / "spring.csv"
    wall = ["01:58", "01:59", "02:00", "02:30", "02:59", "03:00", "03:01"]
    p.write_text("timestamp,node,metric,value\n" + "".join(f"2025-03-30 {w}:00,n001,load1,1\n" for w in wall))
    store, res = _ingest(tmp_path, "telemetry", p)
    assert (res.counts.staged, res.counts.quarantined) == (4, 3)
    reasons = _quarantine_reasons(store, "telemetry")
    assert len(reasons) == 3 and all("does not exist in Europe/Berlin" in r for r in reasons), reasons
    got = sorted(v.strftime("%H:%M") for v in store.read_staged("telemetry").column("time").to_pylist())
    assert got == ["00:58", "00:59", "01:00", "01:01"]  # nothing at 00:59:59.999999999


def _syslog(path: Path, stamps: list[str], mtime: datetime) -> None:
    path.write_text("".join(f"<30>{s} n001 sshd[1]: line {i}\n" for i, s in enumerate(stamps)))
    os.utime(path, (mtime.timestamp(), mtime.timestamp()))


def test_syslog_fall_back_repeated_hour_not_duplicates(tmp_path):
    times = [datetime(2025, 10, 26, 0, 0, tzinfo=UTC) + timedelta(minutes=i) for i in range(180)]  # 02:00 CEST..
    stamps = [t.astimezone(BERLIN).strftime("%b %d %H:%M:%S") for t in times]
    assert stamps[0] == stamps[60]  # the repeated hour: 120 lines share 60 wall times
    p = tmp_path / "fall.log"
    _syslog(p, stamps, datetime(2025, 10, 27, tzinfo=UTC))
    store, res = _ingest(tmp_path, "syslog", p)
    assert (res.counts.staged, res.counts.quarantined, res.counts.duplicates) == (180, 0, 0), res.counts
    staged = sorted(store.read_staged("syslog").column("time").to_pylist())
    assert staged == times


def test_syslog_spring_forward_quarantines_skipped_times(tmp_path):
    stamps = ["Mar 30 01:59:59", "Mar 30 02:00:01", "Mar 30 02:30:00", "Mar 30 02:59:59", "Mar 30 03:00:00"]
    p = tmp_path / "spring.log"
    _syslog(p, stamps, datetime(2025, 3, 31, tzinfo=UTC))
    store, res = _ingest(tmp_path, "syslog", p)
    assert (res.counts.staged, res.counts.quarantined) == (2, 3), res.counts
    reasons = _quarantine_reasons(store, "syslog")
    assert len(reasons) == 3 and all("does not exist in Europe/Berlin" in r for r in reasons), reasons
    got = sorted(v.strftime("%H:%M:%S.%f") for v in store.read_staged("syslog").column("time").to_pylist())
    assert got == ["00:59:59.000000", "01:00:00.000000"]
