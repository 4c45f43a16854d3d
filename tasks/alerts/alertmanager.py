"""Verdicts as Alertmanager alerts (API v2, ``POST /api/v2/alerts``), with resolve and idempotent re-push.

One verdict row is one alert. Labels (the alert's identity in Alertmanager):

* ``alertname``: ``NodewatchNodeAnomaly``, ``NodewatchRackAnomaly``, ``NodewatchArchitectureAnomaly``,
  ``NodewatchJobAnomaly`` (by the verdict's ``kind``);
* ``node`` (node verdicts), ``group`` (group verdicts: the rack / job / architecture named),
  ``rack``, ``architecture`` (when known), ``severity``, ``kind``, ``source="nodewatch"``;
* ``run_id``: the nodewatch run that *raised* the alert (its verdicts), so ``nodewatch runs show ID``
  and the alert meet. A verdict that persists night after night keeps the alert (and ``run_id``) of the
  night it was first raised: re-confirming it sends the same labels and ``startsAt``, which Alertmanager
  merges into the existing alert without a new notification; the annotations name the latest run.

Annotations: ``summary`` (one line), ``evidence`` (the lines behind the verdict), ``report`` (link to the
day's verdicts page), ``day``, ``confirmed_by`` (latest run id). ``startsAt`` is the verdict's first flagged
window; ``endsAt`` is push time + ``hold_hours``, so an alert that no later push re-confirms expires on
its own. An alert pushed before whose verdict is gone from the day's verdicts (or whose severity
changed, which makes it another alert) is resolved: the same labels and ``startsAt`` with ``endsAt`` = now.

What was pushed is remembered in the store (``alerts/alertmanager.json``, atomic writes) and updated
only after Alertmanager accepted the whole batch: a push that fails changes nothing and can be re-run.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pandas as pd

from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.alerts.config import AlertSettings
from nodewatch.tasks.core.escape import strip_control
from nodewatch.tasks.core.store import Store

STATE = ("alerts", "alertmanager.json")
MAX_LABEL = 256
MAX_ANNOTATION = 4000
_ALERTNAMES = {"node": "NodewatchNodeAnomaly", "rack": "NodewatchRackAnomaly", "architecture": "NodewatchArchitectureAnomaly",
               "arch": "NodewatchArchitectureAnomaly", "job": "NodewatchJobAnomaly"}


class AlertmanagerError(RuntimeError):
    """Alertmanager refused or could not be reached (one-line message naming the URL and the reason)."""


def _label(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return strip_control(" ".join(str(v).split()))[:MAX_LABEL]


def _iso(t: Any) -> str | None:
    if t is None:
        return None
    ts = pd.Timestamp(t)
    if pd.isna(ts):
        return None
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _num(v: Any, fmt: str = ".1f") -> str:
    return format(v, fmt) if isinstance(v, int | float) and v == v else "n/a"


def identity(labels: dict[str, str]) -> str:
    """Key of an alert across nights: its labels without ``run_id`` (sha256 of the sorted pairs)."""
    items = sorted((k, v) for k, v in labels.items() if k != "run_id")
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:24]


def evidence_lines(row: dict[str, Any]) -> list[str]:
    """The lines behind a verdict: the fused ``evidence`` lines when present, then the verdict's own numbers."""
    from nodewatch.tasks.alerts.source import score_of

    fused = [strip_control(x) for x in (row.get("evidence") or []) if str(x).strip()]
    lines = list(fused)
    score = score_of(row)
    if score is not None:
        when = ""
        if _iso(row.get("first_time")):
            when = (f", {row.get('windows') or 0} flagged window(s) {(_iso(row.get('first_time')) or '?')[11:16]}-"
                    f"{(_iso(row.get('last_time')) or _iso(row.get('first_time')) or '?')[11:16]} UTC")
        lines.append(f"score {score:.1f} vs calibrated threshold {_num(row.get('threshold'))} (robust z){when}")
    tops = list(row.get("top_metrics") or [])
    if tops:
        lines.append("top metrics: " + ", ".join(strip_control(t) for t in tops))
    own = f"{row.get('kind')} {row.get('subject')}"
    if row.get("suspected_group") and str(row["suspected_group"]) != own:
        lines.append(f"suspected group: {strip_control(row['suspected_group'])}")
    if row.get("vicinity_outlier") is True:
        lines.append("alone in the minority cluster of its rack (vicinity K-Means)")
    mp = row.get("model_peak")
    if isinstance(mp, int | float) and mp == mp:
        lines.append(f"own model (RUAD) peak anomaly probability {mp:.2f}")
    members = list(row.get("members") or [])
    if row.get("kind") != "node" and members:
        more = f" (+{len(members) - 20} more)" if len(members) > 20 else ""
        lines.append(f"{len(members)} member node(s): " + ", ".join(strip_control(m) for m in members[:20]) + more)
    if not fused:  # a fused table's evidence lines already name these
        for k in ("syslog", "fault", "prediction"):
            if row.get(k):
                lines.append(f"{k}: {strip_control(row[k])}")
    return lines


