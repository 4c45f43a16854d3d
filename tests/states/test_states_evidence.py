"""``failure_events.evidence`` carries the real evidence of each episode, not a fixed sentence per cause.

Each branch of :func:`nodewatch.tasks.states.events.episode_evidence`: systemd boot (end time + its own duration),
kernel-banner boot, "now responding", a silent node (last line seen or none) still down at the window end.
"""

from __future__ import annotations

import pandas as pd
from states_helpers import syslog_table

from nodewatch.tasks.states.derive import derive_from_tables
from nodewatch.tasks.states.events import failure_events_table

NODES = ["cn01", "cn02", "cn03", "cn04", "cn05"]


def _nr(t: str, node: str) -> tuple[str, str, str, str]:
    return (t, "slurmctl01", "slurmctld", f"error: Nodes {node} not responding, setting DOWN")


def _ok(t: str, node: str) -> tuple[str, str, str, str]:
    return (t, "slurmctl01", "slurmctld", f"Node {node} now responding")


def _sf(t: str, node: str, dur: str) -> tuple[str, str, str, str]:
    return (t, node, "systemd", f"Startup finished in 10s (kernel) + 4min 50s (userspace) = {dur}.")


def test_failure_evidence_has_the_times_of_the_evidence_lines():
    lines = [
        _nr("2026-01-01T02:00Z", "cn01"),
        _sf("2026-01-01T04:00:00.5Z", "cn01", "1h 2min 3.5s"),
        _ok("2026-01-01T04:01Z", "cn01"),
        _nr("2026-01-01T05:00Z", "cn02"),
        ("2026-01-01T06:00Z", "cn02", "kernel", "Linux version 5.14.0 (mockbuild@x) #1 SMP"),
        _ok("2026-01-01T06:20Z", "cn02"),
        ("2026-01-01T01:00Z", "cn03", "sshd", "session opened"),
        _nr("2026-01-01T07:00Z", "cn03"),  # then silent
        _nr("2026-01-01T08:00Z", "cn04"),  # never logged anything
        ("2026-01-01T09:00Z", "cn05", "sshd", "alive"),
    ]
    t0, t1 = pd.Timestamp("2026-01-01", tz="UTC").value, pd.Timestamp("2026-01-02", tz="UTC").value
    fe = failure_events_table(derive_from_tables(syslog_table(lines), None, None, NODES, t0, t1)).to_pandas()
    assert list(fe.node) == ["cn01", "cn02", "cn03", "cn04"]
    assert list(fe.cause) == ["loss+boot", "loss+boot", "loss+silent", "loss+silent"]
    assert list(fe.evidence) == [
        "not responding 2026-01-01T02:00:00Z; boot finished 2026-01-01T04:00:00.500Z after 1h 2min 3.5s (systemd); "
        "now responding 2026-01-01T04:01:00Z",
        "not responding 2026-01-01T05:00:00Z; kernel boot banner 2026-01-01T06:00:00Z, boot taken to end "
        "2026-01-01T06:20:00Z; now responding 2026-01-01T06:20:00Z",
        "not responding 2026-01-01T07:00:00Z; node silent (last line of the node 2026-01-01T01:00:00Z); "
        "no boot or now responding by 2026-01-02T00:00:00Z",
        "not responding 2026-01-01T08:00:00Z; node silent (no line of the node); "
        "no boot or now responding by 2026-01-02T00:00:00Z",
    ]
    assert fe.end[0] == pd.Timestamp("2026-01-01T04:00:00.5Z")  # DOWN+BOOTING ends when the boot finishes
