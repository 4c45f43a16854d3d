"""Prefect flows ``states_build`` and ``states_report`` (thin wiring of :mod:`nodewatch.tasks.states`).

``states_build(start, end)`` derives SaNSA node states for the UTC days ``start``..``end`` (inclusive)
from staged syslog, jobs, reservations and topology and publishes ``node_states``,
``failure_events`` and ``cubes/state.zarr``. ``states_report(start, end)`` computes the paper's
analytics and publishes each as a table + PNG in the store and as Prefect table/markdown/link
artifacts. Both write a run manifest (``runs/<run_id>.json``).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from prefect import flow, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from nodewatch.flows.prefect_env import artifact_key
from nodewatch.flows.run_names import claim_run_id, flow_run_name
from nodewatch.schemas.manifest import RowCounts
from nodewatch.tasks.core.escape import md, md_code, md_records
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.settings import load_settings
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.states.build import build_states
from nodewatch.tasks.states.report import build_report, load_states, markdown_table, write_report


def run_states_build(start: date, end: date, store: str | None = None, rebuild_cube: bool = False) -> dict[str, Any]:
    """Body of :func:`states_build` (usable without Prefect); returns the manifest as a dict. ``end`` is inclusive."""
    st = Store(load_settings(store=store).store)
    rec = RunRecorder(st, "states_build", {"start": start, "end": end, "rebuild_cube": rebuild_cube},
                      run_id=claim_run_id())
    rec.write()
    try:
        with rec.step("derive_and_publish"):
            out = build_states(st, start, end + timedelta(days=1), rec.run_id, rebuild_cube=rebuild_cube)
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    b = out["build"]
    for table, n in out["input_rows"].items():
        rec.manifest.notes[f"{table}_rows_read"] = n
    rec.add_counts("node_states", RowCounts(rows_in=out["node_states_rows"], staged=out["node_states_rows"]))
    rec.add_counts("failure_events", RowCounts(rows_in=out["failure_events_rows"], staged=out["failure_events_rows"]))
    rec.add_output("cube", out["cube"])
    rec.add_output("nodes", len(b.nodes))
    rec.add_output("days", out["days"])
    rec.manifest.notes["evidence_counts"] = dict(sorted(b.counts.items()))
    return rec.finish().model_dump(mode="json")


@task(task_run_name="derive-states", cache_policy=NO_CACHE)
def _derive(start: date, end: date, store: str | None, rebuild_cube: bool) -> dict[str, Any]:
    return run_states_build(start, end, store, rebuild_cube)


@flow(name="states_build", flow_run_name=flow_run_name, log_prints=True)
def states_build(start: date, end: date, store: str | None = None, rebuild_cube: bool = False) -> dict[str, Any]:
    """SaNSA node states for ``start``..``end`` (inclusive UTC days) -> node_states, failure_events, state cube."""
    m = _derive(start, end, store, rebuild_cube)
    counts = m["notes"].get("evidence_counts", {})
    create_table_artifact(
        md_records([{"count": k, "value": v} for k, v in counts.items()]),
        key=artifact_key("states-evidence", str(start), str(end)),
        description=f"states_build {start}..{end}: evidence and ignored-input counts, run {m['run_id']}",
    )
    create_markdown_artifact(
        f"# states_build {start}..{end}\n\nrun {md_code(m['run_id'])}: {m['outputs']['nodes']} nodes, "
        f"{m['counts']['node_states']['staged']} node_states rows, {m['counts']['failure_events']['staged']} failure events; "
        f"cube {md_code(m['outputs']['cube'])}.",
        key=artifact_key("states-build", str(start), str(end)),
    )
    return m


def run_states_report(start: date, end: date, store: str | None = None, target_anomalies: int = 5) -> tuple[dict[str, Any], list]:
    """Body of :func:`states_report`: analytics tables + PNGs under ``reports/states/<run_id>/``. ``end`` is inclusive."""
    st = Store(load_settings(store=store).store)
    rec = RunRecorder(st, "states_report", {"start": start, "end": end, "target_anomalies": target_anomalies},
                      run_id=claim_run_id())
    rec.write()
    try:
        with rec.step("load"):
            ns, fe, racks = load_states(st, start, end + timedelta(days=1))
        with rec.step("analytics"):
            items = build_report(ns, fe, racks, target_anomalies=target_anomalies)
        with rec.step("write"):
            path = write_report(st, items, rec.run_id)
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    rec.add_counts("node_states", RowCounts(rows_in=len(ns), staged=len(ns)))
    rec.add_output("report", f"{path}/report.md")
    for it in items:
        rec.add_output(it.name, it.paths)
    return rec.finish().model_dump(mode="json"), items


@flow(name="states_report", flow_run_name=flow_run_name, log_prints=True)
def states_report(start: date, end: date, store: str | None = None, target_anomalies: int = 5) -> dict[str, Any]:
    """SaNSA analytics (Table II, transitions, Table III, anomalies, rack under-use, correlated failures) as artifacts."""
    m, items = run_states_report(start, end, store, target_anomalies)
    for it in items:
        key = artifact_key("states", it.name)
        if len(it.table):
            create_table_artifact(
                md_records(it.table.astype(object).where(it.table.notna(), None).to_dict("records")), key=key,
                description=it.title,
            )
        else:
            create_markdown_artifact(f"**{md(it.title)}**: none found", key=key, description=it.title)
        if "png" in it.paths:
            create_link_artifact(f"file://{it.paths['png']}", link_text=f"{it.name}.png", key=f"{key}-png", description=it.title)
    create_markdown_artifact(
        "\n\n".join(f"## {md(it.title)}\n\n{markdown_table(it.table.head(20))}" for it in items[:-1]),
        key=artifact_key("states-report"),
        description=f"states_report run {m['run_id']}",
    )
    return m
