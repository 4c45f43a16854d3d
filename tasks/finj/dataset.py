"""A campaign directory (``events.csv`` + ``raw.csv`` of the engine and sampler) -> labelled feature sets.

Steps (Netti et al. Sec. 6): the 1-s samples are put on a regular 1-s grid (a missed second repeats the
previous sample), constant metrics are dropped (decided on the training campaign, kept in the model's
layout so inference uses the same columns), ``allocated`` metrics are added from the engine's events
(node: any application running; core k: an application pinned to or spanning core k), features are
computed per core (``models/finj/features.py``) and each window gets a *mode*/*recent* label and an
*ambiguous* flag (``models/finj/labels.py``) from the fault program running at each second.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nodewatch.models.finj.features import STEP, WINDOW, FeatureLayout, core_features
from nodewatch.models.finj.labels import window_labels
from nodewatch.tasks.finj.catalog import FAULTS, HEALTHY
from nodewatch.tasks.finj.cgroup import PAGING_IO_FIELDS
from nodewatch.tasks.finj.sampler import LDMS_META, is_counter

MAX_MISSING = 6
"""Most missing (filled) seconds a 60-s window may hold (10 %); more and the window is dropped."""
CLASSES = (HEALTHY, *sorted(FAULTS))
"""Label codes: 0 = healthy, then the eight fault programs (intensity is not a separate class)."""


class CampaignError(ValueError):
    """A campaign directory that cannot be read (one line)."""


@dataclass
class Raw:
    """A campaign's samples on a 1-s grid and its events."""

    t0: int
    """Epoch second of row 0."""
    columns: list[str]
    values: np.ndarray
    """(seconds, columns) float64."""
    events: list[dict[str, str]]
    n_cores: int
    excluded: tuple[tuple[float, float], ...] = ()
    """Epoch-second intervals whose windows are dropped (``exclude.csv`` of the campaign: something else injected
    faults on the machine then, e.g. a test's mini campaign)."""
    missing: np.ndarray | None = None
    """Per grid second: no sample was taken (the row repeats the previous sample). Windows with more than
    :data:`MAX_MISSING` missing seconds are dropped (a stalled sampler gives no feature set)."""
    cores: tuple[int, ...] = ()
    """The cores that get per-core feature sets (the campaign's cores, :func:`campaign_view`); ``()`` = all."""

    @property
    def core_ids(self) -> tuple[int, ...]:
        """The cores with per-core feature sets."""
        return self.cores or tuple(range(self.n_cores))


VIEWS = ("campaign", "node")
"""How node-level CPU metrics are read (:func:`campaign_view`): ``campaign`` (default) or ``node`` (raw /proc/stat)."""


