"""Day-by-day builds (as the nightly flow runs them) give the same states and failure events as one build.

Failures crossing midnight stay one event with their real start/end (no fake episodes at 00:00, no
fake correlated rack failure); a node that stays silent longer than the syslog lookback stays DOWN.
"""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
from states_helpers import syslog_table

from nodewatch.models.states.analytics import correlated_failures
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.states.build import build_states

NODES = ["cn01", "cn02", "cn03", "cn04", "cn05"]
D1 = date(2026, 1, 1)


def _topology(store: Store) -> None:
    t = pa.table(
        {
            "node": NODES,
            "rack": ["r1"] * len(NODES),
            "row": ["1"] * len(NODES),
            "chassis": ["c"] * len(NODES),
            "position": list(range(len(NODES))),
            "architecture": ["x86_64"] * len(NODES),
        }
    )
    store.write_parquet(t, store.staged_key("topology", "2026-01-01", "t"))


def _stage_syslog(store: Store, lines: list[tuple[str, str, str, str]]) -> None:
    """Stage lines into the date partition of their time (as ingest does)."""
    tab = syslog_table(sorted(lines))
    days = [t.strftime("%Y-%m-%d") for t in tab["time"].to_pylist()]
    for d in sorted(set(days)):
        store.write_parquet(tab.filter(pa.array([x == d for x in days])), store.staged_key("syslog", d, "s"))


def _sf(t: str, node: str, dur: str = "5min") -> tuple[str, str, str, str]:
    return (t, node, "systemd", f"Startup finished in 10s (kernel) + 4min 50s (userspace) = {dur}.")


def _nr(t: str, node: str) -> tuple[str, str, str, str]:
    return (t, "slurmctl01", "slurmctld", f"error: Nodes {node} not responding, setting DOWN")


def _ok(t: str, node: str) -> tuple[str, str, str, str]:
    return (t, "slurmctl01", "slurmctld", f"Node {node} now responding")


def _alive(days: int) -> list[tuple[str, str, str, str]]:
    """cn05 logs every few hours, so every day has syslog."""
    d0 = pd.Timestamp("2026-01-01T00:30Z")
    return [((d0 + pd.Timedelta(hours=h)).isoformat(), "cn05", "sshd", "session opened") for h in range(0, 24 * days, 6)]


def _day_by_day(store: Store, days: int) -> None:
    for i in range(days):
        d = D1 + timedelta(days=i)
        build_states(store, d, d + timedelta(days=1), run_id=f"day{i}")


def _tables(store: Store) -> tuple[pd.DataFrame, pd.DataFrame]:
    ns = store.read_staged("node_states").to_pandas().sort_values(["overlay", "node", "start"]).reset_index(drop=True)
    fe = store.read_staged("failure_events").to_pandas().sort_values(["start", "node"]).reset_index(drop=True)
    return ns, fe


def _two_stores(tmp_path, lines: list[tuple[str, str, str, str]], days: int) -> tuple[Store, Store]:
    daily, whole = Store(str(tmp_path / "daily")), Store(str(tmp_path / "whole"))
    for st in (daily, whole):
        _topology(st)
        _stage_syslog(st, lines)
    _day_by_day(daily, days)
    build_states(whole, D1, D1 + timedelta(days=days), run_id="whole")
    return daily, whole


