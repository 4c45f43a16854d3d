"""Counter -> per-second rate conversion with reset handling, vectorised with numpy/pyarrow.

Counters (bytes, packets, errors, I/O operations; ``kind="counter"`` in ``schemas/metrics.py``)
are monotonically increasing totals. The staged telemetry table holds their per-second rate
under ``<name>_rate``. For consecutive samples ``(t0, v0)``, ``(t1, v1)`` of one series
(node, metric), sorted by time:

* ``rate = (v1 - v0) / (t1 - t0)`` in units per second (status :data:`OK`);
* the **first** sample of a series has no predecessor, so no rate (:data:`FIRST`, rate NaN);
* a **reset** (``v1 < v0``: reboot, driver reload, 32/64-bit wrap) is taken as "the counter
  restarted from 0 at ``t0``", so ``rate = v1 / (t1 - t0)`` (:data:`RESET`; the convention of
  Prometheus ``rate()``). With ``on_reset="nan"`` the rate is NaN instead;
* a repeated sample (same time, same value, i.e. a duplicated input row) gets the same rate and
  status as the sample it repeats, so the ingest pipeline can count it as a duplicate;
* the same time with a *different* value is a conflict (:data:`CONFLICT`, rate NaN);
* NaN/inf input values are skipped (:data:`NONFINITE`, rate NaN) and do not break the series:
  the next finite sample is differenced against the last finite one.

Where it happens: in the parsers (``tasks/ingest/telemetry.py``), not in the generic pipeline,
because a rate needs the previous sample of the series, which the parser sees in order. State is
carried across the batches of one file (:class:`CounterState`) and, through the store, across
files and runs (:class:`CounterCarry`): the ingest pipeline seeds each file with the last sample of
every series staged by *earlier runs* (``state/counters/<source>.parquet``) and saves the newest
sample per series when the run finishes. So the first sample of a day's file is differenced against
the last sample of the previous day's file. A seed sample is used only when it is at most
``max_gap`` (1 h) older than the file's first counter sample (a much older seed, e.g. when
backfilling an old day, would give a rate averaged over days), and files of the same run are
seeded from earlier runs only (the outcome does not depend on the order of files in a run). Where no
seed applies, the first sample of a series has no rate and is rejected with a reason (never dropped
silently). Rows whose rate is NaN are handed back to the caller with their status so it can reject
them with :func:`status_reason`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

OK = 0
FIRST = 1
RESET = 2
CONFLICT = 3
NONFINITE = 4

_REASONS = {
    FIRST: "first sample of the counter series in this file, no rate",
    RESET: "counter reset (value decreased), rate taken from 0",
    CONFLICT: "two different counter values at the same time",
    NONFINITE: "counter value is NaN or infinite",
}


def status_reason(status: int) -> str:
    """Human reason for a non-OK status code."""
    return _REASONS[int(status)]


def counter_rates(
    series: np.ndarray,
    time_ns: np.ndarray,
    value: np.ndarray,
    on_reset: Literal["zero", "nan"] = "zero",
    preset: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-second rates of counter samples, in the input order.

    Args:
        series: integer series id per sample (e.g. dictionary index of node+metric).
        time_ns: sample times as int64 nanoseconds.
        value: counter values (float64).
        on_reset: ``"zero"`` (rate from 0 after a reset) or ``"nan"``.
        preset: optional ``(rate, status)`` for the first ``len(rate)`` samples, used instead of the
            computed values (samples carried over from an earlier batch whose rate is already known).

    Returns:
        ``(rate, status)``: float64 rates (NaN where undefined) and int8 status codes
        (:data:`OK`, :data:`FIRST`, :data:`RESET`, :data:`CONFLICT`, :data:`NONFINITE`).
    """
    rate, status, _ = _rates_sorted(series, time_ns, value, on_reset, preset)
    return rate, status


