"""Simulator fault classes: labels on the simulated anomalies, and signature measurement on campaign data."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nodewatch.tasks.finj.dataset import CLASSES, Raw
from nodewatch.tasks.finj.signatures import measure
from nodewatch.tasks.simulate.anomalies import COLUMNS, all_anomalies, node_anomalies
from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.fault_classes import CANDIDATES
from nodewatch.tasks.simulate.topology import build_topology


def test_simulated_anomalies_carry_fault_classes_without_changing_anything_else() -> None:
    cfg = SimConfig(n_nodes=96, anomaly_share=0.2, seed=5)
    topo = build_topology(cfg)
    t_end = 40 * 86400.0
    df = all_anomalies(cfg, topo, t_end)
    again = all_anomalies(cfg, topo, t_end)
    pd.testing.assert_frame_equal(df, again)  # seeded
    # the original columns are exactly what the per-node renewal draws (the label has its own stream)
    node0 = pd.DataFrame(node_anomalies(cfg, 0, t_end), columns=COLUMNS)
    pd.testing.assert_frame_equal(df[df["node"] == 0][COLUMNS].reset_index(drop=True), node0)
    for typ, cls in zip(df["type"], df["fault_class"], strict=True):
        if typ in CANDIDATES:
            assert cls in CANDIDATES[typ]
        else:
            assert cls == ""
    used = set(df["fault_class"]) - {""}
    assert used == {c for v in CANDIDATES.values() for c in v}  # all eight classes appear in 96 nodes x 40 days


def test_measure_finds_the_leak_slope_and_the_cpu_ratio() -> None:
    n = 3000
    t = np.arange(n)
    leak = (t >= 1000) & (t < 1300)
    hog = (t >= 2000) & (t < 2200)
    mem = 4e9 + np.cumsum(np.where(leak, 16 * 2**20, 0.0))
    user = np.where(hog, 90.0, 45.0)
    events = [
        {"time": "1000", "event": "start", "seq": "1", "is_fault": "True", "program": "leak", "cores": "0"},
        {"time": "1300", "event": "end", "seq": "1", "is_fault": "True", "program": "leak", "cores": "0"},
        {"time": "2000", "event": "start", "seq": "2", "is_fault": "True", "program": "dial", "cores": "0"},
        {"time": "2200", "event": "end", "seq": "2", "is_fault": "True", "program": "dial", "cores": "0"},
    ]
    raw = Raw(0, ["cpu0_user", "mem_used"], np.stack([user, mem], axis=1), events, 1)
    sig = measure(raw, "synthetic")
    assert set(sig["classes"]) == {"leak", "dial"}
    assert sig["classes"]["leak"]["mem_used_slope_bytes_per_s"] == pytest_approx(16 * 2**20, 0.01)
    assert sig["classes"]["dial"]["ratio_to_healthy"]["cpu0_user"] == pytest_approx(2.0, 0.01)
    assert CLASSES[0] == "healthy"


def pytest_approx(v: float, rel: float):
    import pytest

    return pytest.approx(v, rel=rel)


def test_truth_sidecar_exports_the_fault_class() -> None:
    from nodewatch.tasks.simulate.schedule import build_schedule
    from nodewatch.tasks.simulate.truth import anomalies_table

    cfg = SimConfig(n_nodes=48, anomaly_share=0.2, seed=5)
    sched = build_schedule(cfg, 3)
    tab = anomalies_table(sched, 1).to_pandas()
    assert len(tab) > 0 and "fault_class" in tab.columns
    for typ, cls in zip(tab["type"], tab["fault_class"], strict=True):
        assert (cls in CANDIDATES[typ]) if typ in CANDIDATES else cls == ""
