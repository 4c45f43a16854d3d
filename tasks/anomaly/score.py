"""Nightly scoring: CURRENT per-node models x one day of ``cubes/telemetry.zarr`` -> ``cubes/scores.zarr``.

Unit of work and of idempotence: a :class:`nodewatch.tasks.cubes.layout.Region` (one UTC day x one node chunk
of the telemetry cube). The scores cube shares the telemetry cube's epoch, step, node order and
node chunk, so :func:`score_region` reads exactly one region of telemetry (plus ``W-1`` steps of
history for windowed models) and returns that region's arrays; :func:`finish_day` writes every
region of the day, the day's marker and the pointer to its summary/alerts files in **one Icechunk
commit** (:mod:`nodewatch.tasks.cubes.repo`). A reader sees a day's scores, thresholds, flags and
summary all from the same scoring, or all from the previous one: a kill at any point publishes nothing.

Order of a day (what :mod:`nodewatch.flows.nightly` wires as Prefect tasks)::

    prepare_day(s)  (axis changes under the cube lock; once, before fanning out)
    score_region(day, b) for every node batch b   -> rows of the per-node summary
        (grouped by group_jobs into a few score_regions calls: one orchestrated task each)
    finish_day(day, results)  -> scores/daily/date=D/v-<token>/{summary,alerts}.parquet, alerts.md, heatmap.png,
                                 then one commit: the regions + the day marker (which names v-<token>)

Nodes without a model are scored as ``no-model`` rows (listed in the summary and the report),
never dropped; a batch that fails lists all its nodes as ``failed`` with the error.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nodewatch.models.anomaly.base import classify
from nodewatch.schemas.cubes import TELEMETRY, CubeSpec, compressors, spec_for, string_encoding, time_encoding
from nodewatch.schemas.names import check_node_name
from nodewatch.schemas.scores import ALERT_SCHEMA, SUMMARY_SCHEMA, TOP_METRICS, scores_spec
from nodewatch.tasks.anomaly.heatmap import heatmap_png
from nodewatch.tasks.anomaly.registry import area, load_models, node_keys
from nodewatch.tasks.core.faults import fault_point
from nodewatch.tasks.core.runs import code_version
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.layout import Region, batches
from nodewatch.tasks.cubes.verify import checked
from nodewatch.tasks.cubes.writer import (
    Geometry,
    axis_lock,
    extend_cube,
    read_geometry,
    read_marker,
    write_marker,
    write_region,
)

DAILY = "scores/daily"
"""Store area of the per-day tables: ``scores/daily/date=YYYY-MM-DD/v-<token>/{summary,alerts}.parquet, alerts.md,
heatmap.png``; the committed day marker of ``cubes/scores.zarr`` names the version readers use."""


class ScoringError(RuntimeError):
    """A node batch could not be scored; the message names the batch's nodes."""