def _rates_sorted(
    series: np.ndarray,
    time_ns: np.ndarray,
    value: np.ndarray,
    on_reset: Literal["zero", "nan"] = "zero",
    preset: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`counter_rates` plus the indices of the finite samples sorted by (series, time)."""
    series = np.asarray(series)
    time_ns = np.asarray(time_ns, dtype=np.int64)
    value = np.asarray(value, dtype=np.float64)
    n = len(value)
    rate = np.full(n, np.nan)
    status = np.full(n, NONFINITE, dtype=np.int8)
    finite = np.isfinite(value)
    idx = np.flatnonzero(finite)
    if idx.size == 0:
        return rate, status, idx
    # sort the finite samples by (series, time); stable so repeated rows keep their order
    order = idx[np.lexsort((time_ns[idx], series[idx]))]
    s, t, v = series[order], time_ns[order], value[order]
    r = np.full(order.size, np.nan)
    st = np.full(order.size, FIRST, dtype=np.int8)
    same = np.zeros(order.size, dtype=bool)
    same[1:] = s[1:] == s[:-1]
    dt = np.zeros(order.size, dtype=np.int64)
    dt[1:] = t[1:] - t[:-1]
    dv = np.zeros(order.size)
    dv[1:] = v[1:] - v[:-1]
    has_prev = same & (dt > 0)
    normal = has_prev & (dv >= 0)
    reset = has_prev & (dv < 0)
    secs = dt / 1e9
    r[normal] = dv[normal] / secs[normal]
    st[normal] = OK
    st[reset] = RESET
    if on_reset == "zero":
        r[reset] = v[reset] / secs[reset]
    repeat = same & (dt == 0) & (dv == 0)
    conflict = same & (dt == 0) & (dv != 0)
    st[conflict] = CONFLICT
    if preset is not None and len(preset[0]):
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(order.size)
        k = len(preset[0])
        fin_k = finite[:k]
        r[pos[:k][fin_k]] = np.asarray(preset[0], np.float64)[fin_k]
        st[pos[:k][fin_k]] = np.asarray(preset[1], np.int8)[fin_k]
    if repeat.any():
        # forward-fill rate/status from the last non-repeated sample (handles chains of repeats)
        src = np.where(repeat, 0, np.arange(order.size))
        src = np.maximum.accumulate(src)
        r = r[src]
        st = st[src]
    rate[order] = r
    status[order] = st
    return rate, status, order


def _codes(known: list[str], arr: pa.Array) -> tuple[np.ndarray, list[str | None]]:
    """Integer codes of ``known + arr`` (equal strings -> equal codes, null -> its own code) and the
    strings of ``arr``'s dictionary. Works on the dictionary, so a dictionary-encoded ``arr`` costs
    one lookup per row."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_encode(arr)
    words = arr.dictionary.cast(pa.string()).to_pylist()
    vocab: dict[str, int] = {}
    for w in known:
        vocab.setdefault(w, len(vocab))
    lut = np.array([vocab.setdefault(w, len(vocab)) for w in words] + [-1], np.int64)
    lut[-1] = len(vocab)  # null
    idx = pc.fill_null(arr.indices, len(words)).to_numpy(zero_copy_only=False).astype(np.int64)
    known_codes = np.fromiter((vocab[w] for w in known), np.int64, len(known))
    return np.concatenate([known_codes, lut[idx]]), words


@dataclass
class CounterState:
    """Last finite sample of every counter series seen so far in one file (carried across batches)."""

    node: list[str] = field(default_factory=list)
    metric: list[str] = field(default_factory=list)
    time_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    value: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    rate: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    status: np.ndarray = field(default_factory=lambda: np.empty(0, np.int8))

    def __len__(self) -> int:
        return len(self.node)


def rates_with_state(
    node: pa.Array,
    metric: pa.Array,
    time_ns: np.ndarray,
    value: np.ndarray,
    state: CounterState,
    on_reset: Literal["zero", "nan"] = "zero",
) -> tuple[np.ndarray, np.ndarray, CounterState]:
    """:func:`counter_rates` for one batch, continuing series from ``state`` (previous batches).

    Returns ``(rate, status, new_state)`` for the batch rows (state rows are only used as
    predecessors). ``new_state`` holds the latest finite sample of every series seen so far.
    """
    k = len(state)
    node = node.combine_chunks() if isinstance(node, pa.ChunkedArray) else node
    metric = metric.combine_chunks() if isinstance(metric, pa.ChunkedArray) else metric
    all_t = np.concatenate([state.time_ns, np.asarray(time_ns, np.int64)])
    all_v = np.concatenate([state.value, np.asarray(value, np.float64)])
    n_codes, _ = _codes(state.node, node)
    m_codes, _ = _codes(state.metric, metric)
    sid = n_codes * (int(m_codes.max(initial=0)) + 1) + m_codes
    rate, status, order = _rates_sorted(sid, all_t, all_v, on_reset, preset=(state.rate, state.status))
    # new state: latest finite sample per series = last of each series in (series, time) order
    if order.size:
        last = np.ones(order.size, dtype=bool)
        last[:-1] = sid[order][1:] != sid[order][:-1]
        keep = order[last]
        old, new_rows = keep[keep < k], keep[keep >= k] - k
        take = pa.array(new_rows)
        new = CounterState(
            node=[state.node[i] for i in old] + node.take(take).cast(pa.string()).to_pylist(),
            metric=[state.metric[i] for i in old] + metric.take(take).cast(pa.string()).to_pylist(),
            time_ns=np.concatenate([all_t[old], all_t[new_rows + k]]),
            value=np.concatenate([all_v[old], all_v[new_rows + k]]),
            rate=np.concatenate([rate[old], rate[new_rows + k]]),
            status=np.concatenate([status[old], status[new_rows + k]]),
        )
    else:
        new = state
    return rate[k:], status[k:], new


_STATE_SCHEMA = pa.schema(
    [
        pa.field("node", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("time_ns", pa.int64(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("rate", pa.float64()),
        pa.field("status", pa.int8(), nullable=False),
    ]
)


def state_to_table(state: CounterState) -> pa.Table:
    """The state as an Arrow table (one row per series), sorted by (node, metric)."""
    t = pa.table(
        [
            pa.array(state.node, pa.string()),
            pa.array(state.metric, pa.string()),
            pa.array(state.time_ns, pa.int64()),
            pa.array(state.value, pa.float64()),
            pa.array(state.rate, pa.float64()),
            pa.array(state.status, pa.int8()),
        ],
        schema=_STATE_SCHEMA,
    )
    return t.sort_by([("node", "ascending"), ("metric", "ascending")])


def state_from_table(t: pa.Table) -> CounterState:
    """Inverse of :func:`state_to_table`."""
    return CounterState(
        node=t["node"].to_pylist(),
        metric=t["metric"].to_pylist(),
        time_ns=t["time_ns"].to_numpy().astype(np.int64),
        value=t["value"].to_numpy().astype(np.float64),
        rate=t["rate"].to_numpy(zero_copy_only=False).astype(np.float64),
        status=t["status"].to_numpy().astype(np.int8),
    )


def merge_states(states: list[CounterState]) -> CounterState:
    """Newest sample per (node, metric) series over ``states`` (ties: the later state in the list wins)."""
    tabs = [state_to_table(s) for s in states if len(s)]
    if not tabs:
        return CounterState()
    # Arrow's sort is stable: among equal (series, time) rows the later state stays last
    t = pa.concat_tables(tabs).sort_by([("node", "ascending"), ("metric", "ascending"), ("time_ns", "ascending")])
    node, metric = (c.to_numpy(zero_copy_only=False) for c in (t["node"], t["metric"]))
    last = np.ones(t.num_rows, bool)
    last[:-1] = (node[1:] != node[:-1]) | (metric[1:] != metric[:-1])
    return state_from_table(t.filter(pa.array(last)))


@dataclass
class CounterCarry:
    """Counter series carried across files (see the module docstring).

    Attributes:
        seed: last sample per series from earlier runs (read-only for the parser).
        max_gap_ns: a seed sample is used only if it is at most this much older than the file's
            first counter sample.
        out: filled by the parser: the newest sample per series seen in this file.
    """

    seed: CounterState = field(default_factory=CounterState)
    max_gap_ns: int = 3600 * 1_000_000_000
    out: CounterState | None = None

    def seed_for(self, first_time_ns: int) -> CounterState:
        """The seed rows not older than ``first_time_ns - max_gap_ns``."""
        s = self.seed
        if not len(s):
            return CounterState()
        keep = np.flatnonzero(s.time_ns >= first_time_ns - self.max_gap_ns)
        return CounterState(
            node=[s.node[i] for i in keep],
            metric=[s.metric[i] for i in keep],
            time_ns=s.time_ns[keep],
            value=s.value[keep],
            rate=s.rate[keep],
            status=s.status[keep],
        )
