"""The metric catalogue: every telemetry metric nodewatch accepts, with unit, range and kind.

Each :class:`Metric` has a name (the ``metric`` column of the staged ``telemetry`` table and the
``metric`` coordinate of the telemetry cube), a CF/UDUNITS unit string, a CF ``long_name``, an
inclusive valid range and a kind:

* ``gauge``: an instantaneous value, staged as read;
* ``counter``: a monotonically increasing total (bytes, packets, errors, I/O operations). Counters
  are **never staged raw**: the telemetry parsers convert them to per-second rates with
  :func:`nodewatch.tasks.core.counters.counter_rates` and stage the rate under :attr:`Metric.rate_name`
  (``<name>_rate``), a gauge in this catalogue with unit ``<unit> s-1``. See ``tasks/core/counters.py``
  for reset handling.

Names are a superset of what ``tasks/simulate/metrics.py`` writes (checked by
``tests/test_telemetry_catalogue.py``: same names and kinds, catalogue ranges contain the
simulator's; per-socket CPU metrics ``cpu<k>_…`` for sockets 0-7, ``fan<k>_rpm`` for 0-15; the
simulator's fan unit ``rpm`` is written ``min-1`` here, the UDUNITS spelling) plus the four
columns of the real Turin per-node files (``power`` in W, ``cpu1``/``cpu2`` socket temperatures in
degC, ``cpus_alloc`` a CPU count; ``../shared/data/PROVENANCE.md``).

Units are true
--------------
Every entry carries the physical unit of the values staged under its name (UDUNITS/CF spelling:
``W``, ``degC``, ``By``, ``%``, ``min-1``, ``"1"`` for counts and ratios) and a physical range; the
range check quarantines a value outside it with the metric, range and unit in the reason (a node
power of 0.155 W is a failed sensor, not a reading). Values that were *standardised* upstream have
no unit and no physical range: they are staged under their own name ``<name>_std`` (unit ``"1"``,
range ``±STD_RANGE``), never under the physical name. The telemetry cube takes each metric's
``units``, ``long_name``, ``valid_min`` and ``valid_max`` from here (``schemas/cubes.py``
:func:`~nodewatch.schemas.cubes.metric_attrs`).

Unknown metrics
---------------
A metric that is not in the catalogue is **quarantined** (reason
``expect_metric_in_catalogue(metric)``), not staged with unit ``"1"``: an unknown name cannot be
range-checked, has no unit for the cube's CF attributes, and is most often a typo or a renamed
collector field that would otherwise silently become a new, unvalidated cube variable. Nothing is
lost: the rows sit in ``quarantine/telemetry/`` with their source offset, and the raw file stays in
``raw/``, so after adding the metric here a re-ingest of the raw file stages them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Kind = Literal["gauge", "counter"]

CPU_SOCKETS = range(8)
"""Socket indices for which per-socket CPU metrics exist (``cpu0_…`` to ``cpu7_…``)."""
FANS = range(16)
"""Fan indices (``fan0_rpm`` to ``fan15_rpm``)."""

_BIG = float(2**64)
"""Upper bound of a raw counter value (64-bit counters); raw counters are converted, never staged."""


@dataclass(frozen=True)
class Metric:
    """One catalogue entry.

    Attributes:
        name: metric name (``metric`` column / cube coordinate).
        unit: CF/UDUNITS unit string (``"1"`` = dimensionless).
        long_name: CF long name.
        min / max: inclusive valid range of the *staged* value (``None`` = unbounded on that side).
        kind: ``gauge`` or ``counter`` (see module doc).
        rate_max: for counters, the largest plausible per-second rate (the range of the ``_rate`` gauge).
    """

    name: str
    unit: str
    long_name: str
    min: float | None
    max: float | None
    kind: Kind = "gauge"
    rate_max: float | None = None

    @property
    def rate_name(self) -> str:
        """Name of the staged per-second rate of a counter (``<name>_rate``)."""
        if self.kind != "counter":
            raise ValueError(f"{self.name} is a gauge, it has no rate")
        return f"{self.name}_rate"

    def rate_metric(self) -> Metric:
        """The gauge entry staged for a counter: ``<name>_rate`` in ``<unit> s-1``, range [0, rate_max]."""
        unit = "s-1" if self.unit == "1" else f"{self.unit} s-1"
        return Metric(self.rate_name, unit, f"rate of {self.long_name}", 0.0, self.rate_max, "gauge")


POWER_NODE_MIN_W = 1.0
"""Lowest physical node input power (W): a node's BMC alone draws more, even with the node off; a lower
reading (0 W, or the 0.155 W of D.A.V.I.D.E.'s failed-sensor stretch) is a sensor fault, quarantined."""

STD_SUFFIX = "_std"
"""Suffix of a standardised variant: ``<name>_std`` holds ``<name>`` after an upstream scaling (z-scores or
similar), unit ``"1"``: never mixed with the physical values under the physical name."""
STD_RANGE = 1e4
"""A standardised value has no physical range: only ``|value| <= STD_RANGE`` (and finite) is checked."""
STD_VARIANTS = ("power", "cpu1", "cpu2", "cpus_alloc")
"""Metrics that also exist standardised (the older ADMIRE Turin files): ``power_std`` etc."""


def std_metric(m: Metric) -> Metric:
    """The standardised variant of ``m``: ``<name>_std``, dimensionless, range ``[-STD_RANGE, STD_RANGE]``."""
    return Metric(
        f"{m.name}{STD_SUFFIX}", "1", f"{m.long_name}, standardised upstream (no physical unit)", -STD_RANGE, STD_RANGE, "gauge"
    )


def _g(name: str, unit: str, long_name: str, lo: float | None, hi: float | None) -> Metric:
    return Metric(name, unit, long_name, lo, hi, "gauge")


def _c(name: str, unit: str, long_name: str, rate_max: float) -> Metric:
    return Metric(name, unit, long_name, 0.0, _BIG, "counter", rate_max)


def _base_metrics() -> list[Metric]:
    m: list[Metric] = []
    for k in CPU_SOCKETS:
        m += [
            _g(f"cpu{k}_load", "1", f"run-queue load of socket {k} (1-min average)", 0.0, 4096.0),
            _g(f"cpu{k}_user", "%", f"CPU time in user mode, socket {k}", 0.0, 100.0),
            _g(f"cpu{k}_sys", "%", f"CPU time in kernel mode, socket {k}", 0.0, 100.0),
            _g(f"cpu{k}_iowait", "%", f"CPU time waiting for I/O, socket {k}", 0.0, 100.0),
            _g(f"cpu{k}_idle", "%", f"CPU idle time, socket {k}", 0.0, 100.0),
            _g(f"cpu{k}_freq", "MHz", f"mean core frequency of socket {k}", 0.0, 10_000.0),
            _g(f"temp_cpu{k}", "degC", f"package temperature of socket {k}", -20.0, 130.0),
            _g(f"power_cpu{k}", "W", f"package power of socket {k}", 0.0, 1_000.0),
        ]
    mem = 64.0 * 2**40  # 64 TiB: larger than any node's memory
    m += [
        _g("load1", "1", "1-minute load average", 0.0, 10_000.0),
        _g("procs_running", "1", "runnable processes", 0.0, 100_000.0),
        _g("procs_blocked", "1", "processes blocked on I/O", 0.0, 100_000.0),
        _g("mem_used", "By", "memory used (MemTotal - MemFree - Buffers - Cached)", 0.0, mem),
        _g("mem_free", "By", "memory free", 0.0, mem),
        _g("mem_cached", "By", "page cache", 0.0, mem),
        _g("mem_buffers", "By", "buffer cache", 0.0, mem),
        _g("swap_used", "By", "swap used", 0.0, mem),
        _g("power_node", "W", "node input power", POWER_NODE_MIN_W, 20_000.0),
        _g("power_cpu", "W", "CPU package power (all sockets)", 0.0, 5_000.0),
        _g("power_mem", "W", "memory (DRAM) power", 0.0, 2_000.0),
        _g("power_gpu", "W", "GPU power (all GPUs)", 0.0, 10_000.0),
        _g("temp_inlet", "degC", "air inlet temperature", -20.0, 80.0),
        _g("temp_exhaust", "degC", "air exhaust temperature", -20.0, 100.0),
        _g("temp_dimm", "degC", "hottest DIMM temperature", -20.0, 120.0),
        _g("temp_gpu", "degC", "hottest GPU temperature", -20.0, 130.0),
        _g("temp_board", "degC", "mainboard temperature", -20.0, 120.0),
        _g("disk_util", "%", "local disk busy time share", 0.0, 100.0),
    ]
    m += [_g(f"fan{k}_rpm", "min-1", f"speed of fan {k} (revolutions per minute)", 0.0, 50_000.0) for k in FANS]
    m += [
        _c("net_rx_bytes", "By", "Ethernet bytes received", 1.25e11),
        _c("net_tx_bytes", "By", "Ethernet bytes transmitted", 1.25e11),
        _c("net_rx_packets", "1", "Ethernet packets received", 2e9),
        _c("net_tx_packets", "1", "Ethernet packets transmitted", 2e9),
        _c("net_errors", "1", "Ethernet receive + transmit errors", 2e9),
        _c("ib_rx_bytes", "By", "InfiniBand bytes received", 1e11),
        _c("ib_tx_bytes", "By", "InfiniBand bytes transmitted", 1e11),
        _c("ib_rx_packets", "1", "InfiniBand packets received", 2e9),
        _c("ib_tx_packets", "1", "InfiniBand packets transmitted", 2e9),
        _c("ib_errors", "1", "InfiniBand symbol + receive errors", 2e9),
        _c("ib_link_downed", "1", "InfiniBand link-down events", 1e6),
        _c("disk_read_bytes", "By", "bytes read from local disks", 5e10),
        _c("disk_write_bytes", "By", "bytes written to local disks", 5e10),
        _c("disk_read_ops", "1", "read operations on local disks", 1e8),
        _c("disk_write_ops", "1", "write operations on local disks", 1e8),
        _c("lustre_read_bytes", "By", "bytes read from Lustre", 1e11),
        _c("lustre_write_bytes", "By", "bytes written to Lustre", 1e11),
        _c("lustre_ops", "1", "Lustre client metadata operations (open/close/getattr/...)", 1e8),
        _c("nfs_ops", "1", "NFS client RPC operations", 1e8),
        _c("edac_ce_count", "1", "EDAC correctable memory errors", 1e9),
        _c("edac_ue_count", "1", "EDAC uncorrectable memory errors", 1e9),
        _c("ctx_switches", "1", "context switches", 1e10),
        _c("interrupts", "1", "interrupts serviced", 1e10),
    ]
    # Real Turin (ADMIRE) per-node files, in physical units (../shared/data/PROVENANCE.md: power 136-608 W,
    # cpu1/cpu2 socket temperatures 28-88 degC, cpus_alloc 0-48 CPUs); the older standardised copies of the
    # same columns are the TURIN_STD variants below, never these names.
    m += [
        _g("power", "W", "node input power (Turin)", POWER_NODE_MIN_W, 20_000.0),
        _g("cpu1", "degC", "CPU temperature of socket 1 (Turin)", -20.0, 130.0),
        _g("cpu2", "degC", "CPU temperature of socket 2 (Turin)", -20.0, 130.0),
        _g("cpus_alloc", "1", "CPUs allocated to jobs (Turin)", 0.0, 4096.0),
    ]
    m += [std_metric(x) for x in m if x.name in STD_VARIANTS]
    return m


def _build() -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    for met in _base_metrics():
        for entry in [met, met.rate_metric()] if met.kind == "counter" else [met]:
            if entry.name in out:
                raise RuntimeError(f"metric {entry.name} defined twice in the catalogue")
            out[entry.name] = entry
    return out


CATALOGUE: dict[str, Metric] = _build()
"""All metrics by name: gauges, counters and the ``<counter>_rate`` gauges staged for counters."""

COUNTERS: frozenset[str] = frozenset(n for n, m in CATALOGUE.items() if m.kind == "counter")
"""Names of counter metrics (converted to rates at parse time, never staged raw)."""

STAGED_METRICS: tuple[str, ...] = tuple(n for n, m in CATALOGUE.items() if m.kind == "gauge")
"""Names that may appear in the staged ``telemetry`` table (gauges, including counter rates)."""


def get_metric(name: str) -> Metric:
    """The catalogue entry of ``name``; ``KeyError`` with a hint for unknown metrics."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}: add it to schemas/metrics.py") from None


def staged_bounds() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(names, lo, hi)`` arrays over :data:`STAGED_METRICS` (unbounded sides as ``-inf``/``inf``).

    Used by the vectorised per-metric range check in ``schemas/telemetry.py``.
    """
    names = np.array(STAGED_METRICS, dtype=object)
    lo = np.array([-np.inf if CATALOGUE[n].min is None else CATALOGUE[n].min for n in STAGED_METRICS], dtype=np.float64)
    hi = np.array([np.inf if CATALOGUE[n].max is None else CATALOGUE[n].max for n in STAGED_METRICS], dtype=np.float64)
    return names, lo, hi


def markdown() -> str:
    """Markdown table of the catalogue (for ``docs/``)."""
    lines = ["| metric | kind | unit | range | long name |", "|---|---|---|---|---|"]
    for m in CATALOGUE.values():
        lo = "-inf" if m.min is None else f"{m.min:g}"
        hi = "inf" if m.max is None else f"{m.max:g}"
        lines.append(f"| {m.name} | {m.kind} | {m.unit} | [{lo}, {hi}] | {m.long_name} |")
    return "\n".join(lines)
