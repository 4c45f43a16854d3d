"""Slurm drain plans from node verdicts: ``scontrol update NodeName=... State=DRAIN Reason="nodewatch: ..."``.

Only node verdicts (``kind == "node"``) at or above a confidence (:func:`nodewatch.tasks.alerts.source.confidence`)
are listed. Nothing is run unless the caller applies the plan and the ``[alerts.drain_policy]`` allows it
(:func:`apply_plan`): ``apply = true``, at most ``max_nodes`` nodes, each at least ``min_confidence``.
Commands run without a shell, one ``scontrol`` per node, so no verdict text can reach a shell.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import date
from typing import Any

from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.alerts.config import DrainPolicy
from nodewatch.tasks.alerts.source import confidence

_REASON_OK = re.compile(r"[^A-Za-z0-9 _.,:;()+/=@-]")
MAX_REASON = 120


class DrainRefused(ValueError):
    """``--apply`` is not allowed by the policy (one-line message saying why)."""


def reason(row: dict[str, Any], day: date, run_id: str | None) -> str:
    """The drain reason: ``nodewatch: <severity> anomaly <day> (<top metrics>) run <id>``, safe characters only."""
    tops = ",".join(str(t) for t in list(row.get("top_metrics") or [])[:2])
    text = f"nodewatch: {row.get('severity', '?')} anomaly {day.isoformat()} ({tops})" + (f" run {run_id}" if run_id else "")
    return _REASON_OK.sub("_", text)[:MAX_REASON]


def plan(rows: list[dict[str, Any]], day: date, run_id: str | None, min_confidence: float) -> list[dict[str, Any]]:
    """One entry per node verdict with confidence >= ``min_confidence`` (highest first): node, confidence, reason, argv, line."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if str(r.get("kind")) != "node":
            continue
        node = r.get("subject")
        if not is_valid_node_name(node):
            continue
        c = confidence(r)
        if c < min_confidence or (node in out and out[node]["confidence"] >= c):
            continue
        why = reason(r, day, run_id)
        argv = ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={why}"]
        out[str(node)] = {"node": str(node), "confidence": round(c, 3), "severity": str(r.get("severity")),
                          "reason": why, "argv": argv,
                          "line": f'scontrol update NodeName={node} State=DRAIN Reason="{why}"'}  # why: no quotes, no $
    return sorted(out.values(), key=lambda e: (-e["confidence"], e["node"]))


def check_policy(entries: list[dict[str, Any]], policy: DrainPolicy | None) -> None:
    """Raise :class:`DrainRefused` unless ``policy`` allows applying ``entries``."""
    if policy is None or not policy.apply:
        raise DrainRefused("--apply refused: no drain policy allows it (set [alerts.drain_policy] apply = true, "
                           "max_nodes, min_confidence); nothing was run")
    if len(entries) > policy.max_nodes:
        raise DrainRefused(f"--apply refused: the plan drains {len(entries)} nodes, the policy allows at most "
                           f"{policy.max_nodes}; nothing was run")
    low = [e["node"] for e in entries if e["confidence"] < policy.min_confidence]
    if low:
        raise DrainRefused(f"--apply refused: {len(low)} node(s) below the policy's min_confidence "
                           f"{policy.min_confidence} ({', '.join(low[:5])}); raise --min-confidence; nothing was run")
    exe = policy.scontrol
    if shutil.which(exe) is None:
        raise DrainRefused(f"--apply refused: {exe} not found (policy scontrol); nothing was run")


def apply_plan(entries: list[dict[str, Any]], policy: DrainPolicy | None, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Run the plan's ``scontrol`` commands (after :func:`check_policy`); one result per node (``ok``, ``output``)."""
    check_policy(entries, policy)
    assert policy is not None
    exe = shutil.which(policy.scontrol) or policy.scontrol
    results = []
    for e in entries:
        try:
            p = subprocess.run([exe, *e["argv"][1:]], capture_output=True, text=True, timeout=timeout_s, check=False)
            ok, out = p.returncode == 0, (p.stdout + p.stderr).strip()[:300]
        except (OSError, subprocess.TimeoutExpired) as err:
            ok, out = False, f"{type(err).__name__}: {err}"[:300]
        results.append({"node": e["node"], "ok": ok, "output": out})
    return results