def to_alert(row: dict[str, Any], day: date, run_id: str, report: str, cfg: AlertSettings) -> dict[str, Any]:
    """One verdict row as an Alertmanager v2 alert (``endsAt`` filled in by :func:`plan`)."""
    from nodewatch.tasks.alerts.source import score_of

    kind = _label(row.get("kind") or "node").lower()
    subject = _label(row.get("subject"))
    if not subject:
        raise ValueError("verdict row without a subject")
    sev = _label(row.get("severity") or "low").lower()
    labels = {"alertname": _ALERTNAMES.get(kind, "NodewatchGroupAnomaly"), "kind": kind,
              "severity": cfg.severity_names.get(sev, sev), "run_id": _label(run_id), "source": "nodewatch"}  # type: ignore[call-overload]
    if kind == "node":
        if not is_valid_node_name(subject):
            raise ValueError(f"verdict names an invalid node {subject!r}")
        labels["node"] = subject
    else:
        labels["group"] = subject
    for k in ("rack", "architecture"):
        v = _label(row.get(k) or "")
        if v and v != "unknown":
            labels[k] = v
    if kind == "rack":
        labels["rack"] = subject
    labels.update({k: _label(v) for k, v in cfg.extra_labels.items()})
    what = f"{subject}" if kind == "node" else f"{kind} {subject} ({len(row.get('members') or [])} nodes)"
    tops = ", ".join(strip_control(t) for t in list(row.get("top_metrics") or [])[:3]) or "-"
    summary = f"{what}: {sev} {kind} anomaly on {day.isoformat()} (score {_num(score_of(row))}, top metrics {tops})"
    ann = {"summary": _label(summary), "evidence": "\n".join(evidence_lines(row))[:MAX_ANNOTATION],
           "report": report, "day": day.isoformat(), "confirmed_by": _label(run_id)}
    starts = _iso(row.get("first_time")) or _iso(pd.Timestamp(day.isoformat(), tz="UTC"))
    return {"labels": labels, "annotations": ann, "startsAt": starts, "generatorURL": report}


def load_state(store: Store) -> dict[str, Any]:
    """What earlier pushes sent: ``{"active": {identity: alert}}`` (empty when never pushed)."""
    if not store.exists(*STATE):
        return {"active": {}}
    try:
        st = store.read_json(*STATE)
    except (ValueError, OSError):
        return {"active": {}}  # a damaged state only costs resolves of alerts that expire by themselves
    return st if isinstance(st, dict) and isinstance(st.get("active"), dict) else {"active": {}}


