"""Anomaly labels for training/evaluation: labelled-interval tables -> ``y[node, time]`` on the cube grid.

Input: one parquet file or a directory of parquet files (e.g. the simulator's
``truth/anomalies/date=*/part.parquet``) with columns ``node, start, end`` (``type`` and
``event_id`` optional; rows with the same ``event_id`` are one interval listed on several days).
Bad rows are never silently lost: each is returned with its file, row and reason in
:attr:`LabelReport.rejected`; a file that cannot be read at all is a one-line :class:`LabelError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from nodewatch.models.anomaly.labels import labels_from_intervals
from nodewatch.schemas.names import is_valid_node_name


class LabelError(ValueError):
    """A labels file that cannot be used (missing, unreadable, wrong columns)."""


@dataclass
class LabelReport:
    """What happened to the label rows: used, outside the nodes/period, rejected with reasons."""

    files: list[str] = field(default_factory=list)
    rows: int = 0
    duplicates: int = 0
    used: int = 0
    unknown_node: int = 0
    outside_period: int = 0
    rejected: list[dict[str, object]] = field(default_factory=list)


def _files(path: str | Path) -> list[Path]:
    p = Path(path)
    if p.is_dir():
        files = sorted(p.rglob("*.parquet"))
        if not files:
            raise LabelError(f"{p}: no parquet files below this directory")
        return files
    if not p.exists():
        raise LabelError(f"{p}: labels file not found")
    return [p]


def read_intervals(path: str | Path, report: LabelReport | None = None) -> pd.DataFrame:
    """Read and check the interval table(s): columns ``node, start (UTC), end (UTC), type``."""
    report = report if report is not None else LabelReport()
    frames = []
    for f in _files(path):
        try:
            t = pq.read_table(f)
        except Exception as e:  # noqa: BLE001 - any reader error becomes one line naming the file
            raise LabelError(f"{f}: not a readable parquet file ({type(e).__name__}: {str(e)[:120]})") from None
        missing = {"node", "start", "end"} - set(t.column_names)
        if missing:
            raise LabelError(f"{f}: missing column(s) {sorted(missing)}; expected node, start, end[, type]")
        df = t.to_pandas()
        df["_file"], df["_row"] = str(f), np.arange(len(df))
        report.files.append(str(f))
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    report.rows = len(df)
    if "event_id" in df.columns:
        dup = df.duplicated(subset=["event_id", "node"], keep="first")
        report.duplicates = int(dup.sum())
        df = df[~dup]
    else:
        dup = df.duplicated(subset=["node", "start", "end"], keep="first")
        report.duplicates = int(dup.sum())
        df = df[~dup]
    start = pd.to_datetime(df["start"], utc=True, errors="coerce")
    end = pd.to_datetime(df["end"], utc=True, errors="coerce")
    node_ok = df["node"].map(is_valid_node_name).astype(bool)
    reasons = np.where(~node_ok, "invalid node name",
                       np.where(start.isna() | end.isna(), "unparseable start/end",
                                np.where(end < start, "end before start", "")))
    for i in np.flatnonzero(reasons != ""):
        r = df.iloc[i]
        report.rejected.append({"file": r["_file"], "row": int(r["_row"]), "node": str(r["node"])[:80], "reason": reasons[i]})
    keep = reasons == ""
    out = pd.DataFrame({
        "node": df["node"][keep].astype(str).to_numpy(),
        "start": start[keep].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("datetime64[ns]"),
        "end": end[keep].dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("datetime64[ns]"),
        "type": (df["type"][keep].astype(str).to_numpy() if "type" in df.columns else np.full(int(keep.sum()), "")),
    })
    return out


def label_grid(intervals: pd.DataFrame, nodes: list[str], times: np.ndarray, step: np.timedelta64,
               report: LabelReport | None = None) -> np.ndarray:
    """``y[node, time]`` for the cube grid (RUAD Section 3.1 *node anomaly*), counting unused rows in ``report``."""
    report = report if report is not None else LabelReport()
    pos = {n: i for i, n in enumerate(nodes)}
    known = intervals["node"].isin(pos)
    report.unknown_node += int((~known).sum())
    iv = intervals[known]
    times = np.asarray(times, dtype="datetime64[ns]")
    if len(times):
        inside = (iv["end"].to_numpy() > times[0]) & (iv["start"].to_numpy() < times[-1] + step)
    else:
        inside = np.zeros(len(iv), bool)
    report.outside_period += int((~inside).sum())
    iv = iv[inside]
    report.used += len(iv)
    return labels_from_intervals(iv["node"].map(pos).to_numpy(), iv["start"].to_numpy(), iv["end"].to_numpy(),
                                 len(nodes), times, step)