def test_failures_crossing_midnight_are_one_event_each(tmp_path):
    lines = [
        # three independent failures of one rack, hours apart, each crossing midnight of day 1
        _nr("2026-01-01T19:00Z", "cn01"),
        _sf("2026-01-02T01:00Z", "cn01"),
        _ok("2026-01-02T01:01Z", "cn01"),
        _nr("2026-01-01T21:30Z", "cn02"),
        _sf("2026-01-02T04:00Z", "cn02"),
        _ok("2026-01-02T04:01Z", "cn02"),
        _nr("2026-01-01T23:10Z", "cn03"),
        _sf("2026-01-02T07:00Z", "cn03", "11min 17.957s"),
        _ok("2026-01-02T07:02Z", "cn03"),
        # one crossing midnight of day 2, one inside day 3
        _nr("2026-01-02T22:00Z", "cn04"),
        ("2026-01-03T01:50Z", "cn04", "kernel", "Linux version 5.14.0 (mockbuild@x) #1 SMP"),
        _sf("2026-01-03T02:00Z", "cn04"),
        _ok("2026-01-03T02:00:30Z", "cn04"),
        _nr("2026-01-03T10:00Z", "cn04"),
        _sf("2026-01-03T11:00Z", "cn04"),
        _ok("2026-01-03T11:00:05Z", "cn04"),
        *_alive(3),
    ]
    daily, whole = _two_stores(tmp_path, lines, 3)
    ns_d, fe_d = _tables(daily)
    ns_w, fe_w = _tables(whole)
    ts = pd.Timestamp
    assert list(fe_d.node) == ["cn01", "cn02", "cn03", "cn04", "cn04"]
    assert list(fe_d.start) == [
        ts(x) for x in ("2026-01-01T19:00Z", "2026-01-01T21:30Z", "2026-01-01T23:10Z", "2026-01-02T22:00Z", "2026-01-03T10:00Z")
    ]
    assert list(fe_d.end) == [
        ts(x) for x in ("2026-01-02T01:00Z", "2026-01-02T04:00Z", "2026-01-02T07:00Z", "2026-01-03T02:00Z", "2026-01-03T11:00Z")
    ]
    assert (fe_d.start.dt.hour != 0).all()  # no episode cut at midnight
    assert set(fe_d.cause) == {"loss+boot"}
    # real evidence: times of "not responding", boot end + duration, "now responding"
    assert fe_d.evidence[2] == (
        "not responding 2026-01-01T23:10:00Z; boot finished 2026-01-02T07:00:00Z after 11min 17.957s (systemd); "
        "now responding 2026-01-02T07:02:00Z"
    )
    # each failure in the partition of the day it started
    assert len(daily.read_staged("failure_events", ["2026-01-01"])) == 3
    # no correlated rack failure: the three starts are hours apart
    starts = fe_d.start.astype("int64").to_numpy()
    ev = correlated_failures(
        np.arange(len(fe_d)), starts, fe_d.end.astype("int64").to_numpy(), np.zeros(len(fe_d), int), 300 * 10**9, 3
    )
    assert ev == []
    # the same as one 3-day build
    pd.testing.assert_frame_equal(fe_d, fe_w)
    pd.testing.assert_frame_equal(ns_d, ns_w)


def test_node_silent_for_days_stays_down_day_by_day(tmp_path):
    lines = [
        _nr("2026-01-01T03:00Z", "cn01"),  # then silent for good
        _nr("2026-01-01T05:00Z", "cn02"),
        ("2026-01-02T08:00Z", "cn02", "sshd", "still alive"),  # logs once after the loss: CONNECTION_LOSS
        *_alive(5),
    ]
    daily, whole = _two_stores(tmp_path, lines, 5)
    ns_d, fe_d = _tables(daily)
    ns_w, fe_w = _tables(whole)
    on = ns_d[ns_d.overlay & (ns_d.node == "cn01")]
    assert list(on.state) == ["IDLE"] + ["DOWN"] * 5
    assert on.start.iloc[1] == pd.Timestamp("2026-01-01T03:00Z") and on.end.iloc[-1] == pd.Timestamp("2026-01-06T00:00Z")
    assert set(on.evidence[1:]) == {"slurmctld loss, node silent, no recovery"}
    cn02 = ns_d[ns_d.overlay & (ns_d.node == "cn02")]
    assert list(cn02.state) == ["IDLE"] + ["CONNECTION_LOSS"] * 5
    # one failure event with its real start, open until the end of the last built day
    assert list(fe_d.node) == ["cn01"] and list(fe_d.cause) == ["loss+silent"]
    assert fe_d.start[0] == pd.Timestamp("2026-01-01T03:00Z") and fe_d.end[0] == pd.Timestamp("2026-01-06T00:00Z")
    assert "not responding 2026-01-01T03:00:00Z" in fe_d.evidence[0] and "by 2026-01-06T00:00:00Z" in fe_d.evidence[0]
    pd.testing.assert_frame_equal(ns_d, ns_w)
    pd.testing.assert_frame_equal(fe_d, fe_w)
    carry = daily.read_staged("state_carry", ["2026-01-05"]).to_pandas().sort_values("node")
    assert list(carry.node) == ["cn01", "cn02"] and list(carry.state) == ["DOWN", "CONNECTION_LOSS"]