def plan(rows: list[dict[str, Any]], day: date, run_id: str, report: str, cfg: AlertSettings, state: dict[str, Any],
         now: datetime | None = None) -> dict[str, Any]:
    """The alerts to send for the day's verdicts: firing (new or re-confirmed) and resolved.

    A verdict whose identity is active from an earlier push keeps that alert's ``run_id`` and ``startsAt``.
    Rows that cannot be an alert (invalid node name, no subject) are listed in ``rejected``.
    """
    now = now or datetime.now(UTC)
    ends = (now + timedelta(hours=cfg.hold_hours)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    active = dict(state.get("active", {}))
    firing: dict[str, dict[str, Any]] = {}
    rejected: list[str] = []
    for r in rows:
        try:
            a = to_alert(r, day, run_id, report, cfg)
        except ValueError as e:
            rejected.append(strip_control(str(e))[:200])
            continue
        key = identity(a["labels"])
        old = active.get(key)
        if old:
            a["labels"]["run_id"] = old["labels"]["run_id"]
            a["startsAt"] = old["startsAt"]
        elif key in firing:  # two rows of one identity (duplicates): keep the earliest start
            a["startsAt"] = min(a["startsAt"], firing[key]["startsAt"])
        a["startsAt"] = min(a["startsAt"], stamp)  # a verdict time ahead of this clock (skew) still fires now
        a["endsAt"] = ends
        firing[key] = a
    resolved = {k: {**a, "endsAt": max(stamp, a["startsAt"])} for k, a in active.items() if k not in firing}
    return {"firing": firing, "resolved": resolved, "rejected": rejected}


def post(url: str, alerts: list[dict[str, Any]], timeout_s: float) -> None:
    """``POST {url}/api/v2/alerts``; anything but 200 is :class:`AlertmanagerError`."""
    import httpx

    if not alerts:
        return
    try:
        r = httpx.post(f"{url}/api/v2/alerts", json=alerts, timeout=timeout_s)
    except httpx.HTTPError as e:
        raise AlertmanagerError(f"alertmanager {url}: {type(e).__name__}: {e}") from None
    if r.status_code != 200:
        raise AlertmanagerError(f"alertmanager {url} refused the alerts: HTTP {r.status_code} {strip_control(r.text)[:200]}")


def get_alerts(url: str, timeout_s: float = 10.0, **params: str) -> list[dict[str, Any]]:
    """``GET {url}/api/v2/alerts`` (e.g. ``filter='source="nodewatch"'``)."""
    import httpx

    try:
        r = httpx.get(f"{url}/api/v2/alerts", params=params, timeout=timeout_s)
        r.raise_for_status()
    except httpx.HTTPError as e:
        raise AlertmanagerError(f"alertmanager {url}: {type(e).__name__}: {e}") from None
    return list(r.json())


class OlderDayError(ValueError):
    """Pushing a day older than the last pushed one would resolve the newer day's alerts."""


def push(store: Store, day: date, rows: list[dict[str, Any]], run_id: str, cfg: AlertSettings, dry_run: bool = False,
         now: datetime | None = None, allow_older: bool = False) -> dict[str, Any]:
    """Send the day's verdicts to ``cfg.alertmanager_url`` (firing + resolved in one POST), then save the state.

    ``dry_run``: build the payload only (no URL needed, no state change). A day older than the last
    pushed one is :class:`OlderDayError` unless ``allow_older`` (its push resolves the newer alerts).
    """
    from nodewatch.tasks.alerts.source import report_link

    state = load_state(store)
    last = str(state.get("day") or "")
    if last and last > day.isoformat() and not allow_older and not dry_run:
        raise OlderDayError(f"the alerts of {last} were pushed already; pushing {day.isoformat()} would resolve them "
                            "(pass --allow-older to do it anyway)")
    p = plan(rows, day, run_id, report_link(store, day, cfg.report_base_url), cfg, state, now)
    payload = list(p["firing"].values()) + list(p["resolved"].values())
    out = {"day": day.isoformat(), "run_id": run_id, "firing": len(p["firing"]), "resolved": len(p["resolved"]),
           "rejected": p["rejected"], "payload": payload, "sent": False}
    if dry_run:
        return out
    if not cfg.alertmanager_url:
        raise AlertmanagerError("no Alertmanager configured: set [alerts] alertmanager_url (or pass --url)")
    post(cfg.alertmanager_url, payload, cfg.timeout_s)
    store.write_json({"active": p["firing"], "day": day.isoformat(), "run_id": run_id,
                      "pushed_at": datetime.now(UTC).isoformat(), "url": cfg.alertmanager_url}, *STATE)
    out["sent"] = True
    return out
