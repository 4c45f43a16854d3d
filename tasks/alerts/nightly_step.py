"""Nightly step ``alerts`` (order 90, off unless ``[alerts] nightly = true``): push the night's verdicts to
Alertmanager and write the Prometheus textfile metrics.

Contract (tasks/core/nightly_steps.py): it publishes ``ctx.shared["fuse"]["verdicts"]`` (a path or a list
of rows) when the ``fuse`` step left them, else the plain verdicts table ``reports/<day>/verdicts.parquet``;
with neither it is ``skipped``. The alerts carry ``run_id`` = the nightly run. Either target may be
unset (no ``alertmanager_url``: no push; no ``textfile_dir``: no metrics). It leaves
``ctx.shared["alerts"] = {"firing": int, "resolved": int, "metrics": path or None}``.
"""

from __future__ import annotations

from typing import Any

from nodewatch.tasks.core.nightly_steps import NightlyStep, StepContext


def _enabled(settings: Any) -> bool:
    from nodewatch.tasks.alerts.config import alert_settings
    from nodewatch.tasks.core.settings import SettingsError

    try:
        return alert_settings(settings).nightly
    except SettingsError:
        return bool(getattr(settings, "alerts", None))  # a broken section that asks for anything: fail the step, visibly


def run(ctx: StepContext) -> dict[str, Any]:
    """Publish the night's verdicts (see module doc); returns the step row and the counts."""
    from nodewatch.tasks.alerts.alertmanager import push
    from nodewatch.tasks.alerts.config import alert_settings
    from nodewatch.tasks.alerts.metrics import write_metrics
    from nodewatch.tasks.alerts.source import read_rows

    cfg = alert_settings(ctx.settings)
    fused = (ctx.shared.get("fuse") or {}).get("verdicts") if isinstance(ctx.shared.get("fuse"), dict) else None
    try:
        rows, src = read_rows(ctx.store, ctx.day, fused)
    except FileNotFoundError as e:
        return {"status": "skipped", "details": str(e).splitlines()[0][:200]}
    if not cfg.alertmanager_url and not cfg.textfile_dir:
        return {"status": "skipped", "details": "neither [alerts] alertmanager_url nor textfile_dir is set"}
    out: dict[str, Any] = {"source": src}
    parts = []
    if cfg.alertmanager_url:
        p = push(ctx.store, ctx.day, rows, ctx.run_id, cfg, allow_older=True)
        out.update(firing=p["firing"], resolved=p["resolved"], rejected=p["rejected"], alertmanager=cfg.alertmanager_url)
        parts.append(f"{p['firing']} alert(s) firing, {p['resolved']} resolved at {cfg.alertmanager_url}"
                     + (f", {len(p['rejected'])} row(s) rejected" if p["rejected"] else ""))
    if cfg.textfile_dir:
        m = write_metrics(ctx.store, ctx.day, rows, cfg.textfile_dir)
        out["metrics"] = m["path"]
        parts.append(f"metrics {m['path']}")
    ctx.shared["alerts"] = {"firing": out.get("firing", 0), "resolved": out.get("resolved", 0), "metrics": out.get("metrics")}
    return {"status": "done", "details": f"{'; '.join(parts)} (verdicts: {src})", **out}


STEP = NightlyStep(name="alerts", run=run, order=90, enabled=_enabled)
