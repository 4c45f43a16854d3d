"""Synthetic staged telemetry/syslog/topology with the staged schemas (tests, benchmark, demos).

Values are generated vectorised with numpy, one time slice at a time, and streamed to parquet with
a ``ParquetWriter`` (bounded memory for any size), then renamed into place like ``Store`` does.
Every generator takes a seed, so a benchmark or test run is reproducible.
"""

from __future__ import annotations

import uuid
from datetime import date

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from nodewatch.tasks.core.store import Store

TELEMETRY_SCHEMA = pa.schema(
    [
        ("time", pa.timestamp("ns", tz="UTC")),
        ("node", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("source_offset", pa.int64()),
    ]
)
SYSLOG_SCHEMA = pa.schema(
    [
        ("time", pa.timestamp("ns", tz="UTC")),
        ("node", pa.string()),
        ("facility", pa.int8()),
        ("severity", pa.int8()),
        ("app", pa.string()),
        ("pid", pa.int64()),
        ("message", pa.string()),
        ("source_offset", pa.int64()),
    ]
)


def node_names(n: int, prefix: str = "cn") -> list[str]:
    """``cn0000``, ``cn0001``, ... (valid node names)."""
    return [f"{prefix}{i:04d}" for i in range(n)]


def _publish(store: Store, key: str) -> None:
    """Publish a staged part written outside ``Store.write_parquet`` (the staged-table commit protocol, if any)."""
    try:
        from nodewatch.tasks.core.commit import commit_part
    except ImportError:  # a store layer without per-run commits shows every part at once
        return
    commit_part(store, key)


def _open_writer(store: Store, key: str, schema: pa.Schema) -> tuple[str, str, pq.ParquetWriter, object]:
    final = store.path(key)
    store.fs.makedirs(final.rpartition("/")[0], exist_ok=True)
    tmp = f"{final.rpartition('/')[0]}/.tmp-{uuid.uuid4().hex}-{final.rpartition('/')[2]}"
    f = store.fs.open(tmp, "wb")
    return final, tmp, pq.ParquetWriter(f, schema, compression="zstd"), f


def write_telemetry_day(
    store: Store,
    day: date,
    nodes: list[str],
    metrics: list[str],
    freq: str = "1min",
    seed: int = 0,
    run_id: str = "synth",
    slice_minutes: int = 60,
    drop_frac: float = 0.0,
) -> int:
    """Stage one day of long-format telemetry (time-major, like a collector) and return its row count.

    Each (node, metric) series is ``base + amplitude * sin(2πt/day) + noise`` rounded to 0.01;
    ``drop_frac`` removes that fraction of rows at random (gaps).
    """
    n_n, n_m = len(nodes), len(metrics)
    levels = np.random.default_rng(seed)  # per (node, metric) level and daily amplitude: the same every day
    base = levels.uniform(10, 500, (n_n, n_m))
    amp = levels.uniform(0, 50, (n_n, n_m))
    rng = np.random.default_rng([seed, day.toordinal()])
    step = pd.Timedelta(freq)
    per_slice = int(pd.Timedelta(minutes=slice_minutes) / step)
    steps = int(pd.Timedelta("1D") / step)
    day0 = pd.Timestamp(day, tz="UTC").value
    node_arr = pa.array(nodes, pa.string())
    metric_arr = pa.array(metrics, pa.string())
    key = store.staged_key("telemetry", day.isoformat(), run_id)
    final, tmp, writer, f = _open_writer(store, key, TELEMETRY_SCHEMA)
    rows = 0
    try:
        for s0 in range(0, steps, per_slice):
            k = min(per_slice, steps - s0)
            ti = np.arange(s0, s0 + k)
            phase = np.sin(2 * np.pi * ti / steps)
            val = base[None] + amp[None] * phase[:, None, None] + rng.normal(0, 2.0, (k, n_n, n_m))
            val = np.round(val, 2).ravel()
            t = np.repeat(day0 + ti * step.value, n_n * n_m)
            ni = np.tile(np.repeat(np.arange(n_n, dtype=np.int32), n_m), k)
            mi = np.tile(np.arange(n_m, dtype=np.int32), k * n_n)
            if drop_frac > 0:
                keep = rng.random(len(val)) >= drop_frac
                t, ni, mi, val = t[keep], ni[keep], mi[keep], val[keep]
            tbl = pa.table(
                {
                    "time": pa.array(t, pa.timestamp("ns", tz="UTC")),
                    "node": node_arr.take(pa.array(ni)),
                    "metric": metric_arr.take(pa.array(mi)),
                    "value": val,
                    "source_offset": np.arange(rows, rows + len(val), dtype=np.int64),
                },
                schema=TELEMETRY_SCHEMA,
            )
            writer.write_table(tbl, row_group_size=1 << 22)
            rows += len(val)
    finally:
        writer.close()
        f.close()
    store.fs.mv(tmp, final)
    _publish(store, key)
    return rows


def write_topology(store: Store, nodes: list[str], per_rack: int = 16, run_id: str = "synth") -> None:
    """Stage a topology table: ``per_rack`` nodes per rack, 8 racks per row."""
    idx = np.arange(len(nodes))
    tbl = pa.table(
        {
            "node": nodes,
            "rack": [f"r{i // per_rack:03d}" for i in idx],
            "row": [f"row{i // (per_rack * 8)}" for i in idx],
            "chassis": [f"c{i // 4:04d}" for i in idx],
            "position": (idx % per_rack).astype(np.int16),
            "architecture": ["x86_64"] * len(nodes),
        }
    )
    store.write_parquet(tbl, store.staged_key("topology", "1970-01-01", run_id))


def syslog_table(times: list[str], nodes: list[str], severities: list[int | None], offset: int = 0) -> pa.Table:
    """A staged-schema syslog table from explicit rows (for tests)."""
    n = len(times)
    return pa.table(
        {
            "time": pa.array(pd.to_datetime(times, utc=True, format="ISO8601").as_unit("ns").asi8, pa.timestamp("ns", tz="UTC")),
            "node": nodes,
            "facility": pa.array([1] * n, pa.int8()),
            "severity": pa.array(severities, pa.int8()),
            "app": ["kernel"] * n,
            "pid": pa.array([None] * n, pa.int64()),
            "message": ["synthetic line"] * n,
            "source_offset": np.arange(offset, offset + n, dtype=np.int64),
        },
        schema=SYSLOG_SCHEMA,
    )


def telemetry_table(times: list[str], nodes: list[str], metrics: list[str], values: list[float], offset: int = 0) -> pa.Table:
    """A staged-schema telemetry table from explicit rows (for tests)."""
    return pa.table(
        {
            "time": pa.array(pd.to_datetime(times, utc=True, format="ISO8601").as_unit("ns").asi8, pa.timestamp("ns", tz="UTC")),
            "node": nodes,
            "metric": metrics,
            "value": pa.array(values, pa.float64()),
            "source_offset": np.arange(offset, offset + len(values), dtype=np.int64),
        },
        schema=TELEMETRY_SCHEMA,
    )
