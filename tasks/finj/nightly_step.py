"""Nightly step ``finj`` (order 30): name the likely fault of each flagged node.

Reads the day's verdicts (``reports/<day>/verdicts.parquet``, public table of ``tasks/anomaly/verdicts.py``;
node rows), the flagged node's staged telemetry of the flagged stretch (``first_time``-60 s to
``last_time``), and the current fault classifier (``models/finj/CURRENT``, trained with
``nodewatch finj train --source staged``, i.e. on catalogue metrics only). Every 60-s window (every 10 s)
is classified; the node's fault is the class with the largest summed probability over the windows whose
most likely class is not ``healthy``, and its confidence is that class's mean probability over those windows.
A node gets a fault only when at least a quarter of its windows look faulty and the confidence is at least
``[finj] min_confidence``.

Leaves ``ctx.shared["finj"] = {"faults": {node: {"fault": str, "confidence": float}}}`` (the contract of the
nightly steps) and writes ``reports/<day>/finj_faults.json`` (one row per flagged node, including the ones
without a fault class and why). Skips (status ``skipped``) when the step is off, there is no verdicts table
or no node verdict, or no classifier; a node without 1-s telemetry is listed with the reason.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from nodewatch.tasks.core.nightly_steps import NightlyStep, StepContext
from nodewatch.tasks.finj.config import FinjSettings, finj_settings

MIN_FAULTY_SHARE = 0.25


def classify_node(model, raw) -> dict[str, Any]:
    """Classify every window of ``raw`` with ``model``; the node's fault, confidence and window counts."""
    from nodewatch.tasks.finj.dataset import build_raw

    ds = build_raw(raw, model.layout)
    x = ds.features[:, 0, :]
    proba = model.forest.predict_proba(x)
    healthy = model.classes.index("healthy") if "healthy" in model.classes else -1
    top = proba.argmax(axis=1)
    faulty = top != healthy
    out: dict[str, Any] = {"windows": int(len(top)), "faulty_windows": int(faulty.sum())}
    if not faulty.any():
        out.update(fault="healthy", confidence=float(proba[:, healthy].mean()) if healthy >= 0 else 0.0)
        return out
    mass = proba[faulty].sum(axis=0)
    if healthy >= 0:
        mass[healthy] = -1.0
    k = int(mass.argmax())
    out.update(fault=model.classes[k], confidence=float(proba[faulty, k].mean()))
    return out


def run(ctx: StepContext) -> dict[str, Any]:
    """The step (see module doc)."""
    import pandas as pd

    from nodewatch.tasks.finj.dataset import CampaignError
    from nodewatch.tasks.finj.staged import raw_from_staged
    from nodewatch.tasks.finj.train import ModelFileError, load_model

    fs = finj_settings(ctx.settings)
    day = ctx.day.isoformat()
    if not ctx.store.exists("reports", day, "verdicts.parquet"):
        return {"status": "skipped", "details": f"no verdicts table for {day}"}
    df = ctx.store.read_parquet("reports", day, "verdicts.parquet").to_pandas()
    nodes = df[df["kind"] == "node"] if "kind" in df else df.iloc[0:0]
    if nodes.empty:
        ctx.shared["finj"] = {"faults": {}}
        return {"status": "skipped", "details": "no node verdict to classify"}
    try:
        model = load_model(ctx.store, fs.model_run)
    except ModelFileError as e:
        return {"status": "skipped", "details": str(e)}
    if model.meta.get("source") != "staged":
        return {
            "status": "skipped",
            "details": f"classifier {model.run_id} was trained on raw samples; "
            "the nightly step needs one trained with --source staged",
        }
    faults: dict[str, dict[str, Any]] = {}
    rows = []
    for _, v in nodes.iterrows():
        node = str(v["subject"])
        t0 = pd.Timestamp(v["first_time"]) - timedelta(seconds=60)
        t1 = pd.Timestamp(v["last_time"])
        if pd.isna(t0) or pd.isna(t1) or t1 <= t0:
            t0, t1 = pd.Timestamp(day, tz="UTC"), pd.Timestamp(day, tz="UTC") + timedelta(days=1)
        row: dict[str, Any] = {"node": node, "from": t0.isoformat(), "to": t1.isoformat()}
        try:
            raw = raw_from_staged(ctx.store, node, t0.timestamp(), t1.timestamp())
            res = classify_node(model, raw)
        except (CampaignError, ValueError) as e:
            row.update(fault=None, confidence=None, reason=str(e))
            rows.append(row)
            continue
        row.update(res)
        share = res["faulty_windows"] / max(1, res["windows"])
        if res["fault"] != "healthy" and share >= MIN_FAULTY_SHARE and res["confidence"] >= fs.min_confidence:
            faults[node] = {"fault": res["fault"], "confidence": round(res["confidence"], 4)}
        else:
            row["reason"] = (
                "healthy"
                if res["fault"] == "healthy"
                else (f"{share:.0%} of windows faulty, confidence {res['confidence']:.2f} (min {fs.min_confidence})")
            )
        rows.append(row)
    ctx.shared["finj"] = {"faults": faults}
    path = ctx.store.write_json({"day": day, "model": model.run_id, "nodes": rows}, "reports", day, "finj_faults.json")
    ctx.rec.add_output("finj_faults", path)
    named = ", ".join(f"{n}: {f['fault']} ({f['confidence']:.2f})" for n, f in sorted(faults.items())[:5])
    return {
        "status": "ok",
        "details": f"{len(rows)} flagged node(s) classified, {len(faults)} with a fault class" + (f" ({named})" if named else ""),
        "faults": len(faults),
    }


def _enabled(settings: object) -> bool:
    try:
        return finj_settings(settings).nightly
    except Exception:  # noqa: BLE001 - an invalid section is reported by the step itself
        return True


STEP = NightlyStep(name="finj", run=run, order=30, enabled=_enabled)
__all__ = ["STEP", "FinjSettings", "classify_node", "run"]
