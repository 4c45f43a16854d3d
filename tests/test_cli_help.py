"""Every command's ``--help`` shows Typer's normal flag forms and click-style metavars (issue 16, CLI polish).

The walk goes over the click command tree Typer builds from the app, so a command added later is
checked without touching this test.
"""

from __future__ import annotations

import re

import click
import typer
from typer.testing import CliRunner

from nodewatch.flows.cli import app

TYPE_FORMS = re.compile(r"<(str|bool|int|float|path|datetime|date|list\[[^>]*\]|tuple[^>]*)>")


def _paths(cmd: click.Command, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    if isinstance(cmd, click.Group) or hasattr(cmd, "commands"):
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            if not sub.hidden:
                out += _paths(sub, (*prefix, name))
    return out


def test_every_help_has_normal_flags_and_metavars() -> None:
    paths = _paths(typer.main.get_command(app))
    assert len(paths) > 30  # the walk reached the sub-commands (ingest <source>, checkpoint ..., states ...)
    runner = CliRunner()
    bad: list[str] = []
    for p in paths:
        res = runner.invoke(app, [*p, "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
        where = " ".join(p) or "(root)"
        if res.exit_code != 0:
            bad.append(f"{where}: exit {res.exit_code}: {res.output[-300:]}")
            continue
        if "--no-no-" in res.output:
            bad.append(f"{where}: --no-no- in {[ln for ln in res.output.splitlines() if '--no-no-' in ln]}")
        m = TYPE_FORMS.search(res.output)
        if m:
            bad.append(f"{where}: type form {m.group(0)}")
    assert not bad, "\n".join(bad)


def test_labels_of_one_command() -> None:
    """The labels themselves: flags show none, values TEXT/DATE/DURATION/INTEGER, the mode flag both forms."""
    res = CliRunner().invoke(app, ["checkpoint", "tables", "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    lines = {ln.split()[1]: ln for ln in res.output.splitlines() if ln.startswith("│ ") and len(ln.split()) > 2}
    assert re.search(r"--ckpt-cost\s+DURATION", lines["--ckpt-cost"])
    assert re.search(r"--machine-nodes\s+INTEGER", lines["--machine-nodes"])
    assert re.search(r"--system\s+TEXT", lines["--system"])
    assert re.search(r"--prefect\s+--no-prefect\s+Run", lines["--prefect"])
    assert re.search(r"--help\s+Show this", lines["--help"])
    res = CliRunner().invoke(app, ["ingest", "syslog", "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    assert "PATHS..." in res.output and re.search(r"--start\s+DATE", res.output)
