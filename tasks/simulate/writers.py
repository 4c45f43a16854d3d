"""Writers for the real formats: long parquet (ExaMon-like), LDMS CSV, sacct -P, SWF, Nagios log, CSVs.

Every writer writes to a temporary name and renames, so a crashed run never leaves a half file.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from nodewatch.tasks.simulate.metrics import COUNTERS, METRIC_NAMES, METRICS

METRIC_UNITS = {m.name: m.unit for m in METRICS}

TELEMETRY_SCHEMA = pa.schema([
    pa.field("timestamp", pa.timestamp("ns", tz="UTC"), nullable=False),
    pa.field("node", pa.string(), nullable=False),
    pa.field("metric", pa.string(), nullable=False),
    pa.field("value", pa.float64(), nullable=False),
])


def _atomic(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` atomically."""
    tmp = _atomic(path)
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_long_parquet(path: Path, names: list[str], epoch_s: int, times_s: np.ndarray, values: np.ndarray,
                       present: np.ndarray) -> int:
    """Long-format telemetry (one row per timestamp x node x metric), ordered by node, metric, time.

    ``values`` is (B, M, T), ``present`` (B, T). Returns the number of rows written.
    """
    B, M, T = values.shape
    mask = np.broadcast_to(present[:, None, :], (B, M, T)).ravel()
    ts_ns = (epoch_s + times_s).astype(np.int64) * 1_000_000_000
    ts = np.broadcast_to(ts_ns[None, None, :], (B, M, T)).ravel()[mask]
    node_idx = np.broadcast_to(np.arange(B, dtype=np.int32)[:, None, None], (B, M, T)).ravel()[mask]
    met_idx = np.broadcast_to(np.arange(M, dtype=np.int32)[None, :, None], (B, M, T)).ravel()[mask]
    node = pa.DictionaryArray.from_arrays(pa.array(node_idx), pa.array(names, pa.string()))
    metric = pa.DictionaryArray.from_arrays(pa.array(met_idx), pa.array(list(METRIC_NAMES), pa.string()))
    tbl = pa.table([pa.array(ts, pa.timestamp("ns", tz="UTC")), node, metric, pa.array(values.ravel()[mask])],
                   names=TELEMETRY_SCHEMA.names)
    tmp = _atomic(path)
    # store_schema=False: readers see plain `string` columns (dictionary encoding stays a storage detail)
    # statistics only where readers prune on them (value statistics cost ~half the write time)
    pq.write_table(tbl, tmp, compression="zstd", compression_level=1, store_schema=False, use_dictionary=["node", "metric"],
                   write_statistics=["timestamp", "node", "metric"], column_encoding={"timestamp": "DELTA_BINARY_PACKED"},
                   version="2.6")
    os.replace(tmp, path)
    return int(mask.sum())


def write_ldms_csv(path: Path, names: list[str], comp_ids: np.ndarray, epoch_s: int, times_s: np.ndarray,
                   values: np.ndarray, present: np.ndarray, jobid: np.ndarray, usec: np.ndarray) -> int:
    """LDMS store_csv style: ``#Time,Time_usec,ProducerName,component_id,job_id,<metrics...>``, rows by time.

    ``Time`` is epoch seconds with the fractional part LDMS prints (``1767225600.001234``); ``Time_usec``
    repeats the microseconds. Counters are written as integers, gauges with 6 decimals.
    """
    B, M, T = values.shape
    ti, bi = np.nonzero(present.T)  # time-major order
    us = usec[bi, ti]
    order = np.lexsort((us, ti))  # rows in arrival order: by sample time, then by microsecond jitter
    ti, bi, us = ti[order], bi[order], us[order]
    sec = (epoch_s + times_s[ti]).astype(np.int64)
    time_str = pa.compute.binary_join_element_wise(
        pa.array(sec).cast(pa.string()), pa.compute.utf8_lpad(pa.array(us).cast(pa.string()), 6, "0"), ".")
    cols = [time_str, pa.array(us), pa.array(np.asarray(names, dtype=object)[bi], pa.string()),
            pa.array(comp_ids[bi]), pa.array(jobid[bi, ti])]
    counter_set = set(COUNTERS)
    for m, name in enumerate(METRIC_NAMES):
        v = values[bi, m, ti]
        as_int = name in counter_set or METRIC_UNITS[name] == "By"
        cols.append(pa.array(v.astype(np.int64)) if as_int else pa.array(np.round(v, 6)))
    header = ["#Time", "Time_usec", "ProducerName", "component_id", "job_id", *METRIC_NAMES]
    tbl = pa.table(cols, names=header)
    tmp = _atomic(path)
    with open(tmp, "wb") as f:
        f.write((",".join(header) + "\n").encode())
        pacsv.write_csv(tbl, f, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    os.replace(tmp, path)
    return len(ti)


def iso(epoch_s: int, t: float) -> str:
    """Slurm timestamp ``YYYY-MM-DDTHH:MM:SS`` (UTC)."""
    return datetime.fromtimestamp(epoch_s + int(t), tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def slurm_duration(sec: float) -> str:
    """Slurm elapsed/timelimit format ``[D-]HH:MM:SS``."""
    s = int(round(sec))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"
