"""Fault classification on the product's own data: a campaign's telemetry as staged by ``nodewatch ingest
telemetry`` (the sampler's ``ldms/<node>.csv``, catalogue metric names, counters as ``_rate``), read back
from the store's ``staged/telemetry`` table.

A classifier trained this way (``nodewatch finj train --source staged``) uses only the catalogue metrics
(``schemas/metrics.py``) and no ``allocated`` metric (the nightly flow does not know the allocation per
second), so the nightly step can apply it to any node whose telemetry is staged at 1-s resolution.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from nodewatch.tasks.finj.dataset import CampaignError, Raw


def _read_node(store, node: str, dates: list[str]):
    """Committed staged telemetry rows of one node (the node filter is applied while reading each part)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = store.staged_files("telemetry", dates)
    if not files:
        return None
    parts = []
    for f in files:
        with store.fs.open(f, "rb") as fh:
            t = pq.read_table(fh, columns=["time", "node", "metric", "value"], filters=[("node", "=", node)])
        parts.append(
            t.cast(
                pa.schema(
                    [
                        ("time", t.schema.field("time").type),
                        ("node", pa.string()),
                        ("metric", pa.string()),
                        ("value", pa.float64()),
                    ]
                )
            )
        )
    return pa.concat_tables(parts)


def raw_from_staged(store, node: str, start_s: float, end_s: float, events: list[dict[str, str]] | None = None) -> Raw:
    """Staged telemetry of ``node`` in ``[start_s, end_s)`` (epoch s) on a 1-s grid (the previous sample repeats)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from nodewatch.schemas.names import check_node_name

    check_node_name(node)
    d0 = datetime.fromtimestamp(start_s, UTC).date()
    d1 = datetime.fromtimestamp(end_s, UTC).date()
    dates = [str(d) for d in np.arange(np.datetime64(d0), np.datetime64(d1) + 1)]
    tab = _read_node(store, node, dates)
    if tab is None:
        raise CampaignError(f"no staged telemetry for {', '.join(dates)}")
    secs = pc.cast(tab["time"], pa.int64()).to_numpy(zero_copy_only=False) // 1_000_000_000
    keep = (secs >= int(start_s)) & (secs < int(np.ceil(end_s)))
    if not keep.any():
        raise CampaignError(f"no staged telemetry of node {node} between {int(start_s)} and {int(end_s)}")
    secs = secs[keep]
    metric = tab["metric"].cast(pa.string()).to_numpy(zero_copy_only=False)[keep]
    value = tab["value"].to_numpy(zero_copy_only=False)[keep].astype(np.float64)
    names, col = np.unique(metric, return_inverse=True)
    t0 = int(secs.min())
    n = int(secs.max()) - t0 + 1
    grid = np.full((n, len(names)), np.nan)
    grid[secs - t0, col] = value
    missing = np.ones(n, bool)
    missing[secs - t0] = False
    median_gap = float(np.median(np.diff(np.unique(secs)))) if len(np.unique(secs)) > 1 else np.inf
    if median_gap > 5:
        raise CampaignError(f"node {node}: staged telemetry every {median_gap:.0f} s; fault classification needs ~1-s samples")
    # previous sample repeats; leading gaps take the first sample
    for j in range(grid.shape[1]):
        c = grid[:, j]
        ok = ~np.isnan(c)
        if not ok.any():
            grid[:, j] = 0.0
            continue
        idx = np.where(ok, np.arange(n), 0)
        np.maximum.accumulate(idx, out=idx)
        first = int(np.argmax(ok))
        idx[:first] = first
        grid[:, j] = c[idx]
    return Raw(t0, [str(x) for x in names], grid, events or [], 1, missing=missing)


def campaign_span(campaign: Path) -> tuple[str, float, float, list[dict[str, str]]]:
    """(node, start, end, events) of a finished campaign (``summary.json`` and ``events.csv``)."""
    import csv

    try:
        summary = json.loads((campaign / "summary.json").read_text())
        with open(campaign / "events.csv", newline="") as fh:
            events = list(csv.DictReader(fh))
        return str(summary["node"]), float(summary["started"]), float(summary["ended"]), events
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CampaignError(f"{campaign.name}: not a finished campaign (summary.json/events.csv: {type(e).__name__})") from None
