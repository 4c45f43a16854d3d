"""Where a (day, node batch) lives in a cube, and the chunk-alignment check of every region write.

A :class:`Region` is the unit of work and of idempotence: one UTC day × one node chunk. Its
:attr:`Region.key` is the cache key of the Prefect/Dask task that builds it and its slices are
the ``region=`` of the Zarr write. Because the time chunk is one day and the node chunk is fixed,
two regions never share a chunk: concurrent writers of different days cannot clobber each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import pandas as pd


@dataclass(frozen=True, order=True)
class Region:
    """One day × one node batch (the batch index counts node chunks from 0)."""

    day: date
    node_batch: int

    def __post_init__(self) -> None:
        if not isinstance(self.day, date) or isinstance(self.day, pd.Timestamp):
            raise TypeError(f"Region.day must be a datetime.date, got {type(self.day).__name__}")
        if self.node_batch < 0:
            raise ValueError(f"Region.node_batch must be >= 0, got {self.node_batch}")

    @property
    def key(self) -> str:
        """Stable cache key, e.g. ``2026-01-02/b0003``."""
        return f"{self.day.isoformat()}/b{self.node_batch:04d}"

    def node_slice(self, node_chunk: int, n_nodes: int) -> slice:
        """Node positions of this batch (the last batch may be shorter)."""
        start = self.node_batch * node_chunk
        if start >= n_nodes:
            raise ValueError(f"region {self.key}: node batch starts at {start} but the cube has {n_nodes} nodes")
        return slice(start, min(start + node_chunk, n_nodes))

    def time_slice(self, epoch: date, steps_per_day: int) -> slice:
        """Time positions of this day on an axis that starts at midnight of ``epoch``."""
        offset = (self.day - epoch).days
        if offset < 0:
            raise ValueError(f"region {self.key}: day is before the cube epoch {epoch.isoformat()}")
        return slice(offset * steps_per_day, (offset + 1) * steps_per_day)


def batches(n_nodes: int, node_chunk: int) -> range:
    """Indices of the node batches covering ``n_nodes`` nodes."""
    return range(-(-n_nodes // node_chunk))


def regions_of(days: list[date], n_nodes: int, node_chunk: int) -> list[Region]:
    """All regions of ``days`` × node batches, sorted."""
    return [Region(d, b) for d in sorted(days) for b in batches(n_nodes, node_chunk)]


def check_aligned(name: str, region: dict[str, slice], chunks: dict[str, int], shape: dict[str, int]) -> None:
    """Raise ``ValueError`` unless every slice of ``region`` starts on a chunk boundary and ends on one
    (or at the end of the axis).

    A misaligned write would read-modify-write a chunk shared with another region, which is not
    safe under concurrent writers and breaks byte-identical re-runs.
    """
    for dim, sl in region.items():
        c, n = chunks[dim], shape[dim]
        start, stop = sl.start or 0, n if sl.stop is None else sl.stop
        if not (0 <= start < stop <= n):
            raise ValueError(f"region {name} {dim}={start}:{stop} is outside the axis (0:{n}); chunks {chunks}")
        if start % c or (stop % c and stop != n):
            raise ValueError(f"region {name} {dim}={start}:{stop} is not aligned to chunks {chunks} (shape {shape})")
