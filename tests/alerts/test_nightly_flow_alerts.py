"""The real ``nightly()`` flow on a small simulated cluster (8 nodes, 15-min telemetry, 10 history days, rack 1
misconfigured on the nightly day) with
``[alerts] nightly = true`` pushes the night's verdicts to a real Alertmanager on loopback, read back from its API;
and every flow and manifest of that store (the bootstrap's and the nightly's ingests of each source, cubes, train,
nightly) and of an ``ingest <source>`` of each source follows the naming scheme (flows/run_names.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from nodewatch.tasks.core.flow_names import FLOW_NAME
from nodewatch.tasks.core.store import Store

HISTORY_DAYS = 10  # the fewest the verdicts step calibrates on
SIM = {"n_nodes": 8, "nodes_per_rack": 4, "step_s": 900, "misconfig_rack": 1, "misconfig_start_day": HISTORY_DAYS,
       "anomaly_share": 0.1}


@pytest.fixture(scope="module")
def night(prefect_harness, module_alertmanager, tmp_path_factory) -> dict:
    """Bootstrap (simulate, ingest, cubes, train 1 epoch) and one ``nightly(demo=True)`` with the alerts step on."""
    from nodewatch.flows.demo import bootstrap
    from nodewatch.flows.nightly import nightly

    base = tmp_path_factory.mktemp("night")
    inbox, store, prom = base / "inbox", base / "store", base / "textfile"
    prom.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NODEWATCH_ALERTS", json.dumps({"nightly": True, "alertmanager_url": module_alertmanager,
                                                  "textfile_dir": str(prom)}))
        bootstrap(str(inbox), str(store), HISTORY_DAYS, 1, 10, SIM)
        m = nightly(demo=True, inbox=str(inbox), store=str(store), checkpoint_tables=False, states=False)
    return {"manifest": m, "store": Store(str(store)), "inbox": inbox, "prom": prom, "am": module_alertmanager}


def _flow_runs() -> dict[str, str]:
    """Flow run name -> flow name of every flow run in the harness API."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as c:
        flows = {f.id: f.name for f in c.read_flows(limit=200)}
        return {r.name: flows[r.flow_id] for r in c.read_flow_runs(limit=200)}


@pytest.mark.e2e
@pytest.mark.slow
def test_nightly_flow_pushes_its_verdicts_to_alertmanager(night):
    from nodewatch.tasks.alerts.alertmanager import get_alerts

    m = night["manifest"]
    assert m["status"] == "completed", m["errors"]
    step = m["outputs"]["alerts"]
    assert step["firing"] >= 1, step
    day = m["parameters"]["day"]
    src = night["store"].path("reports", day, "fused_verdicts.parquet")
    table = pd.read_parquet(src if Path(src).exists() else night["store"].path("reports", day, "verdicts.parquet"))
    got = [a for a in get_alerts(night["am"]) if a["labels"].get("run_id") == m["run_id"]]
    assert len(got) == step["firing"], (got, step)
    subjects = {str(a["labels"].get("node") or a["labels"].get("group")) for a in got}
    assert subjects <= set(table["subject"].astype(str)), (subjects, set(table["subject"]))
    for a in got:
        assert a["status"]["state"] == "active" and a["labels"]["alertname"].startswith("Nodewatch")
        assert a["annotations"]["summary"] and day in a["annotations"]["summary"]
    text = (night["prom"] / "nodewatch.prom").read_text()  # written by the same step, before this run finished
    assert "nodewatch_node_verdict{" in text and 'nodewatch_last_run_timestamp_seconds{flow="ingest_telemetry"}' in text


@pytest.mark.e2e
@pytest.mark.slow
def test_every_flow_and_manifest_follows_the_naming_scheme(night, tmp_path):
    from nodewatch.flows.ingest import ingest
    from nodewatch.tasks.ingest.inbox import day_files, header_only
    from nodewatch.tasks.ingest.registry import sources

    st: Store = night["store"]
    manifests = [st.read_json("runs", f"{r}.json") for r in st.list_runs()]
    flows = {x["flow"] for x in manifests}
    assert {"demo_bootstrap", "nightly", "build_cubes", "train"} <= flows, flows
    assert all(FLOW_NAME.match(f) for f in flows), flows
    ingests = [x for x in manifests if x["flow"].startswith("ingest")]
    assert ingests and all(x["flow"] == f"ingest_{x['parameters']['source']}" for x in ingests), flows
    # the nightly flow run is named by its manifest's run id, under the flow of the manifest
    runs = _flow_runs()
    assert runs[night["manifest"]["run_id"]] == "nightly"

    # `ingest <source>` through Prefect, one small file set per source the simulator writes
    files = day_files(night["inbox"], pd.Timestamp(night["manifest"]["parameters"]["day"]).date())
    files = {s: [str(f) for f in fs if not header_only(f)] for s, fs in files.items()}
    files = {s: fs for s, fs in files.items() if fs and s in sources()}
    assert {"telemetry", "jobs", "syslog"} <= set(files), files
    out = {s: ingest(s, fs, store=str(tmp_path / "st"), data_docs=False) for s, fs in sorted(files.items())}
    runs = _flow_runs()
    for s, m in out.items():
        assert m["flow"] == f"ingest_{s}" and runs[m["run_id"]] == f"ingest_{s}", (s, m["flow"], runs.get(m["run_id"]))
