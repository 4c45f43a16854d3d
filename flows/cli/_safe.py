"""Terminal-safe text: every value from data that the CLI prints goes through :func:`safe` (or :func:`text`).

rich interprets ``[...]`` as markup (a directory named ``a[/x]`` raised ``MarkupError``; a reservation
named ``[link=https://evil.example/]maint`` became a hyperlink) and passes ESC sequences through to the
terminal. :func:`safe` removes control characters (see :func:`nodewatch.tasks.core.escape.strip_control`)
and escapes markup, so the value is shown literally; :func:`text` gives the same as a ``rich.text.Text``
(never parsed as markup) for table cells that carry a style.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.text import Text

from nodewatch.tasks.core.escape import strip_control


def safe(value: Any, multiline: bool = False) -> str:
    """``value`` as literal rich text: control characters removed, ``[`` escaped (markup-safe ``str``).

    Line breaks become ``⏎`` (one value, one line) unless ``multiline`` (a table or report printed whole).
    """
    return escape(strip_control(value, multiline))


def text(value: Any, style: str = "") -> Text:
    """``value`` as a :class:`rich.text.Text` (shown literally, control characters removed)."""
    return Text(strip_control(value), style=style)


def cells(*values: Any) -> list[str]:
    """:func:`safe` of every value (for ``Table.add_row(*cells(...))``)."""
    return [safe(v) for v in values]
