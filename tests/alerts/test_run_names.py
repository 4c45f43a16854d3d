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
