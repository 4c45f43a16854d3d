"""What the simulator (tasks/simulate) writes goes through the telemetry, topology and reservation
ingest without a single unexpected quarantine: only the first sample of every counter series of a
file (which has no rate) is held back, with its reason."""

from __future__ import annotations

from collections import Counter

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from nodewatch.schemas.metrics import COUNTERS
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
from nodewatch.tasks.ingest.topology import load_topology

FIRST = "first sample of the counter series in this file, no rate"


@pytest.mark.slow
def test_simulated_day_ingests_cleanly(tmp_path):
    sim = pytest.importorskip("nodewatch.tasks.simulate.cluster")
    from nodewatch.tasks.simulate.config import SimConfig
    from nodewatch.tasks.simulate.metrics import COUNTERS as SIM_COUNTERS

    cfg = SimConfig(
        n_nodes=48,
        nodes_per_rack=24,
        step_s=300,
        racks_per_row=1,
        ldms_racks=(0,),
        maint_period_days=2,
        workers=1,
        scheduler="synchronous",
    )
    out = tmp_path / "sim"
    sim.simulate(cfg, out, [3])  # day 3: the first per-row maintenance window
    store = Store(str(tmp_path / "store"))

    def run(source, paths, **kw):
        return ingest_files(store, sources()[source], paths, RunRecorder(store, "ingest", {}), data_docs=False, **kw)

    topo = run("topology", [out / "topology" / "topology.csv"])
    assert topo.counts.staged == 48 and topo.counts.quarantined == 0
    known, aliases, _ = load_topology(store)
    assert len(known) == 48

    res = run("reservations", sorted((out / "reservations").rglob("*.csv")))
    assert [r.status for r in res.inputs] == ["ingested"], [r.message for r in res.inputs]
    assert res.counts.rows_in >= 1 and res.counts.quarantined == 0 and res.counts.staged == res.counts.rows_in
    maint = store.read_staged("reservations")
    assert all("MAINT" in f for f in maint.column("flags").to_pylist())
    assert all(n in known for nl in maint.column("node_list").to_pylist() for n in nl)

    files = sorted((out / "telemetry").rglob("*.parquet")) + sorted((out / "telemetry").rglob("*.csv"))
    assert {f.suffix for f in files} == {".parquet", ".csv"}
    tel = run("telemetry", files, known_nodes=known, aliases=aliases)
    assert [r.format for r in tel.inputs] == ["long-parquet"] * (len(files) - 1) + ["ldms-csv"]
    assert all(r.status == "ingested" for r in tel.inputs)
    assert set(SIM_COUNTERS) <= COUNTERS
    reasons = Counter()
    for f in tel.quarantine_files:
        reasons.update(pq.read_table(f).column("reason").to_pylist())
    expected = {f"parse: counter {c}: {FIRST}" for c in SIM_COUNTERS}
    assert set(reasons) <= expected, reasons
    assert sum(reasons.values()) == tel.counts.quarantined == 48 * len(SIM_COUNTERS)  # one per node x counter
    assert tel.counts.balanced and tel.counts.duplicates == 0
    staged = store.read_staged("telemetry", columns=["metric", "value"])
    rates = staged.filter(pc.match_substring(staged.column("metric"), "_rate"))
    assert rates.num_rows > 0 and pc.min(rates.column("value")).as_py() >= 0
