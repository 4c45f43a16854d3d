"""Validation of identifiers that come from input data (node names, sources, run ids).

Every identifier read from a file is checked here *before* it is used to build a path,
a Zarr coordinate or a log message. The node-name rule is deliberately strict: ASCII
letters, digits, ``-``, ``_`` and single dots between parts (FQDN style), 1–63 characters,
starting with a letter or digit. That rules out ``..``, ``/``, NUL, whitespace, a leading or
trailing dot and unicode look-alikes.
"""

from __future__ import annotations

import re

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