class PartialScoringError(ScoringError):
    """Some node batches of a :func:`score_regions` group failed; carries what did get scored.

    ``results`` are the :func:`score_region` outputs of the batches that were scored (and written),
    ``failures`` the ``{"batch", "nodes", "error"}`` of those that were not. Raised (instead of
    returned) so an orchestrator never caches a group with holes as done. Picklable: extra fields
    are keyword arguments with defaults, restored from ``__dict__``.
    """

    def __init__(self, message: str, results: list[dict[str, Any]] | None = None,
                 failures: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.results = results or []
        self.failures = failures or []


# ----------------------------------------------------------------------------- geometry
def telemetry_geometry(store: Store) -> tuple[CubeSpec, Geometry]:
    """Spec and axes of ``cubes/telemetry.zarr`` (its own step, read from its attrs)."""
    if not repo.exists(store, "telemetry.zarr"):
        raise FileNotFoundError(f"no telemetry cube in {store.url}: run `nodewatch cubes build` first")
    attrs = dict(repo.open_group(store, "telemetry.zarr").attrs)
    spec = spec_for(TELEMETRY, pd.Timedelta(seconds=int(attrs.get("step_seconds", 900))))
    geo = read_geometry(store, spec)
    assert geo is not None
    return spec, geo


def scores_spec_for(tele: Geometry) -> CubeSpec:
    """Spec of the scores cube matching the telemetry cube's step."""
    return scores_spec(pd.Timedelta(seconds=tele.step_seconds))


def _node_info(store: Store) -> dict[str, dict[str, str]]:
    g = repo.open_group(store, "telemetry.zarr")
    nodes = [str(x) for x in g["node"][:]]
    racks = [str(x) for x in g["rack"][:]] if "rack" in g else [""] * len(nodes)
    rows = [str(x) for x in g["row"][:]] if "row" in g else [""] * len(nodes)
    return {n: {"rack": r, "row": w} for n, r, w in zip(nodes, racks, rows, strict=True)}


def _create(store: Store, spec: CubeSpec, tele: Geometry, node_info: dict[str, dict[str, str]], zstore: Any) -> Geometry:
    import dask.array as da
    import xarray as xr
    import zarr

    spd = spec.steps_per_day("time")
    n, m, nt = len(tele.nodes), len(tele.metrics), tele.n_days * spd
    nodes = list(tele.nodes)
    times = pd.date_range(pd.Timestamp(tele.epoch), periods=nt, freq=spec.steps["time"])
    obj = lambda xs: np.array(xs, dtype=object)  # noqa: E731
    coords: dict[str, Any] = {
        "node": ("node", obj(nodes)),
        "rack": ("node", obj([node_info.get(x, {}).get("rack", "") for x in nodes])),
        "row": ("node", obj([node_info.get(x, {}).get("row", "") for x in nodes])),
        "time": ("time", times, {"long_name": f"window start ({spec.steps['time']})", "standard_name": "time"}),
        "metric": ("metric", obj(list(tele.metrics))),
    }
    c = tele.node_chunk
    encoding: dict[str, dict[str, Any]] = {k: string_encoding(c) for k in ("node", "rack", "row")}
    encoding["time"] = time_encoding(spd)
    encoding["metric"] = string_encoding(max(m, 1))
    data_vars = {}
    for v in spec.variables:
        shape = (n, nt) if len(v.dims) == 2 else (n, nt, m)
        chunks = (c, spd) if len(v.dims) == 2 else (c, spd, max(m, 1))
        data_vars[v.name] = (v.dims, da.full(shape, v.fill_value, dtype=v.dtype,
                                             chunks=tuple(min(a, b) for a, b in zip(chunks, shape, strict=True))), v.attrs)
        encoding[v.name] = {"chunks": chunks, "compressors": compressors(), "fill_value": v.fill_value}
    attrs = {**spec.attrs, "epoch": tele.epoch.isoformat(), "node_chunk": c, "alloc_days": tele.n_days,
             "telemetry_cube": "telemetry.zarr", "cube_id": uuid.uuid4().hex}
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    ds.to_zarr(zstore, mode="w", compute=False, encoding=encoding, zarr_format=3, consolidated=False)
    zarr.open_group(zstore, mode="a").require_group(repo.DAYS_GROUP)
    return Geometry(tele.epoch, tele.n_days, tele.nodes, tele.metrics, c, tele.step_seconds)


def _grow_metrics(zstore: Any, new: list[str]) -> None:
    import zarr

    g = zarr.open_group(zstore, mode="r+")
    m0 = g["metric"].shape[0]
    for _, arr in g.arrays():
        dims = arr.metadata.dimension_names or ()
        if "metric" in dims:
            shape = list(arr.shape)
            shape[dims.index("metric")] = m0 + len(new)
            arr.resize(tuple(shape))
    g["metric"][m0:] = np.array(new, dtype=object)


def ensure_scores_cube(store: Store) -> tuple[CubeSpec, Geometry]:
    """Create ``cubes/scores.zarr`` or grow it to the telemetry cube's axes (under the cube lock).

    Call once before scoring regions in parallel: region writes never change metadata.
    """
    _, tele = telemetry_geometry(store)
    spec = scores_spec_for(tele)
    with axis_lock(store, spec), repo.transaction(store, spec.key, "axes of scores.zarr", create=True) as session:
        zs = session.store
        geo = read_geometry(store, spec, zs)
        if geo is None:
            return spec, _create(store, spec, tele, _node_info(store), zs)
        if geo.epoch != tele.epoch or geo.step_seconds != tele.step_seconds:
            raise ValueError(
                f"cubes/scores.zarr (epoch {geo.epoch}, step {geo.step_seconds} s) does not match cubes/telemetry.zarr "
                f"(epoch {tele.epoch}, step {tele.step_seconds} s): the telemetry cube was rebuilt; delete "
                f"{store.url_of('cubes', 'scores.zarr')} and re-run `nodewatch backfill`")
        if tuple(tele.nodes[: len(geo.nodes)]) != geo.nodes or tuple(tele.metrics[: len(geo.metrics)]) != geo.metrics:
            raise ValueError("cubes/scores.zarr node/metric order differs from cubes/telemetry.zarr: delete it and backfill")
        new_nodes = list(tele.nodes[len(geo.nodes):])
        if new_nodes or tele.n_days > geo.n_days:
            last = tele.epoch + timedelta(days=tele.n_days - 1)
            geo = extend_cube(store, spec, geo, last, new_nodes, _node_info(store), [], zs)
        new_metrics = list(tele.metrics[len(geo.metrics):])
        if new_metrics:
            _grow_metrics(zs, new_metrics)
            geo = Geometry(geo.epoch, geo.n_days, geo.nodes, tele.metrics, geo.node_chunk, geo.step_seconds)
        return spec, geo


# ----------------------------------------------------------------------------- per region
@dataclass(frozen=True)
class ScoreJob:
    """What a region task needs (plain values: travels to Prefect tasks and Dask workers)."""

    store_url: str
    day: str
    batch: int
    kind: str
    model_run: str

    @property
    def region(self) -> Region:
        """The (day, node batch) region."""
        return Region(date.fromisoformat(self.day), self.batch)


def _top(metrics: list[str], weights: np.ndarray, k: int = TOP_METRICS) -> list[str]:
    w = np.nan_to_num(np.asarray(weights, dtype=np.float64), nan=0.0)
    order = np.argsort(-w, kind="stable")[:k]
    return [metrics[i] for i in order if w[i] > 0]


def _summary_row(day: date, node: str, status: str, reason: str | None = None, **kw: Any) -> dict[str, Any]:
    row = {f.name: None for f in SUMMARY_SCHEMA}
    row.update(day=day, node=node, status=status, reason=reason, windows=0, scored_windows=0, anomalous_windows=0,
               top_metrics=[])
    row.update(kw)
    return row


def _once(shared: dict[tuple[str, ...], Any] | None, key: tuple[str, ...], make: Any) -> Any:
    """``make()``, computed once per ``key`` when the caller shares ``shared`` between regions (else every time)."""
    if shared is None:
        return make()
    if key not in shared:
        shared[key] = make()
    return shared[key]


def score_region(job: ScoreJob, shared: dict[tuple[str, ...], Any] | None = None) -> dict[str, Any]:
    """Score one (day, node batch) region with the models of ``job.model_run`` and write it to the scores cube.

    ``shared`` (:func:`score_regions` passes one per group): the cubes' axes, the opened telemetry cube and the
    model run's node list are read once per group instead of once per region, so every region of a group reads the
    same committed snapshot, and an object store is asked for them once (on the S3 test bed they were ~0.6 s of
    a ~1.3-s region).

    Returns ``{"batch", "nodes", "rows" (summary rows), "errors" (one line per node whose model files are damaged:
    it is listed ``failed``, the others are scored), "arrays" (store path of the region's score/threshold/
    is_anomalous/contribution, an ``.npz`` that :func:`finish_day` commits), "seconds", "scored", "no_model"}``:
    plain data, so an orchestrator may keep it as JSON.
    Raises :class:`ScoringError` naming the batch's nodes if anything goes wrong (the caller keeps going).
    """
    from nodewatch.tasks.anomaly.node_scoring import history_start, score_nodes
    from nodewatch.tasks.cubes import open_telemetry_cube

    t_start = time.perf_counter()
    store = Store(job.store_url)
    region = job.region
    day = region.day
    nodes: list[str] = []
    try:
        def axes() -> tuple[CubeSpec, Geometry]:
            spec = scores_spec_for(telemetry_geometry(store)[1])
            geo = read_geometry(store, spec)
            if geo is None:
                raise FileNotFoundError("cubes/scores.zarr does not exist: call ensure_scores_cube first")
            return spec, geo

        spec, geo = _once(shared, ("axes", job.store_url), axes)
        sl = region.node_slice(geo.node_chunk, len(geo.nodes))
        nodes = [check_node_name(n) for n in geo.nodes[sl]]
        spd = spec.steps_per_day("time")
        t0 = region.time_slice(geo.epoch, spd).start
        step = np.timedelta64(geo.step_seconds, "s")
        metrics = list(geo.metrics)
        midx = {m: i for i, m in enumerate(metrics)}
        score = np.full((len(nodes), spd), np.nan, np.float32)
        thr = np.full((len(nodes), spd), np.nan, np.float32)
        contrib = np.full((len(nodes), spd, len(metrics)), np.nan, np.float32)
        try:
            available = _once(shared, ("nodes", job.store_url, job.kind, job.model_run),
                              lambda: node_keys(store, job.kind, job.model_run))
            models = load_models(store, job.kind, job.model_run, nodes=nodes, skip_bad=True, available=available)
        except FileNotFoundError:
            models = None
        have = set(models.nodes) if models is not None else set()
        bad = dict(models.bad) if models is not None else {}
        times = (np.datetime64(day.isoformat(), "ns") + np.arange(spd) * step).astype("datetime64[ns]")
        if models is not None:
            ds = _once(shared, ("telemetry", job.store_url), lambda: open_telemetry_cube(store))
            first = history_start(models, times[0], step.astype("timedelta64[ns]"))
            h0 = max(0, t0 - int((times[0] - first) / step))
            sub = ds.isel(node=sl, time=slice(h0, t0 + spd))
            sub = checked(sub.load, store, "telemetry.zarr", [day])  # damaged chunks: one line naming them
            s, c = score_nodes(models, sub)
            s, c = s.isel(time=slice(t0 - h0, None)), c.isel(time=slice(t0 - h0, None))
            pos = [nodes.index(n) for n in s["node"].values]
            score[pos] = s.values
            mpos = [midx[str(m)] for m in c["metric"].values]
            contrib[np.ix_(pos, np.arange(spd), mpos)] = c.values
            for p, n in zip(pos, s["node"].values, strict=True):
                thr[p] = np.where(np.isfinite(score[p]), np.float32(models.meta[str(n)]["threshold"]), np.nan)
        flag = np.where(np.isfinite(score), classify(score, np.nan_to_num(thr, nan=np.inf)).astype(np.int8), np.int8(-1))
        arrays = save_region_arrays(store, region, job.model_run,
                                    {"score": score, "threshold": thr, "is_anomalous": flag, "contribution": contrib})
        rows = []
        for k, node in enumerate(nodes):
            if node in bad:  # damaged model files: this node fails alone, named; the others are scored
                rows.append(_summary_row(day, node, "failed", bad[node], model_kind=job.kind, windows=spd))
                continue
            if node not in have:
                reason = f"no model in {job.kind} run {job.model_run}"
                rows.append(_summary_row(day, node, "no-model", reason, model_kind=job.kind, windows=spd))
                continue
            fin = np.isfinite(score[k])
            an = flag[k] == 1
            base = dict(model_kind=job.kind, model_run=str(models.meta[node].get("trained_in", job.model_run)),  # type: ignore[union-attr]
                        threshold=float(models.meta[node]["threshold"]), windows=spd,  # type: ignore[union-attr]
                        scored_windows=int(fin.sum()), anomalous_windows=int(an.sum()))
            if not fin.any():
                rows.append(_summary_row(day, node, "no-data", "no complete window of telemetry on this day", **base))
                continue
            peak = int(np.nanargmax(score[k]))
            weights = contrib[k][an].sum(axis=0) if an.any() else contrib[k][peak]
            rows.append(_summary_row(
                day, node, "scored", None, **base, mean_score=float(np.nanmean(score[k])), peak_score=float(score[k][peak]),
                peak_time=pd.Timestamp(times[peak], tz="UTC"),
                first_anomalous=pd.Timestamp(times[int(np.argmax(an))], tz="UTC") if an.any() else None,
                top_metrics=_top(metrics, weights)))
        return {"batch": job.batch, "nodes": nodes, "rows": rows, "arrays": arrays, "seconds": time.perf_counter() - t_start,
                "errors": list(bad.values()),
                "scored": int(sum(r["status"] == "scored" for r in rows)),
                "no_model": int(sum(r["status"] == "no-model" for r in rows))}
    except Exception as e:
        names = ", ".join(nodes) if nodes else "(nodes unknown)"
        raise ScoringError(f"score batch {region.key} failed for nodes {names}: {type(e).__name__}: {e}") from e


REGIONS = "scores/regions"
"""Computed, not yet (or already) committed score regions: ``scores/regions/date=D/b<batch>-<run>-<token>.npz``."""


def save_region_arrays(store: Store, region: Region, model_run: str, arrays: dict[str, np.ndarray]) -> str:
    """Write a scored region's arrays aside (compressed ``.npz``, no pickle) and return the store path."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    name = f"b{region.node_batch:04d}-{model_run}-{uuid.uuid4().hex[:12]}.npz"
    return store.write_bytes(buf.getvalue(), REGIONS, f"date={region.day.isoformat()}", name)


def load_region_arrays(store: Store, path: str) -> dict[str, np.ndarray]:
    """Arrays saved by :func:`save_region_arrays` (``allow_pickle=False``: data only)."""
    if not path.startswith(store.path(REGIONS) + "/"):
        raise ValueError(f"score region file {path} is not under {store.path(REGIONS)}")
    with store.fs.open(path, "rb") as f, np.load(io.BytesIO(f.read()), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def failed_rows(day: date, nodes: list[str], reason: str) -> list[dict[str, Any]]:
    """Summary rows of a batch that failed (every node listed with the reason)."""
    return [_summary_row(day, n, "failed", reason) for n in nodes]


def batch_failure(store: Store, job: ScoreJob, error: str) -> dict[str, Any]:
    """The ``{"batch", "nodes", "error"}`` record of a node batch that was not scored (see :func:`finish_day`)."""
    return {"batch": job.batch, "nodes": batch_nodes(store, job.batch), "error": error}


def batch_nodes(store: Store, batch: int) -> list[str]:
    """Node names of scores-cube batch ``batch`` (for naming nodes of a batch that failed early)."""
    _, tele = telemetry_geometry(store)
    try:
        return list(tele.nodes[Region(date(2000, 1, 1), batch).node_slice(tele.node_chunk, len(tele.nodes))])
    except ValueError:
        return []


# ----------------------------------------------------------------------------- plan / finish a day
def current_model_run(store: Store, kind: str) -> str:
    """Run id of ``models/<kind>/CURRENT`` (one-line error if there is none)."""
    run = store.current(area(kind))
    if run is None:
        raise FileNotFoundError(f"no trained {kind} models in {store.url}: run `nodewatch train` (or the train flow) first")
    return run


def telemetry_fingerprint(store: Store, day: date) -> str | None:
    """Hash of the telemetry cube's coverage marker of ``day`` (changes when the day is rebuilt from new inputs)."""
    m = read_marker(store, spec_for(TELEMETRY), day)
    if m is None:
        return None
    return hashlib.sha256(json.dumps(m.get("inputs"), sort_keys=True).encode()).hexdigest()[:16]


def scores_cube_id(store: Store) -> str | None:
    """Random id written when ``cubes/scores.zarr`` was created (a recreated cube invalidates cached regions)."""
    if not repo.exists(store, "scores.zarr"):
        return None
    return repo.open_group(store, "scores.zarr").attrs.get("cube_id")


def region_jobs(store: Store, day: date, kind: str, model_run: str) -> list[ScoreJob]:
    """One :class:`ScoreJob` per node batch of ``day``."""
    _, tele = telemetry_geometry(store)
    return [ScoreJob(store.url, day.isoformat(), b, kind, model_run) for b in batches(len(tele.nodes), tele.node_chunk)]


def group_jobs(jobs: list[ScoreJob], n_groups: int) -> list[tuple[ScoreJob, ...]]:
    """Split ``jobs`` into at most ``n_groups`` contiguous groups of near-equal size (order kept).

    An orchestrated task per group instead of per node batch keeps the per-task cost of the
    orchestrator (API calls, state transitions, result persistence: ~0.1 s each) a small share
    of the scoring; contiguous groups keep each group's reads and writes on neighbouring chunks.
    """
    n = max(1, min(n_groups, len(jobs)))
    size, extra = divmod(len(jobs), n)
    out, i = [], 0
    for g in range(n):
        k = size + (g < extra)
        out.append(tuple(jobs[i:i + k]))
        i += k
    return [g for g in out if g]


def score_regions(jobs: Sequence[ScoreJob]) -> list[dict[str, Any]]:
    """Score several regions one after the other (see :func:`score_region`); returns their outputs.

    Every region is attempted even if an earlier one fails; if any failed, or a node of a scored region
    failed alone (damaged model files), raises :class:`PartialScoringError` carrying the outputs of the
    scored regions and the batch failures (each naming its batch's nodes).
    """
    results, failures = [], []
    shared: dict[tuple[str, ...], Any] = {}  # axes, the opened cube and the run's node list: read once per group
    for j in jobs:
        try:
            results.append(score_region(j, shared))
        except ScoringError as e:
            failures.append(batch_failure(Store(j.store_url), j, str(e)))
    node_errors = [e for r in results for e in r.get("errors", [])]
    if failures or node_errors:  # never a complete (cacheable) result while a node failed
        raise PartialScoringError("; ".join([f["error"] for f in failures] + node_errors), results, failures)
    return results


def day_scored(store: Store, day: date, kind: str) -> bool:
    """True if ``day`` was completely scored with the CURRENT model run from the telemetry present now."""
    m = read_marker(store, scores_spec(), day)
    if m is None or m.get("failed_batches") or m.get("failed_nodes"):
        return False
    return m.get("model_run") == store.current(area(kind)) and m.get("telemetry") == telemetry_fingerprint(store, day)


def _daily(day: date, name: str, version: str) -> tuple[str, ...]:
    """Key of a daily file of version ``version`` (``v-<token>``) of ``day``."""
    return (DAILY, f"date={day.isoformat()}", version, name)


def daily_version(store: Store, day: date) -> str:
    """The committed version directory (``v-<token>``) of ``day``'s summary/alerts (one-line error if none)."""
    m = read_marker(store, scores_spec(), day)
    if m is None or not m.get("daily"):
        raise FileNotFoundError(f"no committed scores for {day.isoformat()} in {store.url}: run `nodewatch backfill`")
    return str(m["daily"])


def alerts_from_summary(summary: pd.DataFrame, min_windows: int = 1) -> pd.DataFrame:
    """Alert list (node, first time, peak, top metrics) of the nodes with >= ``min_windows`` anomalous windows."""
    s = summary[(summary["status"] == "scored") & (summary["anomalous_windows"] >= min_windows)]
    s = s.sort_values(["peak_score", "anomalous_windows", "node"], ascending=[False, False, True])
    return pd.DataFrame({
        "day": s["day"], "node": s["node"], "first_time": s["first_anomalous"], "peak_time": s["peak_time"],
        "peak_score": s["peak_score"].astype(np.float32), "anomalous_windows": s["anomalous_windows"].astype(np.int32),
        "top_metrics": s["top_metrics"], "model_run": s["model_run"],
    }).reset_index(drop=True)


def alerts_markdown(day: date, alerts: pd.DataFrame, limit: int = 50) -> str:
    """The alert list as a markdown table."""
    lines = [f"# nodewatch alerts {day.isoformat()}", "", f"{len(alerts)} node(s) flagged.", ""]
    if len(alerts):
        lines += ["| node | first anomalous window (UTC) | peak score | peak at | anomalous windows | top metrics |",
                  "|---|---|---|---|---|---|"]
        for r in alerts.head(limit).itertuples():
            lines.append(f"| {r.node} | {pd.Timestamp(r.first_time):%H:%M} | {r.peak_score:.3f} | "
                         f"{pd.Timestamp(r.peak_time):%H:%M} | {r.anomalous_windows} | {', '.join(r.top_metrics)} |")
        if len(alerts) > limit:
            lines.append(f"\n… and {len(alerts) - limit} more in alerts.parquet")
    return "\n".join(lines) + "\n"


def finish_day(store: Store, day: date, kind: str, model_run: str, results: list[dict[str, Any]],
               failures: list[dict[str, Any]], run_id: str | None = None, min_windows: int = 1) -> dict[str, Any]:
    """Publish the day: summary/alerts/heat map under a new version directory, then one commit of every scored
    region, the day marker and the pointer to that version; returns what was written and the counts.

    ``results`` are the outputs of :func:`score_region`; ``failures`` are ``{"batch", "nodes", "error"}`` of
    batches that raised. The marker lists the failed batches, so :func:`day_scored` is False until a re-run
    scores them; a failed batch's region keeps its previous commit. If *no* batch was scored, nothing is
    published (the previous scores and summary of the day stay) and :class:`ScoringError` names the failures.
    """
    if failures and not results:
        first = failures[0]["error"]
        raise ScoringError(f"scoring {day.isoformat()}: all {len(failures)} node batch(es) failed, the previously "
                           f"published scores of the day are kept; first error: {first}")
    rows = [r for res in results for r in res["rows"]]
    for f in failures:
        rows += failed_rows(day, f["nodes"], f["error"])
    summary = pd.DataFrame(rows, columns=SUMMARY_SCHEMA.names).sort_values("node").reset_index(drop=True)
    version = f"v-{run_id or 'run'}-{uuid.uuid4().hex[:8]}"
    store.write_parquet(pa.Table.from_pandas(summary, schema=SUMMARY_SCHEMA, preserve_index=False),
                        *_daily(day, "summary.parquet", version))
    alerts = alerts_from_summary(summary, min_windows)
    store.write_parquet(pa.Table.from_pandas(alerts, schema=ALERT_SCHEMA, preserve_index=False),
                        *_daily(day, "alerts.parquet", version))
    store.write_bytes(alerts_markdown(day, alerts).encode(), *_daily(day, "alerts.md", version))
    fault_point("score:after-daily")
    _, tele = telemetry_geometry(store)
    spec = scores_spec_for(tele)
    ic_repo = repo.open_repo(store, spec.key)
    session = ic_repo.writable_session(repo.BRANCH)
    geo = read_geometry(store, spec, session.store)
    if geo is None:
        raise FileNotFoundError("cubes/scores.zarr does not exist: call ensure_scores_cube first")
    try:
        for res in results:
            arrays = res["arrays"] if isinstance(res["arrays"], dict) else load_region_arrays(store, res["arrays"])
            write_region(store, spec, geo, Region(day, res["batch"]), arrays, session.store)
        heatmap_png(store, day, _daily(day, "heatmap.png", version), session.store, geo)
        png = store.url_of(*_daily(day, "heatmap.png", version))  # s3://… on an object store, not a bare key
    except repo.io_errors() as e:
        raise ScoringError(f"scores {day.isoformat()}: write failed ({repo.first_line(e)}); nothing was published "
                           "(readers keep the day's previous scores and summary): fix the cause and re-run") from None
    counts = summary["status"].value_counts().to_dict()
    out = {
        "day": day.isoformat(), "model_kind": kind, "model_run": model_run, "nodes": int(len(summary)),
        "scored": int(counts.get("scored", 0)), "no_model": sorted(summary.loc[summary["status"] == "no-model", "node"]),
        "no_data": sorted(summary.loc[summary["status"] == "no-data", "node"]),
        "failed_nodes": sorted(summary.loc[summary["status"] == "failed", "node"]),
        "failed_batches": sorted(f["batch"] for f in failures), "flagged": int(len(alerts)),
        "summary": store.url_of(*_daily(day, "summary.parquet", version)),
        "alerts": store.url_of(*_daily(day, "alerts.parquet", version)),
        "alerts_md": store.url_of(*_daily(day, "alerts.md", version)), "heatmap": png,
    }
    marker = {**out, "daily": version, "telemetry": telemetry_fingerprint(store, day), "code_version": code_version(),
              "run_id": run_id, "written": datetime.now(UTC).isoformat(timespec="seconds")}
    write_marker(session.store, day, marker)
    repo.commit(store, spec.key, session, f"scores {day.isoformat()}", {"run_id": run_id, "day": day.isoformat()})
    return out


def read_summary(store: Store, day: date) -> pd.DataFrame:
    """The per-node summary of ``day`` (of the committed scoring of the day)."""
    with store.fs.open(store.path(*_daily(day, "summary.parquet", daily_version(store, day))), "rb") as f:
        return pq.read_table(f).to_pandas()


def read_alerts(store: Store, day: date) -> pd.DataFrame:
    """The alert list of ``day`` (of the committed scoring of the day)."""
    with store.fs.open(store.path(*_daily(day, "alerts.parquet", daily_version(store, day))), "rb") as f:
        return pq.read_table(f).to_pandas()


def score_day(store: Store, day: date, kind: str = "ruad", model_run: str | None = None, run_id: str | None = None,
              workers: int = 1) -> dict[str, Any]:
    """Score all node batches of ``day`` without Prefect (thread pool of ``workers``); used by tests and benchmarks."""
    from concurrent.futures import ThreadPoolExecutor

    run = model_run or current_model_run(store, kind)
    ensure_scores_cube(store)
    jobs = region_jobs(store, day, kind, run)
    results, failures = [], []

    def one(j: ScoreJob) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        try:
            return score_regions([j]), []
        except PartialScoringError as e:
            return e.results, e.failures

    with ThreadPoolExecutor(max(1, workers)) as ex:
        for res, fail in ex.map(one, jobs):
            results += res
            failures += fail
    return finish_day(store, day, kind, run, results, failures, run_id)