def read_raw(campaign: Path, max_bytes: int = 4 * 2**30, view: str = "campaign") -> Raw:
    """Read ``raw.csv`` and ``events.csv`` of a campaign (regular files only); ``view`` see :func:`campaign_view`."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    import pandas as pd

    from nodewatch.tasks.core.files import UnsafeInputError, open_regular

    def _open(name: str):
        try:
            return os.fdopen(open_regular(campaign / name), "rb")
        except UnsafeInputError as e:
            raise CampaignError(f"{name}: {str(e).split(': ', 1)[-1]}") from None

    with _open("raw.csv") as fh:
        if os.fstat(fh.fileno()).st_size > max_bytes:
            raise CampaignError("raw.csv: larger than the limit")
        try:
            df = pd.read_csv(fh, dtype={"ProducerName": str}, on_bad_lines="skip")
        except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
            raise CampaignError(f"raw.csv: cannot parse: {str(e).splitlines()[0][:200]}") from None
    if df.empty or "#Time" not in df or "Time_usec" not in df:
        raise CampaignError("raw.csv: no samples (LDMS header #Time,Time_usec,... expected)")
    metric_cols = [c for c in df.columns if c not in LDMS_META]
    for c in ["#Time", "Time_usec", *metric_cols]:
        if df[c].dtype.kind not in "fiu":
            df[c] = pd.to_numeric(df[c], errors="coerce")
    with np.errstate(invalid="ignore"):
        t = np.rint(np.nan_to_num(df["#Time"].to_numpy(), nan=0.0) + df["Time_usec"].fillna(0).to_numpy() / 1e6).astype(np.int64)
    vals = df[metric_cols].to_numpy(np.float64)
    keep = np.isfinite(df["#Time"].to_numpy())
    t, vals = t[keep], vals[keep]
    if t.size == 0:
        raise CampaignError("raw.csv: no sample with a valid time")
    order = np.argsort(t, kind="stable")
    t, vals = t[order], vals[order]
    uniq, first = np.unique(t, return_index=True)
    t0 = int(uniq[0])
    idx = np.searchsorted(uniq, np.arange(t0, int(uniq[-1]) + 1), side="right") - 1  # last sample at or before
    grid = vals[first][idx]
    missing = np.ones(idx.size, bool)
    missing[uniq - t0] = False
    # forward-fill NaN cells (a field missing in one sample)
    mask = np.isnan(grid)
    if mask.any():
        pos = np.where(~mask, np.arange(grid.shape[0])[:, None], 0)
        np.maximum.accumulate(pos, axis=0, out=pos)
        grid = grid[pos, np.arange(grid.shape[1])]
        grid = np.nan_to_num(grid)
    with _open("events.csv") as fh:
        events = list(csv.DictReader(line.decode("utf-8", "replace") for line in fh))
    cores = {int(c.split("#", 1)[1]) for c in metric_cols if "#" in c and c.split("#", 1)[1].isdigit()}
    excluded: list[tuple[float, float]] = []
    if (campaign / "exclude.csv").is_file():
        with _open("exclude.csv") as fh:
            for row in csv.DictReader(line.decode("utf-8", "replace") for line in fh):
                try:
                    a, b = float(row["start"]), float(row["end"])
                except (KeyError, TypeError, ValueError):
                    raise CampaignError(f"exclude.csv: bad row {row} (start,end,reason in epoch seconds)") from None
                excluded.append((a, b))
    raw = Raw(t0, metric_cols, grid, events, (max(cores) + 1) if cores else 1, tuple(excluded), missing)
    if view == "campaign":
        raw = campaign_view(raw, campaign_cores(campaign, raw.n_cores, events))
    return add_derived(raw)


def campaign_cores(campaign: Path, n_cores: int, events: list[dict[str, str]] = ()) -> tuple[int, ...]:
    """The cores the campaign ran on: ``cores`` of its ``summary.json`` (written by the engine at the end from its
    CPU affinity: ``taskset -c 1`` makes a 1-core target node); for a campaign still running (no summary), the
    cores its started tasks name if every one names some; else all ``n_cores`` (older campaigns)."""
    import json

    try:
        doc = json.loads((campaign / "summary.json").read_text())
        cores = tuple(sorted({int(c) for c in doc.get("cores") or ()}))
    except (OSError, ValueError, TypeError, AttributeError):
        cores = ()
    if not cores:
        named = [e.get("cores") or "" for e in events if e.get("event") == "start"]
        if named and all(c.strip() for c in named):
            try:
                cores = tuple(sorted({int(c) for n in named for c in n.split()}))
            except ValueError:
                cores = ()
    cores = tuple(c for c in cores if 0 <= c < n_cores)
    return cores or tuple(range(n_cores))


def campaign_view(raw: Raw, cores: tuple[int, ...]) -> Raw:
    """The node as the campaign's job sees it, for a shared machine (``view="campaign"``, the default):

    * CPU time of niced processes (the ``nice`` column of ``/proc/stat``: other tenants' ``nice 19`` work) counts
      as ``idle``, node-wide and per core: the tenants are not part of the node's signal (a campaign runs at
      nice <= 0, so its own time is ``user``/``sys``); ``procstat.nice`` is then constant and dropped;
    * with a campaign pinned to some cores (``cores`` a strict subset), the node-level ``procstat`` CPU fields
      are the sums over those cores and only those cores get per-core feature sets (the other cores'
      ``#k`` columns are dropped): a 1-core target node on a 2-core machine.

    * the node's memory and paging are the target node's own (:func:`target_memory`): the run's cgroups summed.

    Load, disk and network metrics stay node-wide (the kernel does not split them by tenant here; the run's
    ``apps`` cgroup metrics are the job's own share)."""
    from nodewatch.tasks.finj.sampler import STAT_FIELDS

    raw = target_memory(raw, cores)
    col = {c: i for i, c in enumerate(raw.columns)}
    vals = raw.values.copy()
    suffixes = [""] + [f"#{k}" for k in range(raw.n_cores)]
    for sfx in suffixes:
        n, i = col.get(f"procstat.nice{sfx}"), col.get(f"procstat.idle{sfx}")
        if n is not None and i is not None:
            vals[:, i] += vals[:, n]
            vals[:, n] = 0.0
    subset = tuple(sorted(set(cores))) != tuple(range(raw.n_cores))
    if not subset:
        return Raw(raw.t0, raw.columns, vals, raw.events, raw.n_cores, raw.excluded, raw.missing, ())
    for f in STAT_FIELDS:
        node = col.get(f"procstat.{f}")
        per = [col.get(f"procstat.{f}#{k}") for k in cores]
        if node is not None and all(j is not None for j in per):
            vals[:, node] = vals[:, per].sum(axis=1)
    keep = [
        j
        for j, c in enumerate(raw.columns)
        if "#" not in c or not c.rsplit("#", 1)[1].isdigit() or int(c.rsplit("#", 1)[1]) in cores
    ]
    cols = [raw.columns[j] for j in keep]
    return Raw(raw.t0, cols, vals[:, keep], raw.events, raw.n_cores, raw.excluded, raw.missing, tuple(cores))


TARGET_GROUPS = ("apps", "faults", "sys")
"""The run's cgroups whose sum is the target node (every process the campaign started, faults included)."""
TARGET_FIELDS = ("mem_usage", "rss", "cache", "mapped_file", "anon", "file", *PAGING_IO_FIELDS)
"""Memory, paging and I/O fields of ``cgroup.py:group_stats`` summed into ``target.<field>``."""
NODE_IO_VMSTAT = frozenset(
    {"vmstat.nr_dirtied", "vmstat.nr_written", "vmstat.nr_dirty", "vmstat.nr_writeback", "vmstat.pgpgin", "vmstat.pgpgout"}
)
"""Node-wide ``vmstat`` I/O fields kept beside ``diskstats`` (disk traffic, not memory) in the target view."""


def target_memory(raw: Raw, cores: tuple[int, ...] = ()) -> Raw:
    """The target node's own memory, paging and I/O (campaign view), for a campaign with run cgroups.

    A real node's ``/proc/meminfo`` counts every process on it, the faulty one included; on a shared machine
    it counts everybody's. So ``target.<field>`` = the sum over the run's groups (:data:`TARGET_GROUPS`) of
    ``cgroup.<group>.<field>`` (:data:`TARGET_FIELDS`), summed per second *before* any derivative (counters
    stay counters), ``target.mem_free`` = capacity - ``target.mem_usage`` with capacity = ``MemTotal`` x the
    campaign's share of the cores (``len(cores) / n_cores``; a constant: only the level moves), and the
    node-wide ``meminfo.*`` / ``vmstat.*`` columns are dropped (other tenants' memory), except the ``vmstat``
    disk-traffic fields of :data:`NODE_IO_VMSTAT`, which stay node-wide like ``diskstats``. The ``faults``
    group never enters on its own (:data:`EXCLUDED_PREFIXES`). No-op without the ``apps`` group's memory
    (older campaigns, staged telemetry)."""
    col = {c: i for i, c in enumerate(raw.columns)}
    if "cgroup.apps.mem_usage" not in col or any(c.startswith("target.") for c in col):
        return raw
    names, cols = [], []
    for f in TARGET_FIELDS:
        idx = [col[f"cgroup.{g}.{f}"] for g in TARGET_GROUPS if f"cgroup.{g}.{f}" in col]
        if idx:
            names.append(f"target.{f}")
            cols.append(raw.values[:, idx].sum(axis=1))
    if "meminfo.MemTotal" in col:
        share = len(cores or range(raw.n_cores)) / raw.n_cores
        names.append("target.mem_free")
        cols.append(raw.values[:, col["meminfo.MemTotal"]] * share - cols[names.index("target.mem_usage")])
    keep = [j for j, c in enumerate(raw.columns) if not c.startswith(("meminfo.", "vmstat.")) or c in NODE_IO_VMSTAT]
    return Raw(
        raw.t0,
        [raw.columns[j] for j in keep] + names,
        np.column_stack([raw.values[:, keep], *cols]),
        raw.events,
        raw.n_cores,
        raw.excluded,
        raw.missing,
        raw.cores,
    )


EXCLUDED_PREFIXES = ("cgroup.faults.", "cgroup.sys.")
"""Raw metrics never used as features on their own: the fault programs' own cgroup would name the injection
itself (a real fault does not live in a labelled cgroup); it stays in ``raw.csv`` for checking the campaign. The
``sys`` group (the sampler and the engine's helpers) is monitoring overhead. Both enter the target node's totals
(:func:`target_memory`), as they would enter a real node's ``/proc/meminfo``."""
_BUSY = ("user", "nice", "sys", "irq", "softirq")


def add_derived(raw: Raw) -> Raw:
    """Append ``derived.nonjob_cpu`` (node) and ``derived.nonjob_cpu#k`` (per core): CPU seconds spent by
    everything but the job (node or core busy time from ``/proc/stat`` minus the ``apps`` cgroup's CPU time),
    a counter like its sources. It tells interference on a core (another process: a fault, or other users'
    work on a shared machine) from the job's own load, which the absolute node totals mix up. No-op when the
    campaign has no ``apps`` cgroup columns (older campaigns, staged telemetry)."""
    col = {c: i for i, c in enumerate(raw.columns)}
    if "cgroup.apps.cpu_usage" not in col or any(c.startswith("derived.") for c in col):
        return raw
    names, cols = [], []

    def busy(suffix: str) -> np.ndarray | None:
        idx = [col.get(f"procstat.{f}{suffix}") for f in _BUSY]
        if any(i is None for i in idx):
            return None
        return raw.values[:, idx].sum(axis=1)

    pairs = [("", "cgroup.apps.cpu_usage")] + [(f"#{k}", f"cgroup.apps.cpu_usage#{k}") for k in raw.core_ids]
    for suffix, job in pairs:
        b = busy(suffix)
        if b is None or job not in col:
            continue
        names.append(f"derived.nonjob_cpu{suffix}")
        cols.append(b - raw.values[:, col[job]])
    if not cols:
        return raw
    return Raw(
        raw.t0,
        [*raw.columns, *names],
        np.column_stack([raw.values, *cols]),
        raw.events,
        raw.n_cores,
        raw.excluded,
        raw.missing,
        raw.cores,
    )


def per_second_state(raw: Raw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(labels, alloc_node, alloc_core)`` per second: label code (:data:`CLASSES`), node and per-core allocation."""
    n = raw.values.shape[0]
    labels = np.zeros(n, np.int64)
    alloc = np.zeros((n, raw.n_cores), np.float64)
    starts: dict[str, tuple[float, dict[str, str]]] = {}
    end_of_data = raw.t0 + n

    def mark(ev: dict[str, str], s: float, e: float) -> None:
        a = int(np.clip(np.ceil(s - raw.t0), 0, n))
        b = int(np.clip(np.ceil(e - raw.t0), 0, n))
        if ev["is_fault"] == "True":
            if ev["program"] in FAULTS:
                labels[a:b] = CLASSES.index(ev["program"])
        else:
            cores = [int(c) for c in ev["cores"].split()] if ev["cores"] else list(range(raw.n_cores))
            for c in cores:
                if c < raw.n_cores:
                    alloc[a:b, c] = 1.0

    for ev in raw.events:
        try:
            t = float(ev["time"])
        except (KeyError, TypeError, ValueError):
            continue
        if ev.get("event") == "start":
            starts[ev["seq"]] = (t, ev)
        elif ev.get("event") in ("end", "stopped") and ev.get("seq") in starts:
            s, sev = starts.pop(ev["seq"])
            mark(sev, s, t)
    for s, sev in starts.values():  # still running at the end of the data
        mark(sev, s, end_of_data)
    return labels, alloc.max(axis=1), alloc


@dataclass
class Dataset:
    """Feature sets of every window and core, with labels."""

    features: np.ndarray
    """(windows, cores, features)."""
    names: list[str]
    ends: np.ndarray
    """Epoch second of each window's last sample."""
    mode: np.ndarray
    recent: np.ndarray
    ambiguous: np.ndarray
    layout: FeatureLayout


LEVEL_PREFIXES = ("meminfo.", "vmstat.", "loadavg.", "procstat.procs_")
"""Node-wide gauges whose absolute level drifts with everything else running on a shared machine (memory
in use, load average, runnable processes): with ``levels="derivative"`` their first derivative replaces them."""


def choose_layout(raw: Raw, allocated: bool = True, levels: str = "all") -> FeatureLayout:
    """Node/core metric split with constant metrics dropped (Sec. 6: constant metrics are redundant); with
    ``allocated`` the ``allocated`` metric (from the engine's events) leads both lists.

    ``levels="all"`` (the paper's features): gauges enter as levels. ``levels="derivative"``: the node-wide
    gauges of :data:`LEVEL_PREFIXES` are treated like counters (their change per second replaces the level;
    the run's own cgroup gauges stay levels), so a window's features do not depend on how much memory or
    load the machine's other users hold at that time."""
    if levels not in ("all", "derivative"):
        raise ValueError(f"levels must be all or derivative, got {levels!r}")
    var = (raw.values.std(axis=0) > 0) & np.array([not c.startswith(EXCLUDED_PREFIXES) for c in raw.columns], bool)
    node = [c for c, v in zip(raw.columns, var, strict=True) if "#" not in c and v]
    core_bases = sorted({c.split("#", 1)[0] for c, v in zip(raw.columns, var, strict=True) if "#" in c and v})
    core = [b for b in core_bases if all(f"{b}#{k}" in raw.columns for k in raw.core_ids)]
    counters = frozenset(c for c in node + core if is_counter(c) or (levels == "derivative" and c.startswith(LEVEL_PREFIXES)))
    lead = ("allocated",) if allocated else ()
    return FeatureLayout((*lead, *node), (*lead, *core), counters)


def matrices(raw: Raw, layout: FeatureLayout) -> tuple[np.ndarray, list[np.ndarray]]:
    """Node matrix and per-core matrices in ``layout`` order (``allocated`` from the events; a metric the
    layout needs but the campaign lacks is 0)."""
    _, alloc_node, alloc_core = per_second_state(raw)
    col = {c: i for i, c in enumerate(raw.columns)}
    n = raw.values.shape[0]

    def take(names: list[str]) -> np.ndarray:
        out = np.zeros((n, len(names)))
        for j, c in enumerate(names):
            if c in col:
                out[:, j] = raw.values[:, col[c]]
        return out

    node_x = take(list(layout.node))
    if "allocated" in layout.node:
        node_x[:, layout.node.index("allocated")] = alloc_node
    cores = []
    for k in raw.core_ids:
        cx = take([f"{b}#{k}" for b in layout.core])
        if "allocated" in layout.core:
            cx[:, layout.core.index("allocated")] = alloc_core[:, k]
        cores.append(cx)
    return node_x, cores


def build(
    campaign: Path, layout: FeatureLayout | None = None, window: int = WINDOW, step: int = STEP, view: str = "campaign"
) -> Dataset:
    """Read a campaign and compute every window's per-core feature sets and labels."""
    return build_raw(read_raw(campaign, view=view), layout, window, step)


def build_raw(raw: Raw, layout: FeatureLayout | None = None, window: int = WINDOW, step: int = STEP) -> Dataset:
    """Feature sets and labels of samples already on the 1-s grid (campaign files or staged telemetry)."""
    if raw.values.shape[0] < window:
        raise CampaignError(f"only {raw.values.shape[0]} s of samples: a window needs {window}")
    layout = layout or choose_layout(raw)
    node_x, cores = matrices(raw, layout)
    ends = np.arange(window - 1, raw.values.shape[0], step)
    feats = core_features(node_x, cores, layout, ends, window, step)
    labels, _, _ = per_second_state(raw)
    mode, recent, amb = window_labels(labels, ends, window)
    keep = np.ones(ends.size, bool)
    if raw.missing is not None and raw.missing.any():
        cum = np.concatenate([[0], np.cumsum(raw.missing)])
        keep &= (cum[ends + 1] - cum[ends + 1 - window]) <= MAX_MISSING
    for a, b in raw.excluded:  # windows [end - window + 1, end] overlapping an excluded interval
        start_s = ends + raw.t0 - (window - 1)
        keep &= ~((start_s <= b) & (ends + raw.t0 >= a))
    return Dataset(feats[keep], layout.feature_names(), ends[keep] + raw.t0, mode[keep], recent[keep], amb[keep], layout)


def without_faults(ds: Dataset, intervals: list[tuple[float, float]], window: int = WINDOW) -> Dataset:
    """``ds`` without every window that overlaps one of ``intervals`` (epoch seconds): the campaign as if those
    fault instances had not been injected (F-scores over the faults a machine can produce, docs/finj.md)."""
    keep = np.ones(ds.ends.size, bool)
    for a, b in intervals:
        keep &= ~((ds.ends - (window - 1) <= b) & (ds.ends >= a))
    return Dataset(ds.features[keep], ds.names, ds.ends[keep], ds.mode[keep], ds.recent[keep], ds.ambiguous[keep], ds.layout)
