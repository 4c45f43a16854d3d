"""Nightly scores and verdicts as Prometheus metrics in the node_exporter textfile-collector format.

``<textfile_dir>/nodewatch.prom`` (written atomically: temporary file in the same directory, then
rename, by ``prometheus_client.write_to_textfile``) holds:

* ``nodewatch_node_anomaly_score{node,rack}``: the node's peak RUAD anomaly probability (0-1) of the day
  (``peak_score`` of the day's scoring summary), for every scored node;
* ``nodewatch_node_verdict{node,kind}``: 0 = no verdict, 1 low, 2 medium, 3 high: per node the severity of
  its node verdict (``kind="node"``, 0 for every scored or judged node without one) and of each group
  verdict naming it (``kind="rack"`` / ``"architecture"`` / ``"job"``, only for members);
* ``nodewatch_last_run_timestamp_seconds{flow}``: end time of the latest finished run of each flow
  (from the run manifests);
* ``nodewatch_rows_quarantined_total{table}``: rows quarantined by all ingest runs of the store
  (a counter: the sum over the ``ingest_*`` manifests).
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable, Iterator
from datetime import date, datetime
from typing import Any

from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.core.flow_names import canonical_flow
from nodewatch.tasks.core.store import Store

FILE = "nodewatch.prom"
SEVERITY_LEVEL = {"low": 1, "medium": 2, "high": 3}


class TextfileDirError(ValueError):
    """The textfile directory is missing, not a directory, or a symbolic link (one-line message)."""


def node_scores(store: Store, day: date) -> dict[str, float]:
    """Peak RUAD anomaly probability per scored node of ``day`` (empty when the day was not scored).

    The scoring module (it imports torch) is imported only when the day has daily score files."""
    if not store.exists("scores", "daily", f"date={day.isoformat()}"):
        return {}
    from nodewatch.tasks.anomaly.score import read_summary

    try:
        df = read_summary(store, day)
    except Exception:  # noqa: BLE001 - no scoring of the day: no score series
        return {}
    out: dict[str, float] = {}
    for n, s in zip(df["node"], df["peak_score"], strict=True):
        if is_valid_node_name(n) and s is not None and math.isfinite(float(s)):
            out[str(n)] = float(s)
    return out


def node_racks(store: Store) -> dict[str, str]:
    """Rack of each node from the latest ``topology`` snapshot (empty without one)."""
    try:
        t = store.read_staged("topology", columns=["node", "rack", "valid_from"])
    except Exception:  # noqa: BLE001
        try:
            t = store.read_staged("topology", columns=["node", "rack"])
        except Exception:  # noqa: BLE001
            return {}
    if t is None or not t.num_rows:
        return {}
    df = t.to_pandas()
    if "valid_from" in df.columns:
        df = df.sort_values("valid_from", kind="stable")
    return {str(n): str(r) for n, r in zip(df["node"], df["rack"], strict=True) if r is not None}


def verdict_levels(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """Severity level per (node, kind) of the verdict rows (the highest when several name a node)."""
    out: dict[tuple[str, str], int] = {}
    for r in rows:
        kind = str(r.get("kind") or "node")
        lvl = SEVERITY_LEVEL.get(str(r.get("severity")), 1)
        members = [r.get("subject")] if kind == "node" else list(r.get("members") or [])
        for n in members:
            if is_valid_node_name(n):
                out[(str(n), kind)] = max(out.get((str(n), kind), 0), lvl)
    return out


def run_stats(store: Store) -> tuple[dict[str, float], dict[str, int]]:
    """(latest end time per flow in Unix seconds, rows quarantined per table by ingest runs) from the manifests."""
    last: dict[str, float] = {}
    quarantined: dict[str, int] = {}
    for run_id in store.list_runs():
        try:
            m = store.read_json("runs", f"{run_id}.json")
            flow = canonical_flow(str(m["flow"]), m.get("parameters"))  # an old "ingest" manifest: ingest_<source>
        except Exception:  # noqa: BLE001,S112 - an unreadable manifest is reported by `nodewatch runs`
            continue
        fin = m.get("finished")
        if fin and m.get("status") in ("completed", "partial"):
            try:
                ts = datetime.fromisoformat(str(fin).replace("Z", "+00:00")).timestamp()
                last[flow] = max(last.get(flow, 0.0), ts)
            except ValueError:
                pass
        if flow.startswith("ingest"):
            for table, c in (m.get("counts") or {}).items():
                q = c.get("quarantined") if isinstance(c, dict) else None
                if isinstance(q, int) and q >= 0:
                    quarantined[str(table)] = quarantined.get(str(table), 0) + q
    return last, quarantined


class _Collector:
    def __init__(self, fams: list[Any]) -> None:
        self.fams = fams

    def collect(self) -> Iterator[Any]:
        yield from self.fams


def build_registry(scores: dict[str, float], racks: dict[str, str], levels: dict[tuple[str, str], int],
                   last_runs: dict[str, float], quarantined: dict[str, int]) -> Any:
    """A ``prometheus_client`` registry holding the four metric families."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    score = GaugeMetricFamily("nodewatch_node_anomaly_score", "Peak anomaly probability of the node on the last scored day "
                              "(RUAD, 0-1)", labels=["node", "rack"])
    for n in sorted(scores):
        score.add_metric([n, racks.get(n, "")], scores[n])
    verdict = GaugeMetricFamily("nodewatch_node_verdict", "Verdict severity naming the node on the last judged day "
                                "(0 none, 1 low, 2 medium, 3 high) by verdict kind", labels=["node", "kind"])
    nodes = set(scores) | {n for n, _ in levels}
    for n in sorted(nodes):
        verdict.add_metric([n, "node"], float(levels.get((n, "node"), 0)))
    for (n, k), v in sorted(levels.items()):
        if k != "node":
            verdict.add_metric([n, k], float(v))
    last = GaugeMetricFamily("nodewatch_last_run_timestamp_seconds", "End time of the latest finished run of the flow",
                             labels=["flow"])
    for f in sorted(last_runs):
        last.add_metric([f], last_runs[f])
    quar = CounterMetricFamily("nodewatch_rows_quarantined", "Rows quarantined by ingest runs of the store", labels=["table"])
    for t in sorted(quarantined):
        quar.add_metric([t], float(quarantined[t]))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector([score, verdict, last, quar]))  # type: ignore[arg-type]
    return reg


