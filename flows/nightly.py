"""Prefect flows ``nightly(day)`` and ``backfill(start, end)``: the product users run every night.

``nightly``: [demo: simulate the next day into the inbox] -> ingest every source of the day from the
inbox (:mod:`nodewatch.tasks.ingest.inbox`) -> validate (row accounting of every ingest run) -> cubes for the day ->
score every node batch with the CURRENT models -> node states (tonight's failure events) -> refresh
the checkpoint tables (their failure fits read those events) -> report. ``backfill``: the same for a
range of days, cube days and (day, node batch) scoring regions in parallel (regions never share a
Zarr chunk, so parallel writers cannot corrupt the cubes); days already complete are skipped unless ``force``.

Both are thin wiring: every step is a plain function in ``tasks/`` or an existing flow body
(``nodewatch.flows.ingest.run_source``, ``nodewatch.flows.cubes.run_build``, ``nodewatch.flows.states.run_states_build``). I/O
steps are tasks with retries and exponential backoff. A scoring task covers a contiguous group of
node batches of one day (a few per worker: orchestration stays a small share of the work) and is
cached by (day, node batches, code version, model run, telemetry fingerprint), so a retried run
resumes where it failed. A node batch that fails makes its group a failed task naming the batch's
nodes (the group's other batches are kept); the rest of the run completes, the
manifest (``runs/<run_id>.json``, status ``partial``) lists what is missing, and the flow run
ends Failed so the failure is loud in the UI.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.tasks import exponential_backoff
from prefect.utilities.annotations import quote

from nodewatch.flows.prefect_env import artifact_key
from nodewatch.flows.run_names import artifact_link, claim_run_id, flow_run_name, log
from nodewatch.tasks.anomaly.score import (
    PartialScoringError,
    ScoreJob,
    batch_failure,
    batch_nodes,
    day_scored,
    telemetry_fingerprint,
)
from nodewatch.tasks.core.escape import md_records
from nodewatch.tasks.core.runs import RunRecorder, code_version
from nodewatch.tasks.core.settings import load_settings
from nodewatch.tasks.core.store import Store


class PartialRunError(RuntimeError):
    """Raised at the end of a run in which some node batches failed (everything else was done)."""


IO_RETRIES = {"retries": 2, "retry_delay_seconds": exponential_backoff(backoff_factor=5), "retry_jitter_factor": 0.2}
"""Retries of I/O steps: 5 s, 10 s (plus jitter)."""


# ----------------------------------------------------------------------------- tasks
@task(name="simulate-day", cache_policy=NO_CACHE, **IO_RETRIES)
def simulate_day_task(inbox: str, day: date | None) -> date:
    """Demo mode: simulate ``day`` (default: the next one) of the cluster in the inbox."""
    from nodewatch.tasks.ingest.inbox import simulate_day

    return simulate_day(Path(inbox), day)


@task(name="build-cubes", cache_policy=NO_CACHE, **IO_RETRIES)
def cubes_task(start: date, end: date, store: str, force: bool) -> dict[str, Any]:
    """Aggregate staged telemetry/syslog of ``start..end`` into the cubes (complete days are skipped)."""
    from nodewatch.flows.cubes import run_build

    return run_build(start, end, store, force=force)


@task(name="prepare-scores-cube", cache_policy=NO_CACHE, **IO_RETRIES)
def prepare_scores_task(store: str) -> None:
    """Create/grow ``cubes/scores.zarr`` to the telemetry cube's axes (once, before fanning out)."""
    from nodewatch.tasks.anomaly.score import ensure_scores_cube

    ensure_scores_cube(Store(store))


def _score_cache_key(ctx: TaskRunContext | None, params: dict[str, Any]) -> str:
    js: tuple[ScoreJob, ...] = params["jobs"]
    j = js[0]
    ids = "-".join(f"{x.batch:04d}" for x in js)
    return f"score-{j.day}-b{ids}-{code_version()}-{j.kind}-{j.model_run}-{params['fingerprint']}"


