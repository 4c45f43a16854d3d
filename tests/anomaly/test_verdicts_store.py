"""run_verdicts end to end on a store: staged telemetry -> real telemetry cube -> reports/<day>/verdicts.parquet + .md."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from nodewatch.tasks.anomaly.verdicts import run_verdicts
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.synth import TELEMETRY_SCHEMA, node_names, write_topology

DAY0 = date(2026, 2, 1)
HISTORY = 9
METRICS = ["power_node", "temp_cpu0", "cpu0_user", "lustre_read_bytes"]
LEVELS = np.array([300.0, 45.0, 20.0, 1e4])


def _stage_day(store: Store, d: date, nodes: list[str], rng: np.random.Generator, fault: str | None) -> None:
    times = pd.date_range(pd.Timestamp(d, tz="UTC"), periods=288, freq="5min")
    n, t, m = len(nodes), len(times), len(METRICS)
    lvl = LEVELS * (1 + 0.05 * np.arange(n)[:, None, None] / n)
    v = lvl * np.exp(rng.normal(0, 0.02, (n, t, m)))
    if fault is not None:  # 4 hours of CPU +20 degC and full CPU on one node from 10:00
        i = nodes.index(fault)
        v[i, 120:168, 1] += 20
        v[i, 120:168, 2] = 95
    tt = np.broadcast_to(times.as_unit("ns").asi8[None, :, None], v.shape)
    nn = np.broadcast_to(np.array(nodes, dtype=object)[:, None, None], v.shape)
    mm = np.broadcast_to(np.array(METRICS, dtype=object)[None, None, :], v.shape)
    tbl = pa.table({"time": pa.array(tt.ravel(), pa.timestamp("ns", tz="UTC")), "node": nn.ravel().tolist(),
                    "metric": mm.ravel().tolist(), "value": v.ravel(), "source_offset": np.arange(v.size, dtype=np.int64)},
                   schema=TELEMETRY_SCHEMA)
    store.write_parquet(tbl, store.staged_key("telemetry", d.isoformat(), "synth"))


def test_run_verdicts_writes_the_alerts_table(tmp_path) -> None:
    from nodewatch.tasks.cubes.build import build_days, dask_client

    store = Store(str(tmp_path / "store"))
    nodes = node_names(24)
    write_topology(store, nodes, per_rack=8)
    rng = np.random.default_rng(3)
    days = [DAY0 + timedelta(days=i) for i in range(HISTORY + 1)]
    for d in days:
        _stage_day(store, d, nodes, rng, "cn0005" if d == days[-1] else None)
    jobs = pa.table({"job_id": ["7"], "step": pa.array([None], pa.string()),
                     "start_time": pa.array([pd.Timestamp(days[-1], tz="UTC") + pd.Timedelta(hours=20)],
                                            pa.timestamp("ns", tz="UTC")),
                     "end_time": pa.array([None], pa.timestamp("ns", tz="UTC")),  # still running at midnight
                     "node_list": [["cn0010", "cn0011"]]})
    store.write_parquet(jobs, store.staged_key("jobs", days[-1].isoformat(), "synth"))
    with dask_client(n_workers=1) as client:
        build_days(store, "telemetry", days, client)
    out = run_verdicts(store, days[-1], history_days=HISTORY, held_back_days=4)
    assert out["node_alerts"] == 1 and out["group_alerts"] == 0 and out["flagged_nodes"] == ["cn0005"]
    df = pd.read_parquet(store.path("reports", days[-1].isoformat(), "verdicts.parquet"))
    assert df["kind"].tolist() == ["node"] and df["subject"].tolist() == ["cn0005"]
    row = df.iloc[0]
    assert set(row["top_metrics"][:2]) == {"temp_cpu0", "cpu0_user"}
    assert row["first_time"] == pd.Timestamp(days[-1], tz="UTC") + pd.Timedelta(hours=10)
    assert row["rack"] == "r000" and row["architecture"] == "x86_64" and row["severity"] in ("low", "medium", "high")
    md = store.fs.open(store.path("reports", days[-1].isoformat(), "verdicts.md"), "rb").read().decode()
    assert "| cn0005 |" in md and "baseline" in md
    # the heat map beside the table (node x window, alerts boxed), linked from the page
    png = store.path("reports", days[-1].isoformat(), "verdicts_heatmap.png")
    assert out["heatmap"] == png and store.fs.open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert "](verdicts_heatmap.png)" in md
    # idempotent: a second run writes the same table
    run_verdicts(store, days[-1], history_days=HISTORY, held_back_days=4)
    pd.testing.assert_frame_equal(pd.read_parquet(store.path("reports", days[-1].isoformat(), "verdicts.parquet")), df)
    # a day that is not in the cube is a one-line error
    with pytest.raises(ValueError, match="no telemetry windows"):
        run_verdicts(store, days[-1] + timedelta(days=40), history_days=HISTORY, held_back_days=4)
