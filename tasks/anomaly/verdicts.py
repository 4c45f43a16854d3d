"""Node verdicts of one day: read the cube slice, jobs and topology, judge, write the alerts table.

:func:`judge_day` is the whole judgement on arrays (used by :func:`run_verdicts` and by
``benchmarks/alert_quality.py``): own-history reference from the first history days, thresholds
calibrated on the last ``held_back_days`` history days with the alert budget, then the day's evidence
and verdicts (:mod:`nodewatch.models.anomaly.verdicts`). :func:`run_verdicts` reads
``cubes/telemetry.zarr`` (window means), the staged ``jobs`` (allocation rows: ``step`` null) and the
latest ``topology`` snapshot (rack, architecture), optionally the scores cube (RUAD probability, shown
as ``model_peak``), and writes ``reports/<day>/verdicts.parquet`` and ``reports/<day>/verdicts.md``.

Jobs still running are rows with a null ``end_time`` (``sacct`` lists them with state RUNNING): they
count as running to the end of the day. The plain robust-z baseline of ``../shared/DESIGN.md`` is
computed on the same arrays and reported beside the verdicts.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from nodewatch.models.anomaly.running_jobs import infer_running
from nodewatch.models.anomaly.sustained import upper_scale
from nodewatch.models.anomaly.verdicts import (
    DayInputs,
    Evidence,
    VerdictConfig,
    calibrate,
    evidence,
    verdicts,
)
from nodewatch.models.anomaly.vicinity import (
    Reference,
    fit_reference,
    log_transform,
    metric_offsets,
    own_history_baseline,
)
from nodewatch.tasks.core.store import Store

AREA = "reports"
"""``reports/<YYYY-MM-DD>/verdicts.parquet`` and ``verdicts.md``."""

COLUMNS = ["day", "kind", "subject", "severity", "score", "threshold", "first_time", "last_time", "windows",
           "top_metrics", "suspected_group", "rack", "architecture", "members", "model_peak", "vicinity_outlier"]


def job_grid(jobs: pd.DataFrame, nodes: list[str], times: np.ndarray, step: pd.Timedelta,
             transition_windows: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Job state per (node, window): busy, transition (start/stop window + ``transition_windows`` after),
    index of the multi-node job (-1 none) and the job ids of those indices.

    ``jobs``: columns ``job_id``, ``start_time``, ``end_time`` (UTC; null end = still running),
    ``node_list`` (list of node names). Jobs that never started are ignored.
    """
    n, t = len(nodes), len(times)
    busy = np.zeros((n, t), dtype=bool)
    trans = np.zeros((n, t), dtype=bool)
    job = np.full((n, t), -1, dtype=np.int32)
    names: list[str] = []
    if not len(jobs) or not t:
        return busy, trans, job, names
    pos = {v: i for i, v in enumerate(nodes)}
    t0 = np.datetime64(pd.Timestamp(times[0]).tz_localize(None) if pd.Timestamp(times[0]).tzinfo else times[0], "ns")
    st = np.int64(pd.Timedelta(step).value)
    end_all = t0 + np.timedelta64(int(st) * t, "ns")
    s = pd.to_datetime(jobs["start_time"], utc=True).dt.tz_convert(None).to_numpy("datetime64[ns]")
    e = pd.to_datetime(jobs["end_time"], utc=True).dt.tz_convert(None).to_numpy("datetime64[ns]")
    e = np.where(np.isnat(e), end_all, e)
    keep = ~np.isnat(s) & (s < end_all) & (e > t0)
    for jid, a, b, nl in zip(jobs["job_id"].to_numpy()[keep], s[keep], e[keep], jobs["node_list"].to_numpy()[keep],
                             strict=True):
        idx = [pos[x] for x in (nl if nl is not None else []) if x in pos]
        if not idx:
            continue
        ia = int((a - t0).astype(np.int64) // st)
        ib = int(-(-(b - t0).astype(np.int64) // st))  # ceil: window holding the end
        lo, hi = max(ia, 0), min(ib, t)
        if lo < hi:
            busy[np.ix_(idx, np.arange(lo, hi))] = True
        for edge, inside in ((ia, 0 <= ia < t), (int((b - t0).astype(np.int64) // st), b < end_all)):
            if inside:
                trans[np.ix_(idx, np.arange(max(edge, 0), min(edge + 1 + transition_windows, t)))] = True
        if len(idx) >= 2 and lo < hi:
            k = len(names)
            names.append(str(jid))
            job[np.ix_(idx, np.arange(lo, hi))] = k
    return busy, trans, job, names


def _day_slices(times: np.ndarray) -> list[np.ndarray]:
    d = pd.DatetimeIndex(times).normalize()
    return [np.flatnonzero(d == v) for v in d.unique()]


def judge_day(hist: np.ndarray, hist_times: np.ndarray, night: np.ndarray, night_times: np.ndarray, nodes: list[str],
              metrics: list[str], racks: np.ndarray, archs: np.ndarray, jobs: pd.DataFrame, step: pd.Timedelta,
              cfg: VerdictConfig | None = None, held_back_days: int = 7,
              model_scores: np.ndarray | None = None, hist_std: np.ndarray | None = None,
              night_std: np.ndarray | None = None) -> dict[str, Any]:
    """Judge one day from window means (node, time, metric) of its history and of the day itself.

    ``hist_std`` / ``night_std`` (node, time, len(idx)): the window standard deviations of the metrics
    :func:`sustained_index` picks (``cfg.sustained_metrics``), judged as sustained-shift channels
    ``<name> (std, k)`` appended to the metrics (Eq. A1/A2 of :mod:`nodewatch.models.anomaly.sustained`); without
    them, with no such metric or with ``cfg.sustained_k = 0`` only the means are judged.
    ``cfg.io_peer``: the means of ``cfg.io_peer_metrics`` are also judged against the job's other members (the
    job-peer drop, Eq. J1-J3 of :mod:`nodewatch.models.anomaly.job_peers`, its own threshold from the held-back days).

    Returns ``rows`` (verdict dicts), ``window_flags`` (node, time) bool, ``evidence`` (the day's
    :class:`~nodewatch.models.anomaly.verdicts.Evidence`), ``calibration``, ``baseline`` (node, time)
    window flags of the plain robust-z baseline and ``metrics`` (the judged channels' names).
    """
    cfg = cfg or VerdictConfig()
    days = _day_slices(hist_times)
    if len(days) < held_back_days + 3:
        raise ValueError(f"need at least {held_back_days + 3} history days, got {len(days)}")
    ref_idx = np.concatenate(days[:-held_back_days])
    n_mean = hist.shape[2]
    base = own_history_baseline(hist, night)
    idx = sustained_index(metrics, cfg)
    if idx and hist_std is not None and night_std is not None:
        if hist_std.shape != hist.shape[:2] + (len(idx),) or night_std.shape != night.shape[:2] + (len(idx),):
            raise ValueError(f"window std arrays must be (node, time, {len(idx)}) beside the means")
        hist = np.concatenate([hist, hist_std.astype(hist.dtype, copy=False)], axis=2)
        night = np.concatenate([night, night_std.astype(night.dtype, copy=False)], axis=2)
        metrics = list(metrics) + [f"{metrics[i]} (std, {cfg.sustained_k})" for i in idx]
    sustained = np.arange(hist.shape[2]) >= n_mean
    io_peer = np.isin(np.asarray(metrics, dtype=object), cfg.io_peer_metrics) & ~sustained if cfg.io_peer else None
    off = metric_offsets(hist[:, ref_idx])
    xh = log_transform(hist, off)
    hb, ht, hj, _ = job_grid(jobs, nodes, hist_times, step, cfg.transition_windows)
    xr = xh[:, ref_idx]
    if sustained.any():  # the window std channels' reference without job starts/stops (evidence() skips them too)
        xr = xr.copy()
        xr[..., sustained] = np.where(ht[:, ref_idx][:, :, None], np.nan, xr[..., sustained])
    ref = fit_reference(xr, hb[:, ref_idx], floor=cfg.scale_floor, empirical=cfg.empirical_cap,
                        rare_quantum=cfg.rare_quantum)
    if sustained.any():  # Eq. A2: only a rise of the dispersion is evidence, its scale from the upper tail
        ref.scale[..., sustained] = upper_scale(xr[..., sustained], hb[:, ref_idx], cfg.scale_floor)
    held: list[Evidence] = []
    for sl in days[-held_back_days:]:
        b, tr, jb, _ = job_grid(jobs, nodes, hist_times[sl], step, cfg.transition_windows)
        held.append(evidence(DayInputs(xh[:, sl], b, tr, jb, racks, archs, None, sustained, io_peer), ref, cfg))
    cal = calibrate(held, cfg)
    b, tr, jb, names = job_grid(jobs, nodes, night_times, step, cfg.transition_windows)
    xn = log_transform(night, off)
    inferred, first_inferred = 0, len(names)
    if cfg.infer_running and not knows_running(jobs, night_times, step):
        b0 = b
        means_ref = Reference(ref.loc[..., :n_mean], ref.scale[..., :n_mean])  # Eq. 1 on the means alone
        b, tr, jb, starts = infer_running(xn[..., :n_mean], means_ref, b, tr, jb, cfg.transition_windows,
                                          gap=cfg.infer_gap)
        inferred = int((b & ~b0).any(axis=1).sum())
        names = names + [f"running since {pd.Timestamp(night_times[s]):%H:%M} (inferred)" for s in starts]
    day = DayInputs(xn, b, tr, jb, racks, archs, first_inferred, sustained, io_peer)
    ev = evidence(day, ref, cfg)
    rows, wflags = verdicts(ev, cal, day, nodes, metrics, night_times, cfg, model_scores, names)
    return {"rows": rows, "window_flags": wflags, "evidence": ev, "calibration": cal, "baseline": base,
            "inferred_running": inferred, "metrics": metrics}


def sustained_index(metrics: list[str], cfg: VerdictConfig | None = None) -> list[int]:
    """Indices in ``metrics`` of ``cfg.sustained_metrics`` (in that order; absent ones skipped; none when
    ``cfg.sustained_k`` is 0): the metrics whose window std :func:`judge_day` judges as sustained channels."""
    cfg = cfg or VerdictConfig()
    if cfg.sustained_k <= 0:
        return []
    pos = {m: i for i, m in enumerate(metrics)}
    return [pos[m] for m in cfg.sustained_metrics if m in pos]


def knows_running(jobs: pd.DataFrame, times: np.ndarray, step: pd.Timedelta) -> bool:
    """Does the jobs table list the jobs running at the end of ``times``: does any job that started
    before that end have a null end (``sacct`` RUNNING) or end at or after it? The staged daily ``sacct``
    dumps hold only ended jobs, so on the newest day it does not (docs/alerts.md)."""
    if not len(jobs) or not len(times):
        return False
    end = pd.Timestamp(times[-1]).tz_localize(None) + pd.Timedelta(step) if pd.Timestamp(times[-1]).tzinfo is None \
        else pd.Timestamp(times[-1]).tz_convert(None) + pd.Timedelta(step)
    s = pd.to_datetime(jobs["start_time"], utc=True).dt.tz_convert(None)
    e = pd.to_datetime(jobs["end_time"], utc=True).dt.tz_convert(None)
    started = s.notna() & (s < end)
    return bool((started & (e.isna() | (e >= end))).any())


# ----------------------------------------------------------------------------- store I/O
def _topology(store: Store, nodes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    t = store.read_staged("topology")
    racks = np.array([""] * len(nodes), dtype=object)
    archs = np.array([""] * len(nodes), dtype=object)
    if t is None or not t.num_rows:
        return racks, archs
    df = t.to_pandas()
    if "valid_from" in df.columns:  # the latest snapshot of each node wins
        df = df.sort_values("valid_from", kind="stable")
    if "architecture" not in df.columns:
        df["architecture"] = ""
    df = df.drop_duplicates("node", keep="last").set_index("node")
    for i, n in enumerate(nodes):
        if n in df.index:
            racks[i], archs[i] = str(df.at[n, "rack"]), str(df.at[n, "architecture"])
    return racks, archs


def read_jobs(store: Store) -> pd.DataFrame:
    """Allocation rows of the staged ``jobs`` table (``job_id``, ``start_time``, ``end_time``, ``node_list``)."""
    cols = ["job_id", "step", "start_time", "end_time", "node_list"]
    t = store.read_staged("jobs", columns=cols)
    if t is None:
        return pd.DataFrame({c: [] for c in cols})
    df = t.to_pandas()
    return df[df["step"].isna() & df["start_time"].notna()].reset_index(drop=True)


def _model_scores(store: Store, nodes: list[str], t0: np.datetime64, t1: np.datetime64) -> np.ndarray | None:
    from nodewatch.tasks.cubes import repo

    try:
        if not repo.exists(store, "scores.zarr"):
            return None
        ds = repo.open_dataset(store, "scores.zarr")
        sub = ds["score"].sel(time=slice(t0, t1 - np.timedelta64(1, "ns")))
        sub = sub.reindex(node=nodes)
        return np.asarray(sub.values, dtype=np.float64)
    except (KeyError, ValueError, OSError, FileNotFoundError):
        return None


def read_day(store: Store, day: date, history_days: int = 21, cfg: VerdictConfig | None = None) -> dict[str, Any]:
    """Arrays of ``day`` and the ``history_days`` before it from the telemetry cube, with jobs and topology (and
    the window std of ``cfg.sustained_metrics`` as ``hist_std`` / ``night_std``, None if the cube has none)."""
    from nodewatch.tasks.cubes import open_telemetry_cube

    ds = open_telemetry_cube(store)
    step = pd.Timedelta(seconds=int(ds.attrs.get("step_seconds", 900)))
    t0 = np.datetime64(day.isoformat(), "ns")
    t1 = t0 + np.timedelta64(1, "D")
    h0 = t0 - np.timedelta64(history_days, "D")
    nodes = [str(n) for n in ds["node"].values]
    metrics = [str(m) for m in ds["metric"].values]
    mean = ds["mean"]
    hist = mean.sel(time=slice(h0, t0 - np.timedelta64(1, "ns")))
    night = mean.sel(time=slice(t0, t1 - np.timedelta64(1, "ns")))
    hist_std = night_std = None
    idx = sustained_index(metrics, cfg)
    if idx and "std" in ds:
        sd = ds["std"].isel(metric=idx)
        hist_std = np.asarray(sd.sel(time=slice(h0, t0 - np.timedelta64(1, "ns"))).values, dtype=np.float32)
        night_std = np.asarray(sd.sel(time=slice(t0, t1 - np.timedelta64(1, "ns"))).values, dtype=np.float32)
    racks, archs = _topology(store, nodes)
    if "rack" in ds.coords:
        cube_racks = np.array([str(r) for r in ds["rack"].values], dtype=object)
        racks = np.where(racks == "", cube_racks, racks)
    return {
        "nodes": nodes, "metrics": metrics, "step": step,
        "hist": np.asarray(hist.values, dtype=np.float32), "hist_times": hist["time"].values,
        "night": np.asarray(night.values, dtype=np.float32), "night_times": night["time"].values,
        "racks": racks, "archs": np.where(archs == "", "unknown", archs), "jobs": read_jobs(store),
        "model_scores": _model_scores(store, nodes, t0, t1), "hist_std": hist_std, "night_std": night_std,
    }


def verdicts_frame(day: date, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The verdict rows as the alerts table (columns :data:`COLUMNS`; groups first, then nodes by score)."""
    df = pd.DataFrame(rows, columns=COLUMNS[1:])
    df.insert(0, "day", day.isoformat())
    if len(df):
        df["first_time"] = pd.to_datetime(df["first_time"]).dt.tz_localize("UTC")
        df["last_time"] = pd.to_datetime(df["last_time"]).dt.tz_localize("UTC")
        df["rank"] = (df["kind"] == "node").astype(int)
        df = df.sort_values(["rank", "score"], ascending=[True, False]).drop(columns="rank").reset_index(drop=True)
    return df


def verdicts_markdown(day: date, df: pd.DataFrame, info: dict[str, Any], limit: int = 40) -> str:
    """The verdicts page: group alerts, node alerts, what the baseline flags, the configuration."""
    from nodewatch.tasks.core.escape import md as m

    groups, nodes = df[df["kind"] != "node"], df[df["kind"] == "node"]
    lines = [f"# Node verdicts — {day.isoformat()}", "",
             f"- group alerts: {len(groups)}, node alerts: {len(nodes)}, nodes judged: {info['nodes_judged']}",
             f"- plain robust-z baseline (DESIGN.md) flags {info['baseline_nodes']} nodes",
             f"- node-windows whose deviation the job explained: {info['job_explained']}",
             f"- alert budget: {info['config']['budget_per_1000']} false node alerts per 1,000 node-days; "
             f"persistence {info['config']['k']} of {info['config']['n']} windows", ""]
    heat = info.get("heatmap")
    if heat and not str(heat).startswith("not written"):
        lines += ["![verdicts heat map: fused score / threshold, group alerts boxed in red](verdicts_heatmap.png)", ""]
    elif heat:
        lines += [f"- heat map {m(heat)}", ""]
    if len(groups):
        lines += ["## Group alerts", "", "| kind | group | severity | first (UTC) | last | windows | top metrics | nodes |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in groups.itertuples():
            lines.append(f"| {m(r.kind)} | {m(r.subject)} | {m(r.severity)} | {pd.Timestamp(r.first_time):%H:%M} | "
                         f"{pd.Timestamp(r.last_time):%H:%M} | {r.windows} | {m(', '.join(r.top_metrics))} | {len(r.members)} |")
        lines.append("")
    lines += ["## Node alerts", ""]
    if len(nodes):
        lines += ["| node | severity | score / threshold | first (UTC) | windows | top metrics | suspected group | "
                  "rack outlier (K-Means) |", "|---|---|---|---|---|---|---|---|"]
        for r in nodes.head(limit).itertuples():
            lines.append(f"| {m(r.subject)} | {m(r.severity)} | {r.score:.1f} / {r.threshold:.1f} | "
                         f"{pd.Timestamp(r.first_time):%H:%M} | {r.windows} | {m(', '.join(r.top_metrics))} | "
                         f"{m(r.suspected_group or '-')} | {'yes' if r.vicinity_outlier else 'no'} |")
        if len(nodes) > limit:
            lines.append(f"\n{len(nodes) - limit} more in verdicts.parquet")
    else:
        lines.append("No node alert.")
    return "\n".join(lines) + "\n"


def _heatmap(store: Store, day: date, d: dict[str, Any], out: dict[str, Any]) -> str | None:
    """``reports/<day>/verdicts_heatmap.png`` (:func:`nodewatch.tasks.cubes.plot.verdicts_heatmap`); None if it fails."""
    import tempfile
    from pathlib import Path

    from nodewatch.tasks.cubes.plot import verdicts_heatmap

    try:
        with tempfile.TemporaryDirectory(prefix="nodewatch-heat-") as tmp:
            png = verdicts_heatmap(out["evidence"].score, out["calibration"].node, d["nodes"], d["night_times"], d["racks"],
                                   d["archs"], out["rows"], Path(tmp) / "h.png", f"verdicts {day.isoformat()}")
            return store.write_bytes(png.read_bytes(), AREA, day.isoformat(), "verdicts_heatmap.png")
    except (OSError, ValueError) as e:  # the table matters more than the picture
        return f"not written: {str(e).splitlines()[0][:120] if str(e) else type(e).__name__}"


def run_verdicts(store: Store, day: date, history_days: int = 21, cfg: VerdictConfig | None = None,
                 held_back_days: int = 7) -> dict[str, Any]:
    """Judge ``day`` from the store and write ``reports/<day>/verdicts.parquet`` and ``verdicts.md``."""
    cfg = cfg or VerdictConfig()
    d = read_day(store, day, history_days, cfg)
    if d["night"].shape[1] == 0:
        raise ValueError(f"no telemetry windows of {day.isoformat()} in the cube: build the day first")
    out = judge_day(d["hist"], d["hist_times"], d["night"], d["night_times"], d["nodes"], d["metrics"], d["racks"],
                    d["archs"], d["jobs"], d["step"], cfg, held_back_days, d["model_scores"], d["hist_std"],
                    d["night_std"])
    df = verdicts_frame(day, out["rows"])
    judged = int(np.isfinite(d["night"]).any(axis=(1, 2)).sum())
    info = {"nodes_judged": judged, "baseline_nodes": int(out["baseline"].any(axis=1).sum()),
            "job_explained": out["evidence"].job_explained, "config": asdict(cfg),
            "group_thresholds": out["calibration"].group}
    info["heatmap"] = _heatmap(store, day, d, out)
    tbl = pa.Table.from_pandas(df, preserve_index=False)
    paths = {"verdicts": store.write_parquet(tbl, AREA, day.isoformat(), "verdicts.parquet"),
             "markdown": store.write_bytes(verdicts_markdown(day, df, info).encode(), AREA, day.isoformat(), "verdicts.md")}
    return {**paths, **info, "node_alerts": int((df["kind"] == "node").sum()) if len(df) else 0,
            "group_alerts": int((df["kind"] != "node").sum()) if len(df) else 0,
            "flagged_nodes": sorted({n for ms in df["members"] for n in ms}) if len(df) else [],
            "day": day.isoformat(), "history": f"{(day - timedelta(days=history_days)).isoformat()}.."}
