"""Weekly training of the failure predictor from the store (with the other models, ``nodewatch train``).

The simulator-based :func:`nodewatch.tasks.predict.train.train_predictor` measures the predictor; this module
trains the one the nightly ``predict`` step applies, from what the site actually staged: the telemetry of
the training days (``<counter>_rate`` gauges for the counters, as the nightly step reads them) and the
``failure_events`` derived from node states (a failure's anchor is the first telemetry sample the node
missed at or before the episode's ``start``). Failure sequences are cut as in
:mod:`nodewatch.tasks.predict.dataset` (windows of 4 min, leads 7 -> 2 min); ok sequences are every
``stride``-th step at least ``QUIET_BEFORE_S`` (1 h) before a failure of the node and not from its start
until an hour after its end. A real store does not say which failure had a precursor, so every
failure is a training positive (``train_positives="all"``).

It trains only on 15-30 s telemetry (the thesis's 15-s sensor data, sec. 4.2.2; 4-min windows of at least
8 samples) and skips itself, with the reason, on coarser data (the demo's 60-s telemetry), without failure
events, or with too few of them. The run is versioned in the registry like ``nodewatch predict train``.
"""

from __future__ import annotations

import time
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd

from nodewatch.models.predict.features import LEADS_MIN, WINDOW_S, node_feature_matrix, sequence_index, window_steps
from nodewatch.models.predict.uc import event_probability
from nodewatch.tasks.predict import registry
from nodewatch.tasks.predict.dataset import PREDICTOR_METRICS, QUIET_BEFORE_S, Sequences, summary
from nodewatch.tasks.simulate.metrics import COUNTERS

MAX_STEP_S = 30
"""Coarsest telemetry step the predictor trains on (4-min windows of >= 8 samples)."""
MIN_FAILURES = 4
"""Fewer failure sequences than this: no training (nothing to learn a failure class from)."""
NS = 1_000_000_000
ANCHOR_BACK_S = 1800
"""A failure event starts when Slurm marked the node down (``slurmd_timeout_s`` after the crash); its anchor is
moved back over the node's telemetry gap, at most this far, to the first missing sample."""


def _ns(col: pd.Series) -> pd.Series:
    """Nanoseconds since the epoch of a time column whatever its unit (pandas 3 reads Arrow ``us`` as ``us``)."""
    return pd.to_datetime(col, utc=True).astype("datetime64[ns, UTC]").astype("int64")


