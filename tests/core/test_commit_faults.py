"""Fault injection: a real child process is SIGKILLed at each publish step of the staging writer and of the
state writer (``NODEWATCH_FAULT_AT``, :func:`nodewatch.tasks.core.faults.fault_point`). Readers must see no
row of the dead run, and a re-run must give the same staged rows as an uninterrupted run."""

from __future__ import annotations

import signal

import pytest
from commit_helpers import INGEST, STATES, part_runs, run_child, snapshot, syslog_file

from nodewatch.tasks.core.commit_gc import collectable
from nodewatch.tasks.core.runs import effective_status, load_manifest
from nodewatch.tasks.core.store import Store

KILLED = -signal.SIGKILL
pytestmark = pytest.mark.slow  # child processes: ~15 s per case on 2 cores


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted ingest (and states build) of the same input: what every re-run must equal."""
    d = tmp_path_factory.mktemp("ref")
    src = syslog_file(d / "in.log")
    st = Store(str(d / "store"))
    r = run_child(INGEST, [st.url, str(src)])
    assert r.returncode == 0, r.stderr
    r = run_child(STATES, [st.url, "2026-01-01", "2026-01-04"])
    assert r.returncode == 0, r.stderr
    return src, {t: snapshot(st, t) for t in ("syslog", "node_states", "failure_events", "state_carry")}


def _quarantined(st: Store) -> int:
    return sum(st.read_parquet(k).num_rows for k in st.live_keys("quarantine", "syslog"))


@pytest.mark.parametrize("fault", ["stage:after-part:1", "stage:after-part:3", "stage:after-part:4", "stage:before-commit:1"])
def test_kill_before_commit_shows_nothing_and_rerun_equals_uninterrupted(tmp_path, reference, fault):
    src, ref = reference
    st = Store(str(tmp_path / "store"))
    r = run_child(INGEST, [st.url, str(src)], fault=fault)
    assert r.returncode == KILLED, (r.returncode, r.stderr[-2000:])
    # the dead run wrote parts, but readers see none of them
    assert list(st.iter_files("staged", "syslog")), "the child should have written parts before the kill"
    assert Store(st.url).read_staged("syslog") is None
    assert Store(st.url).staged_dates("syslog") == []
    assert st.live_keys("quarantine", "syslog") == []
    dead = st.list_runs()[-1]
    assert effective_status(load_manifest(st, dead)) == "abandoned"
    assert {g.run_id for g in collectable(st)} == {dead}
    # the re-run stages everything (nothing is counted as a duplicate of the dead run's rows)
    r = run_child(INGEST, [st.url, str(src)])
    assert r.returncode == 0, r.stderr
    st2 = Store(st.url)
    assert snapshot(st2, "syslog") == ref["syslog"]
    m = load_manifest(st2, r.stdout.split()[-1])
    c = m.counts["syslog"]
    assert c.duplicates == 0 and c.staged == len(ref["syslog"]) and c.quarantined == 2
    assert _quarantined(st2) == 2  # the dead run's quarantine part is not counted twice
    # the dead run's files were removed by the re-run
    assert not [f for f in st2.iter_files("staged", "syslog") if dead in f]
    assert not [f for f in st2.iter_files("quarantine", "syslog") if dead in f]


def test_kill_after_commit_keeps_the_run_and_rerun_adds_nothing(tmp_path, reference):
    src, ref = reference
    st = Store(str(tmp_path / "store"))
    r = run_child(INGEST, [st.url, str(src)], fault="stage:after-commit:1")
    assert r.returncode == KILLED
    assert snapshot(Store(st.url), "syslog") == ref["syslog"]  # committed: all of it, at once
    # the file was not marked ingested (killed before the marker): the re-run parses it, all rows are duplicates
    r = run_child(INGEST, [st.url, str(src)])
    assert r.returncode == 0, r.stderr
    st2 = Store(st.url)
    assert snapshot(st2, "syslog") == ref["syslog"]
    c = load_manifest(st2, r.stdout.split()[-1]).counts["syslog"]
    assert c.staged == 0 and c.duplicates == len(ref["syslog"])


def _states_store(tmp_path, src) -> Store:
    st = Store(str(tmp_path / "store"))
    assert run_child(INGEST, [st.url, str(src)]).returncode == 0
    r = run_child(STATES, [st.url, "2026-01-01", "2026-01-04"])  # a first build: the re-build replaces it
    assert r.returncode == 0, r.stderr
    return st


@pytest.mark.parametrize("fault", ["states:after-part:1", "states:after-part:4", "states:before-commit:1",
                                   "states:after-commit:1", "states:after-remove:2"])
def test_states_rebuild_killed_at_each_step(tmp_path, reference, fault):
    src, ref = reference
    st = _states_store(tmp_path, src)
    first = {t: part_runs(st, t) for t in ("node_states", "failure_events", "state_carry")}
    r = run_child(STATES, [st.url, "2026-01-01", "2026-01-04"], fault=fault)
    assert r.returncode == KILLED, (r.returncode, r.stderr[-2000:])
    fresh = Store(st.url)
    for t in ("node_states", "failure_events", "state_carry"):
        # one build's rows, never two parts of a day (642 rows twice in the issue)
        assert snapshot(fresh, t) == ref[t], t
        runs = part_runs(fresh, t)
        assert len(runs) == 1
        if "after" not in fault or "part" in fault:
            assert runs == first[t]  # killed before its commit: the previous build is still what readers see
    r = run_child(STATES, [st.url, "2026-01-01", "2026-01-04"])
    assert r.returncode == 0, r.stderr
    again = Store(st.url)
    for t in ("node_states", "failure_events", "state_carry"):
        assert snapshot(again, t) == ref[t]
    # what the killed build wrote is gone (removed by the re-run), only committed parts remain
    tables = ("node_states", "failure_events", "state_carry")
    live = set().union(*(again.live_keys("staged", t) for t in tables))
    on_disk = {f[len(again.root) + 1:] for t in tables for f in again.iter_files("staged", t)}
    assert on_disk == live
