"""Fused verdicts: the day's telemetry verdicts joined with the other capabilities' signals (pure, no I/O).

Issue 15, "Fused verdict per node and day": temporal (own model) x cross-sectional (vicinity) evidence
comes from :mod:`nodewatch.models.anomaly.verdicts`; this module adds, where other nightly steps provide
them, the syslog signal (Ghiasvand & Ciorba's vicinity detector, ``syslog``), a failure warning with its
lead time (Frank's predictors, ``predict``) and the fault class (Netti et al.'s FINJ classifier,
``finj``).

Rule (deliberately simple and explainable, every row says why):

* a node is in the fused table when a telemetry node alert, a syslog abnormality, a failure warning or a
  fault class names it; membership of a group alert alone is no node row (the group is one row), but it
  counts as telemetry agreement for a node another source names;
* its *signals* are the independent sources that agree (``telemetry`` = node alert or group member,
  ``syslog``, ``predict``, ``finj``); ``vicinity`` (the node is the minority cluster of its rack,
  Ghiasvand & Ciorba §II-E two-cluster K-Means) is an evidence line of the telemetry signal, not a
  separate source;
* severity: the telemetry verdict's severity (``low`` for a node named only by another source or only as
  a group member), raised one level for every further agreeing source, at most ``high``;
* group alerts (rack / job / architecture) stay one row each, with a line counting members that other
  sources also name.

No scores are combined numerically: the sources are calibrated differently (robust z, probability,
classifier confidence), so agreement counts and every source's own figure is quoted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("low", "medium", "high")
SOURCES = ("telemetry", "syslog", "predict", "finj")


@dataclass
class Signals:
    """What the other nightly steps left in ``ctx.shared`` (each part may be empty = source absent)."""

    syslog: dict[str, dict[str, Any]] = field(default_factory=dict)
    """node -> {"score": float, "vicinity": str, "window_end": iso str}"""
    predict: dict[str, dict[str, Any]] = field(default_factory=dict)
    """node -> {"lead_min": float, "confidence": float, "at": iso str}"""
    finj: dict[str, dict[str, Any]] = field(default_factory=dict)
    """node -> {"fault": str, "confidence": float}"""
    available: tuple[str, ...] = ("telemetry",)
    """sources that ran this night (a source that ran and names nobody is evidence of absence)"""


def raise_severity(base: str, steps: int) -> str:
    """``base`` raised ``steps`` levels along :data:`SEVERITIES`, capped at ``high``."""
    i = SEVERITIES.index(base) if base in SEVERITIES else 0
    return SEVERITIES[min(i + max(steps, 0), len(SEVERITIES) - 1)]


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _fmt(v: Any, spec: str = ".2f") -> str:
    f = _num(v)
    return "n/a" if f is None else format(f, spec)


def _hhmm(t: Any) -> str:
    s = str(t)
    return s[11:16] if len(s) >= 16 and s[10] in "T " else s


def fuse(verdict_rows: list[dict[str, Any]], sig: Signals) -> list[dict[str, Any]]:
    """Fused rows (module docstring): group rows first, then nodes by number of agreeing sources and severity.

    ``verdict_rows``: rows of the verdicts table (``kind``, ``subject``, ``severity``, ``score``,
    ``threshold``, ``first_time``, ``windows``, ``top_metrics``, ``suspected_group``, ``members``,
    ``vicinity_outlier``, ``rack``, ``architecture``). Each fused row has ``kind``, ``subject``,
    ``severity``, ``signals`` (agreeing sources), ``n_signals``, ``evidence`` (one line per source),
    ``telemetry_score``, ``threshold``, ``top_metrics``, ``suspected_group``, ``syslog_score``,
    ``lead_min``, ``fault``, ``fault_confidence``, ``members``, ``rack``, ``architecture``.
    """
    groups = [r for r in verdict_rows if r.get("kind") != "node"]
    node_rows = {str(r["subject"]): r for r in verdict_rows if r.get("kind") == "node"}
    member_of: dict[str, dict[str, Any]] = {}
    for g in groups:
        for m in g.get("members") or []:
            member_of.setdefault(str(m), g)
    named = set(node_rows) | set(sig.syslog) | set(sig.predict) | set(sig.finj)
    out_nodes: list[dict[str, Any]] = []
    for node in sorted(named):
        v, g = node_rows.get(node), member_of.get(node)
        lines: list[str] = []
        signals: list[str] = []
        base = "low"
        if v is not None:
            signals.append("telemetry")
            base = str(v.get("severity") or "low")
            tops = ", ".join(str(x) for x in (v.get("top_metrics") or []))
            lines.append(f"telemetry: score {_fmt(v.get('score'), '.1f')} / threshold {_fmt(v.get('threshold'), '.1f')} "
                         f"({base}), {v.get('windows', 0)} window(s) from {_hhmm(v.get('first_time'))} UTC, "
                         f"top metrics {tops or '-'}")
            if v.get("vicinity_outlier"):
                lines.append(f"vicinity: alone in the minority cluster of rack {v.get('rack', '')} (two-cluster K-Means)")
            if v.get("suspected_group"):
                lines.append(f"suspected group: {v['suspected_group']}")
        if g is not None:
            if "telemetry" not in signals:
                signals.append("telemetry")
            n_mem = len(g.get("members") or [])
            lines.append(f"member of the {g.get('kind')} alert {g.get('subject')} ({n_mem} nodes drift together)")
        s = sig.syslog.get(node)
        if s is not None:
            signals.append("syslog")
            lines.append(f"syslog: abnormal, score {_fmt(s.get('score'))} in vicinity {s.get('vicinity', '-')}, "
                         f"window ending {s.get('window_end', '-')}")
        p = sig.predict.get(node)
        if p is not None:
            signals.append("predict")
            lines.append(f"predict: failure warning, lead {_fmt(p.get('lead_min'), '.0f')} min, confidence "
                         f"{_fmt(p.get('confidence'))}, at {p.get('at', '-')}")
        f = sig.finj.get(node)
        if f is not None:
            signals.append("finj")
            lines.append(f"finj: fault class {f.get('fault', '-')} (confidence {_fmt(f.get('confidence'))})")
        silent = [x for x in sig.available if x not in signals]
        lines.append(f"agree: {', '.join(signals)} ({len(signals)} of {len(sig.available)} sources that ran"
                     + (f"; silent: {', '.join(silent)})" if silent else ")"))
        ref = v if v is not None else g
        out_nodes.append({
            "kind": "node", "subject": node, "severity": raise_severity(base, len(signals) - 1),
            "signals": signals, "n_signals": len(signals), "evidence": lines,
            "telemetry_score": _num(v.get("score")) if v is not None else None,
            "threshold": _num(v.get("threshold")) if v is not None else None,
            "top_metrics": [str(x) for x in (v.get("top_metrics") or [])] if v is not None else [],
            "suspected_group": str((v or {}).get("suspected_group") or (f"{g.get('kind')} {g.get('subject')}" if g else "")),
            "syslog_score": _num(s.get("score")) if s else None,
            "lead_min": _num(p.get("lead_min")) if p else None,
            "fault": str(f.get("fault", "")) if f else "", "fault_confidence": _num(f.get("confidence")) if f else None,
            "members": [node], "rack": str((ref or {}).get("rack", "") or ""),
            "architecture": str((ref or {}).get("architecture", "") or ""),
        })
    out_groups = []
    for g in groups:
        mem = [str(m) for m in g.get("members") or []]
        also = {src: sum(1 for m in mem if m in d) for src, d in (("syslog", sig.syslog), ("predict", sig.predict),
                                                                   ("finj", sig.finj))}
        tops = ", ".join(str(x) for x in (g.get("top_metrics") or []))
        lines = [f"telemetry: {g.get('kind')} {g.get('subject')} shifts against its peers, score {_fmt(g.get('score'), '.1f')} / "
                 f"threshold {_fmt(g.get('threshold'), '.1f')}, {g.get('windows', 0)} window(s) from "
                 f"{_hhmm(g.get('first_time'))} UTC, top metrics {tops or '-'}"]
        lines += [f"{src}: {n} of {len(mem)} members also named" for src, n in also.items() if src in sig.available]
        agree = ["telemetry"] + [src for src, n in also.items() if n * 2 >= len(mem) and mem]
        lines.append(f"agree: {', '.join(agree)} (a source agrees when it names at least half of the members)")
        out_groups.append({
            "kind": str(g.get("kind")), "subject": str(g.get("subject")),
            "severity": raise_severity(str(g.get("severity") or "low"), len(agree) - 1), "signals": agree,
            "n_signals": len(agree), "evidence": lines, "telemetry_score": _num(g.get("score")),
            "threshold": _num(g.get("threshold")), "top_metrics": [str(x) for x in (g.get("top_metrics") or [])],
            "suspected_group": f"{g.get('kind')} {g.get('subject')}", "syslog_score": None, "lead_min": None,
            "fault": "", "fault_confidence": None, "members": mem, "rack": str(g.get("rack", "") or ""),
            "architecture": str(g.get("architecture", "") or ""),
        })
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    out_nodes.sort(key=lambda r: (-r["n_signals"], -rank[r["severity"]], -(r["telemetry_score"] or 0.0), r["subject"]))
    return out_groups + out_nodes
