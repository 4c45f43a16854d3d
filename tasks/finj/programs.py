"""The fault programs of Netti et al. Sec. 5.2 and the application stand-ins, run by the engine as
``python -m nodewatch.tasks.finj.programs NAME --duration S [--low] --scratch DIR --ctl DIR``.

Every program stops by itself after ``--duration`` seconds (the engine also kills it at its limit) and
respects hard caps: memory (``--mem-cap``, default 2 GiB, also enforced by the fault group's cgroup), disk
(``--disk-cap``, files only under ``--scratch``, default 512 MiB), CPU (only the cores it was pinned to).

Faults (paper behaviour -> what runs here):

* ``leak``: allocates and fills a 16 MiB block every second, never freed (low: 4 MiB), up to the cap.
* ``memeater``: a 36 MiB array written, then grown by 36 MiB and copied every 2 s for 10 steps, then
  restarted (low: 18 MiB).
* ``ddot``: dot products of vectors of 0.9, 5 and 10 x the last-level cache size, size changing every 5 s
  (low: 50 % duty cycle).
* ``dial``: floating-point arithmetic on random numbers in L1-sized arrays (low: 50 % duty cycle).
* ``cpufreq``: the paper lowers the maximum P-state frequency by 50 %. This VM has no cpufreq driver, so the
  nearest real mechanism is used: the CPU bandwidth of the applications' cgroup is limited to 50 % of
  their cores (low: 75 %) for the duration. Unavailable without cgroups.
* ``pagefail``: the paper makes page allocations fail with 50 % probability (low 25 %) through the kernel's
  fault injection (``/sys/kernel/debug/fail_page_alloc``; ``availability.py`` checks it at run time). Here
  with ``task-filter`` on and ``make-it-fail`` set for the applications' processes only, so nothing else on
  the machine fails; every knob is restored at the end. Without it (this VM: ``CONFIG_FAULT_INJECTION`` off)
  the fault is unavailable, unless its stand-in is asked for (``--stand-in pagefail``): the applications'
  cgroup memory limit is set to their usage + 8 MiB (low: + 64 MiB) with the OOM killer disabled, so their
  page allocations fail to charge and stall in reclaim (needs cgroups).
* ``ioerr``: the paper fails 1 in 500 block I/Os with 20 % probability (``fail_make_request``, not in this
  kernel; no device-mapper either). Nearest real mechanism: applications run with an ``LD_PRELOAD`` shim
  (``ioshim.py``) whose ``read``/``write`` on regular files return ``EIO`` on every 500th call with 20 %
  probability while this program holds the switch file ``<ctl>/ioerr`` (low: every 1000th, 10 %).
* ``copy``: writes then reads back a 400 MiB file (page cache dropped for it with ``posix_fadvise``),
  sleeps 2 s, repeats (low: 100 MiB); capped at ``--disk-cap``.

Applications (ours, numpy/Python; not the paper's binaries): ``dgemm`` (matrix products), ``stream``
(triad on 3 x 32 MiB arrays), ``linsolve`` (dense LU solves, HPL-like), ``fileio`` (write/read 64 MiB files
in 64 KiB calls, fsync, Bonnie/IOzone-like; counts and survives EIO).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

MiB = 2**20


class Limits:
    """Caps and the stop time of one program run."""

    def __init__(self, duration: float, mem_cap: int, disk_cap: int, scratch: Path) -> None:
        self.end = time.monotonic() + duration
        self.mem_cap = mem_cap
        self.disk_cap = disk_cap
        self.scratch = scratch

    def left(self) -> float:
        """Seconds left."""
        return self.end - time.monotonic()

    def sleep(self, s: float) -> bool:
        """Sleep ``s`` seconds (at most until the end); False once the time is up."""
        time.sleep(max(0.0, min(s, self.left())))
        return self.left() > 0


def _llc_bytes() -> int:
    best = 0
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in base.glob("index*"):
        try:
            size = (idx / "size").read_text().strip()
            mult = {"K": 1024, "M": MiB}.get(size[-1], 1)
            best = max(best, int(size.rstrip("KM")) * mult)
        except (OSError, ValueError):
            continue
    return best or 8 * MiB


# ----------------------------------------------------------------------------------------------- faults
def leak(lim: Limits, low: bool, **_: object) -> None:
    """Memory leak: 16 MiB (low 4 MiB) filled every second, kept until the end or the cap."""
    import numpy as np

    block = (4 if low else 16) * MiB
    held = []
    while lim.left() > 0:
        if (len(held) + 1) * block <= lim.mem_cap:
            a = np.empty(block, np.uint8)
            a[:] = len(held) % 251
            held.append(a)
        if not lim.sleep(1.0):
            break


def memeater(lim: Limits, low: bool, **_: object) -> None:
    """Memory interference: 36 MiB (low 18) array written, grown by its base size and copied every 2 s, 10 steps."""
    import numpy as np

    base = (18 if low else 36) * MiB // 4
    rng = np.random.default_rng(0)
    while lim.left() > 0:
        arr = rng.integers(0, 2**31 - 1, size=base, dtype=np.int32)
        for _step in range(10):
            if (arr.size + base) * 4 > lim.mem_cap:
                break
            new = np.empty(arr.size + base, np.int32)
            new[: arr.size] = arr
            new[arr.size :] = arr[:base]
            arr = new
            if not lim.sleep(2.0):
                return


def ddot(lim: Limits, low: bool, **_: object) -> None:
    """CPU/cache interference: dot products at 0.9x, 5x, 10x the LLC size, switching every 5 s."""
    import numpy as np

    llc = _llc_bytes()
    sizes = [max(1024, int(f * llc / 8 / 2)) for f in (0.9, 5.0, 10.0)]
    i = 0
    while lim.left() > 0:
        n = sizes[i % 3]
        a = np.random.default_rng(i).random(n)
        b = a[::-1].copy()
        t_end = time.monotonic() + 5.0
        while time.monotonic() < t_end and lim.left() > 0:
            t0 = time.monotonic()
            float(a @ b)
            if low:
                time.sleep(time.monotonic() - t0)
        i += 1


def dial(lim: Limits, low: bool, **_: object) -> None:
    """ALU interference: floating-point arithmetic on random numbers in L1-sized arrays."""
    import numpy as np

    rng = np.random.default_rng(1)
    x = rng.random(512)
    y = rng.random(512)
    while lim.left() > 0:
        t0 = time.monotonic()
        for _ in range(2000):
            x = x * 1.000001 + y / (x + 1.0)
            x -= np.floor(x)
        if low:
            time.sleep(time.monotonic() - t0)


def _apps_group() -> tuple[tuple[str, ...], int]:
    dirs = tuple(d for d in os.environ.get("NWFINJ_APPS_CGROUP", "").split(os.pathsep) if d)
    if not dirs:
        print("unavailable: no cgroup for the applications (needs root and cgroup v1/v2)", file=sys.stderr)
        raise SystemExit(3)
    return dirs, int(os.environ.get("NWFINJ_CGROUP_VERSION", "1"))


def cpufreq(lim: Limits, low: bool, **_: object) -> None:
    """Misconfiguration: CPU bandwidth of the applications' group at 50 % (low 75 %) of their cores."""
    from nodewatch.tasks.finj.cgroup import set_cpu_share

    dirs, ver = _apps_group()
    ncores = int(os.environ.get("NWFINJ_APP_CORES", str(os.cpu_count() or 1)))
    set_cpu_share(dirs, ver, ncores * (0.75 if low else 0.5))
    try:
        while lim.sleep(1.0):
            pass
    finally:
        set_cpu_share(dirs, ver, None)


