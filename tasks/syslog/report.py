"""The syslog section of the nightly report (docs/syslog.md): top abnormal nodes with their vicinity evidence,
vicinity-wide events, outages, the night's new templates.

The nightly ``syslog`` step renders it from ``ctx.shared["syslog"]`` and stores it as
``reports/nightly/date=D/syslog.md``; :func:`nodewatch.tasks.report.nightly.write_report` appends that file to the
night's ``report.md``. Every value from the data goes through :func:`nodewatch.tasks.core.escape.md`.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from nodewatch.tasks.core.escape import md, md_code
from nodewatch.tasks.core.store import Store

AREA = "reports/nightly"
"""The nightly report's area (``tasks.report.nightly.AREA``; importing it would make an import cycle: that module
appends this section)."""
SECTION = "syslog.md"


def section_markdown(shared: dict[str, Any], counts: dict[str, int] | None = None, limit: int = 15) -> str:
    """Markdown of one night's syslog results (``ctx.shared["syslog"]`` contract plus the step's counts)."""
    c = counts or {}
    out = ["## Syslog (vicinity detector, Ghiasvand & Ciorba)", ""]
    if c:
        out += [f"- {c.get('rows', 0):,} lines, {c.get('templates', 0)} templates "
                f"({c.get('templates_new_templates', 0)} new, {c.get('templates_overflow', 0)} overflow lines), "
                f"{c.get('filtered_templates', 0)} templates filtered ({c.get('filtered_lines', 0):,} lines)", ""]
    ab = sorted(shared.get("abnormal", {}).items(), key=lambda kv: -float(kv[1]["score"]))
    out += [f"### Abnormal nodes ({len(ab)})", ""]
    if ab:
        out += ["| node | score | window end (UTC) | SG | vicinity | vicinity median SG | live peers |",
                "|---|---|---|---|---|---|---|"]
        for node, v in ab[:limit]:
            out.append(f"| {md(node)} | {float(v['score']):.1f} | {md(str(v['window_end'])[:16])} | "
                       f"{md(v.get('sg', ''))} | {md(v['vicinity'])} | {md(v.get('peer_median_sg', ''))} | "
                       f"{md(v.get('peers', ''))} |")
        if len(ab) > limit:
            out.append(f"\n{len(ab) - limit} more in {md_code('staged/syslog_abnormal')}")
    else:
        out.append("No node departed from its vicinity.")
    ev = shared.get("vicinity_events", [])
    if ev:
        out += ["", f"### Vicinity-wide events ({len(ev)}: the vicinity departed as a whole, no node alarm)", "",
                "| vicinity | from (UTC) | to (UTC) | nodes at the floor | live | median SG | max SG | window |",
                "|---|---|---|---|---|---|---|---|"]
        for e in sorted(ev, key=lambda e: -int(e["nodes"]))[:limit]:
            out.append(f"| {md(e['vicinity'])} | {md(str(e['start'])[:16])} | {md(str(e['end'])[:16])} | "
                       f"{int(e['nodes'])} | {md(e.get('live', ''))} | {md(e.get('median_sg', ''))} | "
                       f"{md(e.get('max_sg', ''))} | {md(e.get('window_min', ''))} min |")
        if len(ev) > limit:
            out.append(f"\n{len(ev) - limit} more in {md_code('staged/syslog_vicinity_events')}")
    outs = shared.get("outages", [])
    fails = [o for o in outs if o.get("regular_failure")]
    out += ["", f"### Outages ({len(outs)}, {len(fails)} regular failures)", ""]
    if outs:
        out += ["| node | last line (UTC) | kind | boot | regular failure |", "|---|---|---|---|---|"]
        for o in sorted(outs, key=lambda o: (not o.get("regular_failure"), str(o["outage"])))[:limit]:
            out.append(f"| {md(o['node'])} | {md(str(o['outage'])[:19])} | {md(o['kind'])} | "
                       f"{md(str(o['boot'])[:19] if o.get('boot') else '-')} | {'yes' if o.get('regular_failure') else 'no'} |")
    else:
        out.append("None.")
    new = shared.get("new_templates", [])
    out += ["", f"### New templates of the night ({len(new)})", ""]
    if new:
        out += ["| id | lines | template |", "|---|---|---|"]
        for t in sorted(new, key=lambda t: -int(t["lines"]))[:limit]:
            out.append(f"| {int(t['template_id'])} | {int(t['lines'])} | {md(str(t['template'])[:160])} |")
    else:
        out.append("None.")
    return "\n".join(out) + "\n"


def write_section(store: Store, day: date, markdown: str) -> str:
    """Store the section as ``reports/nightly/date=D/syslog.md``; returns its path."""
    return store.write_bytes(markdown.encode(), AREA, f"date={day.isoformat()}", SECTION)


def read_section(store: Store, day: date) -> str | None:
    """The stored section of ``day`` (``None`` when the syslog step did not run)."""
    p = store.path(AREA, f"date={day.isoformat()}", SECTION)
    if not store.fs.exists(p):
        return None
    with store.fs.open(p, "rb") as f:
        return f.read().decode("utf-8", "replace")
