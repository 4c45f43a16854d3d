"""Validation of identifiers that come from input data (node names, sources, run ids).

Every identifier read from a file is checked here *before* it is used to build a path,
a Zarr coordinate or a log message. The node-name rule is deliberately strict: ASCII
letters, digits, ``-``, ``_`` and single dots between parts (FQDN style), 1–63 characters,
starting with a letter or digit. That rules out ``..``, ``/``, NUL, whitespace, a leading or
trailing dot and unicode look-alikes.

One name per node: :func:`normalise_node` is the single rule (case, domain, topology aliases) that
turns a host field of any source into the canonical node name; :func:`canonical_nodes` applies it
to an Arrow column (the ingest pipeline does so for every node column of every table).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NODE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*$"
"""Regex a node name must match (anchored; valid for Python ``re`` and RE2/pyarrow alike).
Together with :data:`NODE_NAME_MAX_LEN` it is the node-name rule; columns using it get both a
regex and a length expectation in their GX suite."""

NODE_NAME_MAX_LEN = 63
"""Maximum length of a node name (a DNS label)."""

_NODE_RE = re.compile(NODE_NAME_PATTERN)
_SAFE_TOKEN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class UnsafeNameError(ValueError):
    """Raised when an identifier from input data is not safe to use."""


def is_valid_node_name(name: object) -> bool:
    """True if ``name`` is a string that satisfies :data:`NODE_NAME_PATTERN`."""
    return isinstance(name, str) and len(name) <= NODE_NAME_MAX_LEN and _NODE_RE.fullmatch(name) is not None


def node_name_mask(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Vectorised :func:`is_valid_node_name` over an Arrow string array (nulls are invalid)."""
    ok = pc.and_(pc.match_substring_regex(values, NODE_NAME_PATTERN), pc.less_equal(pc.utf8_length(values), NODE_NAME_MAX_LEN))
    return np.asarray(pc.fill_null(ok, False).to_numpy(zero_copy_only=False), dtype=bool)


def check_node_name(name: object) -> str:
    """Return ``name`` unchanged if it is a valid node name, else raise :class:`UnsafeNameError`."""
    if not is_valid_node_name(name):
        raise UnsafeNameError(f"invalid node name {name!r}: must match {NODE_NAME_PATTERN}")
    return name  # type: ignore[return-value]


def check_path_token(token: object, what: str = "name") -> str:
    """Validate a single path component (table name, run id, model kind...).

    Rejects separators, ``..``, NUL and anything outside ``[A-Za-z0-9_.-]``.
    """
    if not isinstance(token, str) or not _SAFE_TOKEN_RE.fullmatch(token) or ".." in token:
        raise UnsafeNameError(f"invalid {what} {token!r}: only [A-Za-z0-9_.-] allowed, no '..'")
    return token


# ------------------------------------------------------------------------------ one name per node
_FQDN_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,62}(?:\.[a-z0-9_\-]{1,63})*$")
_IPV4_RE = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def normalise_node(raw: str, aliases: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """The one canonical node name of a host/node field from any source: ``(name, None)`` or ``(None, reason)``.

    Every source (telemetry, syslog, jobs node lists, alerts, tickets, failures, reservations,
    topology) goes through this rule, so one node is one name in every staged table, cube and model:

    1. reject non-ASCII (unicode look-alikes) and anything that is not a host name, before any change;
    2. lower-case (``CN0003`` and ``cn0003`` are one node);
    3. an alias of the full lower-cased name wins (``aliases``: lower-cased alias -> canonical name,
       from the staged topology);
    4. else strip the domain of an FQDN (``cn0003.example.org`` -> ``cn0003``; an IPv4 literal is kept
       whole) and apply an alias of the short name.

    The result must satisfy :data:`NODE_NAME_PATTERN`. Idempotent: a canonical name maps to itself.
    """
    shown = repr(raw[:80]) + ("..." if len(raw) > 80 else "")
    if not raw.isascii():
        return None, f"parse: invalid host name {shown} (non-ASCII)"
    low = raw.lower()
    if len(low) > 253 or not _FQDN_RE.match(low):
        return None, f"parse: invalid host name {shown}"
    aliases = aliases or {}
    name = aliases.get(low)
    if name is None:
        short = low if _IPV4_RE.match(low) else low.split(".", 1)[0]
        name = aliases.get(short, short)
    if not is_valid_node_name(name):
        return None, f"parse: invalid host name {shown} (normalised {name[:80]!r})"
    return name, None


def lower_aliases(aliases: Mapping[str, str] | None) -> dict[str, str]:
    """``aliases`` keyed by lower-cased alias (the form :func:`normalise_node` looks up)."""
    return {k.lower(): v for k, v in (aliases or {}).items()}


_CACHE_MAX = 1 << 16


def canonical_nodes(
    values: pa.Array | pa.ChunkedArray, aliases: Mapping[str, str] | None = None, cache: dict[str, str] | None = None
) -> pa.Array:
    """:func:`normalise_node` over a string (or ``dictionary<string>``) array, each distinct value once.

    A value the rule refuses is kept as written (and nulls stay null), so the node-name validation
    that follows rejects it with its usual reason. ``aliases`` must be keyed lower-case
    (:func:`lower_aliases`); ``cache`` (optional) keeps results across calls with the same aliases.
    A dictionary array comes back dictionary-encoded with unique dictionary values (two spellings of
    one node share one code), a string array as strings.
    """
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    if cache is None or len(cache) > _CACHE_MAX:
        cache = {}
    canon = []
    for v in enc.dictionary.cast(pa.string()).to_pylist():
        if v is None:
            canon.append(None)
            continue
        c = cache.get(v)
        if c is None:
            c = cache[v] = normalise_node(v, aliases)[0] or v
        canon.append(c)
    uniq: dict[str | None, int] = {}
    remap = np.fromiter((uniq.setdefault(c, len(uniq)) for c in canon), np.int32, len(canon))
    codes = pc.take(pa.array(remap, pa.int32()), enc.indices)
    out = pa.DictionaryArray.from_arrays(codes, pa.array(list(uniq), pa.string()))
    return out if pa.types.is_dictionary(arr.type) else out.cast(pa.string())
