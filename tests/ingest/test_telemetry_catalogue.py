"""The metric catalogue (schemas/metrics.py) covers what the simulator writes."""

from __future__ import annotations

import pytest

from nodewatch.schemas.metrics import CATALOGUE, COUNTERS, get_metric, markdown

UNIT_SPELLING = {"rpm": "min-1"}  # simulator spelling -> catalogue (UDUNITS) spelling


def test_simulator_metrics_are_in_the_catalogue():
    sim = pytest.importorskip("nodewatch.tasks.simulate.metrics")
    problems = []
    for x in sim.METRICS:
        c = CATALOGUE.get(x.name)
        if c is None:
            problems.append(f"{x.name}: missing")
            continue
        if c.kind != x.kind or c.unit != UNIT_SPELLING.get(x.unit, x.unit):
            problems.append(f"{x.name}: {c.kind}/{c.unit} vs simulator {x.kind}/{x.unit}")
        if x.kind == "gauge" and (c.min > x.lo or c.max < x.hi):
            problems.append(f"{x.name}: range [{c.min}, {c.max}] does not contain simulator [{x.lo}, {x.hi}]")
    assert problems == []


def test_lookup_and_docs():
    assert get_metric("power_node").unit == "W"
    with pytest.raises(KeyError, match="add it to schemas/metrics.py"):
        get_metric("nosuch")
    assert "| net_rx_bytes_rate | gauge | By s-1 |" in markdown()
    assert "edac_ue_count" in COUNTERS
