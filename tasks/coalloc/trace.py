"""Jobs to replay from a real trace: SWF files (through the ingest SWF parser), job-list CSVs, staged jobs.

Every job that cannot be replayed is *quarantined* with a reason and counted, and the replay goes on:

* ``parse: ...`` -- a line the SWF parser rejects (its own reasons), or a CSV field that is not a number;
* ``negative run time`` -- the trace says the job ran for less than 0 s;
* ``no run time`` -- the job started but the trace does not say for how long (e.g. still running);
* ``no processor count`` -- the trace does not say how many processors/nodes the job had;
* ``larger than the machine`` -- more nodes than the replayed machine has (``--nodes``);
* ``unknown application class`` -- a job-list CSV names a class other than gtc/amg/milc/ghost/snap;
* ``duplicate job id`` -- a job-list CSV repeats a ``job_id`` (the first row is kept).

Jobs that never started (SWF run time -1, :func:`nodewatch.schemas.jobs.never_started`) are valid records
of cancelled jobs, not quarantined: they are skipped by rule and counted (``never_started``).

Real jobs get an application class by the runtime rule
(:func:`nodewatch.models.coalloc.workload.classes_by_runtime`) and their trace run time as exclusive
work; the rank count for the slowdown is the job's processor count (clamped to 512-4096 by the model).
The backfill estimate is the requested time when the trace has one (never below the run time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nodewatch.models.coalloc.frank_tables import APPS
from nodewatch.models.coalloc.workload import Jobs, classes_by_runtime

MAX_CSV_BYTES = 256 << 20
"""Largest job-list CSV read (decompressed); larger lists belong in an SWF trace or the staged jobs table."""

CSV_COLUMNS = ("submit_s", "app", "ranks", "runtime_s")
"""Required columns of a job-list CSV (optional: ``estimate_s``, ``nodes``, ``job_id``)."""


@dataclass
class LoadedJobs:
    """Jobs ready to replay plus what was left out, with reasons."""

    jobs: Jobs
    quarantine: pd.DataFrame
    """One row per quarantined job: ``source_offset`` (line or row), ``job_id``, ``reason``."""
    counts: dict[str, int] = field(default_factory=dict)
    """``rows_in``, ``replayed``, ``quarantined``, ``never_started`` and one count per reason."""
    source: str = ""


def _quarantine_frame(offsets: Any, ids: Any, reasons: Any) -> pd.DataFrame:
    return pd.DataFrame({"source_offset": np.asarray(offsets, dtype=np.int64),
                         "job_id": pd.Series(ids, dtype="string"), "reason": pd.Series(reasons, dtype="string")})


def _finish(df: pd.DataFrame, bad: pd.DataFrame, n_nodes: int, cores_per_node: int, never_started: int, rows_in: int,
            source: str, app_given: bool) -> LoadedJobs:
    """Common checks of SWF/staged/CSV jobs: ``df`` has submit_s, runtime_s, est_s, nodes, ranks, job_id, offset[, app]."""
    reasons = pd.Series(pd.NA, index=df.index, dtype="string")
    reasons[df["runtime_s"].isna()] = "no run time (started, but the trace does not say for how long)"
    reasons[reasons.isna() & (df["runtime_s"] < 0)] = "negative run time"
    reasons[reasons.isna() & (df["nodes"].isna() | (df["nodes"] < 1))] = "no processor count"
    reasons[reasons.isna() & (df["nodes"] > n_nodes)] = f"larger than the machine (> {n_nodes} nodes)"
    if app_given:
        reasons[reasons.isna() & (df["app"] < 0)] = "unknown application class"
    q = reasons.notna()
    bad = pd.concat([bad, _quarantine_frame(df.loc[q, "offset"], df.loc[q, "job_id"], reasons[q])], ignore_index=True)
    ok = df[~q].sort_values("submit_s", kind="stable")
    runtime = ok["runtime_s"].to_numpy(float)
    app = ok["app"].to_numpy(np.int64) if app_given else classes_by_runtime(runtime)
    submit = ok["submit_s"].to_numpy(float)
    submit = submit - (submit.min() if submit.size else 0.0)
    est = np.maximum(ok["est_s"].fillna(0).to_numpy(float), runtime)
    jobs = Jobs(submit, runtime, est, ok["nodes"].to_numpy(np.int64), ok["ranks"].to_numpy(np.int64), app)
    counts = {"rows_in": rows_in, "replayed": len(jobs), "quarantined": len(bad), "never_started": never_started}
    for r, n in bad["reason"].str.replace(r"^(parse:[^(,]*).*$", r"\1", regex=True).value_counts().items():
        counts[f"quarantined: {r}"] = int(n)
    if counts["rows_in"] != counts["replayed"] + counts["quarantined"] + counts["never_started"]:
        raise AssertionError(f"row accounting of {source} does not add up: {counts}")
    return LoadedJobs(jobs, bad.reset_index(drop=True), counts, source)


def _from_jobs_table(t: pd.DataFrame, rejects: pd.DataFrame, n_nodes: int, cores_per_node: int, source: str) -> LoadedJobs:
    """Rows of the ``jobs`` schema (parsed or staged) -> replay jobs."""
    if "step" in t.columns:
        t = t[t["step"].isna()]
    never = t["elapsed_s"].isna() & t["start_time"].isna() if "start_time" in t.columns else t["elapsed_s"].isna()
    t = t[~never]
    submit = pd.to_datetime(t["submit_time"], utc=True)
    df = pd.DataFrame({
        "submit_s": (submit - submit.min()).dt.total_seconds() if len(t) else pd.Series(dtype=float),
        "runtime_s": t["elapsed_s"].astype("Float64").astype(float) if len(t) else pd.Series(dtype=float),
        "est_s": t["timelimit_s"].astype("Float64").astype(float) if "timelimit_s" in t.columns else np.nan,
        "nodes": t["nodes"].astype("Float64").astype(float),
        "ranks": t["cores"].astype("Float64").astype(float).fillna(t["nodes"].astype("Float64").astype(float))
        if "cores" in t.columns else t["nodes"].astype(float),
        "job_id": t["job_id"].astype("string") if "job_id" in t.columns else pd.NA,
        "offset": t["source_offset"].astype(np.int64) if "source_offset" in t.columns else np.arange(len(t)),
    })
    df["ranks"] = df["ranks"].fillna(1).clip(lower=1)
    bad = _quarantine_frame(rejects["source_offset"], [pd.NA] * len(rejects), rejects["reason"])
    rows_in = len(df) + int(never.sum()) + len(rejects)
    out = _finish(df, bad, n_nodes, cores_per_node, int(never.sum()), rows_in, source, app_given=False)
    return out


def load_swf(path: str | Path, n_nodes: int, cores_per_node: int = 8) -> LoadedJobs:
    """An SWF trace (plain or compressed) parsed by :func:`nodewatch.tasks.ingest.jobs_swf.parse_swf`, not staged.

    Raises:
        nodewatch.tasks.ingest.inputs.InputError: not an SWF trace, empty, truncated compressed stream.
    """
    import pyarrow as pa

    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.inputs import open_binary
    from nodewatch.tasks.ingest.jobs_swf import parse_swf

    cols = ["job_id", "submit_time", "start_time", "elapsed_s", "timelimit_s", "nodes", "cores", "source_offset"]
    rows, rejects = [], []
    with open_binary(path) as fh:
        for r in parse_swf(fh, ParseContext(name=Path(path).name, batch_rows=500_000)):
            rows.append(r.rows.select(cols))
            if r.rejects.num_rows:
                rejects.append(r.rejects.to_pandas())
    t = pa.concat_tables(rows).to_pandas() if rows else pd.DataFrame(columns=cols)
    rej = pd.concat(rejects, ignore_index=True) if rejects else pd.DataFrame({"source_offset": [], "reason": []})
    return _from_jobs_table(t, rej, n_nodes, cores_per_node, Path(path).name)


def load_staged(store: Any, n_nodes: int, cores_per_node: int = 8, system: str | None = None) -> LoadedJobs:
    """The committed staged ``jobs`` table (``--jobs staged``), optionally one ``system``."""
    cols = ["job_id", "step", "system", "submit_time", "start_time", "elapsed_s", "timelimit_s", "nodes", "cores"]
    t = store.read_staged("jobs", columns=cols)
    if t is None:
        raise FileNotFoundError(f"no staged jobs in {store.url} (run `nodewatch ingest jobs ...` first)")
    df = t.to_pandas()
    if system is not None:
        df = df[df["system"] == system]
        if df.empty:
            raise ValueError(f"no staged jobs of system {system!r}")
    df = df.reset_index(drop=True)
    df["source_offset"] = np.arange(len(df))
    return _from_jobs_table(df, pd.DataFrame({"source_offset": [], "reason": []}), n_nodes, cores_per_node, "staged jobs")


def load_csv(path: str | Path, n_nodes: int, cores_per_node: int = 32) -> LoadedJobs:
    """A job list: ``submit_s,app,ranks,runtime_s[,estimate_s,nodes,job_id]`` (UTF-8, one header line).

    Raises:
        nodewatch.tasks.ingest.inputs.InputError: not UTF-8 text, no header, a required column missing.
    """
    import io

    from nodewatch.tasks.ingest.inputs import InputError, open_binary

    name = Path(path).name
    with open_binary(path) as f:  # no link followed; .gz/.xz decompressed within the settings' bounds
        data = f.read(MAX_CSV_BYTES + 1)
    if len(data) > MAX_CSV_BYTES:
        raise InputError(f"{name}: job list larger than {MAX_CSV_BYTES >> 20} MiB; use an SWF trace or staged jobs")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{name}: not UTF-8 text (byte {e.start}), line 1") from None
    if not text.strip():
        raise InputError(f"{name}: empty job list, line 0")
    import csv

    try:
        records = list(csv.reader(io.StringIO(text, newline=""), skipinitialspace=True))
    except csv.Error as e:
        raise InputError(f"{name}: not a job-list CSV ({e})") from None
    header = [h.strip() for h in records[0]]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{name}: missing column(s) {', '.join(missing)}; need {','.join(CSV_COLUMNS)}, line 1")
    if len(set(header)) != len(header):
        raise InputError(f"{name}: repeated column names in the header, line 1")
    body = [(i + 2, r) for i, r in enumerate(records[1:]) if any(f.strip() for f in r)]  # blank lines skipped
    too_many = [(ln, r) for ln, r in body if len(r) > len(header)]
    body = [(ln, r) for ln, r in body if len(r) <= len(header)]  # short rows: missing trailing fields are empty
    df = pd.DataFrame([r + [""] * (len(header) - len(r)) for _ln, r in body], columns=header, dtype=str)
    if df.empty:
        df = pd.DataFrame(columns=header, dtype=str)
    pre_bad = _quarantine_frame([ln for ln, _r in too_many], [pd.NA] * len(too_many),
                                [f"parse: expected {len(header)} fields, found {len(r)}" for _ln, r in too_many])
    offset = np.array([ln for ln, _r in body], dtype=np.int64)
    ids = df["job_id"] if "job_id" in df.columns else pd.Series([pd.NA] * len(df), dtype="string")

    def num(col: str) -> pd.Series:
        return pd.to_numeric(df[col], errors="coerce") if col in df.columns else pd.Series(np.nan, index=df.index)

    vals = {c: num(c) for c in ("submit_s", "ranks", "runtime_s", "estimate_s", "nodes")}
    reason = pd.Series(pd.NA, index=df.index, dtype="string")
    for c in ("submit_s", "ranks", "runtime_s"):
        bad = ~np.isfinite(vals[c].to_numpy(float))
        reason[reason.isna() & bad] = f"parse: {c} is not a finite number"
    for c in ("estimate_s", "nodes"):
        if c in df.columns:
            given = df[c].str.strip() != ""
            bad = given & ~np.isfinite(vals[c].to_numpy(float))
            reason[reason.isna() & bad] = f"parse: {c} is not a finite number"
    reason[reason.isna() & (vals["ranks"] < 1)] = "no processor count"
    if "job_id" in df.columns:
        dup = df["job_id"].duplicated(keep="first") & (df["job_id"].str.strip() != "")
        reason[reason.isna() & dup] = "duplicate job id"
    q = reason.notna()
    bad_rows = pd.concat([pre_bad, _quarantine_frame(offset[q.to_numpy()], ids[q], reason[q])], ignore_index=True)
    ok = ~q
    app_map = {a: i for i, a in enumerate(APPS)}
    ranks = vals["ranks"][ok]
    nodes = vals["nodes"][ok].where(vals["nodes"][ok].notna(), np.ceil(ranks / cores_per_node))
    frame = pd.DataFrame({
        "submit_s": vals["submit_s"][ok], "runtime_s": vals["runtime_s"][ok], "est_s": vals["estimate_s"][ok],
        "nodes": nodes, "ranks": ranks.round(), "job_id": ids[ok].astype("string"), "offset": offset[ok.to_numpy()],
        "app": df["app"][ok].str.strip().str.lower().map(app_map).fillna(-1).astype(np.int64),
    })
    return _finish(frame, bad_rows, n_nodes, cores_per_node, 0, len(df) + len(too_many), name, app_given=True)


def load_trace(path: str | Path, n_nodes: int, cores_per_node: int) -> LoadedJobs:
    """SWF (``.swf``, compressed or not) or job-list CSV (``.csv``) by file name."""
    name = Path(path).name.lower()
    if ".csv" in name:
        return load_csv(path, n_nodes, cores_per_node)
    return load_swf(path, n_nodes, cores_per_node)
