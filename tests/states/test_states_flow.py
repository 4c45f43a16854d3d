"""Flows states_build / states_report and the `nodewatch states` CLI on a small synthetic cluster."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from states_helpers import jobs_table, resv_table, syslog_table

NODES = [f"cn{i:03d}" for i in range(16)]
RACKS = ["r1"] * 4 + ["r2"] * 4 + ["r3"] * 4 + ["r4"] * 4


def _stage(store, name, table, day):
    store.write_parquet(table, store.staged_key(name, day, "synthetic"))


def make_cluster(store, seed: int = 3) -> None:
    """16 nodes in 4 racks, 6 days: busy jobs except rack r3 (idle days 1-4), a whole-rack r2 failure,
    a single-node failure, a connection loss, a maintenance reservation and one node stuck in loss."""
    rng = np.random.default_rng(seed)
    _stage(
        store,
        "topology",
        pa.table(
            {
                "node": NODES,
                "rack": RACKS,
                "row": ["1"] * 16,
                "chassis": ["c"] * 16,
                "position": list(range(16)),
                "architecture": ["x86_64"] * 16,
            }
        ),
        "2026-03-01",
    )
    day0 = pd.Timestamp("2026-03-01", tz="UTC")
    jobs = []
    jid = 0
    for n, rack in zip(NODES, RACKS, strict=True):
        t = day0 + pd.Timedelta(minutes=int(rng.integers(0, 120)))
        while t < day0 + pd.Timedelta(days=6):
            dur = pd.Timedelta(minutes=int(rng.integers(60, 400)))
            idle_rack = rack == "r3" and day0 + pd.Timedelta(days=1) <= t < day0 + pd.Timedelta(days=5)
            if not idle_rack:
                jobs.append((str(jid), None, t.isoformat(), (t + dur).isoformat(), [n]))
                jid += 1
            t = t + dur + pd.Timedelta(minutes=int(rng.integers(5, 60)))
    jobs.append(("ghost", None, day0.isoformat(), (day0 + pd.Timedelta(hours=1)).isoformat(), ["nosuchnode"]))
    _stage(store, "jobs", jobs_table(jobs), "2026-03-01")
    lines = [
        # whole rack r2 at the same instant, all reboot (correlated failure)
        ("2026-03-03T04:00:00Z", "ctl", "slurmctld", "error: Nodes cn[004-007] not responding, setting DOWN"),
        *[("2026-03-03T09:58:00Z", f"cn{i:03d}", "kernel", "Linux version 5.14.0-1 (mockbuild@x) #1 SMP") for i in range(4, 8)],
        *[
            ("2026-03-03T10:00:00Z", f"cn{i:03d}", "systemd", "Startup finished in 5s (kernel) + 1min 55s (userspace) = 2min.")
            for i in range(4, 8)
        ],
        *[("2026-03-03T10:00:30Z", "ctl", "slurmctld", f"Node cn{i:03d} now responding") for i in range(4, 8)],
        # single failure of cn001
        ("2026-03-02T12:00:00Z", "ctl", "slurmctld", "error: Nodes cn001 not responding, setting DOWN"),
        ("2026-03-02T13:00:00Z", "cn001", "systemd", "Startup finished in 10s (kernel) + 4min 50s (userspace) = 5min."),
        ("2026-03-02T13:00:05Z", "ctl", "slurmctld", "Node cn001 now responding"),
        # connection loss of cn010 (node keeps logging, no boot)
        ("2026-03-04T01:00:00Z", "ctl", "slurmctld", "error: Nodes cn010 not responding, setting DOWN"),
        ("2026-03-04T01:30:00Z", "cn010", "sshd", "Accepted publickey for root"),
        ("2026-03-04T02:00:00Z", "ctl", "slurmctld", "Node cn010 now responding"),
        # cn015 never comes back and is silent
        ("2026-03-05T06:00:00Z", "ctl", "slurmctld", "error: Nodes cn015 not responding, setting DOWN"),
    ]
    tab = syslog_table(lines)
    days = pc_days(tab)
    for d in sorted(set(days)):
        _stage(store, "syslog", tab.filter(pa.array([x == d for x in days])), d)
    _stage(
        store,
        "reservations",
        resv_table(
            [
                ("maint_fw", "2026-03-05T08:00Z", "2026-03-05T12:00Z", ["cn012", "cn013"], "MAINT"),
                ("climate", "2026-03-02T00:00Z", "2026-03-02T06:00Z", ["cn014"], ""),
            ]
        ),
        "2026-03-01",
    )


def pc_days(tab: pa.Table) -> list[str]:
    return [t.strftime("%Y-%m-%d") for t in tab["time"].to_pylist()]


@pytest.mark.slow
def test_states_flows_end_to_end(store, prefect_harness):
    from prefect.client.orchestration import get_client

    from nodewatch.flows.states import states_build, states_report

    make_cluster(store)
    m = states_build(date(2026, 3, 1), date(2026, 3, 6), store=store.url)
    assert m["status"] == "completed" and m["outputs"]["nodes"] == 16
    assert m["notes"]["evidence_counts"]["job_node_entries_unknown_node"] == 1
    fe = store.read_staged("failure_events").to_pandas().sort_values(["start", "node"])
    assert list(fe.node) == ["cn001", "cn004", "cn005", "cn006", "cn007", "cn015"]
    assert list(fe.cause) == ["loss+boot"] * 5 + ["loss+silent"]
    r = states_report(date(2026, 3, 1), date(2026, 3, 6), store=store.url)
    assert r["status"] == "completed"
    outs = r["outputs"]
    for name in (
        "table2_system",
        "table2_rack",
        "node_percent",
        "transitions",
        "table3_time_between",
        "anomalies",
        "rack_underuse",
        "correlated_failures",
    ):
        with store.fs.open(outs[name]["png"], "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    cf = pd.read_csv(outs["correlated_failures"]["csv"])
    assert len(cf) == 1 and cf.nodes[0] == 4 and cf.racks[0] == "r2 4/4"
    uu = pd.read_csv(outs["rack_underuse"]["csv"])
    assert list(uu.rack) == ["r3"] and uu.first_day[0] == "2026-03-02"
    t2 = pd.read_csv(outs["table2_system"]["csv"]).set_index("state")
    assert t2.pct_time_with_overlay.sum() == pytest.approx(100, abs=0.01)
    assert t2.loc["ADMIN_RESV", "pct_time_without_overlay"] == 0 and t2.loc["ADMIN_RESV", "pct_time_with_overlay"] > 0
    # Table II per rack and per node in both views
    tr = pd.read_csv(outs["table2_rack"]["csv"])
    assert sorted(set(tr.overlay)) == ["with", "without"] and len(tr) == 8
    tn = pd.read_csv(outs["node_percent"]["csv"]).set_index(["node", "overlay"])
    assert len(tn) == 32
    assert tn.loc[("cn012", "without"), "ADMIN_RESV"] == 0 and tn.loc[("cn012", "with"), "ADMIN_RESV"] > 0
    an = pd.read_csv(outs["anomalies"]["csv"])
    assert "cn015" in set(an.node)  # stuck DOWN for a day
    with get_client(sync_client=True) as c:
        keys = {a.key for a in c.read_artifacts()}
    assert {
        "states-table2-system",
        "states-anomalies",
        "states-table2-system-png",
        "states-report",
        "states-node-percent-png",
        "states-table2-rack-png",
    } <= keys
    manifests = [store.read_json("runs", f"{rid}.json") for rid in store.list_runs()]
    assert {x["flow"] for x in manifests} >= {"states_build", "states_report"}


def test_cli_build_show_report(store):
    from typer.testing import CliRunner

    from nodewatch.flows.cli import UserError, app

    make_cluster(store)
    runner = CliRunner()
    res = runner.invoke(
        app, ["--store", store.url, "states", "build", "--start", "2026-03-01", "--end", "2026-03-05", "--no-prefect"]
    )
    assert res.exit_code == 0, res.output
    assert "16 nodes" in res.output
    res = runner.invoke(
        app,
        ["--store", store.url, "states", "show", "--node", "cn001", "--start", "2026-03-02", "--end", "2026-03-02"],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    assert "DOWN" in res.output and "BOOTING" in res.output and "slurmctld loss + boot" in res.output
    assert "2026-03-02 12:00:00" in res.output and "2026-03-02 12:55:00" in res.output
    # datetimes: only the intervals overlapping [start, end), clipped to it
    res = runner.invoke(
        app,
        [
            "--store",
            store.url,
            "states",
            "show",
            "--node",
            "cn001",
            "--start",
            "2026-03-02T11:30",
            "--end",
            "2026-03-02T13:30:00Z",
        ],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    assert "2026-03-02 11:30:00" in res.output and "2026-03-02 13:30:00" in res.output
    assert "DOWN" in res.output and "2026-03-02 00:00:00" not in res.output
    res = runner.invoke(
        app, ["--store", store.url, "states", "show", "--node", "cn001", "--start", "2026-03-02T14:00", "--end", "noon"]
    )
    assert res.exit_code != 0 and "invalid date/time" in str(res.exception)
    res = runner.invoke(
        app,
        ["--store", store.url, "states", "report", "--start", "2026-03-01", "--end", "2026-03-05", "--no-prefect"],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    assert "correlated_failures" in res.output and "report:" in res.output
    res = runner.invoke(
        app, ["--store", store.url, "states", "show", "--node", "nosuch", "--start", "2026-03-02", "--end", "2026-03-02"]
    )
    assert isinstance(res.exception, UserError) and "no states" in str(res.exception)
    res = runner.invoke(
        app, ["--store", store.url, "states", "show", "--node", "../../etc", "--start", "2026-03-02", "--end", "2026-03-02"]
    )
    assert res.exit_code != 0 and "invalid node name" in str(res.exception)
