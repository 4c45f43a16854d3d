"""Prefect flows for ingestion: ``ingest`` (one source), ``ingest_jobs`` and ``ingest_sources``.

The flows are thin: each file is one task with retries (transient I/O), the pipeline logic lives
in :mod:`nodewatch.tasks.ingest`. Results appear as table, markdown and link artifacts.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from nodewatch.flows.prefect_env import artifact_key
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.settings import load_settings
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.discovery import discover_inputs, store_exclusions
from nodewatch.tasks.ingest.ingestor import Ingestor
from nodewatch.tasks.ingest.run import identity_columns, new_ingestor


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
    quarantines the file inside :meth:`~nodewatch.tasks.ingest.ingestor.Ingestor.add_file`)."""
    rec = ing.add_file(path, fmt)
    return rec.model_dump(mode="json")


@task(cache_policy=NO_CACHE)
def stage(ing: Ingestor, data_docs: bool) -> dict:
    """Dedupe, write and commit staged/quarantine partitions and Data Docs (not retried: the commit is once per run)."""
    res = ing.finish(data_docs=data_docs)
    return {"dates": res.dates, "data_docs": res.data_docs, "unexpected": res.unexpected}


def _publish(source: str, manifest: dict) -> None:
    rows = [
        {
            "file": Path(i["path"]).name,
            "status": i["status"],
            "format": i.get("format") or "",
            "rows_in": i["counts"]["rows_in"],
            "staged": i["counts"]["staged"],
            "quarantined": i["counts"]["quarantined"],
            "duplicates": i["counts"]["duplicates"],
            "message": i.get("message") or "",
        }
        for i in manifest["inputs"]
    ]
    create_table_artifact(rows, key=artifact_key("ingest", source), description=f"ingest {source}: run {manifest['run_id']}")
    counts = manifest["counts"]
    lines = [f"# ingest {source} — run `{manifest['run_id']}` ({manifest['status']})", ""]
    lines += ["| table | rows in | staged | quarantined | duplicates |", "|---|---|---|---|---|"]
    for t, c in counts.items():
        lines.append(f"| {t} | {c['rows_in']} | {c['staged']} | {c['quarantined']} | {c['duplicates']} |")
    lines += [f"- {e}" for e in manifest["errors"]]
    create_markdown_artifact("\n".join(lines), key=artifact_key("ingest", source, "summary"))
    for k, v in manifest["outputs"].items():
        if k.startswith("data_docs_") and v:
            create_link_artifact(
                v if "://" in v else f"file://{v}", key=artifact_key("gx-data-docs", source), link_text="GX Data Docs"
            )


def run_source(
    source: str,
    paths: list[str],
    fmt: str = "auto",
    start: datetime | None = None,
    end: datetime | None = None,
    store: str | None = None,
    tz: str = "UTC",
    data_docs: bool = True,
    flow_name: str = "ingest",
    hash_users: bool | None = None,
    follow_symlinks: bool | None = None,
) -> dict:
    """Body shared by the ingest flows: returns the run manifest as a dict.

    ``follow_symlinks`` (``None``: the setting) takes symlinks that resolve to regular files under the
    given paths; by default every link, special file and file under /proc, /sys, /dev is refused
    (:mod:`nodewatch.tasks.ingest.discovery`). Refused entries of directories and globs are listed in the
    manifest's ``notes.refused_inputs``.

    ``hash_users`` (``None``: the setting): replace the source's identity columns (jobs: user, group,
    cancelled_by) by keyed hashes with the settings' ``hash_salt`` (env/TOML only, never a parameter);
    the manifest parameters record ``hash_users`` for such sources, never the salt.
    """
    overrides = {k: v for k, v in (("hash_users", hash_users), ("follow_symlinks", follow_symlinks)) if v is not None}
    settings = load_settings(store=store, **overrides)
    st = Store(settings.store)
    found = discover_inputs(paths, follow_symlinks=settings.follow_symlinks, exclude=store_exclusions(st.url))
    files = found.files
    params = {"source": source, "paths": paths, "format": fmt, "start": start, "end": end, "tz": tz}
    hashing = bool(identity_columns(source)) and settings.hash_users
    if identity_columns(source):
        params["hash_users"] = settings.hash_users
    rec = RunRecorder(st, flow_name, params)
    if found.refused:
        rec.manifest.notes["refused_inputs"] = [{"path": r.path, "reason": r.reason} for r in found.refused]
    rec.write()
    try:
        ing = new_ingestor(
            st,
            source,
            rec,
            start=start,
            end=end,
            tz=tz,
            future_tolerance_s=settings.future_tolerance_s,
            service_hosts=settings.service_hosts,
            hash_salt=settings.hash_salt.get_secret_value() if hashing else None,
        )
        with rec.step("parse_validate"):
            for f in files:
                ingest_file(ing, f, fmt)
        with rec.step("stage"):
            stage(ing, data_docs and settings.data_docs)
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    manifest = rec.finish().model_dump(mode="json")
    _publish(source, manifest)
    return manifest


@flow(name="ingest", log_prints=True)
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
    """Ingest files of one source (jobs, telemetry, syslog, alerts, tickets, topology, failures, …)."""
    return run_source(source, paths, fmt, start, end, store, tz, data_docs, flow_name="ingest", follow_symlinks=follow_symlinks)


@flow(name="ingest_jobs", log_prints=True)
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
    return run_source("jobs", paths, fmt, start, end, store, tz, data_docs, flow_name="ingest_jobs", hash_users=hash_users,
                      follow_symlinks=follow_symlinks)


INGEST_ORDER = ("topology", "reservations", "jobs", "telemetry", "syslog", "alerts", "tickets", "failures")


@flow(name="ingest_sources", log_prints=True)
def ingest_sources(
    sources: dict[str, list[str]],
    start: datetime | None = None,
    end: datetime | None = None,
    store: str | None = None,
    tz: str = "UTC",
) -> dict[str, dict]:
    """Ingest several sources for a date window; topology first so known nodes and aliases apply."""
    order = sorted(sources, key=lambda s: INGEST_ORDER.index(s) if s in INGEST_ORDER else len(INGEST_ORDER))
    return {s: run_source(s, sources[s], "auto", start, end, store, tz, True, flow_name=f"ingest_{s}") for s in order}