def pagefail(lim: Limits, low: bool, **_: object) -> None:
    """Failing memory: the kernel's page-allocation fault injection when the engine found it
    (``NWFINJ_PAGEFAIL=kernel``), else the cgroup stand-in the campaign asked for."""
    dirs, _ = _apps_group()
    if os.environ.get("NWFINJ_PAGEFAIL") == "kernel":
        fail_page_alloc(lim, low, Path(os.environ.get("NWFINJ_DEBUGFS", "/sys/kernel/debug")), dirs)
    else:
        pagefail_cgroup(lim, low)


FAIL_PAGE_ALLOC_KNOBS = ("task-filter", "interval", "times", "min-order", "probability")


def fail_page_alloc(lim: Limits, low: bool, debugfs: Path, app_dirs: tuple[str, ...], proc: Path = Path("/proc")) -> None:
    """The paper's ``pagefail`` (FINJ's program: probability 50 %, low 25 %, interval 1, unlimited times,
    min-order 0), confined to the applications: ``task-filter`` on and ``/proc/<pid>/make-it-fail`` = 1 for
    every process of the applications' cgroup (refreshed every second for new ones). The previous knob values
    and ``make-it-fail`` are restored at the end (also on SIGTERM from the engine: :func:`main`)."""
    import contextlib

    d = debugfs / "fail_page_alloc"
    old = {k: (d / k).read_text().strip() for k in FAIL_PAGE_ALLOC_KNOBS}
    marked: set[int] = set()

    def mark(value: str, pids: set[int]) -> None:
        for pid in pids:
            with contextlib.suppress(OSError):
                (proc / str(pid) / "make-it-fail").write_text(value)

    def app_pids() -> set[int]:
        out: set[int] = set()
        for g in app_dirs[:1]:
            with contextlib.suppress(OSError, ValueError):
                out |= {int(x) for x in Path(g, "cgroup.procs").read_text().split()}
        return out

    try:
        for k, v in (("task-filter", "Y"), ("interval", "1"), ("times", "-1"), ("min-order", "0")):
            (d / k).write_text(v)
        (d / "probability").write_text("25" if low else "50")
        while True:
            new = app_pids() - marked
            mark("1", new)
            marked |= new
            if not lim.sleep(1.0):
                break
    finally:
        (d / "probability").write_text("0")
        mark("0", marked)
        for k in FAIL_PAGE_ALLOC_KNOBS:
            (d / k).write_text(old[k])


