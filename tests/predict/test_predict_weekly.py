"""Weekly predictor training from a real store and the nightly step scoring it (issue 18, item 3).

A small simulated cluster at a 30-s step goes through the project's ingest parsers (topology, reservations,
jobs, syslog, telemetry), node states give the ``failure_events``, :func:`train_weekly` trains and registers
the predictor from the staged data of days 0-2, and the nightly ``predict`` step scores day 3 with it.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from nodewatch.tasks.core.store import Store

SIM = dict(
    n_nodes=8, nodes_per_rack=8, racks_per_row=1, step_s=30, misconfig_rack=-1, ldms_racks=(), syslog_rfc5424_rows=(),
    node_mtbf_days=0.6, precursor_share=1.0, precursor_median_s=1800.0, precursor_sigma=0.3, rack_events_per_year=0.0,
    repair_median_s=1800.0, repair_sigma=0.3, maint_period_days=30, outage_per_node_day=0.0, syslog_lines_per_node_day=50.0,
    frail_nodes=0, workers=1, scheduler="synchronous",
)
TRAIN_DAYS = 3


def _ingest(store: Store, source: str, paths: list, **kw) -> None:
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.ingest.run import new_ingestor

    rec = RunRecorder(store, "ingest", {"source": source})
    ing = new_ingestor(store, source, rec, service_hosts=["slurmctl01"])
    for p in paths:
        ing.add_file(p)
    ing.finish(data_docs=False)
    rec.finish()
    counts = rec.manifest.counts.get(ing.schema.name)
    assert counts is not None and counts.staged > 0, source


@pytest.fixture(scope="module")
def weekly(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, object, dict]:
    from nodewatch.tasks.predict.weekly import train_weekly
    from nodewatch.tasks.simulate.cluster import simulate
    from nodewatch.tasks.simulate.config import SimConfig
    from nodewatch.tasks.states.build import build_states

    tmp = tmp_path_factory.mktemp("weekly")
    cfg = SimConfig(**SIM)
    out = tmp / "sim"
    simulate(cfg, out, list(range(TRAIN_DAYS + 1)))  # days 0-3: states read syslog to day 3, the nightly scores day 3
    store = Store(str(tmp / "store"))
    for source, pattern in (("topology", "topology/*.csv"), ("reservations", "reservations/*/*.csv"),
                            ("jobs", "jobs/sacct/*/*.txt"), ("syslog", "syslog/*/*.log"),
                            ("telemetry", "telemetry/**/*.parquet")):
        _ingest(store, source, sorted(out.glob(pattern)))
    build_states(store, cfg.start, cfg.start + timedelta(days=TRAIN_DAYS), run_id="states-w")
    res = train_weekly(store, cfg.start, cfg.start + timedelta(days=TRAIN_DAYS - 1), "pw-1", epochs=60, stride=2)
    return store, cfg, res


def test_weekly_training_registers_a_30s_predictor(weekly) -> None:
    from nodewatch.tasks.predict import registry

    store, _, res = weekly
    assert res["status"] == "ok", res
    assert res["failures"] >= 8 and res["ok"] > 1000
    assert store.current(registry.AREA) == "pw-1"
    pred = registry.load(store)
    assert pred.params["step_s"] == 30 and pred.params["data"]["source"] == "store"
    assert pred.params["train_positives"] == "all"


def test_nightly_step_scores_the_next_day(weekly) -> None:
    from nodewatch.tasks.core.nightly_steps import StepContext
    from nodewatch.tasks.core.settings import Settings
    from nodewatch.tasks.predict.nightly_step import STEP

    store, cfg, _ = weekly
    ctx = StepContext(store=store, day=cfg.start + timedelta(days=TRAIN_DAYS), settings=Settings(), rec=None, run_id="n")  # type: ignore[arg-type]
    out = STEP.run(ctx)
    assert out["status"] == "ok", out
    assert "of 8" in out["details"]  # every node of the day was scored
    doc = store.read_json("reports", ctx.day.isoformat(), "predict.json")
    assert doc["predictor"] == "pw-1"
    for node, w in ctx.shared["predict"]["warnings"].items():
        assert node.startswith("cn") and set(w) == {"lead_min", "confidence", "at"} and w["lead_min"] == 2.0


def test_weekly_training_skips_60s_telemetry_and_empty_stores(tmp_path) -> None:
    import pandas as pd
    import pyarrow as pa

    from nodewatch.tasks.core.commit import StagedCommit
    from nodewatch.tasks.predict.weekly import train_weekly

    empty = Store(str(tmp_path / "e"))
    r = train_weekly(empty, date(2026, 1, 1), date(2026, 1, 3), "pw-x")
    assert r["status"] == "skipped" and "no staged telemetry" in r["details"]
    # 60-s telemetry (the demo's): one line, no training, nothing registered
    coarse = Store(str(tmp_path / "c"))
    t = pd.date_range("2026-01-01", periods=120, freq="60s", tz="UTC")
    tbl = pa.table({"time": t, "node": ["cn0001"] * len(t), "metric": ["temp_cpu0"] * len(t), "value": [40.0] * len(t)})
    c = StagedCommit(coarse, "tel-1", "telemetry")
    c.replace_partition("telemetry", "2026-01-01", tbl)
    c.commit()
    r = train_weekly(coarse, date(2026, 1, 1), date(2026, 1, 1), "pw-y")
    assert r["status"] == "skipped"
    assert r["details"] == "telemetry step 60 s: the failure predictor trains on 30-s or finer telemetry"
    assert coarse.current("models/predict") is None
