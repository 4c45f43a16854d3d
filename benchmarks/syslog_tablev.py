"""Benchmark: our Table V (Ghiasvand & Ciorba) on the simulator: raw / anonymised / filtered / filtered+anonymised syslog.

Goal (issue 17): failure detection on the simulator (1000 nodes, 30 days) with all four variants; filtered >= the
paper's 87% precision / 83% recall; state the lead time.

For ``--nodes`` x ``--days`` of the simulator (``build_schedule`` + ``render_rack``, the same code as ``nodewatch
simulate``; telemetry is not rendered), every day's syslog goes through the product path: the RFC 5424 parser,
the template miner (state kept across days like the nightly step), PaRS anonymisation with a fixed test key and a
second miner on the anonymised text (what an outside party would do), per-night filtering of frequent/periodic
templates (on raw templates, resp. on the anonymised templates). SG is counted per node in ``--bin-min`` (5) minute
bins (saved with ``--dump``; ``--load`` evaluates saved bins without rendering again); the detector sees the 30 min
before every observation moment (a sliding window, models/syslog/dynamic.py), and on the filtered variants also the
shorter ``SyslogSettings.extra_windows`` at the same moments, abnormal in any window = one alarm (Eq. S2; default
none; ``--extra-windows 10:8`` = the 10-min window with >= 8 lines, ``--sweep-windows`` = the dev grid), and runs per
vicinity: rack within architecture (the paper's final choice, default), rack, architecture, global, the
resource-allocation vicinity (nodes of the same job at that moment, from the simulator's job allocations) and their
union/intersection; the time-of-failure vicinity (failures within 10 min of each other) is offline only, as in the paper.
Windows in which the node boots (a known outage) are not alarms. Static vicinities apply the vicinity-wide rule
(Eq. S3, ``SyslogSettings.wide_interval_min``, ``--wide-interval``; 0 = off): a vicinity in which many nodes reach a
window's floor within 10 min departs as a whole and none of its nodes is a node alarm then. "Detectors in the same
run" prints the 316b8f2 detectors (30-min window alone; 30 + 10 min) beside the ones with Eq. S3.

Ground truth: the simulator's failures (``Schedule.failures``; admin reboots are maintenance, not failures); also
reported: recall among failures with a syslog precursor and among *regular* failures (not ``rack_power``, the
paper's external causes). Scores (models/syslog/evaluate.py): alarm episodes; precision = episodes followed by a
failure of the node within ``--horizon-min`` (or whose first window already holds it); recall at leads
0/10/30/60 min. Silence (no line while the vicinity logs) is scored separately as detection *after* the failure.
Baselines in the same run, no vicinity: the node against itself (robust z of SG against its previous 48 windows,
and against the same moment of its 7 previous days). ``ratio=`` filtered F1 of ours / the better baseline's F1.
Thresholds: ``--factor/--min-sg`` (filtered), ``--raw-factor/--raw-min-sg`` (raw, anonymised); ``--sweep`` prints
the grid used to choose them on a dev seed.

    nice .venv/bin/python benchmarks/syslog_tablev.py --nodes 1000 --days 10 --seed 2 --dump s2.npz --sweep   # dev
    nice .venv/bin/python benchmarks/syslog_tablev.py --nodes 1000 --days 30 --seed 1 --raw-factor 6 --raw-min-sg 40
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import warnings
from datetime import date
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodewatch.models.syslog.dynamic import (  # noqa: E402
    allocation_labels,
    failure_time_groups,
    label_multi_window,
    label_wide,
    multi_window_detect,
    sliding_any,
    sliding_sg,
    vicinity_wide,
)
from nodewatch.models.syslog.evaluate import table_v_scores  # noqa: E402
from nodewatch.models.syslog.filtering import filtered_templates  # noqa: E402
from nodewatch.models.syslog.outages import external_events  # noqa: E402
from nodewatch.models.syslog.vicinity import sg_matrix, two_means_threshold  # noqa: E402
from nodewatch.tasks.ingest.base import ParseContext  # noqa: E402
from nodewatch.tasks.ingest.syslog import parse_rfc5424  # noqa: E402
from nodewatch.tasks.simulate.config import SimConfig  # noqa: E402
from nodewatch.tasks.simulate.schedule import build_schedule  # noqa: E402
from nodewatch.tasks.simulate.syslog import render_rack  # noqa: E402
from nodewatch.tasks.syslog.anonymise import Anonymiser  # noqa: E402
from nodewatch.tasks.syslog.settings import SyslogSettings  # noqa: E402
from nodewatch.tasks.syslog.templates import TemplateMiner  # noqa: E402

NS = 1_000_000_000
BOOT = r"^(Linux version |Startup finished in )"
VARIANTS = ("raw", "anonymised", "filtered", "filtered+anonymised")


def detect(bins: np.ndarray, groups: list[np.ndarray], cfg: SyslogSettings, bin_min: int,
           booting: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Flags (nodes x moments) of the product's detector on one variant's bins: the windows of ``cfg`` (Eq. S2) with
    the vicinity-wide rule (Eq. S3, ``cfg.wide_interval_min``; 0 = off; booting nodes do not count towards it);
    and the wide vicinity-moments."""
    wins = windows_of(cfg, bin_min)
    wide = vicinity_wide(bins, groups, wins, cfg.wide_interval_min // bin_min, cfg.wide_min_nodes, cfg.wide_min_share,
                         booting)
    return multi_window_detect(bins, groups, wins, cfg.density_factor, wide)[0], wide


