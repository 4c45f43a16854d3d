"""The ``fuse`` nightly step (order 60): the day's verdicts fused with the syslog / predict / finj signals.

Runs after the ``verdicts`` step of ``flows/nightly.py`` and the analysis steps (syslog 10, predict 20,
finj 30), each of which may be absent. Writes ``reports/<day>/fused_verdicts.parquet`` and ``.md``
(:func:`nodewatch.tasks.anomaly.fuse.run_fuse`) and leaves
``ctx.shared["fuse"] = {"verdicts": <path of the fused table>, "rows": [<fused row dicts>], "sources": [...]}``
for the alert push (order 90).
"""

from __future__ import annotations

from typing import Any

from nodewatch.tasks.core.nightly_steps import NightlyStep, StepContext


def run(ctx: StepContext) -> dict[str, Any]:
    """Fuse the night's verdicts (see the module docstring); skipped when no source produced anything."""
    from nodewatch.tasks.anomaly.fuse import run_fuse

    out = run_fuse(ctx.store, ctx.day, ctx.shared)
    if out["status"] != "done":
        return out
    ctx.shared["fuse"] = {"verdicts": out["verdicts"], "rows": out["rows"], "sources": out["available"]}
    details = (f"{out['group_rows']} group and {out['node_rows']} node row(s), {out['multi_source']} node(s) named by 2+ "
               f"sources; sources: {', '.join(out['available'])}; {out['markdown']}")
    # the flow puts every key but status/details in the manifest outputs: paths and counts, not the rows
    return {"status": "done", "details": details, **{k: out[k] for k in (
        "verdicts", "markdown", "group_rows", "node_rows", "multi_source", "available", "dropped")}}


STEP = NightlyStep(name="fuse", run=run, order=60)
