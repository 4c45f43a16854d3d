"""Syslog outages from staged-like tables and their reconciliation with the state build's failure events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa

from nodewatch.schemas.states import FAILURE_EVENTS
from nodewatch.tasks.states.reconcile import reconcile
from nodewatch.tasks.syslog.outages import mark_external, syslog_outages

T0 = datetime(2026, 3, 1, tzinfo=UTC)
NS = 10**9


def _ns(d: datetime) -> int:
    return int(d.timestamp()) * NS


def _syslog(rows):
    return pa.table({"time": pa.array([r[0] for r in rows], pa.timestamp("ns", tz="UTC")),
                     "node": [r[1] for r in rows], "message": [r[2] for r in rows]})


def _busy(node: str, start: datetime, hours: float, every_min: int = 5):
    return [(start + timedelta(minutes=k), node, f"heartbeat {k}") for k in range(0, int(hours * 60), every_min)]


def test_outages_boot_silent_maintenance_and_completed_job():
    rows = (_busy("cn001", T0, 6) + [(T0 + timedelta(hours=7), "cn001", "Linux version 5.14.0 (mockbuild@x)"),
                                     (T0 + timedelta(hours=7, minutes=2), "cn001", "Startup finished in 5s (kernel) = 1min.")]
            + _busy("cn001", T0 + timedelta(hours=7, minutes=5), 10)
            + _busy("cn002", T0, 4)  # then silent until the end (T0 + 17 h)
            + _busy("cn003", T0, 3) + [(T0 + timedelta(hours=4), "cn003", "[    0.000000] Linux version 5.14")]
            + _busy("cn003", T0 + timedelta(hours=4, minutes=5), 10)
            + _busy("cn004", T0, 2) + [(T0 + timedelta(hours=3), "cn004", "Startup finished in 1s (kernel) = 9s.")]
            + _busy("cn004", T0 + timedelta(hours=3, minutes=1), 12))
    resv = pa.table({"start": pa.array([T0 + timedelta(hours=2)], pa.timestamp("ns", tz="UTC")),
                     "end": pa.array([T0 + timedelta(hours=5)], pa.timestamp("ns", tz="UTC")),
                     "node_list": [["cn003"]], "flags": [["MAINT"]]})
    jobs = pa.table({"state": ["COMPLETED", "FAILED"],
                     "end_time": pa.array([T0 + timedelta(hours=1, minutes=56), T0 + timedelta(hours=5, minutes=56)],
                                          pa.timestamp("ns", tz="UTC")),
                     "node_list": [["cn004"], ["cn001"]]})
    end = _ns(T0 + timedelta(hours=17))
    out = syslog_outages(_syslog(rows), end, silent_s=3 * 3600, jobs=jobs, reservations=resv, tol_s=300,
                         nodes={"cn001", "cn002", "cn003", "cn004"}).to_pylist()
    by = {r["node"]: r for r in out}
    assert set(by) == {"cn001", "cn002", "cn003", "cn004"}
    assert by["cn001"]["kind"] == "boot" and by["cn001"]["regular_failure"]
    assert by["cn001"]["outage"] == T0 + timedelta(hours=5, minutes=55)
    assert by["cn001"]["boot"] == T0 + timedelta(hours=7)
    assert by["cn002"]["kind"] == "silent" and by["cn002"]["boot"] is None and by["cn002"]["regular_failure"]
    assert not by["cn003"]["regular_failure"] and by["cn003"]["reason"] == "inside a MAINT reservation"
    assert not by["cn004"]["regular_failure"] and by["cn004"]["reason"] == "a job completed on the node then"


def test_outages_garbage_inputs():
    assert syslog_outages(None, 0).num_rows == 0
    rows = [(T0, "cn001", None), (T0 + timedelta(seconds=1), "cn001", "\x00binary"), (T0, "cn001", "")]
    assert syslog_outages(_syslog(rows), _ns(T0 + timedelta(days=1))).num_rows == 0  # 3 lines: too few to be silent


def _fe(rows):
    return pa.table({
        "node": [r[0] for r in rows],
        "start": pa.array([r[1] for r in rows], pa.timestamp("ns", tz="UTC")),
        "end": pa.array([r[2] for r in rows], pa.timestamp("ns", tz="UTC")),
        "cause": ["loss+boot"] * len(rows), "evidence": ["not responding ..."] * len(rows),
        "rack": pa.array([None] * len(rows), pa.string()), "shadowed_by": pa.array([None] * len(rows), pa.string()),
    }, schema=FAILURE_EVENTS.arrow_schema())


def _outages(rows):
    return pa.table({
        "node": [r[0] for r in rows],
        "outage": pa.array([r[1] for r in rows], pa.timestamp("ns", tz="UTC")),
        "boot": pa.array([r[2] for r in rows], pa.timestamp("ns", tz="UTC")),
        "kind": [r[3] for r in rows], "regular_failure": [r[4] for r in rows], "reason": ["x"] * len(rows),
    })


def test_reconcile_one_events_table():
    h = timedelta(hours=1)
    fe = _fe([("cn001", T0 + 2 * h, T0 + 4 * h)])
    out = _outages([
        ("cn001", T0 + 1 * h, T0 + 3.9 * h, "boot", True),  # quiet node: last line 1 h before the DOWN -> same failure
        ("cn002", T0 + 5 * h, T0 + 6 * h, "boot", True),  # controller never saw it -> own row
        ("cn003", T0 + 7 * h, None, "silent", True),  # silent to the end -> open row
        ("cn004", T0 + 8 * h, T0 + 9 * h, "boot", False),  # maintenance: nothing
        ("cn005", T0 - 30 * h, T0 - 29 * h, "boot", True),  # before the window: nothing
    ])
    t_end = _ns(T0 + 24 * h)
    got, counts = reconcile(fe, out, _ns(T0), t_end, racks={"cn002": "r1"})
    assert got.schema == FAILURE_EVENTS.arrow_schema()
    rows = {r["node"]: r for r in got.to_pylist()}
    assert got.num_rows == 3 and set(rows) == {"cn001", "cn002", "cn003"}
    assert rows["cn001"]["cause"] == "loss+boot" and "syslog: last line 2026-03-01T01:00:00Z" in rows["cn001"]["evidence"]
    assert rows["cn002"]["cause"] == "syslog+boot" and rows["cn002"]["rack"] == "r1"
    assert rows["cn002"]["end"] == T0 + 6 * h
    assert rows["cn003"]["cause"] == "syslog+silent" and rows["cn003"]["end"] == T0 + 24 * h
    assert counts == {"syslog_outages": 5, "syslog_failures_matched": 1, "syslog_failures_added": 2}
    # idempotent evidence: reconciling again adds nothing twice
    again, _ = reconcile(got, out, _ns(T0), t_end)
    assert again.num_rows == 3 and again.to_pylist()[0]["evidence"].count("syslog:") == 1


def test_external_events_rack_wide_chain():
    """Hand-made: rack 0 (4 nodes) loses 3 nodes 100 s apart (a chain, 3 >= max(3, 0.25*4)): external; rack 1 has
    3 outages 400 s apart (gap > 300 s: no chain) and a lone one: regular."""
    from nodewatch.models.syslog.outages import external_events

    node = np.array([0, 1, 2, 4, 5, 6, 7])
    t = np.array([1000, 1100, 1200, 1000, 1400, 1800, 90000]) * NS
    grp = np.array([0, 0, 0, 1, 1, 1, 1])
    ext = external_events(node, t, grp, np.array([4, 4]), gap_ns=300 * NS)
    assert ext.tolist() == [True, True, True, False, False, False, False]
    # same node twice in one chain counts once; min_share of a big rack raises the bar
    ext2 = external_events(np.array([0, 0, 1, 2]), np.array([0, 10, 20, 30]) * NS, np.zeros(4, int), np.array([48]),
                           gap_ns=300 * NS)
    assert not ext2.any()


def test_rack_wide_outages_are_external_not_regular():
    nodes = [f"cn{i:03d}" for i in range(1, 9)]
    racks = {n: ("r0" if i < 4 else "r1") for i, n in enumerate(nodes)}
    rows = []
    for i, n in enumerate(nodes):
        rows += _busy(n, T0, 2)
        if i < 3 or i == 5:  # r0: three nodes reboot together (power); r1: one node alone
            rows += [(T0 + timedelta(hours=2, minutes=10 + i), n, "Linux version 5.14.0 (mockbuild@x)")]
        rows += _busy(n, T0 + timedelta(hours=2, minutes=20), 6)
    out = syslog_outages(_syslog(rows), _ns(T0 + timedelta(hours=9)), racks=racks).to_pylist()
    by = {r["node"]: r for r in out}
    assert set(by) == {"cn001", "cn002", "cn003", "cn006"}
    assert by["cn006"]["regular_failure"]
    for n in ("cn001", "cn002", "cn003"):
        assert not by[n]["regular_failure"] and by[n]["reason"] == "external: rack-wide event (rack r0)"
    plain = syslog_outages(_syslog(rows), _ns(T0 + timedelta(hours=9))).to_pylist()
    assert all(r["regular_failure"] for r in plain)  # without racks: the paper's rule alone
    fe = pa.table({"node": ["cn001", "cn002", "cn003", "cn006"],
                   "start": pa.array([T0 + timedelta(hours=2, minutes=m) for m in (1, 2, 3, 3)],
                                     pa.timestamp("ns", tz="UTC")),
                   "end": pa.array([T0 + timedelta(hours=3)] * 4, pa.timestamp("ns", tz="UTC")),
                   "cause": ["loss+boot"] * 4, "evidence": ["down"] * 4, "rack": ["r0", "r0", "r0", "r1"],
                   "shadowed_by": pa.array([None] * 4, pa.string())}, schema=FAILURE_EVENTS.arrow_schema())
    marked, k = mark_external(fe, syslog_outages(_syslog(rows), _ns(T0 + timedelta(hours=9)), racks=racks))
    assert k == 3 and marked["evidence"].to_pylist() == ["down; external: rack-wide event (rack r0)"] * 3 + ["down"]
