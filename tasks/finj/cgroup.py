"""The run's control groups: every task and the sampler of a campaign live in ``nwfinj-<run>/{apps,faults,sys}``.

Why: cleanup (every pid of the run is listed by the kernel, even one whose process group changed), hard
limits (a memory cap on the fault group), and the two faults that need a kernel knob this machine offers
in place of the paper's (``cpufreq`` -> CPU bandwidth of the ``apps`` group, ``pagefail`` -> memory limit of
the ``apps`` group, see ``programs.py``). Deleting the run's groups removes every knob a fault turned.

cgroup v1 (``/sys/fs/cgroup/{cpu,memory}``) and v2 (``/sys/fs/cgroup`` with ``cgroup.controllers``) are
supported; without a writable hierarchy :func:`create` returns ``None`` and the engine uses process groups
only (``cpufreq``/``pagefail`` are then reported unavailable).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
GROUPS = ("apps", "faults", "sys")


@dataclass(frozen=True)
class RunCgroups:
    """The run's groups: ``version`` 1 or 2, ``dirs[group]`` = list of directories (one per v1 hierarchy)."""

    version: int
    base: tuple[str, ...]
    dirs: dict[str, tuple[str, ...]]

    def procs_files(self, group: str) -> list[str]:
        """The ``cgroup.procs`` files a pid must be written to (one per hierarchy)."""
        return [os.path.join(d, "cgroup.procs") for d in self.dirs[group]]

    def to_json(self) -> dict:
        """JSON form (for the watchdog)."""
        return {"version": self.version, "base": list(self.base), "dirs": {k: list(v) for k, v in self.dirs.items()}}

    @classmethod
    def from_json(cls, d: dict) -> RunCgroups:
        """Inverse of :meth:`to_json`."""
        return cls(int(d["version"]), tuple(d["base"]), {k: tuple(v) for k, v in d["dirs"].items()})


OPTIONAL_V1 = ("cpuacct", "blkio")
"""v1 hierarchies joined when present and writable: the sampler reads the run's CPU time (per core) and block
I/O from them (LDMS ``procstat``/``cgroup``-sampler style)."""


def _v1_roots() -> list[Path]:
    return [ROOT / c for c in ("cpu", "memory")]


def _v1_optional() -> list[Path]:
    out = []
    for c in OPTIONAL_V1:
        r = ROOT / c
        if (r / "cgroup.procs").is_file() and os.access(r, os.W_OK) and r.resolve() not in {x.resolve() for x in _v1_roots()}:
            out.append(r)
    return out


def detect() -> tuple[int, str]:
    """(version, reason): 2 or 1 when a writable hierarchy with cpu+memory exists, else (0, why not)."""
    if (ROOT / "cgroup.controllers").is_file():
        ctl = (ROOT / "cgroup.controllers").read_text().split()
        if {"cpu", "memory"} <= set(ctl) and os.access(ROOT, os.W_OK):
            return 2, ""
        return 0, f"cgroup v2 without writable cpu+memory controllers (have: {' '.join(ctl)})"
    roots = _v1_roots()
    if all((r / "cgroup.procs").is_file() for r in roots) and all(os.access(r, os.W_OK) for r in roots):
        return 1, ""
    return 0, "no writable cgroup v1 cpu+memory hierarchy and no cgroup v2 (needs root)"


def create(run: str) -> RunCgroups | None:
    """Create ``nwfinj-<run>/{apps,faults,sys}``; ``None`` if the machine has no usable cgroups."""
    version, _ = detect()
    if version == 0:
        return None
    name = f"nwfinj-{run}"
    if version == 2:
        base = ROOT / name
        base.mkdir()
        ctl = set((ROOT / "cgroup.controllers").read_text().split())
        (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in ("cpu", "memory", "io") if c in ctl))
        dirs = {}
        for g in GROUPS:
            (base / g).mkdir()
            dirs[g] = (str(base / g),)
        return RunCgroups(2, (str(base),), dirs)
    bases = []
    dirs = {g: [] for g in GROUPS}
    for r in _v1_roots() + _v1_optional():
        b = r / name
        b.mkdir()
        bases.append(str(b))
        for g in GROUPS:
            (b / g).mkdir()
            dirs[g].append(str(b / g))
    return RunCgroups(1, tuple(bases), {k: tuple(v) for k, v in dirs.items()})


