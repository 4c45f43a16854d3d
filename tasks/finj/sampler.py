"""LDMS-like 1-s sampler of this node: ``python -m nodewatch.tasks.finj.sampler --out DIR --node NAME``.

Reads ``/proc/stat`` (per core and node), ``/proc/meminfo``, ``/proc/vmstat``, ``/proc/diskstats`` (whole
disks), ``/proc/loadavg``, ``/proc/net/dev`` (all interfaces but ``lo``) and ``/proc/cpuinfo`` (per-core MHz)
once per second, aligned to whole seconds, and appends one row per sample to two files in LDMS
``store_csv`` layout (``#Time,Time_usec,ProducerName,component_id,job_id,<metric>...``):

* ``DIR/ldms/<node>.csv``: metrics named as in the telemetry catalogue (``schemas/metrics.py``), the file
  ``nodewatch ingest telemetry`` reads (counters raw; the ingest turns them into ``_rate`` gauges);
* ``DIR/raw.csv``: every field, ``<plugin>.<field>`` for node metrics and ``<plugin>.<field>#<core>`` for
  per-core ones (raw counters), the input of the fault-classification features (``features.py``).

With the run's control groups (env ``NWFINJ_CGROUPS``, set by the engine) ``raw.csv`` also holds, like LDMS's
cgroup/procstat samplers, the ``apps``, ``faults`` and ``sys`` groups' own CPU time (per core on cgroup v1), throttling,
memory and block I/O (``cgroup.<group>.<field>[#core]``, ``cgroup.py:group_stats``): the campaign's own
processes, apart from whatever else runs on the machine.

Stops on SIGTERM/SIGINT (the row being written is completed) or after ``--duration`` seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import time
from pathlib import Path

LDMS_META = ["#Time", "Time_usec", "ProducerName", "component_id", "job_id"]
STAT_FIELDS = ("user", "nice", "sys", "idle", "iowait", "irq", "softirq", "steal")
DISK_FIELDS = (
    "reads",
    "reads_merged",
    "read_sectors",
    "read_ms",
    "writes",
    "writes_merged",
    "write_sectors",
    "write_ms",
    "in_flight",
    "io_ms",
    "weighted_ms",
)
_WHOLE_DISK = re.compile(r"^(?:[shv]d[a-z]+|xvd[a-z]+|nvme\d+n\d+|mmcblk\d+)$")
NODE_COUNTERS_PREFIX = ("procstat.", "diskstats.", "net.")
"""Raw counters (cumulative); vmstat counters are told apart by :func:`is_counter`."""
_VMSTAT_GAUGE = re.compile(r"^nr_(?!dirtied|written|foll_pin|unstable|vmscan|shmem_hugepages_alloc)")


def is_counter(name: str) -> bool:
    """Whether a raw metric name is a cumulative counter (features use its first derivative instead)."""
    base = name.split("#", 1)[0]
    if base.startswith("derived."):
        return True  # dataset.add_derived: differences of CPU-time counters
    if base.startswith(("cgroup.", "target.")):  # target.*: sums of the run's groups (dataset.target_memory)
        from nodewatch.tasks.finj.cgroup import CGROUP_COUNTERS

        return base.rsplit(".", 1)[-1] in CGROUP_COUNTERS
    if base in ("procstat.procs_running", "procstat.procs_blocked", "diskstats.in_flight"):
        return False
    if base.startswith(NODE_COUNTERS_PREFIX):
        return True
    if base.startswith("vmstat."):
        return not _VMSTAT_GAUGE.match(base[7:])
    return False


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def cgroup_sample(cg: object | None) -> dict[str, float]:
    """The ``apps``, ``faults`` and ``sys`` groups' statistics (``cgroup.<group>.<field>``, per core
    ``cgroup.<group>.cpu_usage#k``), with their processes' own I/O accounting (``task_*``, :class:`cgroup.TaskIO`)."""
    from nodewatch.tasks.finj.cgroup import GROUPS, TaskIO, group_pids, group_stats

    out: dict[str, float] = {}
    if cg is None:
        return out
    task_io = _TASK_IO.setdefault("io", TaskIO())
    for g in GROUPS:
        if g not in cg.dirs:  # type: ignore[attr-defined]
            continue
        fields, per_core = group_stats(cg.dirs[g], cg.version)  # type: ignore[attr-defined]
        fields.update(task_io.totals(g, group_pids(cg, g)))  # type: ignore[attr-defined,arg-type]
        out.update({f"cgroup.{g}.{k}": v for k, v in fields.items()})
        out.update({f"cgroup.{g}.cpu_usage#{k}": v for k, v in enumerate(per_core)})
    return out