def pagefail_cgroup(lim: Limits, low: bool) -> None:
    """The stand-in: the applications' memory limit at usage + 8 MiB (low 64 MiB), OOM killer off (allocations stall)."""
    from nodewatch.tasks.finj.cgroup import memory_usage, set_memory_limit

    dirs, ver = _apps_group()
    head = (64 if low else 8) * MiB
    try:
        while lim.left() > 0:
            set_memory_limit(dirs, ver, memory_usage(dirs, ver) + head, stall=True)
            if not lim.sleep(5.0):
                break
    finally:
        set_memory_limit(dirs, ver, None, stall=True)


def ioerr(lim: Limits, low: bool, ctl: Path, **_: object) -> None:
    """Failing disk: turns on the applications' I/O error shim (every 500th call, 20 %; low 1000th, 10 %)."""
    ctl.mkdir(parents=True, exist_ok=True)
    switch = ctl / "ioerr"
    tmp = ctl / f".ioerr.{os.getpid()}"
    tmp.write_text("1000 10\n" if low else "500 20\n")
    os.replace(tmp, switch)
    try:
        while lim.sleep(1.0):
            pass
    finally:
        switch.unlink(missing_ok=True)


def copy(lim: Limits, low: bool, **_: object) -> None:
    """I/O interference: write and read back a 400 MiB (low 100 MiB) file, drop its cache, sleep 2 s."""
    size = min((100 if low else 400) * MiB, lim.disk_cap)
    lim.scratch.mkdir(parents=True, exist_ok=True)
    path = lim.scratch / f"copy-{os.getpid()}.bin"
    chunk = os.urandom(MiB)
    try:
        while lim.left() > 0:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                for _ in range(size // MiB):
                    os.write(fd, chunk)
                    if lim.left() <= 0:
                        break
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                while os.read(fd, MiB) and lim.left() > 0:
                    pass
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            if not lim.sleep(2.0):
                break
    finally:
        path.unlink(missing_ok=True)


# ----------------------------------------------------------------------------------------- applications
def dgemm(lim: Limits, **_: object) -> None:
    """Dense matrix products (n=768) until the end."""
    import numpy as np

    a = np.random.default_rng(2).random((768, 768))
    while lim.left() > 0:
        a = (a @ a.T) / 768.0


def stream(lim: Limits, **_: object) -> None:
    """STREAM triad on three 32 MiB arrays."""
    import numpy as np

    n = 4 * MiB
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    while lim.left() > 0:
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)


def linsolve(lim: Limits, **_: object) -> None:
    """HPL-like: solve dense systems (n from 500 to 1500)."""
    import numpy as np

    rng = np.random.default_rng(3)
    i = 0
    while lim.left() > 0:
        n = 500 + 250 * (i % 5)
        m = rng.random((n, n)) + n * np.eye(n)
        np.linalg.solve(m, rng.random(n))
        i += 1


def fileio(lim: Limits, **_: object) -> None:
    """Bonnie/IOzone-like: write a 64 MiB file in 64 KiB calls, fsync, read it back; EIO counted, not fatal."""
    lim.scratch.mkdir(parents=True, exist_ok=True)
    path = lim.scratch / f"fileio-{os.getpid()}.bin"
    size = min(64 * MiB, lim.disk_cap)
    chunk = os.urandom(64 * 1024)
    errors = 0
    try:
        while lim.left() > 0:
            try:
                with open(path, "wb", buffering=0) as fh:
                    for _ in range(size // len(chunk)):
                        fh.write(chunk)
                    os.fsync(fh.fileno())
                    os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                with open(path, "rb", buffering=0) as fh:
                    while fh.read(len(chunk)):
                        pass
            except OSError:
                errors += 1
            lim.sleep(0.5)
    finally:
        path.unlink(missing_ok=True)
        print(f"io errors: {errors}", file=sys.stderr)


PROGRAMS = {
    "leak": leak,
    "memeater": memeater,
    "ddot": ddot,
    "dial": dial,
    "cpufreq": cpufreq,
    "pagefail": pagefail,
    "ioerr": ioerr,
    "copy": copy,
    "dgemm": dgemm,
    "stream": stream,
    "linsolve": linsolve,
    "fileio": fileio,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of one program run."""
    p = argparse.ArgumentParser(prog="nodewatch-finj-program")
    p.add_argument("name", choices=sorted(PROGRAMS))
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--low", action="store_true")
    p.add_argument("--scratch", type=Path, required=True)
    p.add_argument("--ctl", type=Path, required=True)
    p.add_argument("--mem-cap", type=int, default=2048 * MiB)
    p.add_argument("--disk-cap", type=int, default=512 * MiB)
    a = p.parse_args(argv)
    if not (0 < a.duration <= 86400):
        print("duration must be in (0, 86400] s", file=sys.stderr)
        return 2
    lim = Limits(a.duration, a.mem_cap, a.disk_cap, a.scratch)

    def stop(*_: object) -> None:  # the engine's SIGTERM at the limit: run the programs' ``finally`` (knobs restored)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        PROGRAMS[a.name](lim, low=a.low, ctl=a.ctl)
    except MemoryError:
        return 4
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
