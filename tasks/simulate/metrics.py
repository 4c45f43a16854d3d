"""The simulated per-node metric catalogue: name, unit, kind (gauge/counter), valid range.

Counters are cumulative since the node's last boot (monotonic, reset to ~0 at every reboot);
gauges are instantaneous values. Ranges are the physically valid ranges a validator may enforce
(every simulated value lies inside them). Units are CF/UDUNITS style.
"""

from __future__ import annotations

from dataclasses import dataclass

CORES_PER_SOCKET = 32
MEM_BYTES = 256 * 2**30
COUNTER_MAX = float(2**63)


@dataclass(frozen=True)
class MetricSpec:
    """One metric: ``kind`` is ``"gauge"`` or ``"counter"``; [lo, hi] the valid range."""

    name: str
    unit: str
    kind: str
    lo: float
    hi: float
    description: str


def _g(name: str, unit: str, lo: float, hi: float, desc: str) -> MetricSpec:
    return MetricSpec(name, unit, "gauge", lo, hi, desc)


def _c(name: str, unit: str, desc: str) -> MetricSpec:
    return MetricSpec(name, unit, "counter", 0.0, COUNTER_MAX, desc)


_SOCKET: list[MetricSpec] = []
for _s in (0, 1):
    _SOCKET += [
        _g(f"cpu{_s}_load", "1", 0.0, 4.0 * CORES_PER_SOCKET, f"run-queue load of socket {_s}'s cores (1-min average)"),
        _g(f"cpu{_s}_user", "%", 0.0, 100.0, f"socket {_s} user time share"),
        _g(f"cpu{_s}_sys", "%", 0.0, 100.0, f"socket {_s} system time share"),
        _g(f"cpu{_s}_iowait", "%", 0.0, 100.0, f"socket {_s} iowait share"),
        _g(f"cpu{_s}_idle", "%", 0.0, 100.0, f"socket {_s} idle share"),
        _g(f"cpu{_s}_freq", "MHz", 400.0, 4500.0, f"socket {_s} mean core frequency"),
    ]

METRICS: tuple[MetricSpec, ...] = tuple(
    _SOCKET
    + [
        _g("mem_used", "By", 0.0, MEM_BYTES, "used memory (MemTotal - MemFree - Buffers - Cached)"),
        _g("mem_free", "By", 0.0, MEM_BYTES, "free memory"),
        _g("mem_cached", "By", 0.0, MEM_BYTES, "page cache"),
        _g("mem_buffers", "By", 0.0, MEM_BYTES, "buffers"),
        _g("swap_used", "By", 0.0, 16 * 2**30, "used swap"),
        _g("power_node", "W", 1.0, 2000.0, "node input power (BMC)"),
        _g("power_cpu", "W", 0.0, 1000.0, "CPU package power, both sockets (RAPL)"),
        _g("power_mem", "W", 0.0, 300.0, "DRAM power (RAPL)"),
        _g("temp_cpu0", "degC", 10.0, 110.0, "socket 0 package temperature"),
        _g("temp_cpu1", "degC", 10.0, 110.0, "socket 1 package temperature"),
        _g("temp_inlet", "degC", 5.0, 60.0, "chassis inlet air temperature"),
        _g("temp_exhaust", "degC", 5.0, 90.0, "chassis exhaust air temperature"),
        _g("temp_dimm", "degC", 10.0, 100.0, "hottest DIMM temperature"),
    ]
    + [_g(f"fan{_f}_rpm", "rpm", 0.0, 20000.0, f"fan {_f} speed") for _f in range(6)]
    + [
        _c("net_rx_bytes", "By", "Ethernet received bytes"),
        _c("net_tx_bytes", "By", "Ethernet transmitted bytes"),
        _c("net_rx_packets", "1", "Ethernet received packets"),
        _c("net_tx_packets", "1", "Ethernet transmitted packets"),
        _c("net_errors", "1", "Ethernet rx+tx errors"),
        _c("ib_rx_bytes", "By", "InfiniBand port received bytes"),
        _c("ib_tx_bytes", "By", "InfiniBand port transmitted bytes"),
        _c("ib_rx_packets", "1", "InfiniBand received packets"),
        _c("ib_tx_packets", "1", "InfiniBand transmitted packets"),
        _c("ib_errors", "1", "InfiniBand symbol+receive errors"),
        _c("ib_link_downed", "1", "InfiniBand link-downed counter"),
        _c("disk_read_bytes", "By", "local disk bytes read"),
        _c("disk_write_bytes", "By", "local disk bytes written"),
        _c("disk_read_ops", "1", "local disk read operations"),
        _c("disk_write_ops", "1", "local disk write operations"),
        _g("disk_util", "%", 0.0, 100.0, "local disk busy time share"),
        _c("lustre_read_bytes", "By", "Lustre client bytes read"),
        _c("lustre_write_bytes", "By", "Lustre client bytes written"),
        _c("lustre_ops", "1", "Lustre client metadata operations (open/close/getattr/...)"),
        _c("nfs_ops", "1", "NFS client RPC operations"),
        _c("edac_ce_count", "1", "EDAC correctable memory errors"),
        _c("edac_ue_count", "1", "EDAC uncorrectable memory errors"),
        _g("procs_running", "1", 0.0, 4096.0, "runnable processes"),
        _g("procs_blocked", "1", 0.0, 4096.0, "processes blocked on I/O"),
        _c("ctx_switches", "1", "context switches"),
        _c("interrupts", "1", "interrupts serviced"),
    ]
)

METRIC_NAMES: tuple[str, ...] = tuple(m.name for m in METRICS)
METRIC_INDEX: dict[str, int] = {m.name: i for i, m in enumerate(METRICS)}
COUNTERS: tuple[str, ...] = tuple(m.name for m in METRICS if m.kind == "counter")
GAUGES: tuple[str, ...] = tuple(m.name for m in METRICS if m.kind == "gauge")


def markdown_table() -> str:
    """Markdown table of the catalogue (used in docs/simulator.md)."""
    lines = ["| metric | unit | kind | valid range | description |", "|---|---|---|---|---|"]
    for m in METRICS:
        hi = "2^63" if m.hi == COUNTER_MAX else f"{m.hi:g}"
        lines.append(f"| `{m.name}` | {m.unit} | {m.kind} | [{m.lo:g}, {hi}] | {m.description} |")
    return "\n".join(lines)
