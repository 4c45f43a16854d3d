"""Slurm hostlist expressions: ``node[001-004,017],gpu[1-2]`` <-> ``[node001, ..., gpu2]``.

Semantics follow Slurm's ``hostlist_create`` / ``scontrol show hostnames``:

* hosts are separated by commas (and whitespace) *outside* brackets;
* ``[...]`` holds a comma-separated list of numbers and ``lo-hi`` ranges; the width of ``lo`` (its
  number of characters) sets the zero padding of every number produced from that range
  (``n[08-11]`` -> n08 n09 n10 n11, ``n[1-10]`` -> n1 ... n10);
* several bracket groups in one name expand as a cartesian product, left group outermost
  (``rack[1-2]-n[01-02]`` -> rack1-n01 rack1-n02 rack2-n01 rack2-n02);
* ``(null)``, ``None assigned``, ``None`` and the empty string mean "no hosts".

Malformed input raises :class:`HostlistError` with a one-line message; validation of the produced
names (path safety) is the caller's job (:func:`nodewatch.schemas.names.is_valid_node_name`).
"""

from __future__ import annotations

import re
from itertools import product

MAX_HOSTS = 1_000_000
"""Largest number of hosts one expression may expand to (a range or the whole expression)."""

EMPTY_HOSTLISTS = frozenset({"", "(null)", "None assigned", "None", "none"})
"""Values sacct prints when no node is assigned."""

_RANGE_RE = re.compile(r"(\d+)(?:-(\d+))?")
_SEPARATORS = ", \t\n"


class HostlistError(ValueError):
    """A hostlist expression that cannot be expanded."""


def _split_top_level(expr: str) -> list[str]:
    """Split on separators outside brackets; check bracket balance."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for i, ch in enumerate(expr):
        if ch == "[":
            if depth:
                raise HostlistError(f"hostlist {expr!r}: nested '[' at position {i}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"hostlist {expr!r}: ']' without '[' at position {i}")
            depth = 0
        elif ch in _SEPARATORS and not depth:
            if cur:
                parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if depth:
        raise HostlistError(f"hostlist {expr!r}: unbalanced '[' (missing ']')")
    if cur:
        parts.append("".join(cur))
    return parts


def _expand_ranges(expr: str, body: str) -> list[str]:
    """Expand the inside of one bracket group, e.g. ``001-004,017``."""
    if not body:
        raise HostlistError(f"hostlist {expr!r}: empty brackets '[]'")
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE_RE.fullmatch(item)
        if m is None:
            raise HostlistError(f"hostlist {expr!r}: bad range {item!r} (expected N or LO-HI with digits)")
        lo_s, hi_s = m.group(1), m.group(2)
        lo = int(lo_s)
        hi = int(hi_s) if hi_s is not None else lo
        if hi < lo:
            raise HostlistError(f"hostlist {expr!r}: reversed range {item!r}")
        if hi - lo + 1 > MAX_HOSTS:
            raise HostlistError(f"hostlist {expr!r}: range {item!r} has more than {MAX_HOSTS:,} hosts")
        width = len(lo_s)
        out.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
        if len(out) > MAX_HOSTS:
            raise HostlistError(f"hostlist {expr!r}: expands to more than {MAX_HOSTS:,} hosts")
    return out


def _expand_one(expr: str, word: str) -> list[str]:
    """Expand one top-level host expression (possibly several bracket groups)."""
    pieces: list[list[str]] = []
    pos = 0
    total = 1
    while pos < len(word):
        lb = word.find("[", pos)
        if lb < 0:
            pieces.append([word[pos:]])
            break
        if lb > pos:
            pieces.append([word[pos:lb]])
        rb = word.index("]", lb)  # balance already checked
        nums = _expand_ranges(expr, word[lb + 1 : rb])
        total *= len(nums)
        if total > MAX_HOSTS:
            raise HostlistError(f"hostlist {expr!r}: expands to more than {MAX_HOSTS:,} hosts")
        pieces.append(nums)
        pos = rb + 1
    return ["".join(p) for p in product(*pieces)]


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into host names, in Slurm's order.

    Args:
        expr: e.g. ``"node[001-004,017],gpu[1-2]"``.

    Returns:
        The host names (duplicates kept, as Slurm does); ``[]`` for ``(null)``/``None assigned``/empty.

    Raises:
        HostlistError: unbalanced or nested brackets, empty brackets, non-numeric or reversed ranges,
            more than :data:`MAX_HOSTS` hosts.
    """
    if not isinstance(expr, str):
        raise HostlistError(f"hostlist {expr!r}: not a string")
    s = expr.strip()
    if s in EMPTY_HOSTLISTS:
        return []
    out: list[str] = []
    for word in _split_top_level(s):
        if word.startswith("["):
            raise HostlistError(f"hostlist {expr!r}: host expression {word!r} has no prefix before '['")
        out.extend(_expand_one(expr, word))
        if len(out) > MAX_HOSTS:
            raise HostlistError(f"hostlist {expr!r}: expands to more than {MAX_HOSTS:,} hosts")
    return out


_TRAILING_NUM_RE = re.compile(r"^(.*?)(\d+)$")


def compress_hostlist(hosts: list[str]) -> str:
    """Inverse of :func:`expand_hostlist` for one-dimensional names (``n01,n02,n03,x`` -> ``n[01-03],x``).

    Hosts are grouped by prefix and digit width of their trailing number (first-seen order of
    prefixes, numbers sorted, duplicates dropped); ``expand_hostlist(compress_hostlist(h))`` returns
    the same set of hosts. Names without a trailing number are kept verbatim.
    """
    groups: dict[tuple[str, int], set[int]] = {}
    order: list[tuple[str, int] | str] = []
    for h in hosts:
        m = _TRAILING_NUM_RE.match(h)
        if m is None:
            if h not in order:
                order.append(h)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            groups[key] = set()
            order.append(key)
        groups[key].add(int(m.group(2)))
    parts: list[str] = []
    for key in order:
        if isinstance(key, str):
            parts.append(key)
            continue
        prefix, width = key
        nums = sorted(groups[key])
        ranges: list[str] = []
        start = prev = nums[0]
        for n in [*nums[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}")
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)