def check_dir(path: str) -> str:
    """``path`` as an existing real directory (not a symbolic link), else :class:`TextfileDirError`."""
    p = os.path.abspath(path)
    try:
        st = os.lstat(p)
    except OSError as e:
        raise TextfileDirError(f"textfile directory {p}: {e.strerror}; create it (the one node_exporter's "
                               "--collector.textfile.directory reads)") from None
    if stat.S_ISLNK(st.st_mode):
        raise TextfileDirError(f"textfile directory {p} is a symbolic link: give the real directory")
    if not stat.S_ISDIR(st.st_mode):
        raise TextfileDirError(f"textfile directory {p} is not a directory")
    return p


def write_metrics(store: Store, day: date | None, rows: list[dict[str, Any]], directory: str) -> dict[str, Any]:
    """Write ``<directory>/nodewatch.prom`` atomically for ``day`` (scores, verdict ``rows``) and the store's runs."""
    from prometheus_client import write_to_textfile

    d = check_dir(directory)
    scores = node_scores(store, day) if day else {}
    levels = verdict_levels(rows)
    racks = node_racks(store)
    for r in rows:  # verdict rows know the rack too
        if r.get("kind") == "node" and r.get("rack") and str(r.get("subject")) not in racks:
            racks[str(r["subject"])] = str(r["rack"])
    last, quar = run_stats(store)
    path = os.path.join(d, FILE)
    write_to_textfile(path, build_registry(scores, racks, levels, last, quar))
    return {"path": path, "scored_nodes": len(scores), "verdict_series": len(levels), "flows": len(last),
            "quarantine_tables": len(quar)}
