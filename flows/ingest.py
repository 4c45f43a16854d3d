"""Prefect flows for ingestion: one flow ``ingest_<source>`` per source (:func:`ingest` runs it, :func:`ingest_jobs`
is the jobs one with ``hash_users``) and ``ingest_sources`` (several sources, topology first). The flow name is
the manifest's ``flow`` field (naming scheme: :mod:`nodewatch.flows.run_names`).

The flows are thin: each file is one task with retries (transient I/O), the run's body is
:func:`nodewatch.flows.ingest_steps.run_source` (also run without Prefect by the CLI when no server is
configured) and the pipeline logic lives in :mod:`nodewatch.tasks.ingest`. Results appear as table,
markdown and link artifacts.
"""

from __future__ import annotations

import functools
from datetime import datetime
from pathlib import Path

from prefect import Flow, flow, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from nodewatch.flows import ingest_steps as steps
from nodewatch.flows.ingest_steps import ingest_file_step, input_rows, stage_step, summary_markdown
from nodewatch.flows.prefect_env import artifact_key
from nodewatch.flows.run_names import artifact_link, flow_run_name, ingest_flow_name, log
from nodewatch.tasks.core.escape import md_records
from nodewatch.tasks.ingest.ingestor import Ingestor


def transient(exc: BaseException) -> bool:
    """Whether an error is worth retrying: I/O (``OSError``: connection, timeout, a busy filesystem), never a
    deterministic parse error (``ValueError``, ``ArrowInvalid``, ``InputError``: the same bytes fail again)."""
    from nodewatch.tasks.ingest.ingestor import transient_io

    return transient_io(exc)


def _retry_transient(task, task_run, state) -> bool:  # noqa: ANN001 - Prefect's retry_condition_fn signature
    try:
        state.result(raise_on_failure=True)
    except BaseException as e:  # noqa: BLE001 - the task's own exception decides
        return transient(e)
    return False


@task(retries=2, retry_delay_seconds=[2, 10], retry_condition_fn=_retry_transient,
      task_run_name="ingest-file-{path.name}", cache_policy=NO_CACHE)
def ingest_file(ing: Ingestor, path: Path, fmt: str) -> dict:
    """Land, parse and validate one file (retried on transient I/O errors only; any other error
    quarantines the file inside :meth:`~nodewatch.tasks.ingest.ingestor.Ingestor.add_file`); its counts go to
    the run log."""
    out = ingest_file_step(ing, path, fmt)
    c = out.get("counts") or {}
    log("%s: parsed (%s), format %s, %s rows in, %s quarantined so far", Path(path).name, out.get("status"),
        out.get("format") or "?", c.get("rows_in"), c.get("quarantined"))
    return out


@task(cache_policy=NO_CACHE)
def stage(ing: Ingestor, data_docs: bool) -> dict:
    """Dedupe, write and commit staged/quarantine partitions and Data Docs (not retried: the commit is once per run)."""
    out = stage_step(ing, data_docs)
    log("staged and committed %d date partition(s)%s", len(out.get("dates") or []),
        ", Data Docs written" if out.get("data_docs") else "")
    return out


def _publish(source: str, manifest: dict) -> None:
    for r in input_rows(manifest):
        log("%s: %s, %s rows in, %s staged, %s quarantined, %s duplicates%s", r["file"], r["status"], r["rows_in"],
            r["staged"], r["quarantined"], r["duplicates"], f" ({r['message']})" if r["message"] else "")
    create_table_artifact(md_records(input_rows(manifest)), key=artifact_key("ingest", source),
                          description=f"ingest {source}: run {manifest['run_id']}")
    create_markdown_artifact(summary_markdown(source, manifest), key=artifact_key("ingest", source, "summary"))
    for k, v in manifest["outputs"].items():
        if k.startswith("data_docs_") and v:
            link = artifact_link(None, v)
            create_link_artifact(link, key=artifact_key("gx-data-docs", source), link_text="GX Data Docs")
            log("GX Data Docs: %s", link)


