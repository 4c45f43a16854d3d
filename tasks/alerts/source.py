"""Which verdict rows to publish, and which nodewatch run produced them.

The fused verdicts of issue 15's ``fuse`` step (``ctx.shared["fuse"]["verdicts"]``: a path or a list of
row dicts) win; otherwise the plain verdicts table ``reports/<day>/verdicts.parquet`` written by the
nightly ``verdicts`` step (docs/alerts.md). Rows keep the columns of that table (``kind``, ``subject``,
``severity``, ``score``, ``threshold``, ``first_time``, ``last_time``, ``windows``, ``top_metrics``,
``suspected_group``, ``rack``, ``architecture``, ``members``, ...); a fused table may add ``evidence``
(list of lines) and ``confidence`` (0-1).
"""

from __future__ import annotations

import math
import os
from datetime import date
from typing import Any

import pandas as pd

from nodewatch.tasks.core.store import Store

VERDICTS = ("reports", "{day}", "verdicts.parquet")
KINDS = ("node", "rack", "architecture", "job", "arch")


class VerdictSourceError(ValueError):
    """The verdicts of a day cannot be read (one-line message)."""


def verdict_path(store: Store, day: date) -> str:
    """Store path of the plain verdicts table of ``day``."""
    return store.path("reports", day.isoformat(), "verdicts.parquet")


def _frame(df: pd.DataFrame, where: str) -> list[dict[str, Any]]:
    missing = {"kind", "subject", "severity"} - set(df.columns)
    if missing:
        raise VerdictSourceError(f"{where}: not a verdicts table (missing columns {', '.join(sorted(missing))})")
    return [_clean(r) for r in df.to_dict("records")]


def _clean(r: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in r.items():
        if hasattr(v, "tolist") and not isinstance(v, str):
            v = v.tolist()
        if isinstance(v, float) and math.isnan(v):
            v = None
        if v is pd.NaT:
            v = None
        out[k] = v
    return out


def read_rows(store: Store, day: date, fused: Any = None) -> tuple[list[dict[str, Any]], str]:
    """The verdict rows of ``day`` and where they came from.

    ``fused``: ``ctx.shared["fuse"]["verdicts"]`` when the fuse step ran (a store path / local path of a
    parquet table, or a list of row dicts); else the plain verdicts table of the day.
    A missing plain table is :class:`FileNotFoundError`; an unreadable one :class:`VerdictSourceError`.
    """
    if isinstance(fused, list):
        return [_clean(dict(r)) for r in fused], "fuse (rows)"
    if isinstance(fused, str) and fused:
        try:
            with store.fs.open(fused, "rb") as f:
                return _frame(pd.read_parquet(f), fused), f"fuse ({fused})"
        except FileNotFoundError:
            raise
        except Exception as e:  # noqa: BLE001 - a damaged table is a one-line error
            raise VerdictSourceError(f"{fused}: cannot read the fused verdicts: {type(e).__name__}: {e}") from None
    path = verdict_path(store, day)
    if not store.fs.exists(path):
        raise FileNotFoundError(f"no verdicts for {day.isoformat()} ({path}): run the nightly flow for that day first")
    try:
        with store.fs.open(path, "rb") as f:
            df = pd.read_parquet(f)
    except Exception as e:  # noqa: BLE001
        raise VerdictSourceError(f"{path}: cannot read the verdicts table: {type(e).__name__}: {str(e)[:200]}") from None
    return _frame(df, path), path


def producing_run(store: Store, day: date) -> str | None:
    """Id of the latest nightly/backfill run whose manifest names the verdicts of ``day`` as an output."""
    want = f"reports/{day.isoformat()}/verdicts.parquet"
    for run_id in sorted(store.list_runs(), reverse=True):
        try:
            m = store.read_json("runs", f"{run_id}.json")
        except Exception:  # noqa: BLE001,S112 - a damaged manifest is not ours to report here
            continue
        v = (m.get("outputs") or {}).get("verdicts") if isinstance(m, dict) else None
        if isinstance(v, dict) and str(v.get("verdicts", "")).endswith(want):
            return str(m.get("run_id", run_id))
    return None


def report_link(store: Store, day: date, base_url: str | None) -> str:
    """Link to the day's verdicts page: under ``base_url`` (``[alerts] report_base_url``), else under
    ``NODEWATCH_REPORTS_URL`` (the store view of ``nodewatch server start``, as the UI's artifact links), else its
    store URL."""
    rel = f"reports/{day.isoformat()}/verdicts.md"
    env = os.environ.get("NODEWATCH_REPORTS_URL", "").strip().rstrip("/")
    base_url = base_url or (env if env.startswith(("http://", "https://")) else None)
    if base_url:
        return f"{base_url}/{rel}"
    url = store.url_of("reports", day.isoformat(), "verdicts.md")
    return url if "://" in url else f"file://{url}"


def score_of(row: dict[str, Any]) -> float | None:
    """The verdict's alert score: ``score`` (verdicts table) or ``telemetry_score`` (fused table), ``None`` if neither."""
    for k in ("score", "telemetry_score"):
        v = row.get(k)
        if isinstance(v, int | float) and math.isfinite(v):
            return float(v)
    return None


def confidence(row: dict[str, Any]) -> float:
    """Confidence of a verdict in [0, 1]: the fused ``confidence`` if given, else ``1 - threshold / score``.

    With the verdicts' severities (low: score < 2 x threshold, medium < 4 x, high) this is < 0.5 for
    low, < 0.75 for medium and >= 0.75 for high.
    """
    c = row.get("confidence")
    if isinstance(c, int | float) and math.isfinite(c):
        return float(min(max(c, 0.0), 1.0))
    s, t = score_of(row), row.get("threshold")
    if not isinstance(s, int | float) or not isinstance(t, int | float) or not math.isfinite(s) or not math.isfinite(t) or s <= 0:
        return {"high": 0.75, "medium": 0.5, "low": 0.0}.get(str(row.get("severity")), 0.0)
    return float(min(max(1.0 - t / s, 0.0), 1.0))
