"""The nightly ``syslog`` step (order 10): template the night's syslog, score it with the vicinity detector,
find outages, export it anonymised (docs/syslog.md).

Leaves ``ctx.shared["syslog"] = {"abnormal": {node: {"score", "vicinity", "window_end"}}, "outages": [...]}`` for
the later steps (predict, fuse, alerts), plus ``new_templates`` and ``filtered_templates``; writes the report
section ``reports/nightly/date=D/syslog.md`` (:mod:`nodewatch.tasks.syslog.report`); skipped with the reason
when the night has no staged syslog.
"""

from __future__ import annotations

from typing import Any

from nodewatch.tasks.core.nightly_steps import NightlyStep, StepContext
from nodewatch.tasks.core.settings import section
from nodewatch.tasks.syslog.settings import SyslogSettings


def run(ctx: StepContext) -> dict[str, Any]:
    """Analyse ``ctx.day`` (module doc); returns the step row plus manifest outputs."""
    from nodewatch.tasks.syslog.detect import analyse_day
    from nodewatch.tasks.syslog.report import section_markdown, write_section

    cfg = section(ctx.settings, "syslog", SyslogSettings)
    if not ctx.store.staged_files("syslog", dates=[ctx.day.isoformat()]):
        ctx.shared["syslog"] = {"abnormal": {}, "outages": []}
        return {"status": "skipped", "details": f"no staged syslog for {ctx.day}"}
    res = analyse_day(ctx.store, ctx.day, ctx.run_id, cfg, export=cfg.export_anonymised,
                      after_finish=ctx.rec.after_finish)  # the miner's CURRENT moves when the night completes
    ctx.shared["syslog"] = res.shared()
    c = res.counts
    sec_path = write_section(ctx.store, ctx.day, section_markdown(ctx.shared["syslog"], c))
    failures = sum(1 for o in ctx.shared["syslog"]["outages"] if o["regular_failure"])
    details = (f"{c['rows']:,} lines, {c['templates']} templates ({c.get('templates_new_templates', 0)} new, "
               f"{c.get('templates_overflow', 0)} overflow lines), {c['filtered_templates']} filtered, "
               f"{c['abnormal_nodes']} abnormal nodes ({c['abnormal_windows']} windows), {failures} syslog failures")
    return {"status": "ok", "details": details,
            "syslog": {**c, "export": res.export, "report_section": sec_path, "detect_commit": res.commit}}


STEP = NightlyStep(name="syslog", run=run, order=10,
                   enabled=lambda s: section(s, "syslog", SyslogSettings).enabled)
