"""Escaping of values that come from input data before they reach a terminal, Markdown or HTML.

Every string that an input file can choose (file names, node names, reservation names, ticket ids,
messages, reasons, run ids read back from manifests) goes through one of these before it is printed
or rendered:

* :func:`strip_control` — drop C0/C1 control characters (ESC, CSI, BEL, CR, NUL, …; tab is kept),
  DEL and the Unicode bidirectional overrides, and turn line breaks into a visible ``⏎`` so one
  value stays on one line;
* :func:`md` — :func:`strip_control` + HTML entities for ``& < >`` + a backslash before every
  Markdown punctuation character, so a value is literal text in a Markdown paragraph *and* in a
  Markdown table cell (``|`` is escaped);
* :func:`html_text` — :func:`strip_control` + :func:`html.escape` (quotes too), for HTML bodies and
  attributes;
* :func:`md_code` — a value inside an inline code span, for ids and paths that read best monospaced.

The terminal side (rich markup) lives in ``nodewatch.flows.cli._safe``, built on :func:`strip_control`.
"""

from __future__ import annotations

import html
import re
from typing import Any

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINEBREAK = re.compile("\r\n|[\n\r\u2028\u2029\x85]")
_MD_PUNCT = re.compile(r"([\\`*_{}\[\]()#!|~])")


def strip_control(value: Any, multiline: bool = False) -> str:
    """``str(value)`` without control characters (tab kept), line breaks shown as ``⏎`` (kept with ``multiline``).

    Removes C0 (0x00–0x1f except tab), DEL, C1 (0x80–0x9f, which includes the 8-bit CSI) and the
    Unicode bidirectional marks/overrides, so no value can move the cursor, recolour, retitle or
    hyperlink a terminal, or reorder the text it is shown in.
    """
    s = "" if value is None else str(value)
    if multiline:
        return "\n".join(_CONTROL.sub("", line) for line in _LINEBREAK.split(s))
    return _CONTROL.sub("", _LINEBREAK.sub("⏎", s))


def md(value: Any) -> str:
    """A value as literal Markdown text (also safe in a table cell): no HTML, no link, no emphasis, no ``|``."""
    # & < > become entities first (no HTML, no entity the input chose); quotes stay as they are: outside
    # an HTML attribute they cannot start markup, and as entities they read badly in the raw .md file.
    s = html.escape(strip_control(value), quote=False)
    return _MD_PUNCT.sub(r"\\\1", s)


def md_code(value: Any) -> str:
    """A value inside an inline code span (backticks in the value cannot close it; ``|`` escaped for tables).

    Markdown renders code spans literally (HTML in them is shown, not interpreted), so the only
    characters to neutralise are the backtick (would close the span) and ``|`` (would split a table row).
    """
    s = strip_control(value).replace("`", "'").replace("|", "¦")
    return f"`{s}`"


def html_text(value: Any) -> str:
    """A value as HTML text or attribute value (``& < > " '`` escaped, control characters removed)."""
    return html.escape(strip_control(value), quote=True)


def plot_label(value: Any) -> str:
    """A value as a literal matplotlib label: control characters removed, ``$`` escaped (no mathtext parse, no crash)."""
    return strip_control(value).replace("$", r"\$")


def md_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for a Prefect table artifact: string keys and values through :func:`md`, other values unchanged.

    Prefect's UI renders a table cell that looks like Markdown with its Markdown renderer (raw HTML
    allowed), so a string cell is escaped exactly like Markdown text.
    """
    return [{md(k): (md(v) if isinstance(v, str) else v) for k, v in r.items()} for r in rows]