def run_source(
    source: str,
    paths: list[str],
    fmt: str = "auto",
    start: datetime | None = None,
    end: datetime | None = None,
    store: str | None = None,
    tz: str = "UTC",
    data_docs: bool = True,
    flow_name: str | None = None,
    hash_users: bool | None = None,
    follow_symlinks: bool | None = None,
) -> dict:
    """Body shared by the ingest flows (:func:`nodewatch.flows.ingest_steps.run_source` with Prefect tasks for
    the steps and Prefect artifacts for the summary): returns the run manifest as a dict."""
    return steps.run_source(source, paths, fmt, start, end, store, tz, data_docs, flow_name, hash_users, follow_symlinks,
                            file_step=ingest_file, stage=stage, publish=_publish)


def _ingest_one(
    source: str,
    paths: list[str],
    fmt: str = "auto",
    start: datetime | None = None,
    end: datetime | None = None,
    store: str | None = None,
    tz: str = "UTC",
    data_docs: bool = True,
    follow_symlinks: bool | None = None,
) -> dict:
    """Ingest files of one source (jobs, telemetry, syslog, alerts, tickets, topology, failures, …)."""
    return run_source(source, paths, fmt, start, end, store, tz, data_docs, follow_symlinks=follow_symlinks)


@functools.cache
def ingest_flow(source: str) -> Flow:
    """The Prefect flow ``ingest_<source>`` (one per source, so the UI lists each source's runs under its name)."""
    return flow(_ingest_one, name=ingest_flow_name(source), flow_run_name=flow_run_name, log_prints=True)


def ingest(
    source: str,
    paths: list[str],
    fmt: str = "auto",
    start: datetime | None = None,
    end: datetime | None = None,
    store: str | None = None,
    tz: str = "UTC",
    data_docs: bool = True,
    follow_symlinks: bool | None = None,
) -> dict:
    """Run the flow ``ingest_<source>`` on ``paths`` and return its manifest (``jobs``: :func:`ingest_jobs`; an
    unknown source is a one-line ``ValueError`` before any flow run starts)."""
    from nodewatch.tasks.ingest.run import get_source

    get_source(source)
    if source == "jobs":
        return ingest_jobs(paths, fmt, store, tz, data_docs, start, end, follow_symlinks=follow_symlinks)
    return ingest_flow(source)(source, paths, fmt, start, end, store, tz, data_docs, follow_symlinks)


@flow(name="ingest_jobs", flow_run_name=flow_run_name, log_prints=True)
def ingest_jobs(
    paths: list[str],
    fmt: str = "auto",
    store: str | None = None,
    tz: str = "UTC",
    data_docs: bool = True,
    start: datetime | None = None,
    end: datetime | None = None,
    hash_users: bool | None = None,
    follow_symlinks: bool | None = None,
) -> dict:
    """Ingest Slurm sacct dumps and SWF traces into the staged ``jobs`` table.

    ``hash_users`` (default: settings ``hash_users``) replaces user, group and cancelled_by by keyed
    hashes; the key is the settings' ``hash_salt`` (``NODEWATCH_HASH_SALT`` or the TOML file).
    """
    return run_source("jobs", paths, fmt, start, end, store, tz, data_docs, hash_users=hash_users,
                      follow_symlinks=follow_symlinks)


INGEST_ORDER = ("topology", "reservations", "jobs", "telemetry", "syslog", "alerts", "tickets", "failures")


@flow(name="ingest_sources", flow_run_name=flow_run_name, log_prints=True)
def ingest_sources(
    sources: dict[str, list[str]],
    start: datetime | None = None,
    end: datetime | None = None,
    store: str | None = None,
    tz: str = "UTC",
) -> dict[str, dict]:
    """Ingest several sources for a date window; topology first so known nodes and aliases apply."""
    order = sorted(sources, key=lambda s: INGEST_ORDER.index(s) if s in INGEST_ORDER else len(INGEST_ORDER))
    return {s: run_source(s, sources[s], "auto", start, end, store, tz, True) for s in order}