def join(cg: RunCgroups, group: str, pid: int = 0) -> None:
    """Move ``pid`` (0 = the caller) into ``group`` (used in the child before exec)."""
    for f in cg.procs_files(group):
        with open(f, "w") as fh:
            fh.write(str(pid or os.getpid()))


def pids(cg: RunCgroups) -> set[int]:
    """Every pid in the run's groups."""
    out: set[int] = set()
    for g in GROUPS:
        for f in cg.procs_files(g):
            with contextlib.suppress(OSError, ValueError):
                out.update(int(x) for x in Path(f).read_text().split())
    return out


def kill_all(cg: RunCgroups, timeout: float = 5.0) -> int:
    """SIGKILL every process of the run until none is left (or ``timeout``); returns how many were left."""
    deadline = time.monotonic() + timeout
    while True:
        left = pids(cg)
        if not left or time.monotonic() > deadline:
            return len(left)
        for p in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        time.sleep(0.05)


def remove(cg: RunCgroups) -> None:
    """Remove the (empty) groups: every limit a fault set on them goes with them."""
    for g in GROUPS:
        for d in cg.dirs[g]:
            with contextlib.suppress(OSError):
                os.rmdir(d)
    for b in cg.base:
        with contextlib.suppress(OSError):
            os.rmdir(b)


# ----------------------------------------------------------------------------- knobs for the faults
def set_cpu_share(dirs: tuple[str, ...], version: int, fraction_of_cores: float | None) -> None:
    """Limit a group's CPU bandwidth to ``fraction_of_cores`` CPUs (``None`` = unlimited)."""
    period = 100_000
    for d in dirs:
        if version == 2:
            val = "max" if fraction_of_cores is None else f"{max(1000, int(fraction_of_cores * period))} {period}"
            Path(d, "cpu.max").write_text(val)
        elif Path(d, "cpu.cfs_quota_us").exists():
            Path(d, "cpu.cfs_period_us").write_text(str(period))
            q = -1 if fraction_of_cores is None else max(1000, int(fraction_of_cores * period))
            Path(d, "cpu.cfs_quota_us").write_text(str(q))