def test_open_episode_is_updated_when_it_resolves(tmp_path):
    """An episode open at a day's end is updated in its start partition by later builds (never duplicated)."""
    store = Store(str(tmp_path / "s"))
    _topology(store)
    _stage_syslog(store, [_nr("2026-01-01T10:00Z", "cn01"), *_alive(4)])
    build_states(store, D1, D1 + timedelta(days=1), run_id="a")
    build_states(store, D1 + timedelta(days=1), D1 + timedelta(days=2), run_id="b")
    fe = store.read_staged("failure_events").to_pandas()
    assert len(fe) == 1 and fe.cause[0] == "loss+silent"
    assert fe.start[0] == pd.Timestamp("2026-01-01T10:00Z") and fe.end[0] == pd.Timestamp("2026-01-03T00:00Z")
    # the node reboots on day 4; the day-3 build (look-ahead day 4, loss seeded from the carry) resolves the episode
    _stage_syslog(store, [_sf("2026-01-04T06:00Z", "cn01"), _ok("2026-01-04T06:00:10Z", "cn01")])
    out = build_states(store, D1 + timedelta(days=2), D1 + timedelta(days=3), run_id="c")
    assert out["build"].counts["losses_carried_in"] == 1 and out["failure_events_updated"] == 1
    fe = store.read_staged("failure_events").to_pandas()
    assert len(fe) == 1 and fe.cause[0] == "loss+boot"
    assert fe.start[0] == pd.Timestamp("2026-01-01T10:00Z") and fe.end[0] == pd.Timestamp("2026-01-04T06:00Z")
    assert len(store.staged_files("failure_events", ["2026-01-01"])) == 1


def test_overlay_does_not_cut_or_invent_failure_events():
    """A failure that began before an emergency reservation keeps its real end; one beginning inside it is shadowed."""
    from states_helpers import resv_table

    from nodewatch.tasks.states.derive import derive_from_tables
    from nodewatch.tasks.states.events import failure_events_table

    syslog = syslog_table(
        [
            _nr("2026-01-01T06:00Z", "cn01"),  # before the overlay, boots after it
            _sf("2026-01-01T14:00Z", "cn01"),
            _ok("2026-01-01T14:01Z", "cn01"),
            _nr("2026-01-01T09:00Z", "cn02"),  # inside the overlay, boots after it
            _sf("2026-01-01T13:00Z", "cn02"),
            _ok("2026-01-01T13:01Z", "cn02"),
        ]
    )
    resv = resv_table([("emergency_r1", "2026-01-01T08:00Z", "2026-01-01T12:00Z", ["cn01", "cn02"], "MAINT")])
    t0, t1 = pd.Timestamp("2026-01-01", tz="UTC").value, pd.Timestamp("2026-01-02", tz="UTC").value
    b = derive_from_tables(syslog, None, resv, NODES, t0, t1)
    fe = failure_events_table(b).to_pandas()
    # every episode is published; the one beginning inside the overlay names it (kept "under the shadowed overlay")
    assert list(fe.node) == ["cn01", "cn02"]
    assert fe.start[0] == pd.Timestamp("2026-01-01T06:00Z") and fe.end[0] == pd.Timestamp("2026-01-01T14:00Z")
    assert pd.isna(fe.shadowed_by[0]) and fe.shadowed_by[1] == "UNSCHEDULED_RESV"
    assert fe.start[1] == pd.Timestamp("2026-01-01T09:00Z") and fe.end[1] == pd.Timestamp("2026-01-01T13:00Z")
    assert b.counts["failure_episodes_shadowed_by_overlay"] == 1
    assert b.counts["failure_episodes_shadowed_by_unscheduled_resv"] == 1