SCORE_CACHE_AGE = timedelta(days=30)


# No Prefect result persistence (persist_result=False, NO_CACHE): Prefect reads a persisted result with
# the serializer named in the file, so a replaced file could run code (pickle). The resume cache is
# JSON in the store instead (nodewatch.tasks.core.result_cache): data only, never code.
@task(name="score-batches", task_run_name="score-{name}", cache_policy=NO_CACHE, persist_result=False,
      retries=1, retry_delay_seconds=5)
def score_task(jobs: tuple[ScoreJob, ...], fingerprint: str | None, name: str, refresh: bool = False,
               dask: str | None = None) -> list[dict[str, Any]]:
    """Score a group of (day, node batch) regions; raises :class:`PartialScoringError` if any failed.

    A group with a failed batch is a failed task (never cached as done), carrying the outputs of
    the batches it did score; each failure names its batch's nodes. A group scored before with the same
    (day, batches, code version, model run, telemetry fingerprint) returns its cached outputs unless
    ``refresh``. With ``dask`` (a scheduler address: ``NODEWATCH_DASK``) the group is scored as one task there.
    """
    from nodewatch.tasks.anomaly.score import score_regions
    from nodewatch.tasks.core.result_cache import load_result, save_result
    from nodewatch.tasks.cubes.cluster import run_on

    st = Store(jobs[0].store_url)
    key = _score_cache_key(None, {"jobs": jobs, "fingerprint": fingerprint})
    if not refresh:
        hit = load_result(st, key, SCORE_CACHE_AGE)
        if hit is not None:
            return hit
    out = run_on(dask, score_regions, jobs)
    save_result(st, key, out)
    return out


SCORE_TASKS_PER_WORKER = 2
"""Score tasks per worker thread and day: few enough that orchestration stays a small share of the
scoring, enough that one slow group does not leave a worker idle for long."""


@task(name="finish-day", cache_policy=NO_CACHE, **IO_RETRIES)
def finish_day_task(store: str, day: date, kind: str, model_run: str, results: list[dict[str, Any]],
                    failures: list[dict[str, Any]], run_id: str) -> dict[str, Any]:
    """Summary parquet, alerts, heat map and day marker."""
    from nodewatch.tasks.anomaly.score import finish_day

    return finish_day(Store(store), day, kind, model_run, results, failures, run_id)


@task(name="checkpoint-tables", cache_policy=NO_CACHE, **IO_RETRIES)
def checkpoint_task(store: str) -> dict[str, Any]:
    """Refresh the checkpoint tables from the staged jobs and the observed failures."""
    from nodewatch.tasks.anomaly.score import telemetry_geometry
    from nodewatch.tasks.checkpoint.tables import run_checkpoint_tables
    from nodewatch.tasks.report.nightly import failure_model_for_tables

    st = Store(store)
    _, tele = telemetry_geometry(st)
    fm, fit = failure_model_for_tables(st, len(tele.nodes))
    jobs = "staged" if st.staged_dates("jobs") else None
    m = run_checkpoint_tables(st, jobs=jobs, failure_models=[fm], parameters={"jobs": jobs, "failure_model": fm.__dict__,
                                                                              "from": "nightly"})
    return {"run_id": m["run_id"], "status": m["status"], "summary": m["notes"].get("summary", []),
            "failure_model": fm.__dict__, "failure_fit": fit, "outputs": m["outputs"]}


@task(name="node-states", cache_policy=NO_CACHE, **IO_RETRIES)
def states_task(start: date, end: date, store: str, rebuild_cube: bool = False) -> dict[str, Any]:
    """SaNSA node states of ``start..end`` (needs staged syslog); ``rebuild_cube`` rewrites the state cube."""
    from nodewatch.flows.states import run_states_build

    m = run_states_build(start, end, store, rebuild_cube)
    return {"run_id": m["run_id"], "status": m["status"], "nodes": m["outputs"].get("nodes"),
            "failure_events": m["counts"].get("failure_events", {}).get("staged", 0)}


