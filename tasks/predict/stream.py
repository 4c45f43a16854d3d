"""Follow a growing LDMS ``store_csv`` file and emit failure warnings as they are predicted.

The file is read with :func:`nodewatch.tasks.core.files.open_regular` (no symlink following) from the
last complete line on every poll; a partial last line waits for the next poll. The header
(``#Time,Time_usec,ProducerName,component_id,job_id,<metrics...>``) must name every metric of the
predictor. Rows with a bad field count, an invalid node name or an unparsable time are skipped and
counted (never a traceback). Every poll scores, per node that received rows, those rows together with
the 15 minutes before them (kept from the previous poll) with
:func:`nodewatch.tasks.predict.score.score_node` and yields warnings newer than the node's last one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from nodewatch.schemas.names import UnsafeNameError, check_node_name
from nodewatch.tasks.core.files import UnsafeInputError, open_regular
from nodewatch.tasks.predict.registry import LoadedPredictor
from nodewatch.tasks.predict.score import score_node, warnings_from_decisions

KEEP_S = 15 * 60
MAX_LINE = 1 << 20


class StreamError(ValueError):
    """A stream that cannot be followed (missing file, not LDMS CSV, metrics missing): one line."""


class LdmsFollower:
    """Incremental reader + scorer of one LDMS CSV file."""

    def __init__(self, path: str, pred: LoadedPredictor) -> None:
        self.path = path
        self.pred = pred
        self.metrics = list(pred.params["metrics"])
        self.step = int(pred.params["step_s"])
        self.offset = 0
        self.cols: dict[str, int] | None = None
        self.buf: dict[str, list[tuple[float, list[float]]]] = {}
        self.last_warn: dict[str, pd.Timestamp] = {}
        self.skipped: dict[str, int] = {"field_count": 0, "node_name": 0, "time": 0, "encoding": 0, "too_long": 0}

    def _read_new(self) -> list[str]:
        try:
            fd = open_regular(self.path)
        except UnsafeInputError as e:
            raise StreamError(str(e)) from None
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < self.offset:
                raise StreamError(f"{self.path}: the file shrank (truncated or replaced); restart the stream")
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) > MAX_LINE:
                raise StreamError(f"{self.path}: no line break in the first {MAX_LINE:,} bytes: not a CSV file")
            return []
        self.offset += end + 1
        out = []
        for raw in data[: end + 1].splitlines():
            if len(raw) > MAX_LINE:
                self.skipped["too_long"] += 1
                continue
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                self.skipped["encoding"] += 1
        return out

    def _header(self, line: str) -> None:
        names = [c.strip() for c in line.lstrip("#").split(",")]
        if len(names) < 3 or names[0] != "Time" or "ProducerName" not in names:
            raise StreamError(f"{self.path}: first line is not an LDMS store_csv header (#Time,...,ProducerName,...)")
        missing = [m for m in self.metrics if m not in names]
        if missing:
            raise StreamError(f"{self.path}: the header lacks the predictor's metrics {', '.join(missing)}")
        self.cols = {n: i for i, n in enumerate(names)}

    def _ingest(self, lines: list[str]) -> set[str]:
        touched: set[str] = set()
        for line in lines:
            if not line.strip():
                continue
            if self.cols is None:
                self._header(line)
                continue
            if line.startswith("#"):
                continue
            f = line.split(",")
            if len(f) != len(self.cols):
                self.skipped["field_count"] += 1
                continue
            node = f[self.cols["ProducerName"]].strip()
            try:
                check_node_name(node)
            except UnsafeNameError:
                self.skipped["node_name"] += 1
                continue
            try:
                t = float(f[self.cols["Time"]])
                if not np.isfinite(t) or t < 0 or t > 1e11:
                    raise ValueError
            except ValueError:
                self.skipped["time"] += 1
                continue
            vals = []
            for m in self.metrics:
                try:
                    vals.append(float(f[self.cols[m]]))
                except ValueError:
                    vals.append(float("nan"))
            self.buf.setdefault(node, []).append((t, vals))
            touched.add(node)
        return touched

    def poll(self) -> list[dict[str, Any]]:
        """Read what was appended since the last poll and return the new warnings."""
        touched = self._ingest(self._read_new())
        out = []
        for node in sorted(touched):
            b = self.buf[node]
            times = pd.to_datetime(np.array([x[0] for x in b]), unit="s", utc=True)
            vals = np.array([x[1] for x in b], dtype=float).T
            dec = score_node(self.pred, times, vals, cumulative=True)
            for w in warnings_from_decisions(node, dec, self.step):
                at = pd.Timestamp(w["at"])
                if node in self.last_warn and at <= self.last_warn[node] + pd.Timedelta(seconds=self.step):
                    self.last_warn[node] = max(self.last_warn[node], at)
                    continue
                self.last_warn[node] = at
                out.append(w)
            # keep the last KEEP_S seconds: the windows of the next poll's first anchors
            t_last = b[-1][0]
            self.buf[node] = [x for x in b if t_last - x[0] <= KEEP_S]
        return out

    def run(self, follow: bool = True, poll_s: float = 1.0, max_seconds: float | None = None) -> Iterator[dict[str, Any]]:
        """Yield warnings; without ``follow`` after one read of the whole file."""
        t0 = time.monotonic()
        while True:
            yield from self.poll()
            if not follow or (max_seconds is not None and time.monotonic() - t0 >= max_seconds):
                return
            time.sleep(poll_s)
