"""Nightly step ``predict`` (order 20): score the day's staged telemetry with the CURRENT failure predictor.

Writes ``reports/<day>/predict.json`` (warnings + usability) and ``reports/<day>/predict.md`` and leaves
``ctx.shared["predict"] = {"warnings": {node: {"lead_min", "confidence", "at"}}}`` for later steps (the
node's most confident warning of the day). Skips itself (with the reason) without a trained predictor,
without staged telemetry for the day, or when the telemetry's step differs from the predictor's (a
predictor trained on 15-s data does not read 60-s data).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nodewatch.tasks.core.escape import md
from nodewatch.tasks.core.nightly_steps import NightlyStep, StepContext
from nodewatch.tasks.core.settings import section

AREA = "reports"


def run(ctx: StepContext) -> dict[str, Any]:
    """Score the night's telemetry; see the module docstring."""
    from nodewatch.tasks.predict import registry
    from nodewatch.tasks.predict.report import usability, usability_markdown
    from nodewatch.tasks.predict.score import median_step_s, score_node, staged_day_frames, warnings_from_decisions
    from nodewatch.tasks.predict.train import PredictSettings

    sec = section(ctx.settings, "predict", PredictSettings)
    ctx.shared["predict"] = {"warnings": {}}
    if ctx.store.current(registry.AREA) is None:
        return {"status": "skipped", "details": "no trained failure predictor (nodewatch predict train)"}
    pred = registry.load(ctx.store)
    step = int(pred.params["step_s"])
    day = ctx.day.isoformat()
    frames = staged_day_frames(ctx.store, day, list(pred.params["metrics"]))
    if not frames:
        return {"status": "skipped", "details": f"no staged telemetry of the predictor's metrics on {day}"}
    steps = [median_step_s(t) for t, _ in frames.values()]
    got = float(np.nanmedian(steps))
    if not np.isfinite(got) or abs(got - step) > 0.25 * step:
        return {"status": "skipped", "details": f"telemetry step {got:g} s differs from the predictor's {step} s"}
    warns: list[dict[str, Any]] = []
    for node, (times, vals) in frames.items():
        warns += warnings_from_decisions(node, score_node(pred, times, vals, cumulative=False), step)
    warns = [w for w in warns if w["confidence"] >= sec.warn_min_confidence or pred.voter is None]
    best: dict[str, dict[str, Any]] = {}
    for w in warns:
        if w["node"] not in best or w["confidence"] > best[w["node"]]["confidence"]:
            best[w["node"]] = {"lead_min": w["lead_min"], "confidence": w["confidence"], "at": w["at"]}
    ctx.shared["predict"] = {"warnings": best}
    use = usability(pred.params, sec.site_nodes, sec.uc_limit)
    doc = {"day": day, "predictor": pred.run_id, "warnings": warns, "usability": use.to_dict(orient="records")}
    ctx.store.write_json(doc, AREA, day, "predict.json")
    head = f"Predictor {md(pred.run_id)}: {len(warns)} warning(s) on {len(best)} node(s)."
    lines = [f"# Failure prediction {day}", "", head, ""]
    lines += [
        f"- {md(w['node'])} at {md(w['at'])}: failure in {w['lead_min']:g} min (confidence {w['confidence']:.3f})"
        for w in warns[:200]
    ]
    lines += ["", usability_markdown(use, sec.site_nodes, sec.uc_limit)]
    ctx.store.write_bytes("\n".join(lines).encode(), AREA, day, "predict.md")
    return {"status": "ok", "details": f"{len(warns)} warning(s) on {len(best)} node(s) of {len(frames)}", "warnings": len(warns)}


def _enabled(settings: Any) -> bool:
    from nodewatch.tasks.predict.train import PredictSettings

    try:
        return section(settings, "predict", PredictSettings).enabled
    except Exception:  # noqa: BLE001 - an invalid section runs the step, which then fails with the one-line reason
        return True


STEP = NightlyStep(name="predict", run=run, order=20, enabled=_enabled)
