"""The nightly flow writes the day's verdicts (reports/<day>/verdicts.parquet + .md) and names them in the report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from nodewatch.tasks.core.store import Store


@pytest.mark.slow
def test_nightly_writes_verdicts(tmp_path, prefect_harness):
    from nodewatch.flows.demo import bootstrap
    from nodewatch.flows.nightly import nightly

    inbox, store = tmp_path / "inbox", tmp_path / "store"
    bootstrap(str(inbox), str(store), 12, 1, 10, {"n_nodes": 12, "nodes_per_rack": 4, "misconfig_rack": -1})
    m = nightly(demo=True, inbox=str(inbox), store=str(store), checkpoint_tables=False, states=False)
    assert m["status"] == "completed"
    v = m["outputs"]["verdicts"]
    st = Store(str(store))
    day = m["parameters"]["day"]
    df = pd.read_parquet(st.path("reports", day, "verdicts.parquet"))
    assert len(df) == v["node_alerts"] + v["group_alerts"]
    assert set(df["kind"]) <= {"node", "rack", "architecture"}
    assert "node_precision" in v and "node_recall" in v  # demo mode: evaluated against the simulator's truth
    # the demo's summary row (flows/demo.py) reads the same table: the same figures as the nightly's evaluation
    from nodewatch.flows.demo import verdict_summary

    vs = verdict_summary(store, inbox, day)
    assert vs is not None and vs["node_alerts"] == v["node_alerts"] and len(vs["group_alerts"]) == v["group_alerts"]
    assert (vs["precision"], vs["recall"]) == (v["node_precision"], v["node_recall"])
    assert verdict_summary(store, inbox, "2020-01-01") is None  # no verdicts that day
    assert Path(v["markdown"]).read_text().startswith(f"# Node verdicts — {day}")
    report = Path(m["outputs"]["report"]["report"]).read_text()
    assert "| verdicts | done |" in report and "baseline flags" in report
    # the discovered fuse step (order 60) wrote the fused verdicts beside them
    fz = m["outputs"]["fuse"]
    fused = pd.read_parquet(fz["verdicts"])
    assert fz["verdicts"] == st.path("reports", day, "fused_verdicts.parquet") and "telemetry" in fz["available"]
    assert set(fused["subject"]) >= set(df.loc[df["kind"] == "node", "subject"])
    assert "| fuse | done |" in report
