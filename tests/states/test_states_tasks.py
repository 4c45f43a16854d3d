"""tasks/states/ (build, classify, derive, events, cube): classifying staged rows, bad input, staged outputs, the cube."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from states_helpers import jobs_table, resv_table, syslog_table

from nodewatch.models.states.timeline import State
from nodewatch.tasks.states.build import build_states
from nodewatch.tasks.states.classify import classify_syslog, parse_systemd_duration, reservation_state
from nodewatch.tasks.states.common import StatesError
from nodewatch.tasks.states.derive import derive_from_tables


def test_parse_systemd_duration():
    assert parse_systemd_duration("11min 17.957s") == (11 * 60 + 17.957) * 1e9
    assert parse_systemd_duration("1h 2min 3s") == 3723 * 10**9
    assert parse_systemd_duration("850ms") == 850_000_000
    assert parse_systemd_duration("garbage") is None


def test_reservation_classes():
    assert reservation_state("maint_0301", "MAINT,IGNORE_JOBS") == State.ADMIN_RESV
    assert reservation_state("root_1", "") == State.ADMIN_RESV
    assert reservation_state("emergency_power", "MAINT") == State.UNSCHEDULED_RESV
    assert reservation_state("climate_team", "") == State.RESERVED_IDLE
    assert reservation_state("fw_update", ["MAINT", "IGNORE_JOBS"]) == State.ADMIN_RESV
    assert reservation_state("climate_team", ["IGNORE_JOBS"]) == State.RESERVED_IDLE
    assert reservation_state(None, None) == State.RESERVED_IDLE


def test_classify_hostlist_unknown_and_garbage():
    nodes = pa.array(["cn01", "cn02", "cn03"])
    t = syslog_table(
        [
            ("2026-01-01T01:00Z", "ctl", "slurmctld", "error: Nodes cn[01-02,09] not responding, setting DOWN"),
            ("2026-01-01T01:00Z", "ctl", "slurmctld", "error: Nodes cn[01-02,09] not responding, setting DOWN"),  # duplicate
            ("2026-01-01T02:00Z", "ctl", "slurmctld", "Node cn01 now responding"),
            ("2026-01-01T02:00Z", "ctl", "slurmctld", "error: Nodes cn[0x-] not responding, setting DOWN"),  # bad hostlist
            ("2026-01-01T01:50Z", "cn01", "systemd", "Startup finished in 2.5s (kernel) + 1min 3s (userspace) = 1min 5.5s."),
            ("2026-01-01T01:50Z", "cn02", "systemd", "Startup finished in nonsense"),
            ("2026-01-01T01:49Z", "cn03", "kernel", "Linux version 5.14.0 (mockbuild@x) #1 SMP"),
            ("2026-01-01T03:00Z", "../../etc", "kernel", "Linux version 5.14.0"),
            # the paper's record carries slurmctld's own timestamp; kernel lines may carry dmesg time
            ("2026-01-01T04:00Z", "ctl", "slurmctld", "[2026-01-01T03:59:59.803] error: Nodes cn03 not responding, setting DOWN"),
            ("2026-01-01T04:10Z", "cn03", "kernel", "[    0.000000] Command line: BOOT_IMAGE=/vmlinuz root=/dev/sda2"),
            # near misses that must not count
            ("2026-01-01T05:00Z", "cn03", "kernel", "nfs: server fs01 not responding, still trying"),
            ("2026-01-01T05:00Z", "ctl", "slurmctld", "_job_complete: JobId=12 Node cn03 now responding? no"),
            ("2026-01-01T05:00Z", "cn03", "systemd", "Started Startup finished in 5s. report"),
        ]
    )
    c = classify_syslog(t, nodes)
    kinds = sorted(zip(c.events.node.tolist(), c.events.kind.tolist(), c.events.duration.tolist(), strict=True))
    assert kinds == [
        (0, 1, 0),
        (0, 1, 0),
        (0, 2, 0),
        (0, 3, 65_500_000_000),
        (1, 1, 0),
        (1, 1, 0),
        (2, 1, 0),
        (2, 4, 0),
        (2, 4, 0),
    ]
    assert c.counts["events_unknown_node"] == 3  # cn09 twice, ../../etc once
    assert c.counts["not_responding_unparsed_hostlist"] == 1
    assert c.counts["startup_finished_unparsed"] == 1
    assert c.counts["events_duplicate"] == 2
    assert c.counts["events_out_of_order"] == 1  # cn01's Startup finished (01:50) comes after its 02:00 line
    assert c.last_seen[2] == pd.Timestamp("2026-01-01T05:00Z").value


def test_jobs_unknown_nodes_steps_and_inverted_times_counted():
    nodes = ["cn01", "cn02"]
    jobs = jobs_table(
        [
            ("1", None, "2026-01-01T01:00Z", "2026-01-01T03:00Z", ["cn01", "ghost7"]),
            ("1", "batch", "2026-01-01T01:00Z", "2026-01-01T03:00Z", ["cn01"]),
            ("2", None, None, None, ["cn02"]),
            ("3", None, "2026-01-01T05:00Z", "2026-01-01T04:00Z", ["cn02"]),
            ("4", None, "2026-01-01T20:00Z", None, ["cn02"]),  # still running
        ]
    )
    t0, t1 = pd.Timestamp("2026-01-01", tz="UTC").value, pd.Timestamp("2026-01-02", tz="UTC").value
    b = derive_from_tables(None, jobs, None, nodes, t0, t1)
    assert b.counts["job_node_entries_unknown_node"] == 1
    assert b.counts["job_steps_ignored"] == 1
    assert b.counts["jobs_never_started"] == 1
    assert b.counts["jobs_end_before_start"] == 1
    tl = b.timeline
    st = [(int(n), State(int(s)).name) for n, s in zip(tl.node, tl.state, strict=True)]
    assert st == [(0, "IDLE"), (0, "JOB_RUNNING"), (0, "IDLE"), (1, "IDLE"), (1, "JOB_RUNNING")]


def test_invalid_node_set_is_one_line_error():
    with pytest.raises(StatesError, match="invalid node name"):
        derive_from_tables(None, None, None, ["../../etc"], 0, 86400 * 10**9)


def _stage(store, table_name, table, day="2026-01-01"):
    store.write_parquet(table, store.staged_key(table_name, day, "test-run"))


def test_build_states_end_to_end(store):
    from nodewatch import open_cube

    nodes = ["cn01", "cn02", "cn03"]
    _stage(
        store,
        "topology",
        pa.table(
            {
                "node": nodes,
                "rack": ["r1", "r1", "r2"],
                "row": ["1"] * 3,
                "chassis": ["c"] * 3,
                "position": [1, 2, 3],
                "architecture": ["x86_64"] * 3,
            }
        ),
    )
    _stage(
        store,
        "syslog",
        syslog_table(
            [
                ("2026-01-01T22:00Z", "ctl", "slurmctld", "error: Nodes cn[01-02] not responding, setting DOWN"),
                ("2026-01-01T22:05Z", "cn02", "sshd", "still alive"),
            ]
        ),
    )
    _stage(
        store,
        "syslog",
        syslog_table(
            [
                ("2026-01-02T02:00Z", "cn01", "systemd", "Startup finished in 1min (kernel) + 9min (userspace) = 10min."),
                ("2026-01-02T02:01Z", "ctl", "slurmctld", "Node cn01 now responding"),
                ("2026-01-02T03:00Z", "ctl", "slurmctld", "Node cn02 now responding"),
            ]
        ),
        day="2026-01-02",
    )
    _stage(store, "jobs", jobs_table([("77", None, "2026-01-01T10:00Z", "2026-01-02T12:00Z", ["cn03", "nodeX"])]))
    _stage(
        store,
        "reservations",
        resv_table(
            [
                ("maint_a", "2026-01-02T20:00Z", "2026-01-03T02:00Z", ["cn01"], "MAINT"),
                ("maint_b", "2026-01-02T21:00Z", "2026-01-02T22:00Z", ["cn01"], "MAINT"),
            ]
        ),
    )
    out = build_states(store, date(2026, 1, 1), date(2026, 1, 3), run_id="r1")
    b = out["build"]
    assert b.counts["job_node_entries_unknown_node"] == 1
    assert b.counts["overlapping_reservations"] == 1 and b.counts["overlapping_jobs"] == 0
    ns = store.read_staged("node_states").to_pandas()
    on = ns[ns.overlay]
    # per node and day, intervals tile the day
    for (node, day), g in on.groupby([on.node, on.start.dt.date]):
        g = g.sort_values("start")
        assert (g.end - g.start).sum() == pd.Timedelta("1D"), (node, day)
    cn01 = on[on.node == "cn01"].sort_values("start")
    # DOWN ends with the boot; the 1-minute wait for "now responding" is within the grace and dropped
    assert list(cn01.state) == ["IDLE", "DOWN", "DOWN", "BOOTING", "IDLE", "ADMIN_RESV"]
    fe = store.read_staged("failure_events").to_pandas()
    assert list(fe.node) == ["cn01"] and list(fe.cause) == ["loss+boot"] and list(fe.rack) == ["r1"]
    assert fe.start[0] == pd.Timestamp("2026-01-01T22:00Z") and fe.end[0] == pd.Timestamp("2026-01-02T02:00Z")
    ds = open_cube("state", store)
    assert ds["state"].dtype == np.int8 and ds["state"].shape == (3, 2880)
    legend = dict(zip(ds["state"].attrs["flag_values"], ds["state"].attrs["flag_meanings"].split(), strict=True))
    assert legend[0] == "NOT_BUILT" and legend[1] == "DOWN" and legend[8] == "UNSCHEDULED_RESV"
    assert ds["state"].encoding["chunks"] == (3, 1440)
    v = int(ds["state"].sel(node="cn02", time="2026-01-02T01:00").values)
    assert v == State.CONNECTION_LOSS
    # re-running a day replaces its partitions and rewrites the cube region identically
    before = ds["state"].values.copy()
    build_states(store, date(2026, 1, 2), date(2026, 1, 3), run_id="r2")
    ns2 = store.read_staged("node_states").to_pandas()
    assert len(store.staged_files("node_states", ["2026-01-02"])) == 1
    assert len(ns2) == len(ns)
    after = open_cube("state", store)["state"].values
    assert np.array_equal(before, after)
    # extending the cube appends days
    build_states(store, date(2026, 1, 3), date(2026, 1, 4), run_id="r3")
    ds3 = open_cube("state", store)
    assert ds3.sizes["time"] == 3 * 1440 and int(ds3["state"].min()) >= 1


def test_build_states_without_inputs_is_clear_error(store):
    with pytest.raises(StatesError, match="no nodes"):
        build_states(store, date(2026, 1, 1), date(2026, 1, 2), run_id="r1")
    with pytest.raises(StatesError, match="after"):
        build_states(store, date(2026, 1, 2), date(2026, 1, 1), run_id="r1")


def test_range_before_the_state_cube_publishes_nothing(store):
    """Issue 23: a build over a range that starts before the state cube used to rewrite node_states and
    failure_events of every day, then fail at the cube write; now it fails with one line and no staged
    output of that run becomes visible."""
    nodes = ["cn01", "cn02"]
    topo = {"node": nodes, "rack": ["r1", "r1"], "row": ["1"] * 2, "chassis": ["c"] * 2, "position": [1, 2],
            "architecture": ["x86_64"] * 2}
    _stage(store, "topology", pa.table(topo))
    _stage(store, "syslog", syslog_table([("2026-01-01T22:00Z", "ctl", "slurmctld",
                                           "error: Nodes cn01 not responding, setting DOWN")]))
    _stage(store, "syslog", syslog_table([("2026-01-02T02:01Z", "ctl", "slurmctld", "Node cn01 now responding")]),
           day="2026-01-02")
    build_states(store, date(2026, 1, 2), date(2026, 1, 3), run_id="r1")
    before = {t: store.read_staged(t).to_pandas() for t in ("node_states", "failure_events") if store.staged_dates(t)}
    files_before = {t: store.staged_files(t) for t in ("node_states", "failure_events", "state_carry")}
    with pytest.raises(StatesError, match="earlier days need --rebuild"):
        build_states(store, date(2026, 1, 1), date(2026, 1, 3), run_id="r2")
    assert {t: store.staged_files(t) for t in files_before} == files_before
    for t, df in before.items():
        pd.testing.assert_frame_equal(store.read_staged(t).to_pandas(), df)
    assert store.staged_dates("node_states") == ["2026-01-02"]