_TASK_IO: dict[str, object] = {}
"""The sampler's one ``cgroup.TaskIO`` (under ``"io"``, created on first use)."""


def _run_cgroups() -> object | None:
    import json

    from nodewatch.tasks.finj.cgroup import RunCgroups

    text = os.environ.get("NWFINJ_CGROUPS")
    if not text:
        return None
    try:
        cg = RunCgroups.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError):
        return None
    if not all(os.path.realpath(d).startswith("/sys/fs/cgroup/") for ds in cg.dirs.values() for d in ds):
        return None
    return cg


def sample(cg: object | None = None) -> dict[str, float]:
    """One sample of every raw metric (and of the run's cgroups ``cg``, when given)."""
    out: dict[str, float] = cgroup_sample(cg)
    ticks = os.sysconf("SC_CLK_TCK")
    for line in _read("/proc/stat").splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0].startswith("cpu"):
            suffix = "" if parts[0] == "cpu" else f"#{parts[0][3:]}"
            for f, v in zip(STAT_FIELDS, parts[1:9], strict=False):
                out[f"procstat.{f}{suffix}"] = int(v) / ticks
        elif parts[0] == "ctxt":
            out["procstat.context_switches"] = float(parts[1])
        elif parts[0] == "intr":
            out["procstat.interrupts"] = float(parts[1])
        elif parts[0] == "processes":
            out["procstat.processes"] = float(parts[1])
        elif parts[0] in ("procs_running", "procs_blocked"):
            out[f"procstat.{parts[0]}"] = float(parts[1])
    for line in _read("/proc/meminfo").splitlines():
        k, _, rest = line.partition(":")
        v = rest.split()
        if v:
            out[f"meminfo.{k.strip().replace('(', '_').replace(')', '')}"] = float(v[0]) * (1024 if len(v) > 1 else 1)
    for line in _read("/proc/vmstat").splitlines():
        k, _, v = line.partition(" ")
        out[f"vmstat.{k}"] = float(v)
    disk = [0.0] * len(DISK_FIELDS)
    for line in _read("/proc/diskstats").splitlines():
        p = line.split()
        if len(p) >= 14 and _WHOLE_DISK.match(p[2]):
            for i in range(len(DISK_FIELDS)):
                disk[i] += float(p[3 + i])
    out.update({f"diskstats.{f}": v for f, v in zip(DISK_FIELDS, disk, strict=True)})
    la = _read("/proc/loadavg").split()
    out["loadavg.load1"], out["loadavg.load5"], out["loadavg.load15"] = float(la[0]), float(la[1]), float(la[2])
    net = [0.0] * 6
    for line in _read("/proc/net/dev").splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            continue
        v = rest.split()
        if len(v) >= 16:
            for i, j in enumerate((0, 1, 2, 8, 9, 10)):
                net[i] += float(v[j])
    for f, v in zip(("rx_bytes", "rx_packets", "rx_errs", "tx_bytes", "tx_packets", "tx_errs"), net, strict=True):
        out[f"net.{f}"] = v
    core = 0
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("processor"):
            core = int(line.split(":")[1])
        elif line.startswith("cpu MHz"):
            out[f"procsensors.cpu_freq#{core}"] = float(line.split(":")[1])
    return out


