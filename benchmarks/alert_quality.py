"""Alert quality of the node verdicts against the simulator's ground truth (issue 15).

For every (seed, cluster size): simulate the demo configuration (``nodewatch.flows.demo.DEMO_DEFAULTS``:
5-min telemetry, 16-node racks, 2% anomalous node-time, rack 2 misconfigured from day 22) for
``--history`` days + ``--nights`` nights (+ one day, whose sacct file holds the jobs still running at the
end of the last night, as a ``sacct --state=RUNNING`` dump would), aggregate the long-format telemetry
into 15-min window means/min/max/std per node and metric (counters as per-second rates, as staged),
and judge each night with three methods on the same arrays:

* ``verdicts``: :func:`nodewatch.tasks.anomaly.verdicts.judge_day` (job-aware, vicinity-checked, calibrated);
* ``baseline``: the plain per-node robust z of ``../shared/DESIGN.md`` (log1p of window means, median/MAD of the
  node's own history, any metric |z| > k for m consecutive windows), with k and m chosen on history days only:
  the (k, m) of the grid with the best node-level F1 against the truth of the last ``HELD_BACK`` history days
  (scored against the days before them); the DESIGN figure's k = 8, m = 2 is in the grid;
* ``ruad``: today's nightly scoring: one RUAD model per node (W=10, ``--epochs``) trained on the first 80% of
  the history, per-node threshold max(T=0.5, q0.99 of the held-out 20%), a node flagged when any window of
  the night is anomalous (``tasks/anomaly/score.py`` alerts, ``min_windows=1``).

Evaluation as ``tasks/report/nightly.py`` ``evaluate_day``: a node is positive when a ground-truth anomaly or
failure precursor overlaps the night, flagged when a node verdict or a group alert names it; windows positive
when they overlap a truth interval. Printed: one row per (size, seed, night, method) and per-kind node recall,
then the goals of the issue. The rack check: on the night the misconfiguration starts, is rack r02 one rack
alert, and how many of its nodes got node alerts besides.

Run: ``nice .venv/bin/python benchmarks/alert_quality.py [--seeds 1 2 3 --sizes 64 256 --epochs 2]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

WINDOW = pd.Timedelta("15min")
HELD_BACK = 7
K_GRID = (4, 6, 8, 10, 12, 16, 20, 25, 30, 40, 60, 100)
M_GRID = (1, 2, 3, 4)
DEMO_DEFAULTS = {
    "n_nodes": 64, "nodes_per_rack": 16, "racks_per_row": 2, "step_s": 300, "seed": 1,
    "anomaly_share": 0.02, "misconfig_rack": 2, "misconfig_start_day": 22, "node_mtbf_days": 60.0,
}
"""Copy of ``nodewatch.flows.demo.DEMO_DEFAULTS`` (start 2026-01-01; importing the flow would start Prefect)."""


def aggregate(out: Path, day: pd.Timestamp, nodes: list[str], metrics: list[str], counters: set[str], step_s: int,
              carry: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Window mean/min/max/std/count (node, window, metric) of one day of simulated long-format telemetry."""
    per_day = 86400 // step_s
    per_win = int(WINDOW.total_seconds()) // step_s
    raw = np.full((len(nodes), per_day, len(metrics)), np.nan)
    npos = {n: i for i, n in enumerate(nodes)}
    mpos = {m: i for i, m in enumerate(metrics)}
    for f in sorted((out / "telemetry" / "long" / f"date={day.date().isoformat()}").glob("*.parquet")):
        t = pq.read_table(f).to_pandas()
        ni = t["node"].map(npos).to_numpy()
        mi = t["metric"].map(mpos).to_numpy()
        ti = ((t["timestamp"].dt.tz_convert(None) - day.tz_localize(None)).dt.total_seconds().to_numpy() // step_s).astype(int)
        ok = (ti >= 0) & (ti < per_day)
        raw[ni[ok], ti[ok], mi[ok]] = t["value"].to_numpy()[ok]
    cidx = np.array([mpos[c] for c in metrics if c in counters])
    prev = carry.get("last", np.full((len(nodes), len(cidx)), np.nan))
    c = raw[:, :, cidx]
    # last finite sample before each step (previous day's carried in), rate = diff / dt, resets dropped
    seq = np.concatenate([prev[:, None, :], c], axis=1)
    filled = pd.DataFrame(seq.reshape(len(nodes), -1, order="F")).T  # (time, node*metric) forward fill
    ff = filled.ffill().to_numpy().T.reshape(len(nodes), per_day + 1, len(cidx), order="F")
    tpos = np.where(np.isfinite(seq), np.arange(per_day + 1)[None, :, None], np.nan)
    tp = pd.DataFrame(tpos.reshape(len(nodes), -1, order="F")).T.ffill().to_numpy().T.reshape(ff.shape, order="F")
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (c - ff[:, :-1]) / ((np.arange(1, per_day + 1)[None, :, None] - tp[:, :-1]) * step_s)
    rate[~np.isfinite(c) | (rate < 0)] = np.nan
    raw[:, :, cidx] = rate
    carry["last"] = ff[:, -1]
    w = raw.reshape(len(nodes), per_day // per_win, per_win, len(metrics))
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {"mean": np.nanmean(w, axis=2), "min": np.nanmin(w, axis=2), "max": np.nanmax(w, axis=2),
                "std": np.nanstd(w, axis=2), "count": np.isfinite(w).sum(axis=2)}


def read_jobs(out: Path, days: list[pd.Timestamp]) -> pd.DataFrame:
    """Allocation rows of the simulated sacct files: job_id, start_time, end_time, node_list."""
    from nodewatch.tasks.simulate.hostlist import expand

    frames = []
    for d in days:
        p = out / "jobs" / "sacct" / f"date={d.date().isoformat()}" / "sacct.txt"
        if p.is_file():
            frames.append(pd.read_csv(p, sep="|", dtype=str, keep_default_na=False))
    df = pd.concat(frames, ignore_index=True)
    df = df[~df["JobID"].str.contains(r"\.") & ~df["NodeList"].isin(["", "None assigned"])]
    return pd.DataFrame({
        "job_id": df["JobIDRaw"].to_numpy(),
        "start_time": pd.to_datetime(df["Start"], utc=True, errors="coerce"),
        "end_time": pd.to_datetime(df["End"], utc=True, errors="coerce"),
        "node_list": [expand(x) for x in df["NodeList"]],
    }).drop_duplicates("job_id")


def _features(a: dict[str, np.ndarray]) -> np.ndarray:
    from nodewatch.models.anomaly.preprocess import features_from_stats

    return features_from_stats(a["mean"], a["min"], a["max"], a["std"], a["count"])


def ruad_model(hist: dict[str, np.ndarray], epochs: int, window: int = 10) -> tuple[object, np.ndarray]:
    """Today's nightly model on the arrays: RUAD per node trained on the first 80% of the history, per-node
    threshold max(T=0.5, q0.99 of the held-out 20%) (``tasks/anomaly/train.py`` defaults)."""
    from nodewatch.models.anomaly.preprocess import chronological_split
    from nodewatch.models.anomaly.ruad import RUAD
    from nodewatch.models.anomaly.thresholds import calibrated_thresholds

    X = _features(hist)
    sp = chronological_split(X.shape[1], 0.8)
    est = RUAD(window=window, epochs=epochs).fit(X[:, :sp])
    return est, calibrated_thresholds(est.score_samples(X[:, sp:]), None, 0.5, 0.99)


def ruad_flags(model: tuple[object, np.ndarray], hist: dict[str, np.ndarray], night: dict[str, np.ndarray],
               window: int = 10) -> np.ndarray:
    """Window flags (node, time) of the night: P >= the node's threshold (the night's windows use the
    ``window - 1`` windows before midnight as context, as the nightly scoring does)."""
    est, thr = model
    X = np.concatenate([_features(hist)[:, -(window - 1):], _features(night)], axis=1)
    p = est.score_samples(X)[:, window - 1:]  # type: ignore[attr-defined]
    return np.where(np.isfinite(p), p >= thr[:, None], False)


def tune_baseline(agg: list[dict[str, np.ndarray]], truths: list[pd.DataFrame], nodes: list[str],
                  history: int) -> tuple[float, int, float]:
    """(k, m, F1) of the baseline with the best summed node-level F1 over the held-back history days."""
    from nodewatch.models.anomaly.vicinity import consecutive, own_history_max_z

    ref = np.concatenate([a["mean"] for a in agg[: history - HELD_BACK]], axis=1)
    zs = [own_history_max_z(ref, agg[d]["mean"]) for d in range(history - HELD_BACK, history)]
    pos = [set(t["node"]) for t in truths]
    best = (8.0, 2, -1.0)
    for k in K_GRID:
        for m in M_GRID:
            tp = fl = ps = 0
            for z, p in zip(zs, pos, strict=True):
                f = {nodes[i] for i in np.flatnonzero(consecutive(z > k, m).any(axis=1))}
                tp, fl, ps = tp + len(f & p), fl + len(f), ps + len(p)
            f1 = 2 * tp / (fl + ps) if fl + ps else 0.0
            if f1 > best[2]:
                best = (float(k), m, f1)
    return best


def truth_for(out: Path, day: pd.Timestamp) -> pd.DataFrame:
    """Ground truth (node, start, end, kind) overlapping ``day`` (anomalies and precursors)."""
    from nodewatch.tasks.report.nightly import ground_truth

    return ground_truth(out, day.date())


def evaluate(flags: np.ndarray, node_flags: set[str], nodes: list[str], times: np.ndarray, scored: np.ndarray,
             truth: pd.DataFrame) -> dict[str, object]:
    """Node and window precision/recall and per-kind node recall of one night."""
    pos_nodes = set(truth["node"]) & {n for n, s in zip(nodes, scored, strict=True) if s}
    flagged = node_flags & {n for n, s in zip(nodes, scored, strict=True) if s}
    tp = flagged & pos_nodes
    t = np.asarray(times, dtype="datetime64[ns]")
    pos_w = np.zeros(flags.shape, dtype=bool)
    npos = {n: i for i, n in enumerate(nodes)}
    kinds: dict[str, list[int]] = {}
    for r in truth.itertuples():
        if r.node not in npos or not scored[npos[r.node]]:
            continue
        s = np.datetime64(r.start.tz_convert(None), "ns")
        e = np.datetime64(r.end.tz_convert(None), "ns")
        pos_w[npos[r.node]] |= (t < e) & (t + np.timedelta64(WINDOW) > s)
        k = kinds.setdefault(str(r.kind), [0, 0])
        k[0] += 1
        k[1] += int(r.node in flagged)
    fl = flags & scored[:, None]

    def ratio(a: int, b: int) -> float:
        return a / b if b else float("nan")

    return {"flagged": len(flagged), "positive": len(pos_nodes), "tp": len(tp), "negative": int(scored.sum()) - len(pos_nodes),
            "false": len(flagged - pos_nodes), "false_node_alerts": len(flagged - pos_nodes),
            "node_p": ratio(len(tp), len(flagged)), "node_r": ratio(len(tp), len(pos_nodes)),
            "win_p": ratio(int((fl & pos_w).sum()), int(fl.sum())), "win_r": ratio(int((fl & pos_w).sum()), int(pos_w.sum())),
            "kinds": kinds}


NOT_VISIBLE = {
    "precursor:io_errors (idle node)": "the simulator halves the job's disk-write rate (telemetry.driver_pieces); an "
                                       "idle node writes only its constant base rate, which the precursor leaves unchanged",
}
"""Per-kind keys of :func:`visibility` that the telemetry cannot show, with the reason (docs/verdicts.md)."""
SHORT_MIN = 30.0
"""precursors shorter than this (minutes) are counted apart: the persistence rule needs 2 of 3 15-min windows and
the ramp of a gauge precursor reaches its amplitude only at the failure (docs/verdicts.md)"""


def visibility(truth: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """``truth`` with the kind of some events made explicit for the per-kind table: ``precursor:io_errors (idle
    node)`` when no job (of all the simulator's jobs, running ones too) overlapped the event on the node (no
    telemetry trace: :data:`NOT_VISIBLE`), and ``<kind> (< 30 min)`` for precursors shorter than
    :data:`SHORT_MIN`."""
    if not len(truth):
        return truth
    out = truth.copy()
    kinds = out["kind"].astype(str).to_numpy().copy()
    js, je = pd.to_datetime(jobs["start_time"], utc=True), pd.to_datetime(jobs["end_time"], utc=True)
    for i, r in enumerate(out.itertuples()):
        if not kinds[i].startswith("precursor:"):
            continue
        if kinds[i] == "precursor:io_errors":
            on = [r.node in nl for nl in jobs["node_list"]]
            busy = bool(((js < r.end) & (je.isna() | (je > r.start)) & np.array(on, dtype=bool)).any())
            if not busy:
                kinds[i] += " (idle node)"
                continue
        if (r.end - r.start).total_seconds() < 60 * SHORT_MIN:
            kinds[i] += f" (< {SHORT_MIN:g} min)"
    out["kind"] = kinds
    return out


CLEAN = {"anomaly_share": 0.0, "misconfig_rack": -1, "node_mtbf_days": 1e6}
"""``--clean``: no anomalies, no misconfigured rack, (almost) no failures: every flag is a false alert."""


def prepare(seed: int, size: int, history: int, nights: int, clean: bool = False,
            cache: Path | None = None) -> dict[str, object]:
    """Simulate one cluster and aggregate it: window stats per day, jobs, topology, truth per day.

    With ``cache`` the arrays are kept in ``cache/<size>-<seed>-<history>-<nights>[-clean]/`` (npz, parquet,
    csv: no pickle) and re-used by the next run with the same arguments (the method can change, the data not).
    """
    from nodewatch.tasks.simulate.cluster import simulate
    from nodewatch.tasks.simulate.config import SimConfig
    from nodewatch.tasks.simulate.metrics import COUNTERS, METRIC_NAMES

    cfg = SimConfig(**{**DEMO_DEFAULTS, "n_nodes": size, "seed": seed, "start": date(2026, 1, 1), **(CLEAN if clean else {})})
    cfg = replace(cfg, ldms_racks=())  # values identical; every node in the parquet format (no LDMS CSV reader here)
    days = [pd.Timestamp(cfg.start, tz="UTC") + pd.Timedelta(days=i) for i in range(history + nights + 1)]
    cdir = cache / f"{size}-{seed}-{history}-{nights}{'-clean' if clean else ''}" if cache else None
    if cdir is not None and (cdir / "done").is_file():
        with np.load(cdir / "agg.npz") as z:
            arrs = {s: z[s] for s in z.files}  # each key read once (z[s] decompresses the whole array again)
        agg = [{s: a[i] for s, a in arrs.items()} for i in range(history + nights)]
        jobs = pd.read_parquet(cdir / "jobs.parquet")
        jobs["node_list"] = [list(x) for x in jobs["node_list"]]
        tr = pd.read_parquet(cdir / "truth.parquet")
        truths = [tr[tr["day"] == i].drop(columns="day").reset_index(drop=True) for i in range(history + nights)]
        topo = pd.read_csv(cdir / "topology.csv", dtype=str)
        print(f"  size {size} seed {seed}: cached arrays from {cdir}", flush=True)
        return {"cfg": cfg, "days": days, "agg": agg, "jobs": jobs, "truths": truths, "topo": topo}
    with tempfile.TemporaryDirectory(prefix="nodewatch-alertq-") as tmp:
        out = Path(tmp)
        t0 = time.perf_counter()
        simulate(cfg, out, list(range(history + nights + 1)))
        t_sim = time.perf_counter() - t0
        topo = pd.read_csv(out / "topology" / "topology.csv", dtype=str)
        nodes = topo["node"].tolist()
        t0 = time.perf_counter()
        carry: dict[str, np.ndarray] = {}
        agg = [aggregate(out, d, nodes, list(METRIC_NAMES), set(COUNTERS), cfg.step_s, carry) for d in days[: history + nights]]
        jobs = read_jobs(out, days)
        truths = [truth_for(out, d) for d in days[: history + nights]]
        print(f"  size {size} seed {seed}: simulate {t_sim:.0f} s, aggregate {time.perf_counter() - t0:.0f} s, "
              f"{len(jobs)} jobs", flush=True)
    if cdir is not None:
        cdir.mkdir(parents=True, exist_ok=True)
        np.savez(cdir / "agg.npz", **{s: np.stack([a[s] for a in agg]) for s in agg[0]})
        jobs.to_parquet(cdir / "jobs.parquet")
        pd.concat([t.assign(day=i) for i, t in enumerate(truths)], ignore_index=True).to_parquet(cdir / "truth.parquet")
        topo.to_csv(cdir / "topology.csv", index=False)
        (cdir / "done").write_text("ok\n")
    return {"cfg": cfg, "days": days, "agg": agg, "jobs": jobs, "truths": truths, "topo": topo}


def run_cluster(seed: int, size: int, history: int, nights: int, epochs: int, with_ruad: bool,
                clean: bool = False, cache: Path | None = None, running_jobs: bool = False,
                vcfg: object | None = None) -> list[dict[str, object]]:
    """Judge the nights of one prepared cluster with the three methods, return one row per (night, method).
    ``vcfg``: the verdicts' :class:`~nodewatch.models.anomaly.verdicts.VerdictConfig` (default: its defaults)."""
    from nodewatch.models.anomaly.verdicts import VerdictConfig, day_group_scores
    from nodewatch.models.anomaly.vicinity import own_history_baseline
    from nodewatch.tasks.anomaly.verdicts import judge_day, sustained_index
    from nodewatch.tasks.simulate.metrics import METRIC_NAMES

    rows: list[dict[str, object]] = []
    data = prepare(seed, size, history, nights, clean, cache)
    cfg, days, agg, jobs, truths, topo = (data[k] for k in ("cfg", "days", "agg", "jobs", "truths", "topo"))
    nodes = topo["node"].tolist()
    racks, archs = topo["rack"].to_numpy(), topo["architecture"].to_numpy()
    metrics = list(METRIC_NAMES)
    if True:
        bk, bm, bf1 = tune_baseline(agg, truths[history - HELD_BACK:history], nodes, history)
        print(f"  baseline k={bk:g} m={bm} (held-back history F1 {bf1:.2f})", flush=True)
        per = 96
        model = None
        if with_ruad:
            t0 = time.perf_counter()
            model = ruad_model({s: np.concatenate([a[s] for a in agg[:history]], axis=1) for s in agg[0]}, epochs)
            print(f"  RUAD trained in {time.perf_counter() - t0:.0f} s ({epochs} epochs)", flush=True)
        for k in range(nights):
            nd = history + k
            hist = {s: np.concatenate([a[s] for a in agg[nd - history:nd]], axis=1) for s in agg[0]}
            night = agg[nd]
            ht = np.array([np.datetime64(days[i].tz_localize(None)) + np.timedelta64(15 * j, "m")
                           for i in range(nd - history, nd) for j in range(per)], dtype="datetime64[ns]")
            nt = np.array([np.datetime64(days[nd].tz_localize(None)) + np.timedelta64(15 * j, "m") for j in range(per)],
                          dtype="datetime64[ns]")
            scored = night["count"].sum(axis=(1, 2)) > 0
            truth = visibility(truths[nd], jobs)
            t0 = time.perf_counter()
            # what the nightly run has staged: the sacct files up to the night (jobs that ended by midnight);
            # --running-jobs adds the jobs still running at midnight (a sacct --state=RUNNING dump, not staged today)
            known = jobs if running_jobs else jobs[pd.to_datetime(jobs["end_time"], utc=True) < days[nd + 1]]
            si = sustained_index(metrics, vcfg)  # type: ignore[arg-type]
            res = judge_day(hist["mean"], ht, night["mean"], nt, nodes, metrics, racks, archs, known, WINDOW, vcfg,
                            hist_std=hist["std"][..., si], night_std=night["std"][..., si])
            t_v = time.perf_counter() - t0
            vnodes = {n for r in res["rows"] for n in r["members"]}
            methods = {"verdicts": (res["window_flags"], vnodes, t_v)}
            t0 = time.perf_counter()
            base = own_history_baseline(hist["mean"], night["mean"], k=bk, m=bm)
            methods["baseline"] = (base, {nodes[i] for i in np.flatnonzero(base.any(axis=1))}, time.perf_counter() - t0)
            if model is not None:
                t0 = time.perf_counter()
                rf = ruad_flags(model, hist, night)
                methods["ruad"] = (rf, {nodes[i] for i in np.flatnonzero(rf.any(axis=1))}, time.perf_counter() - t0)
            mis = f"r{cfg.misconfigured_rack:02d}" if cfg.misconfigured_rack >= 0 else ""
            rack_alerts = [r["subject"] for r in res["rows"] if r["kind"] == "rack"]
            mis_nodes = set(topo.loc[topo["rack"] == mis, "node"])
            node_alerts_in_mis = sum(1 for r in res["rows"] if r["kind"] == "node" and r["subject"] in mis_nodes)
            for name, (fl, nf, secs) in methods.items():
                ev = evaluate(fl, nf, nodes, nt, scored, truth)
                if name == "verdicts":  # false alerts of node verdicts alone (group members counted apart)
                    own = {r["subject"] for r in res["rows"] if r["kind"] == "node"}
                    ev["false_node_alerts"] = len(own - set(truth["node"]))
                    ev["false_group_alerts"] = sum(1 for r in res["rows"] if r["kind"] != "node"
                                                   and not set(r["members"]) & set(truth["node"]))
                    ev["groups_judged"] = len(res["evidence"].groups)
                    ev["thr_median"] = float(np.median(res["calibration"].node))
                    ev["floor_set"] = int((res["calibration"].node <= VerdictConfig().node_floor).sum())
                    # group thresholds (the floor 6 sets them): the held-back group-day scores and tonight's
                    dz = own_history_baseline(hist["mean"], night["mean"], k=8.0, m=2)  # DESIGN.md's own k, m
                    dn = {nodes[i] for i in np.flatnonzero(dz.any(axis=1))} & {n for n, x in zip(nodes, scored, strict=True) if x}
                    ev["design_k8m2"] = [len(dn), len(dn & set(truth["node"])), ev["positive"]]
                    gd = res["calibration"].group_day_scores
                    ev["held_group_scores"] = {k: sorted(round(float(x), 2) for x in v) for k, v in gd.items()}
                    ev["night_group_scores"] = {f"{k}/{nm}": round(float(x), 2)
                                                for (k, nm), x in day_group_scores(res["evidence"], VerdictConfig()).items()}
                rows.append({"size": size, "seed": seed, "night": days[nd].date().isoformat(), "night_no": k + 1,
                             "method": name if name != "baseline" else f"baseline k={bk:g} m={bm}", "seconds": secs, **ev,
                             "misconfig_starts": nd == cfg.misconfig_start_day,
                             "rack_alerts": ",".join(rack_alerts) if name == "verdicts" else "",
                             "mis_rack_alert": (mis in rack_alerts) if name == "verdicts" else None,
                             "mis_rack_node_alerts": node_alerts_in_mis if name == "verdicts" else None,
                             "node_alerts": sum(1 for r in res["rows"] if r["kind"] == "node") if name == "verdicts" else None})
    return rows


def poisson_ci(k: int, n: float, level: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) confidence interval of a Poisson rate ``k / n``, per 1,000."""
    from scipy.stats import chi2

    a = 1 - level
    lo = chi2.ppf(a / 2, 2 * k) / 2 if k else 0.0
    hi = chi2.ppf(1 - a / 2, 2 * k + 2) / 2
    return 1000 * lo / n, 1000 * hi / n


def false_alert_rate(v: pd.DataFrame) -> None:
    """False node alerts (own node verdicts of nodes without any truth interval that night) per 1,000
    negative node-days against the budget, with the exact Poisson 95% CI; group alerts naming no positive node."""
    from nodewatch.models.anomaly.verdicts import VerdictConfig

    cfg = VerdictConfig()
    print(f"\nFalse alerts against the budget ({cfg.budget_per_1000:g} per 1,000 node-days, "
          f"{cfg.group_budget_per_1000:g} per 1,000 group-days):")
    for size, g in v.groupby("size"):
        k, n = int(g["false_node_alerts"].sum()), int(g["negative"].sum())
        lo, hi = poisson_ci(k, n)
        kg, ng = int(g["false_group_alerts"].sum()), int(g["groups_judged"].sum())
        glo, ghi = poisson_ci(kg, max(ng, 1))
        print(f"  {size} nodes: {k} false node alerts / {n} negative node-days = {1000 * k / n:.1f} per 1,000 "
              f"(95% CI {lo:.1f}-{hi:.1f}; budget inside: {lo <= cfg.budget_per_1000 <= hi}); "
              f"{kg} false group alerts / {ng} group-days = {1000 * kg / max(ng, 1):.1f} per 1,000 (CI {glo:.1f}-{ghi:.1f}); "
              f"node thresholds median {g['thr_median'].median():.2f}, set by the floor: {int(g['floor_set'].sum())}")


def group_scores(v: pd.DataFrame) -> None:
    """Group-day scores against the group threshold: held-back (normal) rack-days and tonight's racks, with and
    without a truth interval on a member (is the floor of 6 between them?)."""
    from nodewatch.models.anomaly.verdicts import VerdictConfig

    if "held_group_scores" not in v.columns:
        return
    print(f"\nGroup-day scores (threshold: the floor {VerdictConfig().group_floor:g}):")
    for size, g in v.groupby("size"):
        held = [x for d in g["held_group_scores"] for x in d.get("rack", [])]
        night = [(x, bool(r.mis_rack_alert) and k.endswith(f"/{r.rack_alerts}")) for r in g.itertuples()
                 for k, x in r.night_group_scores.items() if k.startswith("rack/")]
        hi = sorted(x for x, _ in night)
        if held:
            print(f"  {size} nodes: held-back rack-days (with repeats across nights) n={len(held)}, q0.99 "
                  f"{np.quantile(held, 0.99):.2f}, max {max(held):.2f}; night rack scores: top 5 {hi[-5:]}, "
                  f"misconfigured rack when alerted: {sorted(x for x, m in night if m)}")


def ratio(df: pd.DataFrame) -> None:
    """``ratio=``: mean node F1 of the verdicts over the mean node F1 of the plain RUAD threshold (today's nightly
    scoring) on the same nights (over the robust-z baseline with ``--no-ruad``)."""
    def f1(r: pd.Series) -> float:
        p, rc = r["node_p"], r["node_r"]
        return 0.0 if not (p > 0 and rc > 0) else 2 * p * rc / (p + rc)

    v = df[df["method"] == "verdicts"]
    base = df[df["method"] == "ruad"]
    name = "ruad"
    if not len(base):
        base, name = df[df["method"].str.startswith("baseline")], "robust-z baseline"
    if not len(v) or not len(base) or v["positive"].sum() == 0:
        print("ratio=n/a (no positive node on these nights)")
        return
    fv, fb = float(v.apply(f1, axis=1).mean()), float(base.apply(f1, axis=1).mean())
    print(f"\nmean node F1: verdicts {fv:.3f}, {name} {fb:.3f}")
    print(f"ratio={fv / fb:.2f}" if fb > 0 else "ratio=inf")


def _f(x: object) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return ""
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.2f}" if isinstance(x, float) else str(x)


def main() -> None:
    """Run the clusters, print the tables and the goals."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--history", type=int, default=21)
    ap.add_argument("--nights", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--no-ruad", action="store_true", help="skip today's RUAD scoring (faster)")
    ap.add_argument("--clean", action="store_true", help="clusters without anomalies: measure the false-alert rate")
    ap.add_argument("--running-jobs", action="store_true",
                    help="also give the verdicts the jobs still running at midnight (the nightly run stages only ended jobs)")
    ap.add_argument("--cache", type=Path, default=None, help="keep/re-use the simulated arrays here")
    ap.add_argument("--empirical-cap", action="store_true",
                    help="verdicts with the empirical cap of the temporal z (issue 15 candidate, not the default)")
    ap.add_argument("--no-union-floor", action="store_true",
                    help="node thresholds without the union-bound floor of the budget (Eq. B1; the 316b8f2 path)")
    ap.add_argument("--infer-gap", type=int, default=None,
                    help="idle-looking windows in a row inside an inferred running job (default: VerdictConfig; 1 = 24c5b08)")
    ap.add_argument("--rare-quantum", action="store_true",
                    help="own-history scales with the rare-quantum floor (Eq. Q1; evaluated at 750ace9, not the default)")
    ap.add_argument("--no-sustained", action="store_true",
                    help="verdicts without the sustained window-std channel (VerdictConfig.sustained_k=0: the c011c5e path)")
    ap.add_argument("--sustained-k", type=int, default=None,
                    help="windows accumulated by the sustained channel (Eq. A1; default: VerdictConfig)")
    ap.add_argument("--no-io-peer", action="store_true",
                    help="verdicts without the job-peer drop channel of disk_write_bytes (VerdictConfig.io_peer=False: "
                         "the 4c97556 path)")
    ap.add_argument("--per-day-fit", action="store_true",
                    help="node thresholds from one tail fit per held-back day (median); default: one pooled fit")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON lines here")
    a = ap.parse_args()
    t_all = time.perf_counter()
    rows = []
    from nodewatch.models.anomaly.verdicts import VerdictConfig

    vcfg = VerdictConfig(per_day_fit=a.per_day_fit, empirical_cap=a.empirical_cap,
                         union_floor=not a.no_union_floor)
    if a.infer_gap is not None:
        vcfg = replace(vcfg, infer_gap=a.infer_gap)
    if a.rare_quantum:
        vcfg = replace(vcfg, rare_quantum=True)
    if a.sustained_k is not None:
        vcfg = replace(vcfg, sustained_k=a.sustained_k)
    if a.no_sustained:
        vcfg = replace(vcfg, sustained_k=0)
    if a.no_io_peer:
        vcfg = replace(vcfg, io_peer=False)
    for size in a.sizes:
        for seed in a.seeds:
            rows += run_cluster(seed, size, a.history, a.nights, a.epochs, not a.no_ruad, a.clean, a.cache, a.running_jobs, vcfg)
    df = pd.DataFrame(rows)
    if a.json:
        df.to_json(a.json, orient="records", lines=True, default_handler=str)
    print("\n| size | seed | night | method | flagged | positive | node P | node R | window P | window R | rack alerts | "
          "r02 nodes also node alerts | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in df.itertuples():
        print(f"| {r.size} | {r.seed} | {r.night} | {r.method} | {r.flagged} | {r.positive} | {_f(r.node_p)} | {_f(r.node_r)} | "
              f"{_f(r.win_p)} | {_f(r.win_r)} | {r.rack_alerts or ''} | {_f(r.mis_rack_node_alerts)} | "
              f"{r.seconds:.1f} |")
    print("\nNode recall per ground-truth kind (events found / events), all nights pooled:")
    for (size, method), g in df.groupby([df["size"], df["method"].str.split().str[0]]):
        tot: dict[str, list[int]] = {}
        for ks in g["kinds"]:
            for k, (n, hit) in ks.items():
                tot.setdefault(k, [0, 0])
                tot[k][0] += n
                tot[k][1] += hit
        print(f"  {size} nodes, {method}: " + ", ".join(f"{k} {h / n:.2f} ({h}/{n})" for k, (n, h) in sorted(tot.items())))
    v = df[df["method"] == "verdicts"]
    b = df[df["method"].str.startswith("baseline")]
    false_alert_rate(v)
    group_scores(v)
    if "design_k8m2" in v.columns:
        print("\nDESIGN.md's plain robust z with its own k = 8, m = 2 (3 nights per cluster):")
        for (size, seed), g in v.groupby(["size", "seed"]):
            fl, tp, ps = (int(sum(x[i] for x in g["design_k8m2"])) for i in range(3))
            print(f"  {size} nodes seed {seed}: {fl} node-nights flagged, precision {tp / max(fl, 1):.2f}, "
                  f"recall {tp / max(ps, 1):.2f}")
    ratio(df)
    if a.clean:
        print(f"\ntotal {time.perf_counter() - t_all:.0f} s")
        return
    demo = v[v["size"] == 64]
    print("\nGoals (issue 15):")
    print(f"  demo config, every night, node precision >= 0.8: {bool((demo['node_p'] >= 0.8).all())} "
          f"(min {demo['node_p'].min():.2f})")
    print(f"  demo config, every night, node recall >= 0.8: {bool((demo['node_r'] >= 0.8).all())} "
          f"(min {demo['node_r'].min():.2f})")
    print(f"  flagged <= 1.5 x truly anomalous: {bool((demo['flagged'] <= 1.5 * demo['positive']).all())}")
    st = v[v["misconfig_starts"]]
    print(f"  misconfigured rack one rack alert the night it starts: {bool(st['mis_rack_alert'].all())} "
          f"({', '.join(f'{r.size}/{r.seed}: {r.rack_alerts or chr(45)}' for r in st.itertuples())})")
    bm = b.set_index(["size", "seed", "night"])

    def f1(p: float, r: float) -> float:
        return 0.0 if not (p > 0 and r > 0) else 2 * p * r / (p + r)

    beat = [f1(r.node_p, r.node_r) > f1(bm.loc[(r.size, r.seed, r.night), "node_p"], bm.loc[(r.size, r.seed, r.night), "node_r"])
            for r in v.itertuples()]
    print(f"  verdicts beat the baseline (node F1) on every night: {all(beat)} ({sum(beat)}/{len(beat)})")
    kinds: dict[str, list[int]] = {}
    for ks in demo["kinds"]:
        for k, (n, hit) in ks.items():
            kinds.setdefault(k, [0, 0])
            kinds[k][0] += n
            kinds[k][1] += hit
    low = {k: round(h / n, 2) for k, (n, h) in kinds.items() if h / n < 0.7 and k not in NOT_VISIBLE}
    print(f"  per-kind node recall >= 0.7 (demo config, nights pooled; kinds the telemetry can show): below: {low or 'none'}")
    for k, why in NOT_VISIBLE.items():
        if k in kinds:
            print(f"  {k}: {kinds[k][1]}/{kinds[k][0]}, not visible from telemetry: {why}")
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
