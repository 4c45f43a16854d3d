"""Builders of staged-table rows (syslog, jobs, reservations) for the states tests."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

TS = pa.timestamp("ns", tz="UTC")


def syslog_table(rows: list[tuple[str, str, str, str]]) -> pa.Table:
    return pa.table(
        {
            "time": pa.array([pd.Timestamp(r[0]).value for r in rows], pa.int64()).cast(TS),
            "node": pa.array([r[1] for r in rows], pa.string()),
            "facility": pa.array([None] * len(rows), pa.int8()),
            "severity": pa.array([None] * len(rows), pa.int8()),
            "app": pa.array([r[2] for r in rows], pa.string()),
            "pid": pa.array([None] * len(rows), pa.int64()),
            "message": pa.array([r[3] for r in rows], pa.string()),
            "source_offset": pa.array(range(1, len(rows) + 1), pa.int64()),
        }
    )


def jobs_table(rows: list[tuple[str, str | None, str | None, str | None, list[str]]]) -> pa.Table:
    def ts(x):
        return pd.Timestamp(x).value if x else None

    return pa.table(
        {
            "job_id": pa.array([r[0] for r in rows], pa.string()),
            "step": pa.array([r[1] for r in rows], pa.string()),
            "start_time": pa.array([ts(r[2]) for r in rows], pa.int64()).cast(TS),
            "end_time": pa.array([ts(r[3]) for r in rows], pa.int64()).cast(TS),
            "node_list": pa.array([r[4] for r in rows], pa.list_(pa.string())),
            "state": pa.array(["COMPLETED"] * len(rows), pa.string()),
        }
    )


def resv_table(rows: list[tuple[str, str, str, list[str], str]]) -> pa.Table:
    return pa.table(
        {
            "name": pa.array([r[0] for r in rows], pa.string()),
            "start": pa.array([pd.Timestamp(r[1]).value for r in rows], pa.int64()).cast(TS),
            "end": pa.array([pd.Timestamp(r[2]).value for r in rows], pa.int64()).cast(TS),
            "node_list": pa.array([r[3] for r in rows], pa.list_(pa.string())),
            "flags": pa.array([[f for f in r[4].split(",") if f] for r in rows], pa.list_(pa.string())),
            "users": pa.array([["alice"]] * len(rows), pa.list_(pa.string())),
        }
    )
