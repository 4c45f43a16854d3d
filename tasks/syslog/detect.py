"""One night of syslog analytics: templates -> filtering -> SG -> vicinity detector -> abnormal nodes, outages, export.

Store outputs (docs/syslog.md), besides the templates of :mod:`nodewatch.tasks.syslog.catalogue`::

    staged/syslog_filters/date=D/part-<run>.parquet   templates filtered that night: template_id, template, reason, lines
    staged/syslog_abnormal/date=D/part-<run>.parquet  abnormal (node, window): window_end, sg, score, vicinity, variant
    staged/syslog_vicinity_events/date=D/part-<run>.parquet  vicinity-wide events (Eq. S3): vicinity, kind, start,
                                                      end, peak, window_min, nodes, live, median_sg, max_sg, variant
    exports/syslog/date=D/syslog-<run>.log            anonymised log of the day (RSYSLOG_FileFormat, re-ingestable)
    syslog/anon-map/<run>.bin                         its hash -> original mapping, AES-GCM with the site key

``syslog_filters``, ``syslog_abnormal`` and ``syslog_vicinity_events`` are published by one commit (label
``syslog-detect``); a re-run of a day replaces all three. Vicinities come from the staged topology (rack,
architecture; ``rack_arch`` = the paper's best, physical location within one architecture); without a topology
every node is in one ``global`` vicinity.
SG is the number of lines in the ``window_min`` (30) minutes before each observation moment, one moment every
``step_min`` (5) minutes (the paper's sliding window; the first moments of a day see only that day's lines), and
the shorter ``extra_windows`` (10 min, >= 8 lines by default) at the same moments: abnormal in any of them is abnormal (Eq. S2 of
models/syslog/dynamic.py); a row's ``sg`` and ``score`` are those of the window that flagged it. A vicinity in which
many nodes (not booting) reach a window's floor within ``wide_interval_min`` (10) minutes departs as a whole (Eq. S3):
that is one vicinity-wide event (``DayResult.vicinity_events``, ``ctx.shared["syslog"]["vicinity_events"]``), not node alarms.
Windows in which a node boots (its own kernel/systemd boot line) are never abnormal: that outage is known.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.syslog.dynamic import (
    allocation_labels,
    label_multi_window,
    label_wide,
    multi_window_detect,
    sliding_any,
    sliding_sg,
    vicinity_wide,
)
from nodewatch.models.syslog.filtering import filtered_templates
from nodewatch.models.syslog.vicinity import sg_matrix
from nodewatch.schemas.syslog_analytics import SYSLOG_ABNORMAL, SYSLOG_FILTERS, SYSLOG_VICINITY_EVENTS
from nodewatch.tasks.core.commit import StagedCommit
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.syslog.catalogue import TemplateResult, template_day
from nodewatch.tasks.syslog.outages import BOOT_RE, syslog_outages
from nodewatch.tasks.syslog.settings import SyslogSettings

NS = 1_000_000_000
FILTERS = "syslog_filters"
ABNORMAL = "syslog_abnormal"
FILTERS_SCHEMA = SYSLOG_FILTERS.arrow_schema()
ABNORMAL_SCHEMA = SYSLOG_ABNORMAL.arrow_schema()
EVENTS = "syslog_vicinity_events"
EVENTS_SCHEMA = SYSLOG_VICINITY_EVENTS.arrow_schema()


@dataclass
class DayResult:
    """What :func:`analyse_day` produced."""

    day: str
    templates: TemplateResult
    filtered: dict[int, str]
    abnormal: pa.Table
    outages: pa.Table
    export: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    peer_median: list[float] = field(default_factory=list)
    """Per ``abnormal`` row: the median SG of the live nodes of its vicinity in that window (the evidence)."""
    peers: list[int] = field(default_factory=list)
    """Per ``abnormal`` row: the live nodes of its vicinity in that window."""
    vicinity_events: list[dict[str, object]] = field(default_factory=list)
    """Vicinity-wide events (Eq. S3, :func:`wide_events`): a vicinity that departed as a whole, not node alarms."""
    commit: str | None = None
    """Key of the ``syslog-detect`` commit object that published the night's filters, alarms and events."""

    def shared(self) -> dict[str, object]:
        """The ``ctx.shared["syslog"]`` contract: the highest-scoring abnormal window per node, and the outages."""
        best: dict[str, dict[str, object]] = {}
        pm = self.peer_median or [float("nan")] * self.abnormal.num_rows
        pn = self.peers or [0] * self.abnormal.num_rows
        for r, med, n in zip(self.abnormal.to_pylist(), pm, pn, strict=True):
            cur = best.get(r["node"])
            if cur is None or r["score"] > cur["score"]:
                best[r["node"]] = {"score": float(r["score"]), "vicinity": r["vicinity"],
                                   "window_end": r["window_end"].isoformat(), "sg": int(r["sg"]),
                                   "peer_median_sg": float(med), "peers": int(n)}
        outs = [{"node": r["node"], "outage": r["outage"].isoformat(), "kind": r["kind"],
                 "boot": r["boot"].isoformat() if r["boot"] else None, "regular_failure": r["regular_failure"]}
                for r in self.outages.to_pylist()]
        new = []
        if "new" in self.templates.catalogue.column_names:
            cat = self.templates.catalogue.filter(pc.fill_null(self.templates.catalogue["new"], False))
            new = [{"template_id": int(i), "template": t, "lines": int(n)} for i, t, n in
                   zip(cat["template_id"].to_pylist(), cat["template"].to_pylist(), cat["lines_day"].to_pylist(),
                       strict=True)]
        return {"abnormal": best, "outages": outs, "new_templates": new, "filtered_templates": len(self.filtered),
                "vicinity_events": list(self.vicinity_events)}


