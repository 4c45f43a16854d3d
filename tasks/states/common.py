"""Shared basics of the SaNSA state build (Agarwal et al., "SaNSA", Sec. II-C): the user-facing error,
UTC day arithmetic and Arrow -> numpy helpers used by :mod:`nodewatch.tasks.states.classify`,
:mod:`nodewatch.tasks.states.derive`, :mod:`nodewatch.tasks.states.events`,
:mod:`nodewatch.tasks.states.cube` and the orchestrator :mod:`nodewatch.tasks.states.build`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.states.timeline import NS_PER_S

DAY_NS = 86400 * NS_PER_S
MIN_NS = 60 * NS_PER_S


class StatesError(ValueError):
    """A user-facing error of the state build (one line)."""


def _expand(expr: str) -> list[str] | None:
    from nodewatch.tasks.ingest.hostlist import HostlistError, expand_hostlist

    try:
        return expand_hostlist(expr.strip())
    except HostlistError:
        return None


def _ns(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Timestamps as int64 ns since epoch (nulls -> int64 min)."""
    a = pc.cast(arr, pa.timestamp("ns", tz="UTC"))
    return pc.fill_null(a.cast(pa.int64()), np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)


def _node_idx(names: pa.Array | pa.ChunkedArray, nodes: pa.Array) -> np.ndarray:
    """Index of each name in ``nodes`` (-1 if unknown)."""
    return pc.fill_null(pc.index_in(names, value_set=nodes), -1).to_numpy(zero_copy_only=False).astype(np.int64)


def day_range(start: date, end: date) -> list[str]:
    """ISO dates of the UTC days in ``[start, end)``."""
    if end <= start:
        raise StatesError(f"--end {end} must be after --start {start}")
    return [(start + timedelta(days=i)).isoformat() for i in range((end - start).days)]


def _day_ns(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()) * NS_PER_S