# ----------------------------------------------------------------------------- shared bodies
def _ingest(st: Store, inbox: Path, days: list[date], rec: RunRecorder) -> dict[str, Any]:
    """Ingest every source's files of ``days`` (one ingest run per source; already ingested bytes are no-ops)."""
    from nodewatch.flows.ingest import INGEST_ORDER, run_source
    from nodewatch.tasks.ingest.inbox import SOURCE_FORMATS, day_files, header_only

    files: dict[str, list[str]] = {}
    empty: dict[str, list[str]] = {}
    for d in days:
        for src, fs in day_files(inbox, d).items():
            for f in fs:
                (empty if header_only(f) else files).setdefault(src, []).append(f)
    out: dict[str, Any] = {s: {"status": "empty", "empty_files": fs} for s, fs in empty.items() if s not in files}
    for src in sorted(files, key=lambda s: INGEST_ORDER.index(s) if s in INGEST_ORDER else 99):
        try:
            m = run_source(src, sorted(set(files[src])), SOURCE_FORMATS.get(src, "auto"), store=st.url,
                           data_docs=False, flow_name=f"ingest_{src}")
        except Exception as e:  # noqa: BLE001 - one source failing must not stop the others
            rec.error(f"ingest {src}: {type(e).__name__}: {e}")
            out[src] = {"status": "failed", "error": str(e)}
            continue
        out[src] = {"run_id": m["run_id"], "status": m["status"], "files": len(m["inputs"]),
                    "counts": m["counts"], "errors": m["errors"][:10], "empty_files": empty.get(src, [])}
        for err in m["errors"][:10]:
            rec.error(f"ingest {src}: {err}")
    if not files and not empty:
        rec.error(f"no input file for {', '.join(map(str, days))} in {inbox}")
    return out


def _validation(ingest: dict[str, Any]) -> dict[str, Any]:
    """Row accounting of the day: rows in = staged + quarantined + duplicates for every table."""
    tables: dict[str, dict[str, int]] = {}
    for r in ingest.values():
        for t, c in (r.get("counts") or {}).items():
            acc = tables.setdefault(t, {"rows_in": 0, "staged": 0, "quarantined": 0, "duplicates": 0})
            for k in acc:
                acc[k] += int(c[k])
    unbalanced = [t for t, c in tables.items() if c["rows_in"] != c["staged"] + c["quarantined"] + c["duplicates"]]
    return {"tables": tables, "balanced": not unbalanced, "unbalanced": unbalanced,
            "quarantined": sum(c["quarantined"] for c in tables.values())}