def set_cpu_weight(dirs: tuple[str, ...], version: int, shares: int) -> bool:
    """CPU weight of a group against its siblings (v1 ``cpu.shares``, 2..262144, 1024 = default; v2
    ``cpu.weight``, 1..10000, 100 = default, scaled from the v1 value). With the kernel's session
    autogroups (``kernel.sched_autogroup_enabled``) every other session at the root competes with the weight
    of nice 0 whatever its nice value, so a campaign that must own its cores raises its group's weight.
    Returns whether a file was written."""
    done = False
    for d in dirs:
        if version == 2 and Path(d, "cpu.weight").exists():
            Path(d, "cpu.weight").write_text(str(max(1, min(10000, shares * 100 // 1024))))
            done = True
        elif version == 1 and Path(d, "cpu.shares").exists():
            Path(d, "cpu.shares").write_text(str(max(2, min(262144, shares))))
            done = True
    return done


def memory_usage(dirs: tuple[str, ...], version: int) -> int:
    """Current memory charged to a group (bytes)."""
    for d in dirs:
        f = Path(d, "memory.current" if version == 2 else "memory.usage_in_bytes")
        if f.exists():
            return int(f.read_text())
    return 0


def set_memory_limit(dirs: tuple[str, ...], version: int, limit: int | None, stall: bool = False) -> None:
    """Hard memory limit of a group (``None`` = none). With ``stall`` (v1: ``oom_kill_disable``; v2: ``memory.high``)
    allocations beyond the limit wait in reclaim instead of the kernel killing the task."""
    for d in dirs:
        if version == 2:
            Path(d, "memory.high" if stall else "memory.max").write_text("max" if limit is None else str(limit))
        elif Path(d, "memory.limit_in_bytes").exists():
            if stall and Path(d, "memory.oom_control").exists():
                Path(d, "memory.oom_control").write_text("0" if limit is None else "1")
            Path(d, "memory.limit_in_bytes").write_text("-1" if limit is None else str(limit))


# ----------------------------------------------------------------------------- statistics (sampler)
_V1_MEMSTAT = ("rss", "cache", "mapped_file", "pgfault", "pgmajfault", "pgpgin", "pgpgout")
_V2_MEMSTAT = ("anon", "file", "pgfault", "pgmajfault")
PAGING_IO_FIELDS = (
    "pgfault",
    "pgmajfault",
    "pgpgin",
    "pgpgout",
    "mem_failcnt",
    "mem_events_high",
    "mem_events_max",
    "io_read_bytes",
    "io_write_bytes",
    "io_read_ops",
    "io_write_ops",
    "task_rchar",
    "task_wchar",
    "task_syscr",
    "task_syscw",
    "task_read_bytes",
    "task_write_bytes",
)
"""Paging, memory-event and I/O counters of :func:`group_stats` and :class:`TaskIO` (all cumulative)."""
CGROUP_COUNTERS = frozenset(("cpu_usage", "cpu_user", "cpu_system", "nr_periods", "nr_throttled", "throttled_s")
                            + PAGING_IO_FIELDS)
"""Cumulative fields of :func:`group_stats` and :class:`TaskIO` (features use their first derivative)."""
TASK_IO_FIELDS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")
"""Fields of ``/proc/<pid>/io`` summed by :class:`TaskIO` (as ``task_<field>``)."""


def read_task_io(pid: int) -> dict[str, float] | None:
    """``/proc/<pid>/io`` of one process (``None`` when it is gone or unreadable)."""
    try:
        text = Path(f"/proc/{int(pid)}/io").read_text()
    except (OSError, ValueError):
        return None
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k in TASK_IO_FIELDS:
            with contextlib.suppress(ValueError):
                out[k] = float(v)
    return out if len(out) == len(TASK_IO_FIELDS) else None


class TaskIO:
    """A group's I/O from its processes' own accounting (``/proc/<pid>/io``), kept cumulative across exits.

    cgroup v1 ``blkio.throttle.*`` counts nothing here unless a throttling limit is set (measured: 0 bytes over the
    whole 2026-11-28 campaign, also at the root group), and buffered writeback is not charged to a v1 group. The
    kernel's per-task accounting is: ``write_bytes`` is charged when the task dirties a page, ``read_bytes`` when it
    causes a block read, ``rchar``/``wchar``/``syscr``/``syscw`` count read/write calls and bytes. A process's last
    values are kept when it exits (or its pid is reused), so the totals are counters like ``/proc/vmstat``."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, int], dict[str, float]] = {}
        self._gone: dict[str, dict[str, float]] = {}

    def totals(self, group: str, pids: set[int] | list[int]) -> dict[str, float]:
        """``task_<field>`` totals of ``group`` whose processes are now ``pids``."""
        gone = self._gone.setdefault(group, dict.fromkeys(TASK_IO_FIELDS, 0.0))

        def retire(key: tuple[str, int]) -> None:
            for f, v in self._last.pop(key).items():
                gone[f] += v

        seen = set()
        for pid in pids:
            cur = read_task_io(pid)
            if cur is None:
                continue
            key = (group, pid)
            prev = self._last.get(key)
            if prev is not None and any(cur[f] < prev[f] for f in TASK_IO_FIELDS):
                retire(key)  # the pid was reused by a new process
            self._last[key] = cur
            seen.add(key)
        for key in [k for k in self._last if k[0] == group and k not in seen]:
            retire(key)
        live = [v for k, v in self._last.items() if k[0] == group]
        return {f"task_{f}": gone[f] + sum(v[f] for v in live) for f in TASK_IO_FIELDS}


def group_pids(cg: RunCgroups, group: str) -> set[int]:
    """The pids of one of the run's groups (its first hierarchy's ``cgroup.procs``)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return {int(x) for x in Path(cg.procs_files(group)[0]).read_text().split()}
    return set()


def _kv(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            with contextlib.suppress(ValueError):
                out[k] = float(v)
    return out


def _num(path: Path) -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def group_stats(dirs: tuple[str, ...], version: int) -> tuple[dict[str, float], list[float]]:
    """(node-level fields, per-core CPU seconds) of one group: what LDMS's cgroup sampler records.

    Fields (seconds / bytes / counts): ``cpu_usage`` (+ ``cpu_user``/``cpu_system`` on v2), ``nr_periods``,
    ``nr_throttled``, ``throttled_s``, ``mem_usage``, memory.stat fields, ``mem_failcnt`` (v1) or
    ``mem_events_high``/``mem_events_max`` (v2), ``io_{read,write}_{bytes,ops}``. Per-core CPU time only on v1
    (``cpuacct.usage_percpu``). A file the kernel does not offer is left out.
    """
    out: dict[str, float] = {}
    per_core: list[float] = []
    for d in map(Path, dirs):
        if version == 2:
            st = _kv(d / "cpu.stat")
            for k, name in (
                ("usage_usec", "cpu_usage"),
                ("user_usec", "cpu_user"),
                ("system_usec", "cpu_system"),
                ("throttled_usec", "throttled_s"),
            ):
                if k in st:
                    out[name] = st[k] / 1e6
            for k in ("nr_periods", "nr_throttled"):
                if k in st:
                    out[k] = st[k]
            if (v := _num(d / "memory.current")) is not None:
                out["mem_usage"] = v
            ms = _kv(d / "memory.stat")
            out.update({k: ms[k] for k in _V2_MEMSTAT if k in ms})
            ev = _kv(d / "memory.events")
            for k in ("high", "max"):
                if k in ev:
                    out[f"mem_events_{k}"] = ev[k]
            io = {"rbytes": 0.0, "wbytes": 0.0, "rios": 0.0, "wios": 0.0}
            with contextlib.suppress(OSError):
                for line in (d / "io.stat").read_text().splitlines():
                    for kv in line.split()[1:]:
                        k, _, v = kv.partition("=")
                        if k in io:
                            io[k] += float(v)
            if (d / "io.stat").exists():
                out.update(
                    io_read_bytes=io["rbytes"], io_write_bytes=io["wbytes"], io_read_ops=io["rios"], io_write_ops=io["wios"]
                )
            continue
        if (v := _num(d / "cpuacct.usage")) is not None:
            out["cpu_usage"] = v / 1e9
            with contextlib.suppress(OSError, ValueError):
                per_core = [float(x) / 1e9 for x in (d / "cpuacct.usage_percpu").read_text().split()]
        if (d / "cpu.stat").exists():
            st = _kv(d / "cpu.stat")
            for k in ("nr_periods", "nr_throttled"):
                if k in st:
                    out[k] = st[k]
            if "throttled_time" in st:
                out["throttled_s"] = st["throttled_time"] / 1e9
        if (v := _num(d / "memory.usage_in_bytes")) is not None:
            out["mem_usage"] = v
            ms = _kv(d / "memory.stat")
            out.update({k: ms[k] for k in _V1_MEMSTAT if k in ms})
            if (f := _num(d / "memory.failcnt")) is not None:
                out["mem_failcnt"] = f
        svc = d / "blkio.throttle.io_service_bytes"
        if svc.exists():
            for fname, kind in (("blkio.throttle.io_service_bytes", "bytes"), ("blkio.throttle.io_serviced", "ops")):
                r = w = 0.0
                with contextlib.suppress(OSError):
                    for line in (d / fname).read_text().splitlines():
                        p = line.split()
                        if len(p) == 3 and p[1] in ("Read", "Write"):
                            r += float(p[2]) if p[1] == "Read" else 0.0
                            w += float(p[2]) if p[1] == "Write" else 0.0
                out[f"io_read_{kind}"], out[f"io_write_{kind}"] = r, w
    return out, per_core
