"""Which fault programs this machine can produce, checked at run time (``finj generate`` and ``finj run``).

``pagefail`` is the paper's kernel fault injection (Netti et al. Sec. 5.2: "makes any page allocation request
fail with 50% probability"; FINJ's program writes ``/sys/kernel/debug/fail_page_alloc``). It needs a kernel
built with ``CONFIG_FAULT_INJECTION`` + ``CONFIG_FAIL_PAGE_ALLOC``, debugfs mounted and root. Without them the
fault is *unavailable* with the reason: the cgroup memory-limit stand-in (``programs.pagefail_cgroup``) showed
in 1 of 6 instances of the 2026-11-28 campaign (docs/finj.md), so it only runs when asked for
(``--stand-in pagefail``) and such a campaign records it in ``summary.json`` (``stand_ins``).
``cpufreq`` (cgroup CPU bandwidth) and ``ioerr`` (the ``LD_PRELOAD`` shim) are checked by the engine (cgroups,
C compiler): their stand-ins are visible in the data (docs/finj.md) and run by default.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

DEBUGFS = Path("/sys/kernel/debug")
STAND_INS = ("pagefail",)
"""Faults whose stand-in runs only when asked for (``--stand-in``)."""
LEGACY_STAND_INS = ("pagefail",)
"""Faults that ran as stand-ins in campaigns older than the ``stand_ins`` key of ``summary.json``."""


def config_paths() -> tuple[Path, ...]:
    """Where the running kernel's build configuration may be read."""
    return (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}"))


def kernel_config(option: str, paths: Iterable[Path] | None = None) -> str | None:
    """``"y"``/``"m"`` (built), ``"n"`` (``# CONFIG_X is not set`` or absent from a readable config) or ``None``
    (no configuration readable)."""
    for p in config_paths() if paths is None else paths:
        try:
            raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        for line in raw.decode("utf-8", "replace").splitlines():
            if line.startswith(f"{option}="):
                return line.split("=", 1)[1].strip().strip('"')
        return "n"
    return None


def pagefail_reason(debugfs: Path | None = None, euid: int | None = None, paths: Iterable[Path] | None = None) -> str:
    """``""`` when the kernel's page-allocation fault injection can be driven here, else why not (one line)."""
    debugfs = DEBUGFS if debugfs is None else debugfs
    euid = os.geteuid() if euid is None else euid
    knob = debugfs / "fail_page_alloc" / "probability"
    if knob.exists():
        return "" if euid == 0 else f"needs root to write {knob.parent}"
    paths = list(config_paths() if paths is None else paths)
    fi, fpa = kernel_config("CONFIG_FAULT_INJECTION", paths), kernel_config("CONFIG_FAIL_PAGE_ALLOC", paths)
    if fi == "n":
        why = "CONFIG_FAULT_INJECTION is not set in this kernel"
    elif fpa == "n":
        why = "CONFIG_FAIL_PAGE_ALLOC is not set in this kernel"
    elif fpa in ("y", "m"):
        why = f"debugfs is not mounted at {debugfs}"
    else:
        why = "the kernel configuration is unreadable"
    return f"no kernel page-allocation fault injection ({knob.parent} absent: {why})"


def unavailable(stand_ins: Sequence[str] = (), debugfs: Path | None = None, euid: int | None = None) -> dict[str, str]:
    """Faults this machine cannot produce with their paper mechanism and not asked for as stand-ins, with why."""
    out = {}
    why = pagefail_reason(debugfs, euid)
    if why and "pagefail" not in stand_ins:
        out["pagefail"] = why + "; its cgroup stand-in (--stand-in pagefail) left no trace in 5 of 6 instances (docs/finj.md)"
    return out


def campaign_stand_ins(summary: dict) -> tuple[str, ...]:
    """The faults a campaign ran as opt-in stand-ins: ``summary.json`` ``stand_ins``; a campaign older than that
    key ran ``pagefail`` as its cgroup stand-in (:data:`LEGACY_STAND_INS`)."""
    if "stand_ins" in summary:
        return tuple(str(s) for s in summary.get("stand_ins") or ())
    return LEGACY_STAND_INS