def _days(start: date, end: date) -> list[str]:
    return [(start + timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]


def _node_grids(store: Any, days: list[str], metrics: list[str]) -> tuple[dict[str, tuple[pd.DatetimeIndex, np.ndarray]], float]:
    """Per node, the training days' values (M, T) on one regular grid, counters as per-step increments; and the step."""
    from nodewatch.tasks.predict.score import _grid, median_step_s, staged_day_frames

    per_node: dict[str, list[tuple[pd.DatetimeIndex, np.ndarray]]] = {}
    steps = []
    for day in days:
        for node, (t, v) in staged_day_frames(store, day, metrics).items():
            per_node.setdefault(node, []).append((t, v))
            if np.isfinite(s := median_step_s(t)):
                steps.append(s)
    if not steps:
        return {}, float("nan")
    step = float(np.median(steps))
    out = {}
    is_c = np.array([m in COUNTERS for m in metrics])
    for node, parts in per_node.items():
        t = pd.DatetimeIndex(np.concatenate([p[0].as_unit("ns").asi8 for p in parts])).tz_localize("UTC")
        v = np.concatenate([p[1] for p in parts], axis=1)
        grid, g = _grid(t, v, int(round(step)))
        g = g.copy()
        g[is_c] = g[is_c] * round(step)  # per-second rates -> per-step increments, as in training on the simulator
        out[node] = (grid, g)
    return out, step


def staged_step(store: Any, days: list[str], metric: str = PREDICTOR_METRICS[0]) -> float:
    """Median sampling step (s) of ``metric`` on the first of ``days`` with staged telemetry (NaN: none); one day read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for day in days:
        tbl = store.read_staged("telemetry", dates=[day], columns=["time", "node", "metric"])
        if tbl is None or tbl.num_rows == 0:
            continue
        tbl = tbl.filter(pc.equal(tbl["metric"], pa.scalar(metric)))
        if tbl.num_rows == 0:
            continue
        df = tbl.select(["node", "time"]).to_pandas()
        df["t"] = _ns(df["time"])
        d = df.sort_values(["node", "t"]).groupby("node")["t"].diff().dropna()
        d = d[d > 0]
        if len(d):
            return float(d.median()) / NS
    return float("nan")


def store_sequences(
    store: Any, start: date, end: date, stride: int = 4, metrics: tuple[str, ...] = PREDICTOR_METRICS
) -> tuple[Sequences, Sequences, float]:
    """Failure and ok sequences of the staged days ``start``..``end`` and the telemetry step (s)."""
    days = _days(start, end)
    grids, step = _node_grids(store, days, list(metrics))
    empty = np.zeros((0, len(LEADS_MIN), 7 * len(metrics)), np.float32)
    none = Sequences(empty, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0))
    if not grids or not np.isfinite(step) or step > MAX_STEP_S:
        return none, none, step
    st = int(round(step))
    w = window_steps(st, WINDOW_S)
    fe = store.read_staged("failure_events", dates=days, columns=["node", "start", "end"])
    fdf = fe.to_pandas() if fe is not None else pd.DataFrame(columns=["node", "start", "end"])
    fdf["s"] = _ns(fdf["start"]) / NS
    fdf["e"] = _ns(fdf["end"]).where(fdf["end"].notna(), 0) / NS
    names = sorted(grids)
    pos_x, pos_g, pos_n, pos_t = [], [], [], []
    neg_x, neg_g, neg_n, neg_t = [], [], [], []
    for k, node in enumerate(names):
        grid, v = grids[node]
        feat = node_feature_matrix(v, np.zeros(len(metrics), bool), w)
        t0 = grid.as_unit("ns")[0].value / NS
        tg = t0 + st * np.arange(len(grid))
        fl = fdf[fdf["node"] == node]
        gone = np.isnan(v).all(axis=0)
        for i, r in enumerate(fl.itertuples()):
            a = int(np.floor((r.s - t0) / st))
            back = 0  # the episode starts when Slurm noticed; the anchor is the first sample the node missed
            while 0 < a <= len(gone) and gone[a - 1] and back < ANCHOR_BACK_S // st:
                a, back = a - 1, back + 1
            idx = sequence_index(np.array([a]), st)[0, ::-1]
            if idx.min() < 0 or idx.max() >= len(feat) or np.isnan(feat[idx]).any():
                continue
            pos_x.append(feat[idx])
            pos_g.append(k * 10_000 + i)
            pos_n.append(k)
            pos_t.append(r.s)
        anchors = np.arange(max(LEADS_MIN) * 60 // st + w, len(grid), stride)
        bad = np.zeros(len(anchors), bool)
        ta = tg[anchors]
        for r in fl.itertuples():
            end = r.e if r.e > 0 else tg[-1]
            bad |= (ta >= r.s - QUIET_BEFORE_S) & (ta < end + QUIET_BEFORE_S)
        anchors = anchors[~bad]
        seq = feat[sequence_index(anchors, st)[:, ::-1]]
        ok = ~np.isnan(seq).any(axis=(1, 2))
        neg_x.append(seq[ok].astype(np.float32))
        day_of = ((tg[anchors[ok]]) // 86400).astype(np.int64)
        neg_g.append(-(k * 100_000 + day_of % 100_000) - 1)  # an ok group is a node-day
        neg_n.append(np.full(int(ok.sum()), k))
        neg_t.append(tg[anchors[ok]])
    pos = Sequences(
        x=np.stack(pos_x).astype(np.float32) if pos_x else empty, y=np.ones(len(pos_x), np.int64),
        group=np.asarray(pos_g, np.int64), has_precursor=np.ones(len(pos_x), bool),
        node=np.asarray(pos_n, np.int64), time_s=np.asarray(pos_t, float),
    )
    neg = Sequences(
        x=np.concatenate(neg_x) if neg_x else empty, y=np.zeros(sum(len(x) for x in neg_x), np.int64),
        group=np.concatenate(neg_g) if neg_g else np.zeros(0, np.int64), has_precursor=np.zeros(sum(len(x) for x in neg_x), bool),
        node=np.concatenate(neg_n) if neg_n else np.zeros(0, np.int64), time_s=np.concatenate(neg_t) if neg_t else np.zeros(0),
    )
    return pos, neg, step


def train_weekly(
    store: Any, start: date, end: date, run_id: str, epochs: int = 300, stride: int = 4, splits: int = 1, seed: int = 0
) -> dict[str, Any]:
    """Train and register the predictor from the store's ``start``..``end``; ``{"status": "ok"|"skipped", ...}``."""
    from nodewatch.tasks.predict.evaluate import cross_validate, fps_table
    from nodewatch.tasks.predict.train import fit_final

    t0 = time.perf_counter()
    def too_coarse(step: float) -> dict[str, Any]:
        return {"status": "skipped",
                "details": f"telemetry step {step:g} s: the failure predictor trains on {MAX_STEP_S}-s or finer telemetry"}

    step = staged_step(store, _days(start, end))
    if np.isfinite(step) and step > MAX_STEP_S:  # decided from one day's timestamps, before reading every day
        return too_coarse(step)
    pos, neg, step = store_sequences(store, start, end, stride=stride)
    if not np.isfinite(step):
        return {"status": "skipped", "details": f"no staged telemetry of the predictor's metrics {start}..{end}"}
    if step > MAX_STEP_S:
        return too_coarse(step)
    if len(pos.y) < MIN_FAILURES or len(neg.y) < 100:
        return {"status": "skipped", "details": f"too little data to train the failure predictor: {len(pos.y)} failure "
                                                f"sequence(s) (need {MIN_FAILURES}) and {len(neg.y)} ok sequences"}
    t_data = time.perf_counter() - t0
    n_nodes = len(np.unique(np.concatenate([pos.node, neg.node])))
    n_days = (end - start).days + 1
    p_e, _ = event_probability(len(pos.y), int(n_nodes * n_days * 86400 // step))
    fps: list[dict[str, Any]] = []
    cv_rows: list[dict[str, Any]] = []
    if splits > 0 and len(pos.y) >= 4 * MIN_FAILURES:  # each split needs failures in all three parts
        cv = cross_validate(pos, neg, splits=splits, seed=seed, epochs=epochs, train_positives="all")
        cv_rows = cv.to_dict(orient="records")
        fps = fps_table(cv, p_e).to_dict(orient="records")
    ens, voter = fit_final(pos, neg, epochs=epochs, seed=seed, train_positives="all")
    params = {
        "kind": "predict", "run_id": run_id, "step_s": int(round(step)), "window_s": WINDOW_S,
        "leads_min": sorted(LEADS_MIN, reverse=True), "metrics": list(PREDICTOR_METRICS), "hidden": ens.hidden,
        "epochs": epochs, "train_positives": "all", "p_e": p_e,
        "data": {"source": "store", "start": start.isoformat(), "end": end.isoformat(), "n_nodes": n_nodes,
                 "stride": stride, "counts": summary(pos, neg).to_dict(orient="records")},
        "cv": {"splits": splits if cv_rows else 0, "rounds": cv_rows},
        "fps": fps,
        "timings_s": {"data": t_data, "fit": time.perf_counter() - t0 - t_data},
    }
    registry.save(store, run_id, ens, voter, params)
    return {"status": "ok", "run_id": run_id, "details": f"{len(pos.y)} failure and {len(neg.y)} ok sequences, "
            f"{n_nodes} nodes, step {step:g} s", "failures": len(pos.y), "ok": len(neg.y)}