def _score_days(st: Store, days: list[date], kind: str, model_run: str, force: bool, rec: RunRecorder,
                workers: int) -> dict[date, dict[str, Any]]:
    """Score all (day, node batch) regions of ``days`` in parallel, then finish each day."""
    from nodewatch.tasks.anomaly.score import group_jobs, region_jobs, scores_cube_id
    from nodewatch.tasks.cubes.cluster import fanout

    logger = get_run_logger()
    prepare_scores_task(st.url)
    n_groups = SCORE_TASKS_PER_WORKER * max(1, workers)
    jobs = {d: group_jobs(region_jobs(st, d, kind, model_run), n_groups) for d in days}
    cube_id = scores_cube_id(st)
    runner = ThreadPoolTaskRunner(max_workers=max(1, workers))
    futures: dict[date, list[tuple[tuple[ScoreJob, ...], Any]]] = {}
    with fanout(None, workers) as dask_at, runner:  # NODEWATCH_DASK=slurm/address: the groups run on that cluster
        for d, groups in jobs.items():
            fp = f"{telemetry_fingerprint(st, d)}-{cube_id}"
            futures[d] = [(g, runner.submit(score_task, {"jobs": g, "fingerprint": fp, "name": _group_name(g),
                                                         "refresh": force, "dask": dask_at}))
                          for g in groups]
        out: dict[date, dict[str, Any]] = {}
        for d, fs in futures.items():
            results, failures = [], []
            for g, f in fs:
                f.wait()
                if f.state.is_completed():
                    results.extend(f.result())
                    continue
                try:
                    f.result()
                    lost = [(j, "unknown error") for j in g]
                except PartialScoringError as e:
                    results.extend(e.results)
                    failures.extend(e.failures)
                    lost = []
                except Exception as e:  # noqa: BLE001 - the whole group failed before scoring
                    lost = [(j, f"score batch {j.region.key} failed for nodes {', '.join(batch_nodes(st, j.batch))}: {e}")
                            for j in g]
                failures.extend(batch_failure(st, j, err) for j, err in lost)
            for fail in failures:
                logger.error(fail["error"])
                rec.error(fail["error"])
            for err in (e for r in results for e in r.get("errors", [])):  # nodes failed alone (damaged model files)
                logger.error(err)
                rec.error(err)
            if failures and not results:  # nothing scored: publish nothing, the day's previous scores stay
                msg = (f"scoring {d.isoformat()}: all {len(failures)} node batch(es) failed; nothing published, "
                       "the previously published scores and summary of the day are kept")
                logger.error(msg)
                rec.error(msg)
                nodes = sorted(n for f in failures for n in f["nodes"])
                out[d] = {"day": d.isoformat(), "published": False, "scored": 0, "flagged": 0, "no_model": [],
                          "no_data": [], "failed_nodes": nodes, "failed_batches": sorted(f["batch"] for f in failures),
                          "error": msg}
                continue
            # quote(): the summary rows (one dict per node) need no walk for upstream futures; Prefect's
            # parameter introspection of ~1000 dicts would cost more than writing them
            out[d] = finish_day_task(st.url, d, kind, model_run, quote(results), quote(failures), rec.run_id)
    return out


def _group_name(group: tuple[ScoreJob, ...]) -> str:
    first, last = group[0], group[-1]
    return f"{first.day}-b{first.batch}" + (f"..b{last.batch}" if last.batch != first.batch else "")


def _report(st: Store, day: date, score: dict[str, Any], steps: dict[str, Any], truth: str | None,
            checkpoint: dict[str, Any] | None) -> dict[str, Any]:
    """Evaluate against ground truth (if any), render the markdown report, publish artifacts."""
    from nodewatch.tasks.anomaly.score import read_alerts, read_summary
    from nodewatch.tasks.report.nightly import day_flags, evaluate_day, ground_truth, report_markdown, with_sections, write_report

    summary, alerts = read_summary(st, day), read_alerts(st, day)
    ev = None
    if truth and Path(truth, "truth").is_dir():
        flags, step = day_flags(st, day)
        ev = evaluate_day(summary, alerts, flags, ground_truth(truth, day), step)
    md = with_sections(st, day, report_markdown(day, steps, score, alerts, ev, (checkpoint or {}).get("summary")))
    paths = write_report(st, day, md, ev)
    key = artifact_key("nightly", day.isoformat())
    create_markdown_artifact(md, key=key, description=f"nightly report {day}")
    rows = alerts.head(200).assign(
        first_time=lambda d: d["first_time"].astype(str), peak_time=lambda d: d["peak_time"].astype(str),
        top_metrics=lambda d: d["top_metrics"].map(", ".join), day=lambda d: d["day"].astype(str))
    create_table_artifact(md_records(rows.to_dict("records")) or [{"node": "none flagged"}], key=f"{key}-alerts",
                          description=f"alerts {day}: {len(alerts)} node(s) flagged")
    heat = score.get("heatmap")
    if heat:
        create_link_artifact(artifact_link(st, heat), link_text=f"score heat map {day}",
                             key=f"{key}-heatmap", description="node x time anomaly score")
    create_link_artifact(artifact_link(st, paths["report"]), link_text=f"nightly report {day}", key=f"{key}-report",
                         description="the report as a page")
    verdicts = (steps.get("verdicts") or {}).get("status") == "done" and st.exists("reports", day.isoformat(), "verdicts.md")
    if verdicts:
        create_link_artifact(artifact_link(st, st.path("reports", day.isoformat(), "verdicts.md")),
                             link_text=f"node verdicts {day}", key=f"{key}-verdicts", description="docs/alerts.md")
    log("report %s", artifact_link(st, paths["report"]))
    out = {"report": paths["report"], "flagged": len(alerts)}
    if ev is not None:
        out["evaluation"] = ev.as_dict()
    return out