def catalogue_row(s: dict[str, float], prev: dict[str, float] | None, dt: float) -> dict[str, float]:
    """The metrics of the telemetry catalogue (``schemas/metrics.py``) from a raw sample.

    ``cpu0_*`` is the whole node (this sampler's machines have one socket); percentages come from the
    change of the CPU-time counters since ``prev``; ``disk_util`` from the disk busy time.
    """
    mem = lambda k: s.get(f"meminfo.{k}", 0.0)  # noqa: E731
    row = {
        "load1": s["loadavg.load1"],
        "procs_running": s.get("procstat.procs_running", 0.0),
        "procs_blocked": s.get("procstat.procs_blocked", 0.0),
        "mem_free": mem("MemFree"),
        "mem_cached": mem("Cached"),
        "mem_buffers": mem("Buffers"),
        "mem_used": max(0.0, mem("MemTotal") - mem("MemFree") - mem("Buffers") - mem("Cached")),
        "swap_used": max(0.0, mem("SwapTotal") - mem("SwapFree")),
        "net_rx_bytes": s["net.rx_bytes"],
        "net_tx_bytes": s["net.tx_bytes"],
        "net_rx_packets": s["net.rx_packets"],
        "net_tx_packets": s["net.tx_packets"],
        "net_errors": s["net.rx_errs"] + s["net.tx_errs"],
        "disk_read_bytes": s["diskstats.read_sectors"] * 512,
        "disk_write_bytes": s["diskstats.write_sectors"] * 512,
        "disk_read_ops": s["diskstats.reads"],
        "disk_write_ops": s["diskstats.writes"],
        "ctx_switches": s["procstat.context_switches"],
        "interrupts": s["procstat.interrupts"],
    }
    freqs = [v for k, v in s.items() if k.startswith("procsensors.cpu_freq#")]
    if freqs:
        row["cpu0_freq"] = sum(freqs) / len(freqs)
    if prev is not None and dt > 0:
        d = {f: s[f"procstat.{f}"] - prev[f"procstat.{f}"] for f in STAT_FIELDS}
        tot = sum(d.values())
        if tot > 0:
            row["cpu0_user"] = min(100.0, 100 * (d["user"] + d["nice"]) / tot)
            row["cpu0_sys"] = min(100.0, 100 * (d["sys"] + d["irq"] + d["softirq"]) / tot)
            row["cpu0_iowait"] = min(100.0, 100 * d["iowait"] / tot)
            row["cpu0_idle"] = min(100.0, 100 * d["idle"] / tot)
        row["disk_util"] = min(100.0, max(0.0, 100 * (s["diskstats.io_ms"] - prev["diskstats.io_ms"]) / 1000 / dt))
    return row


class _CsvOut:
    def __init__(self, path: Path, node: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.node = path, node
        self.cols: list[str] | None = None
        self.fh = open(path, "a", buffering=1)  # noqa: SIM115

    def write(self, t: float, row: dict[str, float]) -> None:
        if self.cols is None:
            self.cols = sorted(row)
            self.fh.write(",".join(LDMS_META + self.cols) + "\n")
        sec = math.floor(t)
        vals = ",".join(repr(float(row[c])) if c in row else "" for c in self.cols)
        self.fh.write(f"{sec},{int((t - sec) * 1e6)},{self.node},0,0,{vals}\n")

    def close(self) -> None:
        self.fh.close()


def run(out: Path, node: str, duration: float | None = None, interval: float = 1.0) -> int:
    """Sample until SIGTERM/SIGINT or ``duration``; returns the number of samples written."""
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    raw = _CsvOut(out / "raw.csv", node)
    cat = _CsvOut(out / "ldms" / f"{node}.csv", node)
    end = time.time() + duration if duration else math.inf
    prev, prev_t, n = None, 0.0, 0
    full = None
    cg = _run_cgroups()
    try:
        while not stop and time.time() < end:
            nxt = math.floor(time.time() / interval + 1) * interval
            time.sleep(max(0.0, nxt - time.time()))
            t = time.time()
            s = sample(cg)
            if full is None:
                full = sorted(s)
            raw.write(t, s)
            row = catalogue_row(s, prev, t - prev_t)
            if prev is not None:  # the first row has no CPU percentages: skip it in the catalogue file
                cat.write(t, row)
            prev, prev_t = s, t
            n += 1
    finally:
        raw.close()
        cat.close()
    return n


def lock_memory() -> str:
    """``mlockall(MCL_CURRENT | MCL_FUTURE)`` (needs root or a big enough ``RLIMIT_MEMLOCK``): the sampler's pages
    stay resident, so it keeps sampling while the machine thrashes (a global OOM stalled an unlocked sampler
    for 252 s). Returns ``""`` or the reason it could not."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mlockall(1 | 2) != 0:
            return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as e:
        return str(e)
    return ""


def main(argv: list[str] | None = None) -> int:
    """Command-line entry (started by the engine)."""
    from nodewatch.schemas.names import check_node_name

    p = argparse.ArgumentParser(prog="nodewatch-finj-sampler")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--node", required=True)
    p.add_argument("--duration", type=float, default=None)
    p.add_argument("--mlock", action="store_true", help="lock the sampler's memory (root)")
    a = p.parse_args(argv)
    if a.mlock and (why := lock_memory()):
        print(f"sampler: memory not locked: {why}", flush=True)
    run(a.out, check_node_name(a.node), a.duration)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