def test_shadowed_by_names_the_overlay_in_effect():
    """ADMIN_RESV shadows a failure beginning inside it; inside both overlays UNSCHEDULED_RESV (higher priority) wins."""
    from states_helpers import resv_table

    from nodewatch.tasks.states.derive import derive_from_tables
    from nodewatch.tasks.states.events import failure_events_table

    syslog = syslog_table(
        [
            _nr("2026-01-01T09:00Z", "cn01"),  # inside the maintenance window only
            _sf("2026-01-01T09:30Z", "cn01"),
            _nr("2026-01-01T11:00Z", "cn02"),  # inside maintenance and the emergency window
            _sf("2026-01-01T11:30Z", "cn02"),
            _nr("2026-01-01T15:00Z", "cn03"),  # outside both
            _sf("2026-01-01T15:30Z", "cn03"),
        ]
    )
    resv = resv_table(
        [
            ("root_maint", "2026-01-01T08:00Z", "2026-01-01T12:00Z", ["cn01", "cn02", "cn03"], "MAINT"),
            ("emergency_r1", "2026-01-01T10:30Z", "2026-01-01T13:00Z", ["cn02"], ""),
        ]
    )
    t0, t1 = pd.Timestamp("2026-01-01", tz="UTC").value, pd.Timestamp("2026-01-02", tz="UTC").value
    b = derive_from_tables(syslog, None, resv, NODES, t0, t1)
    fe = failure_events_table(b).to_pandas()
    assert list(fe.node) == ["cn01", "cn02", "cn03"]
    assert list(fe.shadowed_by.fillna("-")) == ["ADMIN_RESV", "UNSCHEDULED_RESV", "-"]
    assert b.counts["failure_episodes_shadowed_by_overlay"] == 2
    assert b.counts["failure_episodes_shadowed_by_admin_resv"] == 1
    assert b.counts["failure_episodes_shadowed_by_unscheduled_resv"] == 1


def test_update_of_partition_staged_before_shadowed_by(tmp_path):
    """An open episode whose partition was written before ``shadowed_by`` existed is updated; other rows read null."""
    store = Store(str(tmp_path / "s"))
    _topology(store)
    _stage_syslog(
        store, [_nr("2026-01-01T02:00Z", "cn02"), _sf("2026-01-01T02:30Z", "cn02"), _nr("2026-01-01T10:00Z", "cn01"), *_alive(4)]
    )
    build_states(store, D1, D1 + timedelta(days=1), run_id="a")
    # rewrite the day-1 partition as an older build would have staged it (no shadowed_by column)
    (old_file,) = store.staged_files("failure_events", ["2026-01-01"])
    old = store.read_staged("failure_events", ["2026-01-01"])
    store.fs.rm(old_file)
    store.write_parquet(old.drop_columns(["shadowed_by"]), store.staged_key("failure_events", "2026-01-01", "a"))
    _stage_syslog(store, [_sf("2026-01-02T06:00Z", "cn01"), _ok("2026-01-02T06:00:10Z", "cn01")])
    out = build_states(store, D1 + timedelta(days=1), D1 + timedelta(days=2), run_id="b")
    assert out["failure_events_updated"] == 1
    fe = store.read_staged("failure_events", ["2026-01-01"]).to_pandas().sort_values("node").reset_index(drop=True)
    assert list(fe.node) == ["cn01", "cn02"] and fe.shadowed_by.isna().all()
    assert fe.end[0] == pd.Timestamp("2026-01-02T06:00Z")
