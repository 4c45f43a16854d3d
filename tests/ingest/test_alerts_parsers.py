"""Nagios alerts, alerts CSV and tickets CSV parsers, and the RUAD label join."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from nodewatch.models.anomaly.labels import labels_from_intervals
from nodewatch.schemas.alerts import alert_id
from nodewatch.tasks.ingest.alerts import (
    parse_alerts_csv,
    parse_nagios,
    parse_tickets_csv,
    parse_time,
    ruad_label_intervals,
    sniff_alerts_csv,
    sniff_nagios,
    sniff_tickets_csv,
)
from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import InputError
from nodewatch.tasks.ingest.registry import sources

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
NS = 1_000_000_000


def run(parser, data: bytes, **kw) -> tuple[pa.Table, pa.Table]:
    kw.setdefault("name", "in.log")
    res = list(parser(io.BytesIO(data), ParseContext(**kw)))
    return pa.concat_tables([r.rows for r in res]), pa.concat_tables([r.rejects for r in res])


NAGIOS = f"""[{T0}] SERVICE ALERT: cn001.cluster.org;CPU Load;CRITICAL;HARD;3;CRITICAL - load 91.2; very high
[{T0 + 60}] HOST ALERT: CN002;DOWN;SOFT;1;PING CRITICAL - Packet loss = 100%
[{T0 + 61}] SERVICE NOTIFICATION: admin;cn001;CPU Load;CRITICAL;notify-by-email;load
[{T0 + 62}] CURRENT SERVICE STATE: cn001;CPU Load;CRITICAL;HARD;3;x
[{T0 + 63}] SERVICE ALERT: cn003;Disk;BROKEN;HARD;1;x
[{T0 + 64}] SERVICE ALERT: cn003;Disk;OK;HARD
[{T0 + 65}] HOST ALERT: ../../etc;DOWN;HARD;1;x
[{T0 + 66}] SERVICE ALERT: cn004;Disk;OK;MAYBE;1;x
[{T0 + 67}] SERVICE ALERT: cn004;Disk;OK;HARD;one;x
Nagios 4.4.6 starting... (PID=1234)
"""


def test_nagios_alert_lines_by_hand():
    rows, rej = run(parse_nagios, NAGIOS.encode())
    d = rows.to_pylist()
    assert [r["source_offset"] for r in d] == [1, 2]
    assert d[0] == {
        "time": datetime.fromtimestamp(T0, UTC), "node": "cn001", "service": "CPU Load", "state": "CRITICAL",
        "state_type": "HARD", "attempt": 3, "output": "CRITICAL - load 91.2; very high",
        "alert_id": f"cn001/CPU Load@{T0}", "source_format": "nagios", "source_offset": 1,
    }
    assert (d[1]["node"], d[1]["service"], d[1]["state"], d[1]["state_type"]) == ("cn002", "HOST", "DOWN", "SOFT")
    reasons = dict(zip(rej.column("source_offset").to_pylist(), rej.column("reason").to_pylist(), strict=True))
    assert reasons == {
        3: "parse: not an alert line (Nagios 'SERVICE NOTIFICATION')",
        4: "parse: not an alert line (Nagios 'CURRENT SERVICE STATE')",
        5: "parse: unknown service state 'BROKEN'",
        6: "parse: SERVICE ALERT needs 6 ';'-separated fields, found 4",
        7: "parse: invalid host name '../../etc'",
        8: "parse: unknown state type 'MAYBE'",
        9: "parse: attempt 'one' is not a number",
        10: "parse: not a Nagios log line (expected '[epoch] TYPE: fields')",
    }
    assert rows.num_rows + rej.num_rows == 10


def test_nagios_wrong_format_is_a_file_error():
    with pytest.raises(InputError, match=r"^in.log:1: not a Nagios log line .*wrong --format"):
        run(parse_nagios, b"Oct 11 22:14:15 cn1 su: x\nOct 11 22:14:16 cn1 su: y\n")


def test_alerts_csv_and_time_forms():
    data = (
        "time,node,service,state,state_type,attempt,output,alert_id\n"
        f"{T0},cn001,GPU,critical,hard,2,\"temp 95C, throttling\",\n"
        "2026-01-01T01:00:00+01:00,cn001,GPU,OK,HARD,1,ok,NAG-77\n"
        "2026-01-01 00:10:00,cn001,GPU,OK,HARD,1,naive = ctx.tz,\n"
        f"{T0},cn001,GPU,OK,HARD,1\n"
    ).encode()
    rows, rej = run(parse_alerts_csv, data, tz="Europe/Zurich")
    d = rows.to_pylist()
    assert d[0]["output"] == "temp 95C, throttling" and d[0]["state"] == "CRITICAL" and d[0]["alert_id"] == f"cn001/GPU@{T0}"
    assert d[1]["time"] == datetime.fromtimestamp(T0, UTC) and d[1]["alert_id"] == "NAG-77"
    assert d[2]["time"] == datetime(2025, 12, 31, 23, 10, tzinfo=UTC)
    assert rej.column("reason").to_pylist() == ["parse: 6 fields, header has 8"]
    assert rej.column("source_offset").to_pylist() == [5]


def test_alerts_csv_wrong_columns_is_a_file_error():
    with pytest.raises(InputError, match=r"^x.csv:1: header lacks column\(s\) attempt, state_type"):
        run(parse_alerts_csv, b"time,node,service,state,output\n1,cn1,a,OK,x\n", name="x.csv")


@pytest.mark.parametrize(
    "value, expected",
    [("1767225600", T0 * NS), ("1767225600.5", T0 * NS + NS // 2), ("2026-01-01T00:00:00Z", T0 * NS),
     ("2026-01-01T02:00:00+02:00", T0 * NS), ("", "empty"), ("yesterday", "bad time 'yesterday'")],
)
def test_parse_time(value, expected):
    assert parse_time(value, "UTC") == expected


TICKETS = (
    "ticket_id,node,service,alert_time,false_positive,opened,closed,summary\n"
    f"T-1,cn001,CPU Load,{T0},yes,{T0 + 600},{T0 + 3600},\"fan curve; not a real\nproblem\"\n"
    f"T-2,cn002,,{T0 + 60},False,{T0 + 700},,real outage\n"
    f"T-3,cn003,Disk,{T0},perhaps,{T0 + 700},,x\n"
    f"T-4,../../etc,Disk,{T0},no,{T0 + 700},,x\n"
    f"T-5,cn003,Disk,,no,{T0 + 700},,no alert ref\n"
)


def test_tickets_csv_by_hand():
    rows, rej = run(parse_tickets_csv, TICKETS.encode())
    d = rows.to_pylist()
    assert [r["ticket_id"] for r in d] == ["T-1", "T-2"]
    assert d[0]["false_positive"] is True and d[0]["alert_id"] == f"cn001/CPU Load@{T0}"
    assert d[0]["summary"] == "fan curve; not a real\nproblem" and d[0]["source_offset"] == 2  # quoted newline kept
    assert d[0]["closed"] == datetime.fromtimestamp(T0 + 3600, UTC)
    assert d[1]["service"] == "HOST" and d[1]["alert_id"] == f"cn002/HOST@{T0 + 60}" and d[1]["closed"] is None
    reasons = dict(zip(rej.column("source_offset").to_pylist(), rej.column("reason").to_pylist(), strict=True))
    assert reasons == {
        5: "parse: false_positive 'perhaps' is not a boolean",
        6: "parse: invalid host name '../../etc'",
        7: "parse: neither alert_id nor alert_time given",
    }


def test_tickets_wrong_column_set():
    with pytest.raises(InputError, match=r"^t.csv:1: header lacks column\(s\) alert_id or alert_time"):
        run(parse_tickets_csv, b"ticket_id,node,false_positive,opened\nT1,cn1,no,1\n", name="t.csv")


def test_tickets_join_alerts_into_ruad_labels():
    alerts_rows, _ = run(parse_nagios, (
        f"[{T0 - 120}] SERVICE ALERT: cn001;CPU Load;CRITICAL;SOFT;1;x\n"  # opens the interval
        f"[{T0}] SERVICE ALERT: cn001;CPU Load;CRITICAL;HARD;3;x\n"        # ticketed false positive (the HARD one)
        f"[{T0 + 900}] SERVICE ALERT: cn001;CPU Load;OK;HARD;1;x\n"
        f"[{T0 + 60}] HOST ALERT: cn002;DOWN;HARD;1;x\n"                   # real outage, ticket says not FP
        f"[{T0 + 1800}] HOST ALERT: cn002;DOWN;HARD;2;x\n"                 # still down: same interval
        f"[{T0 + 3600}] HOST ALERT: cn002;UP;HARD;1;x\n"
        f"[{T0 + 1200}] SERVICE ALERT: cn003;Disk;WARNING;HARD;1;x\n"      # not critical
        f"[{T0 + 2700}] SERVICE ALERT: cn003;Disk;CRITICAL;HARD;1;x\n"     # open until the end
    ).encode())
    tickets_rows, _ = run(parse_tickets_csv, TICKETS.encode())
    until = datetime.fromtimestamp(T0 + 4 * 3600, UTC)
    iv = ruad_label_intervals(alerts_rows, tickets_rows, until)
    assert iv["node"].tolist() == ["cn002", "cn003"]
    assert iv["start"].astype(np.int64).tolist() == [(T0 + 60) * NS, (T0 + 2700) * NS]
    assert iv["end"].astype(np.int64).tolist() == [(T0 + 3600) * NS, (T0 + 4 * 3600) * NS]
    assert iv["alert_id"].tolist() == [f"cn002/HOST@{T0 + 60}", f"cn003/Disk@{T0 + 2700}"]
    # and into the 15-min label grid of nodewatch.models.anomaly.labels
    times = np.arange(np.datetime64(T0, "s"), np.datetime64(T0 + 4 * 3600, "s"), np.timedelta64(15, "m")).astype("datetime64[ns]")
    idx = np.array([{"cn001": 0, "cn002": 1, "cn003": 2}[n] for n in iv["node"]])
    lab = labels_from_intervals(idx, iv["start"], iv["end"], 3, times, np.timedelta64(15, "m"))
    assert lab.sum(axis=1).tolist() == [0, 4, 13]  # cn001 FP removed; cn002 00:01-01:00; cn003 00:45-04:00


def test_alert_id_rejects_naive_time():
    with pytest.raises(ValueError):
        alert_id("cn1", "HOST", datetime(2026, 1, 1))
    assert alert_id("cn1", "HOST", datetime(2026, 1, 1, tzinfo=UTC)) == f"cn1/HOST@{T0}"


def test_sniffers_and_registry():
    assert sniff_nagios(NAGIOS.encode()) == pytest.approx(0.9)
    assert sniff_nagios(TICKETS.encode()) == 0.0
    assert sniff_tickets_csv(TICKETS.encode()) == 1.0 and sniff_alerts_csv(TICKETS.encode()) == 0.0
    assert sniff_alerts_csv(b"time,node,service,state,state_type,attempt,output\n") == 1.0
    src = sources()
    assert [f.name for f in src["alerts"].formats] == ["nagios", "alerts_csv"]
    assert src["tickets"].table.name == "tickets" and src["alerts"].table.unique_key == ("alert_id",)


@pytest.mark.slow
def test_pipeline_stages_alerts_and_tickets_with_accounting(store, tmp_path):
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.ingest.pipeline import ingest_files

    nag = tmp_path / "nagios.log"
    nag.write_text(NAGIOS + f"[{T0}] SERVICE ALERT: cn001.cluster.org;CPU Load;CRITICAL;HARD;3;CRITICAL - load 91.2; very high\n"
                   f"[{T0 + 5}] SERVICE ALERT: cn777;Disk;OK;HARD;1;unknown node\n")
    tck = tmp_path / "tickets.csv"
    tck.write_text(TICKETS + f"T-1,cn001,CPU Load,{T0},yes,{T0 + 600},{T0 + 3600},duplicate ticket id\n")
    known = {"cn001", "cn002", "cn003", "cn004"}
    rec = RunRecorder(store, "test", {})
    ra = ingest_files(store, sources()["alerts"], [nag], rec, known_nodes=known, data_docs=False)
    rt = ingest_files(store, sources()["tickets"], [tck], rec, known_nodes=known, data_docs=False)
    rec.finish()
    # 12 lines: 2 alerts staged, 1 duplicate (same alert_id), 1 unknown node + 8 parse rejects quarantined
    assert (ra.counts.rows_in, ra.counts.staged, ra.counts.duplicates, ra.counts.quarantined) == (12, 2, 1, 9)
    # 6 records: T-1, T-2 staged, 3 rejects, and the repeated T-1 with a different summary is a
    # conflicting duplicate (same key, other values): quarantined, not dropped
    assert (rt.counts.rows_in, rt.counts.staged, rt.counts.duplicates, rt.counts.quarantined) == (6, 2, 0, 4)
    q = pa.concat_tables([store.read_parquet(p.split(store.root + "/", 1)[1]) for p in ra.quarantine_files])
    reasons = dict(zip(q.column("source_offset").to_pylist(), q.column("reason").to_pylist(), strict=True))
    assert reasons[12].startswith("expect_column_values_to_be_in_set(node")
    assert reasons[7] == "parse: invalid host name '../../etc'"
    alerts = store.read_staged("alerts")
    tickets = store.read_staged("tickets")
    iv = ruad_label_intervals(alerts, tickets, datetime.fromtimestamp(T0 + 3600, UTC))
    # cn001's CRITICAL is a ticketed false positive; cn002's DOWN (ticket says real) stays
    assert iv["node"].tolist() == ["cn002"] and iv["alert_id"].tolist() == [f"cn002/HOST@{T0 + 60}"]


def test_reads_what_the_simulator_writes():
    """Header and value forms of tasks/simulate/records.py (Jira-like tickets, Nagios log with rotation lines)."""
    from nodewatch.tasks.simulate.records import TICKET_COLUMNS

    tickets = ",".join(TICKET_COLUMNS) + "\n" + (
        "HPC-00000107,cn0107,check_temp,2026-01-01T00:02:00Z,true,2026-01-01T01:00:00Z,2026-01-01T02:00:00Z,"
        "False Positive,\"cn0107 check_temp CRITICAL (check timeout, not reproducible)\"\n"  # csv.writer quotes it
    )
    rows, rej = run(parse_tickets_csv, tickets.encode())
    assert rej.num_rows == 0 and rows.column("alert_id").to_pylist() == [f"cn0107/check_temp@{T0 + 120}"]
    nag = (f"[{T0}] LOG ROTATION: DAILY\n[{T0}] LOG VERSION: 2.0\n"
           f"[{T0 + 120}] SERVICE ALERT: cn0107;check_temp;CRITICAL;HARD;3;CRITICAL - CPU temperature 95 C (threshold 90 C)\n")
    rows, rej = run(parse_nagios, nag.encode())
    assert rows.column("alert_id").to_pylist() == [f"cn0107/check_temp@{T0 + 120}"]
    assert rej.column("reason").to_pylist() == ["parse: not an alert line (Nagios 'LOG ROTATION')",
                                                "parse: not an alert line (Nagios 'LOG VERSION')"]