def _verdicts(st: Store, day: date, truth: str | None, rec: RunRecorder) -> dict[str, Any]:
    """Node verdicts of the day (docs/alerts.md); never stops the night: too little history is skipped,
    an error is one line in the manifest and the step row."""
    from nodewatch.tasks.anomaly.verdicts import run_verdicts

    try:
        v = run_verdicts(st, day)
    except ValueError as e:  # too little history, day not in the cube
        return {"status": "skipped", "details": str(e).splitlines()[0][:200]}
    except Exception as e:  # noqa: BLE001 - the report must still be written
        rec.error(f"verdicts: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return {"status": "FAILED", "details": str(e).splitlines()[0][:200] if str(e) else type(e).__name__}
    details = (f"{v['node_alerts']} node alert(s), {v['group_alerts']} group alert(s), {len(v['flagged_nodes'])} node(s) "
               f"named; plain robust-z baseline flags {v['baseline_nodes']}; {v['markdown']}")
    out = {k: v[k] for k in ("verdicts", "markdown", "node_alerts", "group_alerts", "baseline_nodes")}
    if truth and Path(truth, "truth").is_dir():
        from nodewatch.tasks.report.nightly import ground_truth

        pos = set(ground_truth(truth, day)["node"])
        flagged = set(v["flagged_nodes"])
        tp = len(pos & flagged)
        out["node_precision"] = tp / len(flagged) if flagged else None
        out["node_recall"] = tp / len(pos) if pos else None
        p, r = out["node_precision"], out["node_recall"]
        details += (f"; against truth: node precision {'n/a' if p is None else f'{p:.2f}'}, "
                    f"recall {'n/a' if r is None else f'{r:.2f}'}")
    rec.add_output("verdicts", out)
    return {"status": "done", "details": details}


def _progress(steps: dict[str, Any], name: str) -> None:
    """One line per finished step in the run log (the Prefect UI's Logs tab)."""
    row = steps.get(name) or {}
    log("step %s: %s %s", name, row.get("status", "?"), str(row.get("details", ""))[:300])


def _extra_steps(st: Store, day: date, truth: str | None, rec: RunRecorder, steps: dict[str, Any]) -> None:
    """The capability steps of :mod:`nodewatch.tasks.core.nightly_steps`; one failing never stops the night."""
    from nodewatch.tasks.core.nightly_steps import StepContext, discover

    ctx = StepContext(store=st, day=day, settings=load_settings(store=st.url), rec=rec, run_id=rec.run_id,
                      truth=truth, steps=steps)
    for step in discover():
        if not step.enabled(ctx.settings):
            continue
        with rec.step(step.name):
            try:
                out = step.run(ctx)
                steps[step.name] = {"status": str(out.get("status", "done")), "details": str(out.get("details", ""))}
                _progress(steps, step.name)
                rec.add_output(step.name, {k: v for k, v in out.items() if k not in ("status", "details")})
            except Exception as e:  # noqa: BLE001 - the report must still be written
                msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                rec.error(f"{step.name}: {type(e).__name__}: {msg}")
                steps[step.name] = {"status": "FAILED", "details": msg}
                _progress(steps, step.name)


def _settings_store(store: str | None) -> Store:
    return Store(load_settings(store=store).store)


# ----------------------------------------------------------------------------- flows
@flow(name="nightly", flow_run_name=flow_run_name, log_prints=True)
def nightly(day: date | None = None, demo: bool = False, inbox: str | None = None, store: str | None = None,
            model_kind: str = "ruad", truth: str | None = None, workers: int = 2, force: bool = False,
            checkpoint_tables: bool = True, states: bool = True) -> dict[str, Any]:
    """One night: [simulate] -> ingest -> validate -> cubes -> score -> states -> checkpoint tables -> report.

    ``day`` defaults to yesterday (UTC); in demo mode to the day after the last simulated one. ``inbox``
    (default ``$NODEWATCH_INBOX``) holds the day's files; ``truth`` a simulator output with ground truth
    (default: the inbox in demo mode) for precision/recall in the report.
    """
    from nodewatch.tasks.anomaly.score import current_model_run
    from nodewatch.tasks.ingest.inbox import inbox_dir

    st = _settings_store(store)
    box = inbox_dir(inbox)
    params = {"day": day, "demo": demo, "inbox": str(box), "model_kind": model_kind, "truth": truth, "force": force}
    rec = RunRecorder(st, "nightly", params, run_id=claim_run_id())
    rec.write()
    log("nodewatch run %s (manifest runs/%s.json, store %s)", rec.run_id, rec.run_id, st.url)
    steps: dict[str, Any] = {}
    failed_nodes: list[str] = []
    try:
        if demo:
            with rec.step("simulate"):
                day = simulate_day_task(str(box), day)
            steps["simulate"] = {"status": "done", "details": f"simulated {day} into {box}"}
            truth = truth or str(box)
        day = day or (datetime.now(UTC).date() - timedelta(days=1))
        rec.manifest.parameters["day"] = day.isoformat()
        with rec.step("ingest"):
            ing = _ingest(st, box, [day], rec)
        rec.add_output("ingest", ing)
        steps["ingest"] = {"status": "done" if ing else "no input",
                           "details": ", ".join(f"{s}: {r.get('status')}" for s, r in ing.items())}
        for src, r in ing.items():
            for t, c in (r.get("counts") or {}).items():
                log("ingest %s (run %s, %s file(s)): %s %s rows in, %s staged, %s quarantined, %s duplicates", src,
                    r.get("run_id"), r.get("files"), t, c.get("rows_in"), c.get("staged"), c.get("quarantined"),
                    c.get("duplicates"))
        val = _validation(ing)
        rec.add_output("validate", val)
        steps["validate"] = {"status": "balanced" if val["balanced"] else "UNBALANCED",
                             "details": f"{val['quarantined']} row(s) quarantined; "
                                        + ", ".join(f"{t} {c['staged']}/{c['rows_in']} staged" for t, c in val["tables"].items())}
        _progress(steps, "validate")
        with rec.step("cubes"):
            cm = cubes_task(day, day, st.url, force)
        rec.add_output("cubes", {"run_id": cm["run_id"], "days": cm["outputs"].get("days")})
        steps["cubes"] = {"status": cm["status"],
                          "details": ", ".join(f"{r['cube']} {r['status']}" for r in cm["outputs"]["days"])}
        _progress(steps, "cubes")
        model_run = current_model_run(st, model_kind)
        with rec.step("score"):
            if not force and day_scored(st, day, model_kind):
                from nodewatch.tasks.anomaly.score import scores_spec
                from nodewatch.tasks.cubes.writer import read_marker

                score = {k: v for k, v in (read_marker(st, scores_spec(), day) or {}).items()}
                steps["score"] = {"status": "up-to-date", "details": f"already scored with {model_run}"}
            else:
                score = _score_days(st, [day], model_kind, model_run, force, rec, workers)[day]
                steps["score"] = {"status": "FAILED" if not score.get("published", True) else
                                  "done" if not score["failed_batches"] else "PARTIAL",
                                  "details": f"{score['scored']} scored, {len(score['no_model'])} without model, "
                                             f"{score['flagged']} flagged"}
        _progress(steps, "score")
        failed_nodes = score.get("failed_nodes", [])
        rec.add_output("score", score)
        if states:
            with rec.step("states"):
                if st.staged_dates("syslog"):
                    try:
                        sm = states_task(day, day, st.url)
                        rec.add_output("states", sm)
                        steps["states"] = {"status": sm["status"], "details": f"run {sm['run_id']}, "
                                                                              f"{sm['failure_events']} failure events"}
                    except Exception as e:  # noqa: BLE001
                        rec.error(f"states: {type(e).__name__}: {e}")
                        steps["states"] = {"status": "FAILED", "details": str(e)[:200]}
                else:
                    steps["states"] = {"status": "skipped", "details": "no staged syslog"}
        with rec.step("verdicts"):
            steps["verdicts"] = _verdicts(st, day, truth, rec)
        _progress(steps, "verdicts")
        _extra_steps(st, day, truth, rec, steps)
        ck = None
        if checkpoint_tables:
            with rec.step("checkpoint_tables"):
                try:
                    ck = checkpoint_task(st.url)
                    steps["checkpoint_tables"] = {"status": ck["status"], "details": f"run {ck['run_id']}, model "
                                                  f"{ck['failure_model']['name']} ({ck['failure_fit']['reason']})"}
                    rec.add_output("checkpoint_tables", {k: ck[k] for k in ("run_id", "status", "failure_model", "failure_fit")})
                except Exception as e:  # noqa: BLE001 - the report must still be written
                    rec.error(f"checkpoint tables: {type(e).__name__}: {e}")
                    steps["checkpoint_tables"] = {"status": "FAILED", "details": str(e)[:200]}
        with rec.step("report"):
            rep = (_report(st, day, score, steps, truth, ck) if score.get("published", True)
                   else {"flagged": 0, "report": None, "skipped": score.get("error")})
        rec.add_output("report", rep)
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    m = rec.finish().model_dump(mode="json")
    print(f"nightly {day}: {score.get('scored')} nodes scored, {rep['flagged']} flagged; manifest runs/{m['run_id']}.json")
    if failed_nodes:
        raise PartialRunError(f"nightly {day}: scoring failed for {len(failed_nodes)} node(s): {', '.join(failed_nodes[:50])}; "
                              f"everything else completed (manifest runs/{m['run_id']}.json)")
    return m


@flow(name="backfill", flow_run_name=flow_run_name, log_prints=True)
def backfill(start: date, end: date, force: bool = False, inbox: str | None = None, store: str | None = None,
             model_kind: str = "ruad", truth: str | None = None, workers: int = 2, states: bool = True) -> dict[str, Any]:
    """Re-run ``start..end`` (inclusive): [ingest from the inbox] -> cubes -> score -> states -> reports.

    Cube days and (day, node batch) scoring regions run in parallel; days whose cubes and scores are
    complete (same inputs, same CURRENT model) are skipped unless ``force``.
    """
    from nodewatch.tasks.anomaly.score import current_model_run
    from nodewatch.tasks.cubes.build import days_between

    st = _settings_store(store)
    days = days_between(start, end)
    rec = RunRecorder(st, "backfill", {"start": start, "end": end, "force": force, "inbox": inbox, "model_kind": model_kind},
                      run_id=claim_run_id())
    rec.write()
    try:
        if inbox:
            with rec.step("ingest"):
                rec.add_output("ingest", _ingest(st, Path(inbox), days, rec))
        with rec.step("cubes"):
            cm = cubes_task(start, end, st.url, force)
        rec.add_output("cubes", {"run_id": cm["run_id"], "days_built": cm["outputs"].get("days_built")})
        model_run = current_model_run(st, model_kind)
        todo = [d for d in days if force or not day_scored(st, d, model_kind)]
        skipped = [d.isoformat() for d in days if d not in todo]
        rec.add_output("days_skipped", skipped)
        with rec.step("score"):
            scored = _score_days(st, todo, model_kind, model_run, force, rec, workers) if todo else {}
        rec.add_output("days_scored", {d.isoformat(): {k: s[k] for k in ("scored", "flagged", "failed_batches", "failed_nodes")}
                                       for d, s in scored.items()})
        if states and st.staged_dates("syslog") and todo:
            with rec.step("states"):
                try:
                    first, last, rebuild = _states_range(st, min(todo), max(todo))
                    rec.add_output("states", states_task(first, last, st.url, rebuild))
                except Exception as e:  # noqa: BLE001 - the reports are still written; the flow ends Failed below
                    rec.error(f"states: {type(e).__name__}: {e}")
        with rec.step("report"):
            reports = {d.isoformat(): _report(st, d, s, {"backfill": {"status": "done", "details": f"run {rec.run_id}"}},
                                              truth, None)["report"] for d, s in scored.items() if s.get("published", True)}
        rec.add_output("reports", reports)
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    m = rec.finish().model_dump(mode="json")
    rows = [{"day": d.isoformat(), "status": "skipped (complete)" if d.isoformat() in skipped else "scored",
             "scored": scored[d]["scored"] if d in scored else None, "flagged": scored[d]["flagged"] if d in scored else None,
             "failed_nodes": len(scored[d]["failed_nodes"]) if d in scored else 0} for d in days]
    create_table_artifact(rows, key=artifact_key("backfill", start.isoformat(), end.isoformat()),
                          description=f"backfill {start}..{end}: run {m['run_id']}")
    failed = sorted({n for s in scored.values() for n in s["failed_nodes"]})
    print(f"backfill {start}..{end}: {len(scored)} day(s) scored, {len(skipped)} skipped; manifest runs/{m['run_id']}.json")
    if failed:
        raise PartialRunError(f"backfill {start}..{end}: scoring failed for node(s) {', '.join(failed[:50])}; "
                              f"manifest runs/{m['run_id']}.json")
    if m["errors"]:  # a failed step (states) fails the flow run: the manifest is 'partial', the UI shows Failed
        raise PartialRunError(f"backfill {start}..{end}: {m['errors'][0][:300]}; everything else completed "
                              f"(manifest runs/{m['run_id']}.json)")
    return m


def _states_range(st: Store, first: date, last: date) -> tuple[date, date, bool]:
    """The days a backfill of ``first..last`` must (re)build states for, and whether the state cube is rebuilt.

    The state cube only grows forward: when it starts after ``first`` (a nightly ran before this backfill
    of earlier days) it is rebuilt from ``first`` through its last day (and the last staged syslog day), so
    later days keep their states (day-by-day builds equal one build of the range: the carry of
    tasks/states/build.py).
    """
    from nodewatch.schemas.states import CUBE_PATH
    from nodewatch.tasks.cubes import repo

    try:
        ds = repo.open_dataset(st, CUBE_PATH.split("/")[-1])
        t0 = date.fromisoformat(str(ds["time"].values[0])[:10])
        t1 = date.fromisoformat(str(ds["time"].values[-1])[:10])
    except Exception:  # noqa: BLE001 - no state cube yet (or unreadable: the build itself reports why)
        return first, last, False
    if t0 <= first:
        return first, last, False
    staged = [date.fromisoformat(str(d)[:10]) for d in st.staged_dates("syslog")]
    return first, max([last, t1, *(d for d in staged if d >= first)]), True


@flow(name="train_weekly", flow_run_name=flow_run_name, log_prints=True)
def train_weekly(days: int = 28, model: str = "ruad", epochs: int = 5, window: int = 10, node_batch: int = 50,
                 workers: int = 2, store: str | None = None, end: date | None = None) -> dict[str, Any]:
    """The weekly retrain: the ``train`` flow on the last ``days`` complete days before ``end`` (default: today UTC)."""
    from nodewatch.flows.train import train

    last = (end or datetime.now(UTC).date()) - timedelta(days=1)
    return train(start=last - timedelta(days=days - 1), end=last, model=model, epochs=epochs, window=window,
                 node_batch=node_batch, workers=workers, store=store)
