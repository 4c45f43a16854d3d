"""Fused verdicts of one day: the verdicts table plus the syslog / predict / finj signals, written beside it.

Reads ``reports/<day>/verdicts.parquet`` (:mod:`nodewatch.tasks.anomaly.verdicts`) and what the
``syslog``, ``predict`` and ``finj`` nightly steps left in ``ctx.shared`` (each may be absent), fuses them
with :func:`nodewatch.models.anomaly.fuse.fuse` and writes ``reports/<day>/fused_verdicts.parquet`` and
``fused_verdicts.md`` the way the verdicts are written (temporary name + rename, one file each; re-running
a day rewrites the same table). Node names from the shared inputs are validated
(:func:`nodewatch.schemas.names.is_valid_node_name`); an invalid one is dropped and counted, never a
path or a report cell. Text from other steps is escaped before it reaches markdown.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Any

import pandas as pd
import pyarrow as pa

from nodewatch.models.anomaly.fuse import Signals, fuse
from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.anomaly.verdicts import AREA
from nodewatch.tasks.core.escape import strip_control
from nodewatch.tasks.core.store import Store

FUSED = "fused_verdicts.parquet"
"""``reports/<day>/fused_verdicts.parquet`` (and ``fused_verdicts.md``)."""

SCHEMA = pa.schema([
    ("day", pa.string()), ("kind", pa.string()), ("subject", pa.string()), ("severity", pa.string()),
    ("signals", pa.list_(pa.string())), ("n_signals", pa.int32()), ("evidence", pa.list_(pa.string())),
    ("telemetry_score", pa.float64()), ("threshold", pa.float64()), ("top_metrics", pa.list_(pa.string())),
    ("suspected_group", pa.string()), ("syslog_score", pa.float64()), ("lead_min", pa.float64()),
    ("fault", pa.string()), ("fault_confidence", pa.float64()), ("members", pa.list_(pa.string())),
    ("rack", pa.string()), ("architecture", pa.string()),
])
"""Columns of the fused table (docs/alerts.md, "Fused verdicts")."""

_SOURCES = {"syslog": "abnormal", "predict": "warnings", "finj": "faults"}


def signals_from_shared(shared: dict[str, Any]) -> tuple[Signals, dict[str, int]]:
    """:class:`Signals` from ``ctx.shared`` (keys ``syslog``/``predict``/``finj`` per the nightly contract).

    A missing key is a source that did not run; a malformed entry (not a mapping, invalid node name) is
    dropped and counted in the returned ``{source: dropped}``.
    """
    parts: dict[str, dict[str, dict[str, Any]]] = {}
    dropped: dict[str, int] = {}
    available = ["telemetry"]
    for src, key in _SOURCES.items():
        block = shared.get(src)
        if not isinstance(block, dict):
            continue
        available.append(src)
        entries = block.get(key) or {}
        good: dict[str, dict[str, Any]] = {}
        bad = 0
        for node, info in (entries.items() if isinstance(entries, dict) else []):
            if is_valid_node_name(node) and isinstance(info, dict):
                # text from another step: no control characters in the table or any later terminal/page
                good[str(node)] = {str(k): strip_control(v) if isinstance(v, str) else v for k, v in info.items()}
            else:
                bad += 1
        if not isinstance(entries, dict):
            bad += 1
        parts[src] = good
        if bad:
            dropped[src] = bad
    return Signals(parts.get("syslog", {}), parts.get("predict", {}), parts.get("finj", {}), tuple(available)), dropped


def read_verdicts(store: Store, day: date) -> list[dict[str, Any]] | None:
    """Rows of the day's verdicts table, ``None`` when the verdicts step wrote none."""
    if not store.exists(AREA, day.isoformat(), "verdicts.parquet"):
        return None
    df = store.read_parquet(AREA, day.isoformat(), "verdicts.parquet").to_pandas()
    rows = df.to_dict("records")
    for r in rows:
        for c in ("members", "top_metrics"):
            r[c] = [str(x) for x in (r.get(c) if r.get(c) is not None else [])]
    return rows


def fused_frame(day: date, rows: list[dict[str, Any]]) -> pa.Table:
    """The fused rows as an Arrow table of :data:`SCHEMA`."""
    cols: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
    for r in rows:
        for f in SCHEMA:
            v = day.isoformat() if f.name == "day" else r.get(f.name)
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            cols[f.name].append(v)
    return pa.table(cols, schema=SCHEMA)


def fused_markdown(day: date, rows: list[dict[str, Any]], info: dict[str, Any], limit: int = 60) -> str:
    """The fused verdicts page: one block per alert with its evidence lines."""
    from nodewatch.tasks.core.escape import md

    lines = [f"# Fused verdicts — {day.isoformat()}", "",
             f"- sources that ran: {', '.join(info['available'])}"
             + ("" if info["had_verdicts"] else " (no verdicts table: telemetry verdicts skipped or failed)"),
             f"- group alerts: {info['group_rows']}, node rows: {info['node_rows']} "
             f"({info['multi_source']} named by two or more sources)", ""]
    if info.get("dropped"):
        lines += [f"- dropped malformed entries: {', '.join(f'{k} {v}' for k, v in sorted(info['dropped'].items()))}", ""]
    if not rows:
        lines.append("No alert from any source.")
    for r in rows[:limit]:
        lines.append(f"## {md(r['kind'])} {md(r['subject'])} — {md(r['severity'])} ({md(', '.join(r['signals']))})")
        lines += [""] + [f"- {md(x)}" for x in r["evidence"]] + [""]
    if len(rows) > limit:
        lines.append(f"{len(rows) - limit} more in {FUSED}")
    return "\n".join(lines) + "\n"


def run_fuse(store: Store, day: date, shared: dict[str, Any]) -> dict[str, Any]:
    """Fuse the day's verdicts with the shared signals and write the fused table and page.

    Returns the paths, the counts, the sources that ran and ``rows`` (JSON-friendly fused rows for a later
    step, e.g. the alert push). With neither a verdicts table nor any other source the day is skipped
    (``status`` ``skipped``) and nothing is written.
    """
    verdict_rows = read_verdicts(store, day)
    sig, dropped = signals_from_shared(shared)
    if verdict_rows is None and len(sig.available) == 1:
        return {"status": "skipped", "details": f"no verdicts table for {day.isoformat()} and no syslog/predict/finj signals"}
    rows = fuse(verdict_rows or [], sig)
    info = {"available": list(sig.available), "had_verdicts": verdict_rows is not None, "dropped": dropped,
            "group_rows": sum(1 for r in rows if r["kind"] != "node"),
            "node_rows": sum(1 for r in rows if r["kind"] == "node"),
            "multi_source": sum(1 for r in rows if r["kind"] == "node" and r["n_signals"] >= 2)}
    tbl = fused_frame(day, rows)
    path = store.write_parquet(tbl, AREA, day.isoformat(), FUSED)
    mdp = store.write_bytes(fused_markdown(day, rows, info).encode(), AREA, day.isoformat(), "fused_verdicts.md")
    json_rows = pd.DataFrame(tbl.to_pandas()).astype(object).where(lambda d: d.notna(), None).to_dict("records")
    for r in json_rows:
        for c in ("signals", "evidence", "top_metrics", "members"):
            r[c] = [str(x) for x in r[c]] if r[c] is not None else []
    return {"status": "done", "verdicts": path, "markdown": mdp, "rows": json_rows, **info}
