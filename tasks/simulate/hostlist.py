"""Slurm hostlist expressions: ``cn[0001-0004,0017]`` <-> node names (written by the simulator)."""

from __future__ import annotations

import re
from collections.abc import Iterable

_RANGE = re.compile(r"^([A-Za-z][A-Za-z0-9_\-]*?)(\d+)$")


def compress(names: Iterable[str]) -> str:
    """Compact hostlist for names sharing a prefix and digit width, e.g. ``cn[0001-0003,0007]``.

    Names with other prefixes/widths are appended comma-separated (as ``scontrol show hostlist`` does).
    """
    groups: dict[tuple[str, int], list[int]] = {}
    others: list[str] = []
    for n in names:
        m = _RANGE.match(n)
        if not m:
            others.append(n)
            continue
        groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
    parts: list[str] = []
    for (prefix, width), nums in sorted(groups.items()):
        nums = sorted(set(nums))
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        ranges: list[str] = []
        lo = prev = nums[0]
        for x in nums[1:] + [None]:  # type: ignore[list-item]
            if x is not None and x == prev + 1:
                prev = x
                continue
            ranges.append(f"{lo:0{width}d}" if lo == prev else f"{lo:0{width}d}-{prev:0{width}d}")
            if x is not None:
                lo = prev = x
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts + others)


def expand(expr: str) -> list[str]:
    """Inverse of :func:`compress` (used by tests and the plot script)."""
    out: list[str] = []
    for m in re.finditer(r"([A-Za-z0-9_\-]+?)(?:\[([0-9,\-]+)\])?(?:,|$)", expr):
        prefix, body = m.group(1), m.group(2)
        if not prefix:
            continue
        if body is None:
            out.append(prefix)
            continue
        for r in body.split(","):
            lo, _, hi = r.partition("-")
            w = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{i:0{w}d}")
    return out
