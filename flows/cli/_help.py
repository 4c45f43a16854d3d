"""Help rendering: click-style metavars (``TEXT``, ``INTEGER``, ``DATE``, ``PATH``) instead of Typer's ``<str>``.

Typer (0.29) labels every value in ``--help`` by its Python type: ``--store <str>``, ``--force <bool>``,
``--help <bool>``. :func:`relabel` gives every command and group of the app classes whose parameters
show the usual click metavars instead: nothing for flags, ``TEXT`` for strings, ``INTEGER``/``FLOAT``,
``DATE`` for dates and times, ``PATH`` for paths, ``[a|b]`` for choices, and for text options named
in ``_TEXT_BY_NAME`` ``DATE`` (``--start``, ``--end``, ``--day``, …) or ``DURATION`` (``--ckpt-cost``,
``--mtbf-node``, ``--step``, …); an explicit ``typer.Option(metavar=...)`` wins. It runs once after the command modules are
registered (:mod:`nodewatch.flows.cli`), so a new command gets the same labels without doing anything.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any, get_args

import click
import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import DefaultPlaceholder

# text options that hold a date/time or a duration ("5y", "30m", "15min"), by parameter name
_TEXT_BY_NAME: dict[str, str] = {
    **dict.fromkeys(("start", "end", "day", "date", "epoch", "window_start", "window_end", "train_end"), "DATE"),
    **dict.fromkeys(("ckpt_cost", "restart", "mtbf_node", "mtbf_machine", "step"), "DURATION"),
}
_NAMES: dict[type, str] = {str: "TEXT", int: "INTEGER", float: "FLOAT", bool: "BOOLEAN", datetime: "DATE", date: "DATE",
                           Path: "PATH"}


def label(param: click.Parameter) -> str:
    """The metavar shown for ``param`` in help ('' for a flag: a flag takes no value)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    if param.metavar is not None and not isinstance(param, TyperArgument):
        return param.metavar
    desc = getattr(param, "type_descriptor", None)
    if desc is None:  # a plain click parameter (e.g. the help option)
        return param.type.name.upper() if param.type is not None else "TEXT"
    if desc.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
    if desc.is_datetime:
        return "DATE"
    if desc.is_path:
        return "PATH"
    ann: Any = desc.annotation
    if desc.is_list and get_args(ann):
        ann = get_args(ann)[0]
    if desc.is_tuple:
        return " ".join(_NAMES.get(a, "TEXT") for a in get_args(ann))
    if ann is str and param.name in _TEXT_BY_NAME:
        return _TEXT_BY_NAME[param.name]
    return _NAMES.get(ann, "TEXT")


def _display_type_rich(self: click.Parameter, ctx: click.Context) -> str | None:  # noqa: ARG001 - Typer's signature
    """The value label of ``self`` in help (:func:`label`)."""
    return label(self)


class LabelledOption(TyperOption):
    """A Typer option shown with a click-style metavar (same layout: a parameter's class is swapped)."""

    display_type_rich = _display_type_rich


class LabelledArgument(TyperArgument):
    """A Typer argument shown with a click-style metavar (same layout: a parameter's class is swapped).

    Its name is upper-case as in click (``PATHS...``; usage ``PATHS...``, optional ``[DAY]``).
    """

    display_type_rich = _display_type_rich

    @property
    def display_name_raw(self) -> str:
        """The argument's name in help: its metavar, else its name in upper case."""
        return self.metavar if self.metavar is not None else (self.name or "").upper()

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


def _relabel_params(params: list[click.Parameter]) -> list[click.Parameter]:
    for p in params:
        if type(p) is TyperOption:
            p.__class__ = LabelledOption
        elif type(p) is TyperArgument:
            p.__class__ = LabelledArgument
    return params


class LabelledCommand(TyperCommand):
    """A Typer command whose help shows click-style metavars."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        """Parameters (help option included) with click-style labels."""
        return _relabel_params(super().get_params(ctx))


class LabelledGroup(TyperGroup):
    """A Typer group whose help shows click-style metavars."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        """Parameters (help and completion options included) with click-style labels."""
        return _relabel_params(super().get_params(ctx))


def _unset(value: object) -> bool:
    return value is None or isinstance(value, DefaultPlaceholder)


def relabel(app: typer.Typer) -> None:
    """Use :class:`LabelledGroup` / :class:`LabelledCommand` for ``app`` and every command and group under it."""
    if _unset(app.info.cls) or app.info.cls is TyperGroup:
        app.info.cls = LabelledGroup
    for c in app.registered_commands:
        if _unset(c.cls) or c.cls is TyperCommand:
            c.cls = LabelledCommand
    for g in app.registered_groups:
        if g.typer_instance is not None:
            relabel(g.typer_instance)
