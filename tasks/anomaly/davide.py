"""Real labelled telemetry: one D.A.V.I.D.E. node's power with injected misconfiguration periods.

``../shared/data/telemetry/davide/`` (PROVENANCE.md): ``davide19_bbb_*.csv`` (``time_stamp`` UTC,
``node_id``, ``power`` W, 5-min means) and ``anomaly_periods.csv`` (``start``, ``end``, ``label``, periods
``[start, end)`` in UTC). :func:`read_davide` parses both (files opened without following links, rows
that do not parse are counted, never raised; readings below :data:`DEAD_W` are the documented sensor
failure of 2018-04-03..06 and become missing); :func:`windows` aggregates to 15-min window statistics
(``mean``, ``min``, ``max``, ``std``, ``count``, arrays ``(1, time, 1)``) with a label per window: 1 when
any of its samples lies in an anomaly period.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nodewatch.tasks.core.files import open_regular

DEAD_W = 1.0
"""Power readings below this (the 864 rows reading ~0.155 W) are a dead sensor, not a power level."""
DATA_FILE = "davide19_bbb_20180303_000001_20180530_050001.csv"
PERIODS_FILE = "anomaly_periods.csv"


@dataclass
class Davide:
    """The parsed node: samples and labelled periods, with counts of what was dropped."""

    samples: pd.DataFrame
    """``time`` (UTC), ``power`` (W, NaN = dead sensor), ``label`` ('' normal, else the period's label)"""
    periods: pd.DataFrame
    """``start``, ``end``, ``label``"""
    bad_rows: int
    dead_rows: int


def _read_csv(path: Path, max_bytes: int = 64 << 20) -> pd.DataFrame:
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{path}: larger than {max_bytes} bytes, not the D.A.V.I.D.E. extract")
    return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, encoding="utf-8", encoding_errors="replace")


def read_davide(folder: str | os.PathLike[str]) -> Davide:
    """Parse the extract in ``folder`` (see the module docstring); a missing column is a one-line ``ValueError``."""
    d = Path(folder)
    raw = _read_csv(d / DATA_FILE)
    per = _read_csv(d / PERIODS_FILE)
    for name, df, cols in ((DATA_FILE, raw, ("time_stamp", "power")), (PERIODS_FILE, per, ("start", "end", "label"))):
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"{d / name}: missing column(s) {', '.join(missing)}")
    t = pd.to_datetime(raw["time_stamp"], format="%Y-%m-%d %H:%M:%S", errors="coerce", utc=True)
    p = pd.to_numeric(raw["power"], errors="coerce")
    ok = t.notna() & p.notna() & np.isfinite(p)
    s = pd.DataFrame({"time": t[ok], "power": p[ok].astype(float)}).drop_duplicates("time").sort_values("time")
    dead = s["power"] < DEAD_W
    s.loc[dead, "power"] = np.nan
    periods = pd.DataFrame({
        "start": pd.to_datetime(per["start"], format="%Y-%m-%d %H:%M:%S", errors="coerce", utc=True),
        "end": pd.to_datetime(per["end"], format="%Y-%m-%d %H:%M:%S", errors="coerce", utc=True),
        "label": per["label"].astype(str)}).dropna()
    lab = np.array([""] * len(s), dtype=object)
    for r in periods.itertuples():
        lab[((s["time"] >= r.start) & (s["time"] < r.end)).to_numpy()] = r.label
    s["label"] = lab
    return Davide(s.reset_index(drop=True), periods, int((~ok).sum()) + int(ok.sum() - len(s)), int(dead.sum()))


def windows(dv: Davide, step: str = "15min") -> dict[str, np.ndarray]:
    """15-min window statistics ``(1, time, 1)`` of the power, the window start times and labels (1 = any
    sample of the window inside an anomaly period)."""
    s = dv.samples.set_index("time")
    g = s["power"].resample(step)
    stats = {"mean": g.mean(), "min": g.min(), "max": g.max(), "std": g.std(ddof=0), "count": g.count()}
    lab = (s["label"] != "").astype(float).resample(step).max().reindex(stats["mean"].index).fillna(0.0) > 0
    out = {k: v.to_numpy(dtype=np.float64)[None, :, None] for k, v in stats.items()}
    out["times"] = stats["mean"].index.to_numpy()
    out["label"] = lab.to_numpy()
    return out
