"""Prefect flow ``syslog_days`` (thin wiring of :mod:`nodewatch.tasks.syslog.detect`).

For every UTC day ``start``..``end`` (inclusive) with staged syslog: template the rows (drain3, ids stable across
runs), filter frequent/periodic templates, score the SG with the vicinity detector, find outages and (optionally)
write the anonymised export, exactly like the nightly ``syslog`` step (docs/syslog.md). Each day is its own run
(manifest and commits, flow ``syslog_detect`` like the CLI); the flow's manifest lists them, one step per day.
Prefect artifacts: a table of the days and a markdown summary of
the top abnormal nodes and the outages.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from nodewatch.flows.prefect_env import artifact_key
from nodewatch.flows.run_names import claim_run_id, flow_run_name
from nodewatch.tasks.core.escape import md, md_code, md_records
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.settings import load_settings, section
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.syslog.settings import SyslogSettings

MAX_DAYS = 366


def run_syslog_days(start: date, end: date, store: str | None = None, export: bool = True) -> dict[str, Any]:
    """Body of :func:`syslog_days` (usable without Prefect); returns the manifest as a dict. ``end`` is inclusive.

    Days without staged syslog are skipped (listed in the manifest's notes); a data error stops the run with the
    manifest marked failed.
    """
    from nodewatch.tasks.syslog.detect import analyse_day

    if end < start or (end - start).days >= MAX_DAYS:
        raise ValueError(f"day range {start}..{end}: end must be >= start and at most {MAX_DAYS} days")
    s = load_settings(store=store)
    cfg = section(s, "syslog", SyslogSettings)
    st = Store(s.store)
    rec = RunRecorder(st, "syslog_days", {"start": start, "end": end, "export": export}, run_id=claim_run_id())
    rec.write()
    days, skipped = [], []
    try:
        for i in range((end - start).days + 1):
            d = start + timedelta(days=i)
            if not st.staged_files("syslog", dates=[d.isoformat()]):
                skipped.append(d.isoformat())
                continue
            # one run (manifest, commits) per day, like `nodewatch syslog detect`; the flow's run lists them
            child = RunRecorder(st, "syslog_detect", {"day": d, "export": export, "parent": rec.run_id})
            child.write()
            try:
                with rec.step(f"syslog {d}"), child.step("syslog_detect"):
                    r = analyse_day(st, d, child.run_id, cfg, export=export, after_finish=child.after_finish)
            except BaseException as e:
                child.error(f"{type(e).__name__}: {e}")
                child.finish("failed")
                raise
            child.add_output("syslog", {**r.counts, "export": r.export})
            child.finish()
            sh = r.shared()
            top = sorted(sh["abnormal"].items(), key=lambda kv: -kv[1]["score"])[:10]
            days.append({"day": d.isoformat(), "run_id": child.run_id, **r.counts, "export": r.export,
                         "top_abnormal": [{"node": n, **v} for n, v in top], "outages_list": sh["outages"][:50]})
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    rec.add_output("days", [{k: v for k, v in x.items() if k not in ("top_abnormal", "outages_list")} for x in days])
    rec.manifest.notes["skipped_days"] = skipped
    rec.manifest.notes["top_abnormal"] = {x["day"]: x["top_abnormal"] for x in days}
    rec.manifest.notes["outages"] = {x["day"]: x["outages_list"] for x in days}
    return rec.finish().model_dump(mode="json")


@task(task_run_name="syslog-days", cache_policy=NO_CACHE)
def _days(start: date, end: date, store: str | None, export: bool) -> dict[str, Any]:
    return run_syslog_days(start, end, store, export)


def summary_markdown(m: dict[str, Any]) -> str:
    """Markdown of a ``syslog_days`` manifest: per day the top abnormal nodes (vicinity evidence) and outages."""
    out = [f"# syslog_days run {md_code(m['run_id'])}"]
    for d in m["outputs"].get("days", []):
        day = d["day"]
        out.append(f"## {md(day)}\n\n{d['rows']:,} lines, {d['templates']} templates "
                   f"({d.get('templates_new_templates', 0)} new), {d['filtered_templates']} filtered, "
                   f"{d['abnormal_nodes']} abnormal nodes, {d['outages']} outages")
        top = m["notes"].get("top_abnormal", {}).get(day, [])
        if top:
            out.append(md_records([{"node": t["node"], "score": round(t["score"], 1), "vicinity": t["vicinity"],
                                    "window_end": t["window_end"]} for t in top]))
        outs = m["notes"].get("outages", {}).get(day, [])
        if outs:
            out.append(md_records(outs[:20]))
    skipped = m["notes"].get("skipped_days", [])
    if skipped:
        out.append(f"No staged syslog: {md(', '.join(skipped))}")
    return "\n\n".join(out)


@flow(name="syslog_days", flow_run_name=flow_run_name, log_prints=True)
def syslog_days(start: date, end: date, store: str | None = None, export: bool = True) -> dict[str, Any]:
    """Syslog analytics for ``start``..``end`` (inclusive UTC days): templates -> filter -> vicinity detector."""
    m = _days(start, end, store, export)
    rows = [{k: v for k, v in d.items() if k != "export"} for d in m["outputs"].get("days", [])]
    if rows:
        create_table_artifact(md_records(rows), key=artifact_key("syslog-days", str(start), str(end)),
                              description=f"syslog_days {start}..{end}, run {m['run_id']}")
    create_markdown_artifact(summary_markdown(m), key=artifact_key("syslog-summary", str(start), str(end)),
                             description=f"syslog_days run {m['run_id']}: abnormal nodes and outages")
    return m
