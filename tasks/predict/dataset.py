"""Training and evaluation sequences for the failure predictor from the simulated cluster.

Frank sec. 4.2.2 mines *failure* events (hardware anomalies followed by a job failure) and *ok* events
from 15-s sensor data. Here the simulator's failures are the failure events (``precursor_start`` tells
which carry a precursor: the thesis's failure definition requires one, so rates are reported both over
failures with a precursor and over all failures), and ok events are every step of randomly drawn
node-days that are at least :data:`QUIET_BEFORE_S` before a failure of that node and not during its
down time. For each event the six lead-time windows are cut from the node's telemetry rendered at the
simulator's step (:mod:`nodewatch.models.predict.features`).

Counters are differenced, so the rendering starts from a zero counter base (no chaining from the
epoch is needed; increments are unaffected).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nodewatch.models.predict.features import FEATURES, LEADS_MIN, WINDOW_S, node_feature_matrix, sequence_index, window_steps
from nodewatch.tasks.simulate import telemetry
from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.metrics import COUNTERS, METRIC_INDEX
from nodewatch.tasks.simulate.schedule import Schedule, build_schedule

PREDICTOR_METRICS = (
    "temp_cpu0",
    "fan0_rpm",
    "power_node",
    "temp_inlet",
    "cpu0_load",
    "cpu0_sys",
    "cpu0_freq",
    "edac_ce_count",
    "ib_errors",
    "disk_write_bytes",
)
"""Ten series, the analogue of Table 4.2 (CPU temperature, fan RPM, power for voltage, inlet for PSU
temperature, 1-min load, CPU system time, frequency; plus error counters and disk writes that carry the
simulator's precursors (EDAC, InfiniBand, I/O) where the thesis had memory, disk usage and bytes in/out)."""
ANOMALY_KINDS = ("cpu_hog", "memory_leak", "network_degradation", "thermal_fan_failure", "disk_slowdown",
                 "misconfiguration")
"""The simulator's anomaly types (``tasks/simulate/anomalies.py``): none of them ends in a failure."""
BUSY_LOAD = 8.0
"""A sequence is on a *busy* node when the mean 1-min load of CPU 0 in its last (2-min) window exceeds this: an
idle socket reads ~0.5, a job 10-32 (32 cores per socket); Frank's ok events are "mined ... from within successful
jobs" (sec. 4.2.2), i.e. on loaded nodes, where the precursors of our failures mostly occur too."""
QUIET_BEFORE_S = 3600.0
"""Ok events are at least one hour before a failure of the node and outside its precursor window (a precursor
may start up to 12 h before; windows between are neither failure nor ok and are not used)."""


@dataclass
class Sequences:
    """Lead-time inputs ``x`` (N, L, 70) in sequence order (7 -> 2 min), labels, and grouping for splits."""

    x: np.ndarray
    y: np.ndarray
    group: np.ndarray
    """Failure event id for positives, node-day id (negative numbers) for ok events: splits never cut a group."""
    has_precursor: np.ndarray
    node: np.ndarray
    time_s: np.ndarray
    """Anchor time (the failure time for positives) in seconds since the simulation epoch."""
    anomaly: np.ndarray | None = None
    """Per sequence: 0, or 1 + the index in :data:`ANOMALY_KINDS` of a simulated anomaly (a condition that does
    not end in a failure) overlapping the sequence's windows (anchor - 11 min .. anchor); ``None`` if unknown."""
    hard: np.ndarray | None = None
    """Per sequence: True if it comes from a node-day drawn *because* it holds an anomaly (a hard negative, training
    only: such node-days are over-represented, so rates on them are not the machine's rates)."""


def _render(sched: Schedule, nodes: np.ndarray, day: int) -> tuple[np.ndarray, np.ndarray]:
    """Values (B, M, T) of the predictor metrics and presence (B, T) for ``nodes`` on ``day``."""
    events = sched.node_events(nodes)
    base = np.zeros((len(nodes), len(telemetry.DRIVERS)))
    vals, present, _, _ = telemetry.render(sched, events, nodes, day, base)
    idx = [METRIC_INDEX[m] for m in PREDICTOR_METRICS]
    v = vals[:, idx, :]
    v[np.broadcast_to(~present[:, None, :], v.shape)] = np.nan
    return v, present


def _counter_mask() -> np.ndarray:
    return np.array([m in COUNTERS for m in PREDICTOR_METRICS])


def _node_features(sched: Schedule, node: int, days: list[int], w: int) -> tuple[np.ndarray, float]:
    """Feature matrix of ``node`` over consecutive ``days`` (T_total, 70) and the time of its first sample."""
    parts = [_render(sched, np.array([node]), d)[0][0] for d in days]
    return node_feature_matrix(np.concatenate(parts, axis=-1), _counter_mask(), w), days[0] * 86400.0


def failure_sequences(sched: Schedule, w: int) -> Sequences:
    """One sequence per failure (anchor = failure time), rendered from the failing node's telemetry."""
    cfg = sched.cfg
    step = cfg.step_s
    f = sched.failures
    horizon = sched.t_stop
    f = f[(f["t_fail"] >= 86400.0) & (f["t_fail"] < horizon)].reset_index(drop=True)
    xs, keep = [], []
    for i, r in f.iterrows():
        day = int(r["t_fail"] // 86400)
        t0 = day * 86400.0
        days = [day - 1, day] if r["t_fail"] - t0 < (max(LEADS_MIN) * 60 + WINDOW_S + step) else [day]
        feat, start = _node_features(sched, int(r["node"]), days, w)
        a = int(np.floor((r["t_fail"] - start) / step))
        idx = sequence_index(np.array([a]), step)[0, ::-1]  # sequence order: 7 -> 2 minutes
        if idx.min() < 0 or idx.max() >= len(feat):
            continue
        seq = feat[idx]
        if np.isnan(seq).all():
            continue
        xs.append(seq)
        keep.append(i)
    f = f.loc[keep]
    x = np.stack(xs) if xs else np.zeros((0, len(LEADS_MIN), 7 * len(PREDICTOR_METRICS)))
    return Sequences(
        x=x,
        y=np.ones(len(f), np.int64),
        group=f["event_id"].to_numpy(np.int64),
        has_precursor=f["precursor_start"].notna().to_numpy(),
        node=f["node"].to_numpy(np.int64),
        time_s=f["t_fail"].to_numpy(float),
    )


def random_node_days(sched: Schedule, node_days: int, seed: int = 0) -> set[tuple[int, int]]:
    """``node_days`` random (node, day) draws (days >= 1; duplicates collapse)."""
    n_days = int(sched.t_stop // 86400)
    g = np.random.default_rng(seed)
    return {(int(g.integers(sched.cfg.n_nodes)), int(g.integers(1, n_days))) for _ in range(node_days)}


def anomaly_node_days(sched: Schedule, per_kind: int, seed: int = 0, exclude: set | None = None) -> set[tuple[int, int]]:
    """Up to ``per_kind`` random (node, day) pairs per anomaly kind whose day overlaps an anomaly of that kind.

    These are the hard negatives: a fan failure, memory leak, CPU hog ... changes the telemetry for hours without
    ending in a failure. Random node-days hold them at their natural share (~7 % of node-days, ~1 % of node-time),
    i.e. a handful per training set, too few for the networks to learn that they are ok.
    """
    n_days = int(sched.t_stop // 86400)
    g = np.random.default_rng(seed + 7919)
    exclude = exclude or set()
    out: set[tuple[int, int]] = set()
    an = sched.anomalies
    for kind in ANOMALY_KINDS:
        cand = set()
        for r in an[an["type"] == kind].itertuples():
            for d in range(max(1, int(r.start // 86400)), min(n_days - 1, int(r.end // 86400)) + 1):
                cand.add((int(r.node), d))
        cand = sorted(cand - exclude - out)
        if cand:
            pick = g.choice(len(cand), size=min(per_kind, len(cand)), replace=False)
            out |= {cand[i] for i in pick}
    return out


def _anomaly_codes(sched: Schedule, node: int, t_anchor: np.ndarray) -> np.ndarray:
    """0 or 1 + kind index of an anomaly overlapping [anchor - 11 min, anchor] (the windows of the sequence)."""
    code = np.zeros(len(t_anchor), np.int8)
    an = sched.anomalies
    lo = t_anchor - (max(LEADS_MIN) * 60 + WINDOW_S)
    for r in an[an["node"] == node].itertuples():
        if r.type in ANOMALY_KINDS:
            code[(lo < r.end) & (t_anchor >= r.start)] = ANOMALY_KINDS.index(r.type) + 1
    return code


def ok_sequences(
    sched: Schedule, node_days: int, w: int, seed: int = 0, stride: int = 1,
    pairs: set[tuple[int, int]] | None = None, hard: bool = False,
) -> Sequences:
    """Ok sequences at every ``stride``-th step of ``node_days`` random (node, day) pairs (days >= 1), or of ``pairs``.

    ``hard=True`` marks them as hard negatives (:attr:`Sequences.hard`, e.g. from :func:`anomaly_node_days`).
    """
    cfg = sched.cfg
    step = cfg.step_s
    if pairs is None:
        pairs = random_node_days(sched, node_days, seed)
    by_day: dict[int, list[int]] = {}
    for n, d in sorted(pairs):
        by_day.setdefault(d, []).append(n)
    fl = sched.failures
    xs, groups, nodes, times, codes = [], [], [], [], []
    cm = _counter_mask()
    for d, ns in by_day.items():
        arr = np.array(ns)
        prev, _ = _render(sched, arr, d - 1)
        cur, _ = _render(sched, arr, d)
        t_first = (d - 1) * 86400.0
        for b, n in enumerate(arr):
            feat = node_feature_matrix(np.concatenate([prev[b], cur[b]], axis=-1), cm, w)
            T = cur.shape[-1]
            anchors = np.arange(T, 2 * T, stride)  # anchors on day d (the previous day supplies the windows)
            t_anchor = t_first + anchors * step
            bad = np.zeros(len(anchors), bool)
            for r in fl[fl["node"] == n].itertuples():
                # not ok: an hour before a failure, and anywhere in its precursor window (up to 12 h long: an
                # "ok" sequence inside it carries the precursor and taught the networks false alarms)
                lo = r.t_fail - QUIET_BEFORE_S
                if not pd.isna(r.precursor_start):
                    lo = min(lo, r.precursor_start)
                bad |= (t_anchor >= lo) & (t_anchor < r.t_up + QUIET_BEFORE_S)
            anchors, t_anchor = anchors[~bad], t_anchor[~bad]
            seq = feat[sequence_index(anchors, step)[:, ::-1]]  # sequence order: 7 -> 2 minutes
            ok = ~np.isnan(seq).any(axis=(1, 2))
            xs.append(seq[ok].astype(np.float32))
            groups.append(np.full(int(ok.sum()), -(n * 100_000 + d) - 1, np.int64))
            nodes.append(np.full(int(ok.sum()), n, np.int64))
            times.append(t_anchor[ok])
            codes.append(_anomaly_codes(sched, int(n), t_anchor[ok]))
    x = np.concatenate(xs) if xs else np.zeros((0, len(LEADS_MIN), 7 * len(PREDICTOR_METRICS)), np.float32)
    m = len(x)
    return Sequences(
        x=x,
        y=np.zeros(m, np.int64),
        group=np.concatenate(groups) if groups else np.zeros(0, np.int64),
        has_precursor=np.zeros(m, bool),
        node=np.concatenate(nodes) if nodes else np.zeros(0, np.int64),
        time_s=np.concatenate(times) if times else np.zeros(0),
        anomaly=np.concatenate(codes) if codes else np.zeros(0, np.int8),
        hard=np.full(m, bool(hard)),
    )


def busy(x: np.ndarray) -> np.ndarray:
    """Per sequence of ``x`` (N, L, 70): is the node loaded in its last window (:data:`BUSY_LOAD`)?"""
    col = PREDICTOR_METRICS.index("cpu0_load") * len(FEATURES) + FEATURES.index("mean")
    return np.asarray(x[:, -1, col], np.float64) > BUSY_LOAD


def hard_strata(seq: Sequences) -> np.ndarray:
    """Stratum of each ok sequence for the networks' epoch sample: anomaly kind x node load, -1 outside an anomaly.

    ``2 * kind_index + busy`` where the sequence overlaps a non-failing anomaly (:attr:`Sequences.anomaly`), so a
    degraded network on a busy node and on an idle one are separate strata (12 at most); -1 elsewhere and for
    sequences of unknown anomaly (failures, stores).
    """
    if seq.anomaly is None or not len(seq.y):
        return np.full(len(seq.y), -1, np.int64)
    an = np.asarray(seq.anomaly, np.int64)
    out = np.full(len(an), -1, np.int64)
    m = an > 0
    if m.any():
        out[m] = 2 * (an[m] - 1) + busy(seq.x[np.flatnonzero(m)]).astype(np.int64)
    return out


def simulated_sequences(
    cfg: SimConfig, n_days: int, node_days: int, seed: int = 0, stride: int = 1
) -> tuple[Sequences, Sequences]:
    """Failure and ok sequences of a simulated cluster of ``cfg`` over ``n_days`` days."""
    w = window_steps(cfg.step_s)
    sched = build_schedule(cfg, n_days)
    return failure_sequences(sched, w), ok_sequences(sched, node_days, w, seed=seed, stride=stride)


def simulated_data(
    cfg: SimConfig, n_days: int, node_days: int, stride: int = 1, hard_per_kind: int = 0, seed: int | None = None
) -> tuple[Sequences, Sequences, Sequences | None]:
    """Failures, ok sequences of ``node_days`` random node-days and (``hard_per_kind`` > 0) hard negatives.

    Hard negatives are up to ``hard_per_kind`` node-days per anomaly kind (:func:`anomaly_node_days`), disjoint
    from the random ones.
    """
    seed = cfg.seed if seed is None else seed
    w = window_steps(cfg.step_s)
    sched = build_schedule(cfg, n_days)
    nat = random_node_days(sched, node_days, seed)
    neg = ok_sequences(sched, node_days, w, stride=stride, pairs=nat)
    hard = None
    if hard_per_kind > 0:
        hard = ok_sequences(sched, 0, w, stride=stride, pairs=anomaly_node_days(sched, hard_per_kind, seed, exclude=nat),
                            hard=True)
    return failure_sequences(sched, w), neg, hard


def summary(pos: Sequences, neg: Sequences) -> pd.DataFrame:
    """Counts of the data set (for the report)."""
    return pd.DataFrame(
        [
            {"events": "failure (with precursor)", "sequences": int(pos.has_precursor.sum())},
            {"events": "failure (no precursor)", "sequences": int((~pos.has_precursor).sum())},
            {"events": "ok", "sequences": len(neg.y)},
            {"events": "ok node-days", "sequences": len(np.unique(neg.group))},
        ]
    )


class Stacked:
    """Read-only lazy stack of row arrays (N_i, ...) along axis 0, e.g. the memory-mapped ``x`` of several machines.

    Indexing (an int, a slice, a boolean mask of length N or an integer index array) gathers only the rows asked
    for, part by part and in chunks, into one new float32 array: stacking four 60-day machines never copies all of
    their sequences into memory (only the training rows a fit gathers anyway).
    """

    CHUNK = 100_000
    """Rows gathered per fancy-indexing call (bounds the temporary of a memory-mapped read)."""

    def __init__(self, parts: list[np.ndarray]) -> None:
        if not parts:
            raise ValueError("Stacked needs at least one array")
        tail = {tuple(p.shape[1:]) for p in parts}
        if len(tail) != 1:
            raise ValueError(f"Stacked parts must agree beyond axis 0, got shapes {sorted(tail)}")
        self.parts = list(parts)
        self.offsets = np.cumsum([0] + [len(p) for p in parts])
        self.shape = (int(self.offsets[-1]),) + tail.pop()
        self.dtype = np.dtype(np.float32)
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: object) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            return self[np.array([key])][0]
        return self.gather(key)

    def gather(self, key: object, out: np.ndarray | None = None) -> np.ndarray:
        """Rows ``key`` (slice, 1-d bool mask or int indices) as float32, written into ``out`` if given."""
        if isinstance(key, slice):
            idx = np.arange(len(self))[key]
        else:
            k = np.asarray(key)
            if k.dtype == bool:
                if k.shape != (len(self),):
                    raise IndexError(f"boolean index of shape {k.shape} for {len(self)} rows")
                idx = np.flatnonzero(k)
            elif k.ndim == 1 and np.issubdtype(k.dtype, np.integer):
                idx = np.where(k < 0, k + len(self), k)
                if len(idx) and (idx.min() < 0 or idx.max() >= len(self)):
                    raise IndexError(f"index out of range for {len(self)} rows")
            else:
                raise IndexError(f"Stacked supports int, slice, 1-d bool or int indices, got {k.dtype} {k.shape}")
        if out is None:
            out = np.empty((len(idx),) + self.shape[1:], np.float32)
        elif out.shape != (len(idx),) + self.shape[1:]:
            raise ValueError(f"out has shape {out.shape}, the rows need {(len(idx),) + self.shape[1:]}")
        part = np.searchsorted(self.offsets, idx, side="right") - 1
        for p in np.unique(part):
            where = np.flatnonzero(part == p)
            local = idx[where] - self.offsets[p]
            for lo in range(0, len(where), self.CHUNK):
                out[where[lo : lo + self.CHUNK]] = self.parts[p][local[lo : lo + self.CHUNK]]
        return out


def group_stride(parts: list[Sequences | None]) -> int:
    """One more than the largest ``|group|`` of ``parts``: shifting machine ``i``'s ids by ``i`` strides keeps them apart."""
    return 1 + max((int(np.abs(np.asarray(q.group)).max()) for q in parts if q is not None and len(q.group)), default=0)


def combine(parts: list[Sequences | None], stride: int | None = None) -> Sequences | None:
    """The sequences of several machines (simulator seeds) as one set; ``x`` a :class:`Stacked` view (no copy).

    Group ids of part ``i`` move ``i * stride`` away from 0 (failure events >= 0 up, ok node-days < 0 down; default
    stride :func:`group_stride`), so node-day 7 of machine 1 and of machine 2 stay two groups and a split never
    takes one for the other. Pass the same ``stride`` when combining the failures, ok and hard sets of the same
    machines. ``None`` parts (a machine without hard negatives) are skipped but keep their index; all ``None`` gives
    ``None``. ``node`` and ``time_s`` stay per machine.
    """
    stride = group_stride(parts) if stride is None else int(stride)
    kept = [(i, q) for i, q in enumerate(parts) if q is not None]
    if not kept:
        return None
    groups = []
    for i, q in kept:
        g = np.asarray(q.group, np.int64)
        groups.append(np.where(g >= 0, g + i * stride, g - i * stride))

    def cat(name: str) -> np.ndarray | None:
        vals = [getattr(q, name) for _, q in kept]
        if any(v is None for v in vals):
            return None
        return np.concatenate([np.asarray(v) for v in vals])

    return Sequences(x=Stacked([q.x for _, q in kept]), y=cat("y"), group=np.concatenate(groups),
                     has_precursor=cat("has_precursor"), node=cat("node"), time_s=cat("time_s"),
                     anomaly=cat("anomaly"), hard=cat("hard"))


def combine_machines(
    data: list[tuple[Sequences, Sequences, Sequences | None]],
) -> tuple[Sequences, Sequences, Sequences | None]:
    """``(failures, ok, hard)`` of several machines combined with one group stride (unique ids across all three)."""
    stride = group_stride([q for d in data for q in d])
    return tuple(combine([d[j] for d in data], stride) for j in range(3))  # type: ignore[return-value]
