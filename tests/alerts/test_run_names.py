"""One naming scheme: a flow run is named by the nodewatch run id its first manifest takes; later manifests of
the same flow run get their own ids; a flow run can be renamed to a manifest opened inside a task."""

from __future__ import annotations

import pytest
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from nodewatch.flows.run_names import RUN_ID, claim_run_id, flow_run_name, name_run
from nodewatch.tasks.core.runs import RunRecorder, new_run_id


@task(cache_policy=NO_CACHE)
def _opens_a_manifest(store) -> str:
    return RunRecorder(store, "inner", {}, run_id=claim_run_id()).run_id


@flow(name="naming_probe", flow_run_name=flow_run_name)
def _probe(store) -> dict:
    from prefect.runtime import flow_run

    first = RunRecorder(store, "outer", {}, run_id=claim_run_id()).run_id
    second = _opens_a_manifest(store)
    return {"name": flow_run.get_name(), "first": first, "second": second}


@flow(name="rename_probe", flow_run_name=flow_run_name)
def _rename(target: str) -> str:
    name_run(target)
    return target


def test_claim_outside_a_flow_run_is_none():
    assert claim_run_id() is None
    assert RUN_ID.match(new_run_id("x"))


@pytest.mark.e2e
def test_flow_run_named_by_its_first_manifest(prefect_harness, store):
    from prefect.client.orchestration import get_client

    out = _probe(store)
    assert out["name"] == out["first"] and RUN_ID.match(out["first"])
    assert out["second"] != out["first"] and RUN_ID.match(out["second"])
    target = new_run_id("rename_probe")
    _rename(target)
    with get_client(sync_client=True) as c:
        names = {r.name for r in c.read_flow_runs(limit=20)}
    assert out["first"] in names and target in names


def test_flow_name_scheme_and_old_manifests():
    from nodewatch.flows.run_names import canonical_flow, flow_matches, ingest_flow_name

    assert ingest_flow_name("jobs") == "ingest_jobs" and ingest_flow_name("syslog") == "ingest_syslog"
    for bad in ("", "Jobs", "a-b", "../x", "a b"):
        with pytest.raises(ValueError):
            ingest_flow_name(bad)
    assert canonical_flow("ingest", {"source": "telemetry"}) == "ingest_telemetry"  # written before the scheme
    assert canonical_flow("ingest", {"source": "../x"}) == "ingest" and canonical_flow("ingest", {}) == "ingest"
    assert canonical_flow("nightly", {"source": "x"}) == "nightly"
    assert flow_matches("ingest_telemetry", "ingest", {"source": "telemetry"})
    assert not flow_matches("ingest_jobs", "ingest", {"source": "telemetry"})
    assert flow_matches("ingest", "ingest_jobs") and flow_matches("ingest", "ingest", {"source": "jobs"})
    assert not flow_matches("ingest", "nightly") and not flow_matches("nightly", "backfill")


def test_runs_list_filters_and_shows_old_and_new_names(store):
    from typer.testing import CliRunner

    from nodewatch.flows.cli import app

    rows = [("20260101T000000.000001Z-aaaaaa", "ingest", {"source": "telemetry"}),  # before the scheme
            ("20260101T000000.000002Z-bbbbbb", "ingest_telemetry", {"source": "telemetry"}),
            ("20260101T000000.000003Z-cccccc", "ingest_jobs", {"source": "jobs"}),
            ("20260101T000000.000004Z-dddddd", "nightly", {})]
    for rid, name, params in rows:
        store.write_json({"run_id": rid, "flow": name, "parameters": params, "status": "completed", "code_version": "x",
                          "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:00:01Z", "counts": {}},
                         "runs", f"{rid}.json")

    def run(*args: str) -> str:
        r = CliRunner().invoke(app, ["--store", store.url, "runs", *args], env={"COLUMNS": "250"})
        assert r.exit_code == 0, r.output
        return r.output

    def listed(*args: str) -> list[str]:
        return sorted(rid for rid, *_ in rows if rid in run("list", *args))

    assert listed("--flow", "ingest_telemetry") == [rows[0][0], rows[1][0]]
    assert listed("--flow", "ingest") == [rows[0][0], rows[1][0], rows[2][0]]
    assert listed("--flow", "nightly") == [rows[3][0]] and len(listed()) == 4
    assert "flow=ingest_telemetry " in run("show", rows[0][0])
