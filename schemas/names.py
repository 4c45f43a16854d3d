"""Validation of identifiers that come from input data (node names, sources, run ids).

Every identifier read from a file is checked here *before* it is used to build a path,
a Zarr coordinate or a log message. The node-name rule is deliberately strict: ASCII
letters, digits, ``-``, ``_`` and single dots (FQDN parts), 1–63 characters, starting with
a letter or digit. That rules out ``..``, ``/``, NUL, whitespace, and unicode look-alikes.
"""

from __future__ import annotations

import re

NODE_NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9_\-]|\.(?!\.)){0,62}$"
"""Regex a node name must match (anchored). Shared with the GX suites and pyarrow masks."""

_NODE_RE = re.compile(NODE_NAME_PATTERN)
_SAFE_TOKEN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class UnsafeNameError(ValueError):
    """Raised when an identifier from input data is not safe to use."""


def is_valid_node_name(name: object) -> bool:
    """True if ``name`` is a string that satisfies :data:`NODE_NAME_PATTERN`."""
    return isinstance(name, str) and _NODE_RE.fullmatch(name) is not None and not name.endswith(".")


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
