"""The body of the ingest flows, free of Prefect (it never imports ``prefect``).

:func:`run_source` does one source's run: discover inputs, record the run, land/parse/validate each
file, stage, finish the manifest, publish the summary. How a file step and the stage step are called
and where the summary goes are parameters: :mod:`nodewatch.flows.ingest` passes Prefect tasks (retries,
task runs) and Prefect artifacts; :func:`run_local` passes the plain functions and writes the summary
as a markdown file under ``runs/artifacts/<run_id>/`` (:mod:`nodewatch.flows.local`). Both give the same
manifest and row accounting.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from nodewatch.flows.run_names import claim_run_id, ingest_flow_name
from nodewatch.tasks.core.escape import md
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.settings import load_settings
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.discovery import discover_inputs, store_exclusions
from nodewatch.tasks.ingest.ingestor import Ingestor
from nodewatch.tasks.ingest.landing import check_forced_format, check_format
from nodewatch.tasks.ingest.run import get_source, identity_columns, new_ingestor

FileStep = Callable[[Ingestor, Path, str], dict]
StageStep = Callable[[Ingestor, bool], dict]
Publish = Callable[[str, dict], None]


def ingest_file_step(ing: Ingestor, path: Path, fmt: str) -> dict:
    """Land, parse and validate one file (any error but a transient one quarantines the file inside
    :meth:`~nodewatch.tasks.ingest.ingestor.Ingestor.add_file`)."""
    return ing.add_file(path, fmt).model_dump(mode="json")


def stage_step(ing: Ingestor, data_docs: bool) -> dict:
    """Dedupe, write and commit staged/quarantine partitions and Data Docs (once per run)."""
    res = ing.finish(data_docs=data_docs)
    return {"dates": res.dates, "data_docs": res.data_docs, "unexpected": res.unexpected}


def input_rows(manifest: dict) -> list[dict[str, Any]]:
    """One row per input file of an ingest manifest (the table artifact)."""
    return [
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


def summary_markdown(source: str, manifest: dict) -> str:
    """The run summary of an ingest manifest as markdown (counts per table, errors); values escaped."""
    lines = [f"# ingest {md(source)} — run `{manifest['run_id']}` ({manifest['status']})", ""]
    lines += ["| table | rows in | staged | quarantined | duplicates |", "|---|---|---|---|---|"]
    for t, c in manifest["counts"].items():
        lines.append(f"| {md(t)} | {c['rows_in']} | {c['staged']} | {c['quarantined']} | {c['duplicates']} |")
    lines += [f"- {md(e)}" for e in manifest["errors"]]
    return "\n".join(lines)


def files_markdown(manifest: dict) -> str:
    """The per-file table of an ingest manifest as markdown (values escaped)."""
    rows = input_rows(manifest)
    cols = ["file", "status", "format", "rows_in", "staged", "quarantined", "duplicates", "message"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(md(str(r[c])) for c in cols) + " |" for r in rows]
    return "\n".join(out)


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
    *,
    file_step: FileStep = ingest_file_step,
    stage: StageStep = stage_step,
    publish: Publish | None = None,
) -> dict:
    """Body shared by the ingest flows: returns the run manifest as a dict.

    ``follow_symlinks`` (``None``: the setting) takes symlinks that resolve to regular files under the
    given paths; by default every link, special file and file under /proc, /sys, /dev is refused
    (:mod:`nodewatch.tasks.ingest.discovery`). Refused entries of directories and globs are listed in the
    manifest's ``notes.refused_inputs``.

    ``hash_users`` (``None``: the setting): replace the source's identity columns (jobs: user, group,
    cancelled_by) by keyed hashes with the settings' ``hash_salt`` (env/TOML only, never a parameter);
    the manifest parameters record ``hash_users`` for such sources, never the salt.

    ``file_step``/``stage`` run the steps (Prefect tasks in a flow, the plain functions otherwise);
    ``publish(source, manifest)`` publishes the summary after the run finished. ``flow_name`` (default
    ``ingest_<source>``, the naming scheme of :mod:`nodewatch.flows.run_names`) is the manifest's ``flow``.
    """
    overrides = {k: v for k, v in (("hash_users", hash_users), ("follow_symlinks", follow_symlinks)) if v is not None}
    check_format(get_source(source), fmt)  # before anything lands (InputError)
    settings = load_settings(store=store, **overrides)
    st = Store(settings.store)
    found = discover_inputs(paths, follow_symlinks=settings.follow_symlinks, exclude=store_exclusions(st.url))
    files = found.files
    for f in files:  # a forced --format no first line of a file matches: a usage error, nothing lands
        check_forced_format(get_source(source), f, fmt)
    params = {"source": source, "paths": paths, "format": fmt, "start": start, "end": end, "tz": tz}
    hashing = bool(identity_columns(source)) and settings.hash_users
    if identity_columns(source):
        params["hash_users"] = settings.hash_users
    rec = RunRecorder(st, flow_name or ingest_flow_name(source), params, run_id=claim_run_id())
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
                file_step(ing, f, fmt)
        with rec.step("stage"):
            stage(ing, data_docs and settings.data_docs)
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    manifest = rec.finish().model_dump(mode="json")
    if publish is not None:
        publish(source, manifest)
    return manifest


def run_local(source: str, paths: list[str], **kw: Any) -> tuple[dict, list[str]]:
    """:func:`run_source` without Prefect: plain steps, the summary written as markdown files.

    Returns the manifest and the URLs of the files written (``runs/artifacts/<run_id>/ingest-<source>*.md``).
    """
    from nodewatch.flows.local import write_artifact
    from nodewatch.flows.prefect_env import artifact_key

    written: list[str] = []

    def publish(src: str, manifest: dict) -> None:
        st = Store(load_settings(store=kw.get("store")).store)
        text = summary_markdown(src, manifest) + "\n\n## files\n\n" + files_markdown(manifest) + "\n"
        docs = [v for k, v in manifest["outputs"].items() if k.startswith("data_docs_") and v]
        text += "".join(f"\nGX Data Docs: {md(v)}\n" for v in docs)
        written.append(write_artifact(st, manifest["run_id"], artifact_key("ingest", src, "summary"), text))

    return run_source(source, paths, publish=publish, **kw), written
