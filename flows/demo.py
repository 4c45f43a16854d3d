"""``python -m nodewatch.flows.demo`` (what ``make demo`` runs): a simulated cluster end to end.

64 simulated nodes, 21 days of history written in the real formats, ingested through the real
parsers, aggregated into the cubes, one RUAD model per node trained on the history, then three
``nightly(demo=True)`` runs (each simulates the next day, ingests, builds cubes, scores, refreshes
the checkpoint tables, derives node states and writes the report). Prints a summary: per night the
nodes the node verdicts flag (docs/alerts.md), their precision/recall against the simulator's ground
truth and the group alerts, beside the plain RUAD threshold; a checkpoint-table excerpt, paths.

Needs only the installed venv (no ``../shared/data``). Everything goes to ``--out`` (default
``./demo-output``): ``inbox/`` (simulated files + ground truth) and ``store/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from prefect import flow  # flows/__init__.py (imported first) has set the Prefect defaults

DEMO_SERVICE_HOSTS = '["slurmctl01"]'
"""The simulated Slurm controller: its syslog (``not responding, setting DOWN``) is node-state evidence."""

DEMO_DEFAULTS: dict[str, Any] = {
    "n_nodes": 64, "nodes_per_rack": 16, "racks_per_row": 2, "step_s": 300, "seed": 1, "start": date(2026, 1, 1),
    "anomaly_share": 0.02, "misconfig_rack": 2, "misconfig_start_day": 22, "node_mtbf_days": 60.0,
}
"""Simulator settings of the demo: 5-min telemetry (the cube aggregates to 15 min anyway), 2% anomalous node-time,
rack 2 misconfigured on the second nightly day, failures more frequent than the default (node MTBF 60 days)."""


@flow(name="demo_bootstrap", log_prints=True)
def bootstrap(inbox: str, store: str, history_days: int = 21, epochs: int = 5, window: int = 10,
              sim: dict[str, Any] | None = None) -> dict[str, Any]:
    """Simulate ``history_days`` days into ``inbox``, ingest them, build the cubes and train RUAD per node."""
    from nodewatch.flows.nightly import _ingest, cubes_task
    from nodewatch.tasks.anomaly.train import TrainConfig, run_training
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.simulate.cluster import simulate
    from nodewatch.tasks.simulate.config import SimConfig

    os.environ.setdefault("NODEWATCH_SERVICE_HOSTS", DEMO_SERVICE_HOSTS)
    cfg = SimConfig(**{**DEMO_DEFAULTS, **(sim or {})})
    st = Store(store)
    rec = RunRecorder(st, "demo_bootstrap", {"inbox": inbox, "history_days": history_days, "epochs": epochs})
    rec.write()
    timings: dict[str, float] = {}
    t = time.perf_counter()
    simulate(cfg, Path(inbox), list(range(history_days)))
    timings["simulate"] = time.perf_counter() - t
    days = [cfg.start + timedelta(days=i) for i in range(history_days)]
    t = time.perf_counter()
    ing = _ingest(st, Path(inbox), days, rec)
    timings["ingest"] = time.perf_counter() - t
    failed = {s: r.get("error") for s, r in ing.items() if r.get("status") == "failed"}
    if "telemetry" not in ing or failed:
        rec.finish("failed")
        raise RuntimeError(f"demo ingest failed: {failed or 'no telemetry file in ' + inbox}")
    t = time.perf_counter()
    cubes = cubes_task(days[0], days[-1], st.url, False)
    timings["cubes"] = time.perf_counter() - t
    t = time.perf_counter()
    tr = run_training(st, days[0], days[-1], TrainConfig(model="ruad", window=window, epochs=epochs, workers=2, threads=1))
    timings["train"] = time.perf_counter() - t
    rec.add_output("ingest", {s: r.get("status") for s, r in ing.items()})
    rec.add_output("cubes", cubes["run_id"])
    rec.add_output("train", {"run_id": tr["run_id"], "trained": tr["trained"], "failed": len(tr["failed"])})
    rec.manifest.timings.update(timings)
    rec.finish()
    return {"timings": timings, "train": {"run_id": tr["run_id"], "trained": tr["trained"], "failed": tr["failed"]},
            "days": [d.isoformat() for d in days], "ingest": ing}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def verdict_summary(store: str | Path, inbox: str | Path, day: str) -> dict[str, Any] | None:
    """The night's node verdicts (``reports/<day>/verdicts.parquet``) against the simulator's truth.

    Flagged = nodes a node alert or a group alert names (as ``tasks/report/nightly.py`` counts them);
    positive = nodes with a truth anomaly or precursor overlapping the day. ``None`` without a verdicts table.
    """
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.report.nightly import ground_truth

    st = Store(str(store))
    if not st.exists("reports", day, "verdicts.parquet"):
        return None
    df = st.read_parquet("reports", day, "verdicts.parquet").to_pandas()
    flagged = {str(n) for ms in df["members"] for n in ms} if len(df) else set()
    truth = ground_truth(inbox, date.fromisoformat(day))
    pos = set(truth["node"])
    tp = flagged & pos
    kinds = {str(k): (len(g), int(g["node"].isin(flagged).sum())) for k, g in truth.groupby("kind")}
    groups = df[df["kind"] != "node"] if len(df) else df
    return {"flagged": len(flagged), "positive": len(pos), "node_alerts": int((df["kind"] == "node").sum()) if len(df) else 0,
            "group_alerts": [f"{r.kind} {r.subject}" for r in groups.itertuples()],
            "precision": len(tp) / len(flagged) if flagged else None, "recall": len(tp) / len(pos) if pos else None,
            "kinds": kinds}


def main(argv: list[str] | None = None) -> int:
    """Run the demo and print its summary."""
    ap = argparse.ArgumentParser(prog="python -m nodewatch.flows.demo", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="demo-output", help="output directory (inbox/ and store/), wiped first")
    ap.add_argument("--nodes", type=int, default=DEMO_DEFAULTS["n_nodes"])
    ap.add_argument("--history-days", type=int, default=21)
    ap.add_argument("--nights", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5)
    args = ap.parse_args(argv)
    os.environ.setdefault("NODEWATCH_SERVICE_HOSTS", DEMO_SERVICE_HOSTS)
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # read when dask is first imported, below

    import logging

    from rich.console import Console
    from rich.table import Table

    from nodewatch.flows.nightly import nightly

    for name in ("distributed", "prefect", "great_expectations"):
        logging.getLogger(name).setLevel(logging.WARNING)
    con = Console(width=max(Console().width, 150))
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    inbox, store = out / "inbox", out / "store"
    t0 = time.perf_counter()
    con.print(f"[bold]nodewatch demo[/bold]: {args.nodes} simulated nodes, {args.history_days} days of history, "
              f"{args.nights} nightly runs -> {out}")
    boot = bootstrap(str(inbox), str(store), args.history_days, args.epochs,
                     sim={"n_nodes": args.nodes})
    con.print("bootstrap: " + ", ".join(f"{k} {v:.0f} s" for k, v in boot["timings"].items())
              + f"; {boot['train']['trained']} node models trained")
    nights = []
    for _ in range(args.nights):
        t = time.perf_counter()
        m = nightly(demo=True, inbox=str(inbox), store=str(store))
        nights.append((m, time.perf_counter() - t))
    wall = time.perf_counter() - t0

    tbl = Table(title="nightly runs: node verdicts (docs/alerts.md) against the simulator's truth, "
                      "plain RUAD threshold as the baseline")
    for c in ("day", "status", "scored", "positive", "verdicts: flagged", "node P", "node R", "group alerts",
              "RUAD: flagged", "node P", "node R", "window P", "window R", "seconds"):
        tbl.add_column(c, no_wrap=c in ("day", "status"))
    verdict_rows = []
    for m, secs in nights:
        sc, ev = m["outputs"]["score"], m["outputs"]["report"].get("evaluation") or {}
        vs = verdict_summary(store, inbox, m["parameters"]["day"])
        verdict_rows.append(vs)
        vf = (str(vs["flagged"]), _fmt(vs["precision"]), _fmt(vs["recall"]), ", ".join(vs["group_alerts"]) or "-") \
            if vs else ("not run", "", "", "")
        tbl.add_row(m["parameters"]["day"], m["status"], str(sc.get("scored")), str(vs["positive"]) if vs else "",
                    *vf, str(sc.get("flagged")), _fmt(ev.get("node_precision")), _fmt(ev.get("node_recall")),
                    _fmt(ev.get("window_precision")), _fmt(ev.get("window_recall")), f"{secs:.0f}")
    con.print(tbl)
    kinds: dict[str, list[int]] = {}
    for vs in verdict_rows:
        for k, (n, hit) in (vs or {}).get("kinds", {}).items():
            kinds.setdefault(k, [0, 0])
            kinds[k][0] += n
            kinds[k][1] += hit
    if kinds:
        con.print("verdicts: node recall by ground-truth kind (all nights): "
                  + ", ".join(f"{k} {h}/{n}" for k, (n, h) in sorted(kinds.items())), highlight=False)
    last = nights[-1][0]
    ev = last["outputs"]["report"].get("evaluation") or {}
    if ev.get("recall_by_kind"):
        con.print("RUAD: node recall by ground-truth kind (last night): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in ev["recall_by_kind"].items()))
    ck = last["outputs"].get("checkpoint_tables")
    if ck:
        from nodewatch.tasks.checkpoint.tables import AREA
        from nodewatch.tasks.core.store import Store

        st = Store(str(store))
        md = st.path(AREA, ck["run_id"], "table.md")
        con.print(f"\n[bold]checkpoint tables[/bold] (run {ck['run_id']}, failure model {ck['failure_model']['name']}: "
                  f"node MTBF {ck['failure_model']['mtbf_node_h']:.0f} h, Weibull shape {ck['failure_model']['shape']:.2f})")
        with st.fs.open(md, "rb") as f:
            lines = f.read().decode().splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.startswith("| shape") or ln.startswith("| nodes")), 0)
        con.print("\n".join(lines[start:start + 12]), highlight=False)
    sc = last["outputs"]["score"]
    con.print("\n[bold]paths[/bold]")
    for k, v in (("store", store), ("inbox (simulated files + ground truth)", inbox),
                 ("scores cube", store / "cubes/scores.zarr"),
                 ("telemetry cube", store / "cubes/telemetry.zarr"), ("last report", last["outputs"]["report"]["report"]),
                 ("last alerts", sc.get("alerts_md")), ("last heat map", sc.get("heatmap")),
                 ("last manifest", store / "runs" / f"{last['run_id']}.json")):
        con.print(f"  {k}: {v}")
    con.print(f"\ndemo wall time: {wall:.0f} s")
    (out / "demo-summary.json").write_text(json.dumps({
        "wall_seconds": wall, "bootstrap": boot["timings"],
        "nights": [{"day": m["parameters"]["day"], "seconds": s, "status": m["status"],
                    "flagged": m["outputs"]["score"].get("flagged"), "verdicts": vs,
                    "evaluation": m["outputs"]["report"].get("evaluation")}
                   for (m, s), vs in zip(nights, verdict_rows, strict=True)]}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