def windows_of(cfg: SyslogSettings, bin_min: int) -> list[tuple[int, float]]:
    """``[(bins, min_sg)]``: the main window then ``cfg.extra_windows`` (Eq. S2), in ``bin_min`` bins."""
    return [(w // bin_min, float(m)) for w, m in [(cfg.window_min, cfg.min_sg), *cfg.extra_windows]]


def alarm_episodes_1d(x: np.ndarray) -> list[tuple[int, int]]:
    """Runs of consecutive True of a 1-D mask: ``(first, last)``."""
    d = np.diff(np.concatenate([[0], np.asarray(x, np.int8), [0]]))
    return list(zip(np.flatnonzero(d == 1).tolist(), (np.flatnonzero(d == -1) - 1).tolist(), strict=True))


def baseline(sg: np.ndarray, hist: int = 48, z: float = 6.0) -> np.ndarray:
    """Per-node robust z of SG against the node's previous ``hist`` windows (no vicinity)."""
    n, w = sg.shape
    flags = np.zeros(sg.shape, bool)
    for k in range(hist, w):
        h = sg[:, k - hist:k].astype(float)
        med = np.median(h, axis=1)
        mad = np.median(np.abs(h - med[:, None]), axis=1) * 1.4826
        zz = (sg[:, k] - med) / np.maximum(mad, 1.0)
        flags[:, k] = (np.abs(zz) > z) & (sg[:, k] > 0)
    return flags


def f1(s: dict) -> float:
    p, r = s["precision"], s["recall@0min"]
    return 0.0 if not p or not r or np.isnan(p) else 2 * p * r / (p + r)


def render(a: argparse.Namespace, cfg: SyslogSettings, sim: SimConfig, sched: object) -> dict[str, np.ndarray]:
    """Render, parse, mine, anonymise and filter every day; SG per node per ``--bin-min`` bin of each variant."""
    topo = sched.topo
    name_idx = {n: i for i, n in enumerate(topo.names)}
    w_ns = a.bin_min * 60 * NS  # SG is kept in bins; the detector sums window_min // bin_min bins (sliding window)
    per_day = 86400 * NS // w_ns
    W = per_day * a.days
    epoch_ns = sim.epoch_s * NS
    t_start = time.perf_counter()
    sg = {v: np.zeros((topo.n, W), np.int64) for v in VARIANTS}
    boots = {v: np.zeros((topo.n, W), bool) for v in ("raw", "anonymised")}
    miner_raw, miner_anon = TemplateMiner(sim_th=cfg.sim_th), TemplateMiner(sim_th=cfg.sim_th)
    anon = Anonymiser(b"benchmark-key-not-a-secret-0123456789")
    racks = sorted(set(topo.rack.tolist()))
    n_lines = 0
    t_mine = t_anon = t_parse = t_render = 0.0
    filt_log = []
    for day in range(a.days):
        t0 = time.perf_counter()
        lines: list[str] = []
        for r in racks:
            nodes = topo.nodes_of_rack(r)
            lines += render_rack(sched, sched.node_events(nodes), nodes, day, "5424")
        t1 = time.perf_counter()
        res = list(parse_rfc5424(io.BytesIO(("\n".join(lines) + "\n").encode()), ParseContext(name=f"day{day}")))
        rows = res[0].rows if len(res) == 1 else __import__("pyarrow").concat_tables([x.rows for x in res])
        t2 = time.perf_counter()
        n_lines += rows.num_rows
        tns = rows["time"].combine_chunks().cast("int64").to_numpy()
        nidx = np.array([name_idx.get(x, -1) for x in rows["node"].to_pylist()], np.int64)
        msgs = rows["message"].combine_chunks()
        ar = miner_raw.assign(msgs)
        t3 = time.perf_counter()
        tpl = miner_raw.templates()
        amsgs = anon.messages(msgs.to_pylist(), [tpl.get(int(i)) for i in ar.template_id])
        t4 = time.perf_counter()
        aa = miner_anon.assign(amsgs)
        t5 = time.perf_counter()
        t_render += t1 - t0
        t_parse += t2 - t1
        t_mine += (t3 - t2) + (t5 - t4)
        t_anon += t4 - t3
        d0 = epoch_ns + day * 86400 * NS
        sl = slice(day * per_day, (day + 1) * per_day)
        base = sg_matrix(tns, nidx, topo.n, d0, w_ns, per_day)
        sg["raw"][:, sl] = base
        sg["anonymised"][:, sl] = sg_matrix(tns, nidx, topo.n, d0, w_ns, per_day)
        fkw = {"share": cfg.filter_share, "max_cv": cfg.filter_periodic_cv, "node_share": cfg.filter_node_share}
        fr = filtered_templates(ar.template_id, nidx, tns, **fkw)
        fa = filtered_templates(aa.template_id, nidx, tns, **fkw)
        keep_r = ~np.isin(ar.template_id, list(fr))
        keep_a = ~np.isin(aa.template_id, list(fa))
        filt_log.append((len(fr), 1 - keep_r.mean(), len(fa), 1 - keep_a.mean()))
        sg["filtered"][:, sl] = sg_matrix(tns[keep_r], nidx[keep_r], topo.n, d0, w_ns, per_day)
        sg["filtered+anonymised"][:, sl] = sg_matrix(tns[keep_a], nidx[keep_a], topo.n, d0, w_ns, per_day)
        for v, m in (("raw", msgs), ("anonymised", amsgs)):
            b = pc.match_substring_regex(m if not isinstance(m, list) else __import__("pyarrow").array(m), BOOT)
            b = b.to_numpy(zero_copy_only=False)
            boots[v][:, sl] |= sg_matrix(tns[b], nidx[b], topo.n, d0, w_ns, per_day) > 0
        print(f"day {day}: {rows.num_rows:,} lines, templates raw={len(tpl)} anon={len(miner_anon.templates())}, "
              f"filtered raw={len(fr)} ({1 - keep_r.mean():.0%} of lines) anon={len(fa)} ({1 - keep_a.mean():.0%})",
              flush=True)
    assert np.array_equal(sg["raw"], sg["anonymised"])
    print(f"{n_lines:,} lines; render {t_render:.0f} s, parse {t_parse:.0f} s, mine {t_mine:.0f} s, "
          f"anonymise {t_anon:.0f} s, total {time.perf_counter() - t_start:.0f} s")
    print(f"filtered per night (mean): raw {np.mean([x[0] for x in filt_log]):.1f} templates / "
          f"{np.mean([x[1] for x in filt_log]):.0%} of lines; anonymised {np.mean([x[2] for x in filt_log]):.1f} / "
          f"{np.mean([x[3] for x in filt_log]):.0%}")
    out = {k.replace("+", "_"): v for k, v in sg.items()}
    out["boots"] = boots["raw"]
    out["boots_anon"] = boots["anonymised"]
    if a.dump:
        np.savez_compressed(a.dump, **out)
    return out


def self_baseline(sg: np.ndarray, stride: int, hist: int, start: int, z: float = 6.0) -> np.ndarray:
    """The node against itself: robust z of SG against ``sg[:, t - j*stride]``, j = 1..hist (median/MAD)."""
    flags = np.zeros(sg.shape, bool)
    for t in range(max(start, stride * hist), sg.shape[1]):
        h = sg[:, t - stride * hist:t:stride].astype(float)
        med = np.median(h, axis=1)
        mad = np.median(np.abs(h - med[:, None]), axis=1) * 1.4826
        flags[:, t] = ((sg[:, t] - med) / np.maximum(mad, 1.0) > z) & (sg[:, t] > 0)
    return flags


def evaluate(a: argparse.Namespace, cfg: SyslogSettings, sim: SimConfig, sched: object, bins: dict) -> None:
    """Table V (four variants), Table IV analogue (vicinities), baselines in the same run, ``ratio=``."""
    t_start = time.perf_counter()
    topo = sched.topo
    bin_ns = a.bin_min * 60 * NS
    k = cfg.window_min // a.bin_min
    epoch_ns = sim.epoch_s * NS
    n_bins = bins["raw"].shape[1]
    per_day = 86400 * NS // bin_ns
    wend = epoch_ns + (np.arange(n_bins) + 1) * bin_ns
    win_ns = cfg.window_min * 60 * NS
    sg = {v: sliding_sg(bins[v.replace("+", "_")], k) for v in VARIANTS}
    boots = {"raw": sliding_any(bins["boots"], k), "anonymised": sliding_any(bins.get("boots_anon", bins["boots"]), k)}
    fl = sched.failures
    sel = ((fl["t_fail"] >= 0) & (fl["t_fail"] < a.days * 86400)).to_numpy()
    f_node = fl["node"].to_numpy()[sel].astype(np.int64)
    f_ns = (fl["t_fail"].to_numpy()[sel] * NS).astype(np.int64) + epoch_ns
    has_pre = fl["precursor_kind"].notna().to_numpy()[sel]
    pre_min = ((fl["t_fail"] - fl["precursor_start"]).to_numpy()[sel] / 60.0)  # footprint length (NaN: none)
    if sim.syslog_precursor_share >= 0:  # paper-like knob: the syslog bursts are drawn apart from the telemetry's
        sp = {(n, float(z)): (z - a) / 60.0 for n in range(topo.n) for a, z, _ in sched.syslog_precursors(n)}
        keys = list(zip(fl["node"].to_numpy()[sel].tolist(), fl["t_fail"].to_numpy()[sel].tolist(), strict=True))
        has_pre = np.array([(int(n), float(z)) in sp for n, z in keys], bool)
        pre_min = np.array([sp.get((int(n), float(z)), np.nan) for n, z in keys])
    if sim.syslog_precursor_lines_per_min <= 0:
        has_pre[:] = False
    racks = sorted(set(topo.rack.tolist()))
    # the product's rule (models/syslog/outages.external_events, the one tasks/syslog/outages applies): a rack-wide
    # chain of failures is an external cause; Table V of the paper is over the other, *regular* failures
    rack_of = np.asarray(topo.rack, np.int64)
    external = external_events(f_node, f_ns, rack_of[f_node], np.bincount(rack_of), 300 * NS)
    regular = ~external
    is_rp = fl["cause"].to_numpy()[sel] == "rack_power"
    print(f"external (rack-wide chains, product rule): {external.sum()} failures; simulator cause rack_power: "
          f"{is_rp.sum()}; both: {(external & is_rp).sum()}")
    arch = np.array(topo.arch)[topo.rack] if len(topo.arch) != topo.n else np.array(topo.arch)
    groups = {
        "rack_arch": [np.flatnonzero((topo.rack == r) & (arch == x)) for r in racks for x in sorted(set(arch.tolist()))],
        "rack": [topo.nodes_of_rack(r) for r in racks],
        "arch": [np.flatnonzero(arch == x) for x in sorted(set(arch.tolist()))],
        "global": [np.arange(topo.n)],
    }
    groups = {kk: [g for g in v if len(g)] for kk, v in groups.items()}
    pairs = sched.node_pairs()
    ok = np.isfinite(pairs["start"].to_numpy()) & np.isfinite(pairs["end"].to_numpy())
    pairs = pairs[ok]
    jobs = allocation_labels(pairs["node"].to_numpy(), pairs["row"].to_numpy(),
                             (pairs["start"].to_numpy() * NS).astype(np.int64) + epoch_ns,
                             (pairs["end"].to_numpy() * NS).astype(np.int64) + epoch_ns, topo.n, wend)
    busy = (jobs >= 0).mean()
    leads = tuple(x * 60 * NS for x in (0, 10, 30, 60))
    hz = a.horizon_min * 60 * NS

    raw_cfg = cfg.model_copy(update={"density_factor": a.raw_factor or cfg.density_factor,
                                     "min_sg": cfg.min_sg if a.raw_min_sg is None else a.raw_min_sg,
                                     "extra_windows": []})  # raw/anonymised: the 30-min window (no short ones chosen)

    def run(v: str, vic: str, c: SyslogSettings | None = None) -> np.ndarray:
        c = c or (cfg if v.startswith("filtered") else raw_cfg)
        s = sg[v]
        if vic == "job":  # as the product (tasks/syslog/detect.py): Eq. S2 windows per job, Eq. S3 per job
            b_ = bins[v.replace("+", "_")]
            wins = windows_of(c, a.bin_min)
            jw = label_wide(b_, jobs, wins, c.wide_interval_min // a.bin_min, c.wide_min_nodes, c.wide_min_share,
                            boots["anonymised" if "anonymised" in v else "raw"])
            sgs = [s if kb == wins[0][0] else sliding_sg(b_, kb) for kb, _ in wins]
            f = label_multi_window(sgs, jobs, [floor for _, floor in wins], c.density_factor, jw)[0]
        elif vic in ("rack_arch|job", "rack_arch&job"):
            f1_, f2_ = run(v, "rack_arch", c), run(v, "job", c)
            f = (f1_ | f2_) if "|" in vic else (f1_ & f2_)
        else:  # Eq. S2: the main window and the shorter ones, union; Eq. S3: vicinity-wide moments are no node alarm
            f = detect(bins[v.replace("+", "_")], groups[vic], c, a.bin_min,
                       boots["anonymised" if "anonymised" in v else "raw"])[0]
        return f & ~boots["anonymised" if "anonymised" in v else "raw"]

    def score(flags: np.ndarray, m: np.ndarray | None = None) -> dict:
        m = np.ones(len(f_ns), bool) if m is None else m
        return table_v_scores(flags, wend, f_node[m], f_ns[m], hz, leads, window_ns=win_ns)

    print(f"\n{a.nodes} nodes x {a.days} days, {len(f_ns)} failures ({has_pre.sum()} with a syslog precursor, "
          f"{regular.sum()} regular = not rack_power); SG window {cfg.window_min} min sliding by {a.bin_min} min; "
          f"nodes busy {busy:.0%} of moments; density_factor {cfg.density_factor}, min_sg {cfg.min_sg}, extra windows "
          f"(min, min_sg) {cfg.extra_windows} (raw/anonymised: {raw_cfg.density_factor}, {raw_cfg.min_sg}, none); "
          f"vicinity-wide interval {cfg.wide_interval_min} min (0 = off), >= max({cfg.wide_min_nodes}, "
          f"{cfg.wide_min_share} x live) nodes")
    if a.sweep:
        print("\nsweep (filtered): vicinity factor min_sg -> precision recall@0 alarms")
        grid = [("filtered", vic, fac, ms) for vic in (a.vicinity, "job") for fac in (2, 3, 4, 6, 8)
                for ms in (5, 10, 15, 20, 30)]
        grid += [("raw", a.vicinity, fac, ms) for fac in (3, 6, 12, 24) for ms in (40, 80, 160, 320)]
        for v, vic, fac, ms in grid:
            c2 = cfg.model_copy(update={"density_factor": float(fac), "min_sg": float(ms)})
            s = score(run(v, vic, c2))
            print(f"  {v:8s} {vic:9s} {fac:3d} {ms:3d}: {s['precision']:.2f} {s['recall@0min']:.2f} "
                  f"F1 {f1(s):.2f} {int(s['episodes'])}", flush=True)
    if a.sweep_windows:
        print("\nsweep (filtered, dev seed only): extra windows [(min, min_sg)] -> regular failures: precision recall@0 "
              "recall@10 F1 alarms")
        grid: list[list[tuple[int, float]]] = [[]]
        for w in (5, 10, 15, 20):
            grid += [[(w, float(m))] for m in (3, 4, 5, 6, 7, 8, 9, 10, 12) if m >= 15 * w / 60]
        grid += [[(15, 10.0), (10, 8.0)], [(15, 9.0), (10, 8.0)], [(20, 12.0), (15, 10.0), (10, 8.0)],
                 [(10, 8.0), (5, 7.0)]]
        for ew in grid:
            s = score(run("filtered", a.vicinity, cfg.model_copy(update={"extra_windows": ew})), regular)
            print(f"  {ew}: {s['precision']:.2f} {s['recall@0min']:.2f} {s['recall@10min']:.2f} F1 {f1(s):.2f} "
                  f"{int(s['episodes'])}", flush=True)
    print(f"\nTable V (vicinity {a.vicinity}, horizon {a.horizon_min} min); truth = regular failures (the paper's, "
          f"{regular.sum()}) or all failures ({len(f_ns)}); recall at the failure moment and with lead >= 0/10/30/60 min")
    print("| data | truth | precision | recall @moment | recall@0 | @10min | @30min | @60min | "
          "recall, with precursor | median lead min | alarms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results = {}
    for v in VARIANTS:
        flags = run(v, a.vicinity)
        for label, m in (("regular", regular), ("all", None)):
            s = score(flags, m)
            sp = score(flags, has_pre if m is None else has_pre & m)
            if label == "regular":
                results[v] = s
            print(f"| {v} | {label} | {s['precision']:.2f} | {s['recall@moment']:.2f} | {s['recall@0min']:.2f} | "
                  f"{s['recall@10min']:.2f} | {s['recall@30min']:.2f} | {s['recall@60min']:.2f} | "
                  f"{sp['recall@0min']:.2f} | {s['median_lead_min']:.0f} | {int(s['episodes'])} |", flush=True)
    print(f"\nDetectors in the same run (vicinity {a.vicinity}; filtered | filtered+anonymised; truth = regular "
          "failures, then all failures): precision, recall @moment, @0/10/30/60 min, median lead, alarms; "
          "vicinity-wide events (Eq. S3)")
    static = a.vicinity if a.vicinity in groups else "rack_arch"  # the table and the silence rule: static vicinities
    if static != a.vicinity:
        print(f"  (vicinity {a.vicinity} is not static: the table below is of {static}; the job path is in Table IV)")
    for name, ew, wi in (("316b8f2 default: 30 min", [], 0), ("316b8f2 opt-in: 30 + 10 min", [(10, 8.0)], 0),
                         ("30 min + Eq. S3", [], cfg.wide_interval_min or 10),
                         ("30 + 10 min + Eq. S3", [(10, 8.0)], cfg.wide_interval_min or 10)):
        c2 = SyslogSettings(**{**cfg.model_dump(), "extra_windows": ew, "wide_interval_min": wi, "step_min": a.bin_min})
        cells = []
        for v in ("filtered", "filtered+anonymised"):
            fv, wide = detect(bins[v.replace("+", "_")], groups[static], c2, a.bin_min,
                              boots["anonymised" if "anonymised" in v else "raw"])
            fv &= ~boots["anonymised" if "anonymised" in v else "raw"]
            s, sa = score(fv, regular), score(fv)
            n_ev = sum(len(alarm_episodes_1d(w)) for w in wide)
            cells.append(f"{s['precision']:.2f} {s['recall@moment']:.2f} {s['recall@0min']:.2f} "
                         f"{s['recall@10min']:.2f} {s['recall@30min']:.2f} {s['recall@60min']:.2f} "
                         f"{s['median_lead_min']:.0f}m {int(s['episodes'])} (all: {sa['precision']:.2f} "
                         f"{sa['recall@0min']:.2f}) ev {n_ev}")
        print(f"  {name:28s}: {' | '.join(cells)}", flush=True)
    # silence (after the fact): a node without any line in a window whose vicinity peers log (median >= 5 lines)
    live_med = np.zeros(sg["raw"].shape)
    warnings.simplefilter("ignore", RuntimeWarning)  # all-silent vicinity-moments: nanmedian of nothing
    for g in groups[static]:
        x = sg["raw"][g].astype(float)
        live_med[g] = np.nanmedian(np.where(x > 0, x, np.nan), axis=0) if len(g) > 1 else 0.0
    silent = (sg["raw"] == 0) & (np.nan_to_num(live_med) >= 5) & ~boots["raw"]
    for late in (30, 60):
        late_ns = late * 60 * NS
        both = run("filtered", a.vicinity) | silent
        s = table_v_scores(both, wend, f_node, f_ns + late_ns, hz + late_ns, (0,), window_ns=win_ns)
        print(f"filtered + silence, found by failure + {late} min (after the fact; not Table V): precision "
              f"{s['precision']:.2f} recall {s['recall@0min']:.2f} alarms {int(s['episodes'])}")
    ff = run("filtered", a.vicinity)
    f30 = run("filtered", a.vicinity, cfg.model_copy(update={"extra_windows": []}))
    print("\nFailures with a syslog footprint, by its length (filtered, regular failures): found = recall@0 "
          f"(extra windows {cfg.extra_windows}; the {cfg.window_min}-min window alone)")
    for lo, hi in ((0, 10), (10, 19), (19, 30), (30, 60), (60, 10**9)):
        m = has_pre & regular & (pre_min >= lo) & (pre_min < hi)
        r = score(ff, m)["recall@0min"] if m.any() else float("nan")
        r30 = score(f30, m)["recall@0min"] if m.any() else float("nan")
        print(f"  {lo}-{hi if hi < 10**9 else 'inf'} min: {int(m.sum())} failures, found {r:.2f} ({r30:.2f})")
    s, s30 = score(ff, regular), score(f30, regular)
    print(f"  all regular: {cfg.window_min}-min window alone: precision {s30['precision']:.2f} recall@0 "
          f"{s30['recall@0min']:.2f} alarms {int(s30['episodes'])}; with the extra windows: {s['precision']:.2f} "
          f"{s['recall@0min']:.2f} {int(s['episodes'])}; false alarm episodes per 1000 node-days "
          f"{(s30['episodes'] - s30['true_episodes']) / (topo.n * a.days) * 1000:.2f} -> "
          f"{(s['episodes'] - s['true_episodes']) / (topo.n * a.days) * 1000:.2f}")
    print("\nVicinities (filtered syslog): Table IV analogue")
    for vic in ("rack_arch", "rack", "arch", "global", "job", "rack_arch|job", "rack_arch&job"):
        fv = run("filtered", vic)
        s, sa = score(fv, regular), score(fv)
        print(f"  {vic:13s}: regular failures: precision {s['precision']:.2f} recall {s['recall@0min']:.2f} (with "
              f"precursor {score(fv, has_pre & regular)['recall@0min']:.2f}) F1 {f1(s):.2f}; all failures: "
              f"{sa['precision']:.2f} / {sa['recall@0min']:.2f}; alarms {int(s['episodes'])}", flush=True)
    tg = [g for g in failure_time_groups(f_node, f_ns, 10 * 60 * NS) if len(set(f_node[g].tolist())) >= 3]
    hit = nodes_in = flagged_groups = 0
    for g in tg:
        t = int(np.searchsorted(wend, f_ns[g].min(), side="right")) - 1
        nodes = np.unique(f_node[g])
        ab, _ = two_means_threshold(sg["filtered"][nodes, t][None, :].astype(float), cfg.density_factor, cfg.min_sg)
        hit += int(ab.sum())
        nodes_in += len(nodes)
        flagged_groups += bool(ab.any())
    print(f"  time of failure (offline, 10 min, groups of >= 3 nodes): {len(tg)} groups, {nodes_in} nodes; "
          f"abnormal inside their group at the first failure: {hit} nodes in {flagged_groups} groups")
    base = {"self, previous 48 windows": self_baseline(sg["filtered"], k, 48, 0),
            "self, same time on 7 previous days": self_baseline(sg["filtered"], per_day, 7, 0)}
    bs_best = None
    for name, bf in base.items():
        bs = score(bf & ~boots["raw"], regular)
        print(f"baseline {name} (filtered SG, robust z > 6): precision {bs['precision']:.2f} recall "
              f"{bs['recall@0min']:.2f} F1 {f1(bs):.2f} alarms {int(bs['episodes'])}")
        bs_best = bs if bs_best is None or f1(bs) > f1(bs_best) else bs_best
    print(f"evaluation {time.perf_counter() - t_start:.0f} s")
    print(f"ratio={f1(results['filtered']) / max(f1(bs_best), 1e-9):.2f}  (filtered F1 / best baseline F1)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--horizon-min", type=int, default=120)
    ap.add_argument("--bin-min", type=int, default=5, help="SG bin (the 30-min window slides by one bin)")
    ap.add_argument("--dump", default=None, help="save the SG matrices and truth to this .npz")
    ap.add_argument("--sweep", action="store_true", help="print precision/recall over density_factor x min_sg")
    ap.add_argument("--sweep-windows", action="store_true", help="print precision/recall over extra SG windows (dev)")
    ap.add_argument("--extra-windows", default=None,
                    help="extra SG windows 'min:min_sg,...' ('' = none; default: SyslogSettings.extra_windows)")
    ap.add_argument("--wide-interval", type=int, default=None,
                    help="vicinity-wide interval in minutes (Eq. S3; 0 = off; default: SyslogSettings)")
    ap.add_argument("--precursor-rate", type=float, default=None, help="syslog_precursor_lines_per_min (default: simulator's)")
    ap.add_argument("--precursor-share", type=float, default=None,
                    help="syslog_precursor_share (paper-like setting; default: simulator's -1 = telemetry windows)")
    ap.add_argument("--vicinity", default="rack_arch",
                    choices=("rack_arch", "rack", "arch", "global", "job", "rack_arch|job", "rack_arch&job"))
    ap.add_argument("--raw-factor", type=float, default=None, help="density_factor for raw/anonymised (default: --factor)")
    ap.add_argument("--raw-min-sg", type=float, default=None, help="min_sg for raw/anonymised (default: --min-sg)")
    ap.add_argument("--load", default=None, help="skip rendering: evaluate the SG bins saved by --dump")
    ap.add_argument("--factor", type=float, default=None, help="density_factor (default: SyslogSettings)")
    ap.add_argument("--min-sg", type=float, default=None, help="min_sg (default: SyslogSettings)")
    a = ap.parse_args()
    cfg = SyslogSettings()
    if a.factor is not None:
        cfg = cfg.model_copy(update={"density_factor": a.factor})
    if a.min_sg is not None:
        cfg = cfg.model_copy(update={"min_sg": a.min_sg})
    if a.extra_windows is not None:
        ew = [(int(x.split(":")[0]), float(x.split(":")[1])) for x in a.extra_windows.split(",") if x.strip()]
        cfg = SyslogSettings(**{**cfg.model_dump(), "extra_windows": ew, "step_min": a.bin_min})
    if a.wide_interval is not None:
        cfg = SyslogSettings(**{**cfg.model_dump(), "wide_interval_min": a.wide_interval, "step_min": a.bin_min})
    kw = {} if a.precursor_rate is None else {"syslog_precursor_lines_per_min": a.precursor_rate}
    if a.precursor_share is not None:
        kw["syslog_precursor_share"] = a.precursor_share
    sim = SimConfig(n_nodes=a.nodes, start=date(2026, 1, 1), seed=a.seed, **kw)
    sched = build_schedule(sim, a.days)
    bins = dict(np.load(a.load)) if a.load else render(a, cfg, sim, sched)
    evaluate(a, cfg, sim, sched, bins)


if __name__ == "__main__":
    main()
