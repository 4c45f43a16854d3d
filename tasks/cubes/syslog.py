"""Syslog line counts per node, window and severity (Ghiasvand & Ciorba's syslog generation, SG).

The SG parameter of a node is "the number of Syslog entries received from a computing node during a
fixed time window (e.g. 30 minutes)" (Ghiasvand & Ciorba, §3). We count staged ``syslog`` rows per
node × 30-min window × severity, and the same per 1-min window for later node-state derivation.
Rows without severity are counted under ``unset`` (index 8) so that no line is lost.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.cubes import SEVERITY_NAMES, SEVERITY_UNSET, SYSLOG_FINE_STEP, SYSLOG_STEP
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.telemetry import DEFAULT_BATCH_ROWS, ScanReport, _lookup, staged_batches

N_SEV = len(SEVERITY_NAMES)


def count_lines(
    store: Store, files: list[str], day: date, nodes: dict[str, int], batch_rows: int = DEFAULT_BATCH_ROWS
) -> tuple[np.ndarray, np.ndarray, ScanReport]:
    """Counts of one day: ``(lines[node, 48, severity], lines_1min[node, 1440, severity], report)``."""
    fine = int(pd.Timedelta("1D") / SYSLOG_FINE_STEP)
    ratio = int(SYSLOG_STEP / SYSLOG_FINE_STEP)
    n = len(nodes)
    fine_counts = np.zeros(n * fine * N_SEV, np.int64)
    rep = ScanReport()
    day0 = pd.Timestamp(day, tz="UTC").value
    for path in files:
        for rb in staged_batches(store, path, ["time", "node", "severity"], ["node"], batch_rows):
            rep.rows_read += rb.num_rows
            t = rb.column("time").cast(pa.timestamp("ns", tz="UTC")).to_numpy(zero_copy_only=False).view(np.int64)
            ti = (t - day0) // SYSLOG_FINE_STEP.value
            sev_col = rb.column("severity")
            sev = sev_col.fill_null(SEVERITY_UNSET).to_numpy(zero_copy_only=False).astype(np.int64)
            ni = _lookup(rb.column("node"), nodes)
            ok_time = (ti >= 0) & (ti < fine) & (t != np.iinfo(np.int64).min)
            ok_sev = (sev >= 0) & (sev < N_SEV)
            rep.drop("time outside the day", (~ok_time).sum())
            rep.drop("severity out of range", (ok_time & ~ok_sev).sum())
            rep.drop("node not on the cube axis", (ok_time & ok_sev & (ni < 0)).sum())
            ok = ok_time & ok_sev & (ni >= 0)
            rep.rows_used += int(ok.sum())
            idx = (ni[ok] * fine + ti[ok]) * N_SEV + sev[ok]
            fine_counts += np.bincount(idx, minlength=len(fine_counts))
    fine_counts = fine_counts.reshape(n, fine, N_SEV)
    coarse = fine_counts.reshape(n, fine // ratio, ratio, N_SEV).sum(axis=2)
    if coarse.max(initial=0) > np.iinfo(np.int32).max:
        raise ValueError(f"more than 2**31 syslog lines in one window on {day}")
    return coarse.astype(np.int32), fine_counts.astype(np.int32), rep


def syslog_nodes(store: Store, files: list[str]) -> set[str]:
    """Distinct node names in staged syslog files."""
    out: set[str] = set()
    for path in files:
        for rb in staged_batches(store, path, ["node"], ["node"]):
            col = rb.column("node")
            if pa.types.is_dictionary(col.type):
                col = col.dictionary_decode()
            out.update(s for s in pc.unique(col).to_pylist() if s is not None)
    return out