def vicinities(store: Store, nodes: list[str], kind: str) -> tuple[list[np.ndarray], list[str]]:
    """Index groups of ``nodes`` per vicinity ``kind`` and their labels (``global`` without a topology)."""
    topo = store.read_staged("topology", columns=["node", "rack", "architecture", "valid_from"])
    if kind == "global" or topo is None or topo.num_rows == 0:
        return [np.arange(len(nodes))], ["global"]
    latest = topo.sort_by([("valid_from", "ascending")]).to_pylist()
    info = {r["node"]: (r["rack"], r["architecture"]) for r in latest}
    keys = []
    for n in nodes:
        rack, arch = info.get(n, ("?", "?"))
        keys.append({"rack": f"rack {rack}", "arch": f"arch {arch}", "rack_arch": f"rack {rack} / {arch}"}[kind])
    labels = sorted(set(keys))
    arr = np.array(keys)
    return [np.flatnonzero(arr == lab) for lab in labels], labels


JOB_LOOKBACK_DAYS = 14  # jobs are partitioned by submit day: a job running today may have been submitted before


def job_labels(store: Store, nodes: list[str], day: date, moments_ns: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Resource-allocation vicinity (§II-A2): the staged job each node runs at each moment (-1: idle), and the job
    ids; steps of one job count as the job. Jobs without a start are skipped; a job not ended runs to the end."""
    days = [(day - timedelta(days=i)).isoformat() for i in range(JOB_LOOKBACK_DAYS, -1, -1)]
    jobs = store.read_staged("jobs", days, columns=["job_id", "start_time", "end_time", "node_list"])
    if jobs is None or jobs.num_rows == 0:
        return np.full((len(nodes), len(moments_ns)), -1, np.int64), []
    idx = {n: i for i, n in enumerate(nodes)}
    ids: dict[str, int] = {}
    node, lab, st, en = [], [], [], []
    far = int(moments_ns[-1]) + 1
    for jid, a, b, nl in zip(jobs["job_id"].to_pylist(), pc.cast(jobs["start_time"], pa.int64()).to_pylist(),
                             pc.cast(jobs["end_time"], pa.int64()).to_pylist(), jobs["node_list"].to_pylist(),
                             strict=True):
        if a is None or not nl or (b is not None and b <= moments_ns[0] - 86400 * NS):
            continue
        k = ids.setdefault(str(jid), len(ids))
        for n in nl:
            if n in idx:
                node.append(idx[n])
                lab.append(k)
                st.append(a)
                en.append(far if b is None else b)
    out = allocation_labels(np.array(node, np.int64), np.array(lab, np.int64), np.array(st, np.int64),
                            np.array(en, np.int64), len(nodes), moments_ns)
    return out, list(ids)


def detect(bins: np.ndarray, groups: list[np.ndarray], labels: list[str], cfg: SyslogSettings,
           booting: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
    """Abnormal flags, scores, vicinity index per node, index of the deciding window per (node, moment), the SG
    of every window and the vicinity-wide moments (groups x moments, Eq. S3), from the ``step_min`` bins
    (``cfg.windows()``: the main window then the extra ones, Eq. S2). ``booting`` (nodes x moments): windows in
    which the node boots, a known outage: not counted towards a vicinity-wide event."""
    windows = cfg.windows()
    wide = vicinity_wide(bins, groups, windows, cfg.wide_bins(), cfg.wide_min_nodes, cfg.wide_min_share, booting)
    flags, score, which = multi_window_detect(bins, groups, windows, cfg.density_factor, wide)
    sgs = [sliding_sg(bins, k) for k, _ in windows]
    vic = np.zeros(bins.shape[0], np.int64)
    for k, g in enumerate(groups):
        vic[g] = k
    return flags, score, vic, which, sgs, wide


def _event(name: str, member: np.ndarray, sgs: list[np.ndarray], floors: list[float], a: int, b: int,
           moments_ns: np.ndarray, window_bins: list[int], step_min: int) -> dict[str, object]:
    """One vicinity-wide event over moments ``a .. b-1``; ``member`` (nodes x (b - a)): the vicinity's nodes. Its SG
    statistics are read at the peak: the (window, moment) with the most members at or above the window's floor."""
    best = (-1, 0, 0)
    for i, (sg, f) in enumerate(zip(sgs, floors, strict=True)):
        n = (member & (sg[:, a:b] >= max(f, 1.0))).sum(axis=0)
        t = int(np.argmax(n))
        if int(n[t]) > best[0]:
            best = (int(n[t]), i, t)
    n_hi, i, t = best
    x = sgs[i][member[:, t], a + t]
    live = x[x > 0]
    ts = [datetime.fromtimestamp(int(moments_ns[m]) / NS, UTC).isoformat() for m in (a, b - 1, a + t)]
    return {"vicinity": name, "start": ts[0], "end": ts[1], "nodes": n_hi, "peak": ts[2],
            "window_min": int(window_bins[i]) * step_min, "live": int(len(live)),
            "median_sg": float(np.median(live)) if len(live) else 0.0, "max_sg": int(x.max()) if len(x) else 0}


def _runs(row: np.ndarray) -> list[tuple[int, int]]:
    """``(start, end)`` of the runs of ``True`` in ``row`` (end exclusive)."""
    d = np.diff(np.concatenate([[0], row.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def wide_events(wide: np.ndarray, labels: list[str], sgs: list[np.ndarray], floors: list[float],
                groups: list[np.ndarray], moments_ns: np.ndarray, window_bins: list[int] | None = None,
                step_min: int = 5) -> list[dict[str, object]]:
    """Vicinity-wide events (Eq. S3) of static vicinities: consecutive wide moments of one vicinity merged
    (window ends ``start`` .. ``end``). ``nodes``: the most of its nodes at or above a window's floor (``sgs[i] >=
    max(floors[i], 1)``) at one moment (the ``peak``, in the window of ``window_min``); ``live``, ``median_sg`` (of
    the live nodes) and ``max_sg`` of the vicinity at the peak."""
    wb = window_bins or [1] * len(sgs)
    n = sgs[0].shape[0] if sgs else 0
    out = []
    for j, lab in enumerate(labels):
        for a, b in _runs(wide[j]):
            member = np.zeros((n, b - a), bool)
            member[groups[j]] = True
            out.append(_event(lab, member, sgs, floors, a, b, moments_ns, wb, step_min))
    return out


def label_events(wide: np.ndarray, node_labels: np.ndarray, names: list[str], sgs: list[np.ndarray],
                 floors: list[float], moments_ns: np.ndarray, window_bins: list[int] | None = None,
                 step_min: int = 5) -> list[dict[str, object]]:
    """:func:`wide_events` for dynamic vicinities (jobs): ``wide`` is ``(labels, moments)`` from
    :func:`~nodewatch.models.syslog.dynamic.label_wide`, ``node_labels`` (nodes x moments) the label of each node
    at each moment (membership at each moment)."""
    wb = window_bins or [1] * len(sgs)
    out = []
    for j in np.flatnonzero(wide.any(axis=1)).tolist():
        for a, b in _runs(wide[j]):
            out.append(_event(names[j], node_labels[:, a:b] == j, sgs, floors, a, b, moments_ns, wb, step_min))
    return out


def events_table(events: list[dict[str, object]], static: str, variant: str) -> pa.Table:
    """The ``syslog_vicinity_events`` rows of :func:`wide_events` / :func:`label_events` output (``static``: the
    kind of the non-job vicinities; ``global`` without a topology)."""
    def ts(key: str) -> pa.Array:
        return pa.array([datetime.fromisoformat(str(e[key])) for e in events], pa.timestamp("ns", tz="UTC"))

    return pa.table({
        "vicinity": [str(e["vicinity"]) for e in events],
        "kind": ["job" if str(e["vicinity"]).startswith("job ") else "global" if e["vicinity"] == "global" else static
                 for e in events],
        "start": ts("start"), "end": ts("end"), "peak": ts("peak"),
        **{c: [e[c] for e in events] for c in ("window_min", "nodes", "live", "median_sg", "max_sg")},
        "variant": [variant] * len(events),
    }, schema=EVENTS_SCHEMA)


def analyse_day(store: Store, day: date, run_id: str, cfg: SyslogSettings, export: bool = False,
                key: bytes | None = None, after_finish: Callable[[Callable[[], None]], None] | None = None) -> DayResult:
    """Template, filter, score and find outages for the UTC day ``day`` (module doc); ``after_finish``: see
    :func:`~nodewatch.tasks.syslog.catalogue.template_day`."""
    tr = template_day(store, day, run_id, cfg, after_finish)
    rows = tr.templated
    ds = day.isoformat()
    d0 = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * NS
    step_ns = cfg.step_min * 60 * NS  # observation moments every step; SG = the window_min before each (Eq. S1)
    k = max(1, cfg.window_min // cfg.step_min)
    n_win = -(-86400 * NS // step_ns)
    nodes_arr = rows["node"].combine_chunks().dictionary_encode()
    nodes = nodes_arr.dictionary.to_pylist()
    nidx = nodes_arr.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    tns = pc.cast(rows["time"], pa.int64()).to_numpy()
    tid = rows["template_id"].to_numpy()
    filt = filtered_templates(tid, nidx, tns, cfg.filter_share, cfg.filter_periodic_cv, node_share=cfg.filter_node_share)
    keep = ~np.isin(tid, np.array(sorted(filt), np.int64)) if cfg.filtered else np.ones(len(tid), bool)
    bins = sg_matrix(tns[keep], nidx[keep], len(nodes), d0, step_ns, n_win)
    staged = tr.source
    boot = pc.fill_null(pc.match_substring_regex(staged["message"], BOOT_RE), False)
    b = staged.filter(boot)
    pos = {n: i for i, n in enumerate(nodes)}
    b_idx = np.array([pos.get(n, -1) for n in b["node"].to_pylist()], np.int64)
    booting = sliding_any(sg_matrix(pc.cast(b["time"], pa.int64()).to_numpy(), b_idx, len(nodes), d0, step_ns, n_win) > 0, k)
    static = cfg.vicinity.split("|")[0] if cfg.vicinity != "job" else "global"
    groups, labels = vicinities(store, nodes, static)
    flags, score, vic, which, sgs, wide = detect(bins, groups, labels, cfg, booting)
    vic_label = np.array(labels, object)[np.broadcast_to(vic[:, None], bins.shape)]
    peer_sel: dict[tuple[int, int], np.ndarray] = {}
    moments = d0 + (np.arange(n_win) + 1) * step_ns
    floors, wbins = [m for _, m in cfg.windows()], [kb for kb, _ in cfg.windows()]
    events = [] if cfg.vicinity == "job" else wide_events(wide, labels, sgs, floors, groups, moments, wbins,
                                                           cfg.step_min)
    if "job" in cfg.vicinity:
        if cfg.vicinity == "job":
            flags[:], score[:] = False, 0.0
        jl, job_ids = job_labels(store, nodes, day, moments)
        jwide = label_wide(bins, jl, cfg.windows(), cfg.wide_bins(), cfg.wide_min_nodes, cfg.wide_min_share, booting)
        jf, js, jwhich = label_multi_window(sgs, jl, floors, cfg.density_factor, jwide)  # Eq. S2 per job, S3: no alarm
        take = jf & (~flags | (js > score))  # the job vicinity decides where it scores higher than the static one
        which = np.where(take, jwhich, which)
        flags |= jf
        score = np.where(take, js, score)
        for i, w in zip(*np.nonzero(take), strict=True):
            vic_label[i, w] = f"job {job_ids[jl[i, w]]}"
            peer_sel[(int(i), int(w))] = np.flatnonzero(jl[:, w] == jl[i, w])
        events += label_events(jwide, jl, [f"job {j}" for j in job_ids], sgs, floors, moments, wbins, cfg.step_min)
    flags &= ~booting
    ni, wi = np.nonzero(flags)
    sg = np.choose(which, sgs) if len(sgs) > 1 else sgs[0]  # SG of the window that decided each (node, moment)
    abnormal = pa.table({
        "node": [nodes[i] for i in ni.tolist()],
        "window_end": pa.array(d0 + (wi + 1) * step_ns, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        "sg": sg[ni, wi].astype(np.int64), "score": score[ni, wi].astype(float),
        "vicinity": [str(vic_label[i, w]) for i, w in zip(ni.tolist(), wi.tolist(), strict=True)],
        "variant": ["filtered" if cfg.filtered else "raw"] * len(ni),
    }, schema=ABNORMAL_SCHEMA)
    tpl = dict(zip(tr.catalogue["template_id"].to_pylist(), tr.catalogue["template"].to_pylist(), strict=True))
    vc = dict(zip(*np.unique(tid, return_counts=True), strict=True))
    ftab = pa.table({"template_id": sorted(filt), "template": [tpl.get(i) for i in sorted(filt)],
                     "reason": [filt[i] for i in sorted(filt)], "lines": [int(vc.get(i, 0)) for i in sorted(filt)]},
                    schema=FILTERS_SCHEMA)
    commit = StagedCommit(store, run_id, "syslog-detect", fault="syslog")
    commit.replace_partition(FILTERS, ds, ftab)
    commit.replace_partition(ABNORMAL, ds, abnormal)
    commit.replace_partition(EVENTS, ds, events_table(events, static, "filtered" if cfg.filtered else "raw"))
    commit_key = commit.commit()
    commit.drop_removed()
    jobs = store.read_staged("jobs", columns=["state", "end_time", "node_list"])
    resv = store.read_staged("reservations")
    topo = store.read_staged("topology", columns=["node", "rack", "valid_from"])
    racks = None
    if topo is not None and topo.num_rows:
        racks = {r["node"]: (str(r["rack"]) if r["rack"] is not None else None)
                 for r in topo.sort_by([("valid_from", "ascending")]).to_pylist()}
    outs = syslog_outages(staged, int(pc.max(staged["time"]).cast(pa.int64()).as_py()), jobs=jobs, reservations=resv,
                          racks=racks)
    res = DayResult(ds, tr, filt, abnormal, outs)
    res.vicinity_events = events
    res.commit = commit_key
    for i, w in zip(ni.tolist(), wi.tolist(), strict=True):
        g = peer_sel.get((i, w), groups[vic[i]])
        x = sgs[which[i, w]][g, w]  # the vicinity in the same window length
        live = x[x > 0]
        res.peer_median.append(float(np.median(live)) if len(live) else 0.0)
        res.peers.append(int(len(live)))
    res.counts = {"rows": tr.rows, "templates": tr.templates, "filtered_templates": len(filt),
                  "filtered_lines": int((~keep).sum()), "abnormal_windows": abnormal.num_rows,
                  "abnormal_nodes": len(set(abnormal["node"].to_pylist())), "outages": outs.num_rows,
                  "vicinity_events": len(res.vicinity_events),
                  **{f"templates_{k}": v for k, v in tr.counts.items() if k in ("overflow", "new_templates", "truncated")}}
    if export:
        res.export = export_anonymised(store, day, run_id, tr, cfg, key)
    return res


def export_anonymised(store: Store, day: date, run_id: str, tr: TemplateResult, cfg: SyslogSettings,
                      key: bytes | None = None) -> str:
    """Write the day's anonymised log (RSYSLOG_FileFormat, gzip) and the encrypted mapping; returns the log's key."""
    from nodewatch.tasks.syslog.anonymise import Anonymiser, anon_key, anonymise_table, seal_mapping

    key = key if key is not None else anon_key(store, cfg.secret_env)
    rows = tr.source.select(["time", "node", "app", "pid", "message"])
    rows = rows.append_column("template_id", tr.templated["template_id"].combine_chunks())
    tpl = dict(zip(tr.catalogue["template_id"].to_pylist(), tr.catalogue["template"].to_pylist(), strict=True))
    anon = Anonymiser(key, numbers=cfg.anonymise_numbers)
    out = anonymise_table(rows, tpl, anon)
    lines = []
    for t, node, app, pid, msg in zip(out["time"].to_pylist(), out["node"].to_pylist(), out["app"].to_pylist(),
                                      out["pid"].to_pylist(), out["message"].to_pylist(), strict=True):
        tag = f"{app}[{pid}]: " if app and pid is not None else (f"{app}: " if app else "")
        lines.append(f"{t.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z {node} {tag}{msg}")
    k = ("exports", "syslog", f"date={day.isoformat()}", f"syslog-{run_id}.log.gz")
    store.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), mtime=0), *k)
    store.write_bytes(seal_mapping(key, anon.mapping), "syslog", "anon-map", f"{run_id}.bin")
    return "/".join(k)
