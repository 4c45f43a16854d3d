"""The simulator's syslog precursor knob (SimConfig.syslog_precursor_lines_per_min): a failing node's SG departs
from its rack's before the failure, and 0 turns it off."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.schedule import build_schedule
from nodewatch.tasks.simulate.syslog import render_rack


def _lines_in_precursors(rate: float) -> tuple[int, int, float]:
    sim = SimConfig(n_nodes=48, start=date(2026, 1, 1), seed=5, syslog_precursor_lines_per_min=rate, precursor_share=1.0,
                    node_mtbf_days=5.0)
    s = build_schedule(sim, 2)
    nodes = s.topo.nodes_of_rack(0)
    ev = s.node_events(nodes)
    inside = total = 0
    span = 0.0
    local = {s.topo.names[int(n)]: i for i, n in enumerate(nodes)}
    wins = [[(a, z) for a, z, _ in e.precursors] for e in ev]
    for day in (0, 1):
        for line in render_rack(s, ev, nodes, day, "5424"):
            p = line.split(" ", 3)
            hh, mm, ss = p[1][11:19].split(":")
            t = day * 86400 + int(hh) * 3600 + int(mm) * 60 + float(ss)
            total += 1
            inside += any(a <= t < z for a, z in wins[local[p[2]]])
    for e in ev:
        span += sum(min(z, 2 * 86400) - max(a, 0) for a, z, _ in e.precursors if z > 0 and a < 2 * 86400)
    return inside, total, span


def test_precursor_rate_knob():
    with pytest.raises(ValueError, match="syslog_precursor_lines_per_min"):
        SimConfig(syslog_precursor_lines_per_min=-1)
    off, _, span = _lines_in_precursors(0.0)
    on, _, span2 = _lines_in_precursors(3.0)
    assert span == span2 and span > 3600  # same failures and precursor windows, only the syslog differs
    # the background rate is ~300 lines/node/day (0.2/min); the knob adds ~3/min inside the windows
    assert on - off == pytest.approx(3.0 * span / 60, rel=0.25)
    assert np.isfinite(off)


def test_paper_like_share_knob():
    """syslog_precursor_share: -1 keeps the telemetry windows (default, same bytes); 1.0 gives every internal-cause
    failure a syslog burst and rack_power none; the telemetry precursors do not change."""
    with pytest.raises(ValueError, match="syslog_precursor_share"):
        SimConfig(syslog_precursor_share=1.5)
    kw = {"n_nodes": 48, "start": date(2026, 1, 1), "seed": 5, "node_mtbf_days": 5.0, "rack_events_per_year": 200.0}
    base = build_schedule(SimConfig(**kw), 2)
    paper = build_schedule(SimConfig(**kw, syslog_precursor_share=1.0), 2)
    nodes = np.arange(48)
    ev0, ev1 = base.node_events(nodes), paper.node_events(nodes)
    assert all(e.syslog_precursors is None for e in ev0)
    assert [e.precursors for e in ev0] == [e.precursors for e in ev1]
    fl = paper.failures
    internal = fl[fl["cause"] != "rack_power"]
    assert (fl["cause"] == "rack_power").any() and len(internal) > 10
    got = {(n, z) for n, e in zip(nodes.tolist(), ev1, strict=True) for _, z, _ in e.syslog_precursors}
    assert got == set(zip(internal["node"].tolist(), internal["t_fail"].tolist(), strict=True))
    assert all(z - a >= 300 for e in ev1 for a, z, _ in e.syslog_precursors)
    half = build_schedule(SimConfig(**kw, syslog_precursor_share=0.5), 2).node_events(nodes)
    n_half = sum(len(e.syslog_precursors) for e in half)
    assert 0.3 * len(internal) < n_half < 0.7 * len(internal)
