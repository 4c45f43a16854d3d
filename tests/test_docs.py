"""Docs that are generated from code must be current; names in docs must exist in the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_tables_reference_is_current():
    sys.path.insert(0, str(ROOT / "docs"))
    import gen_tables

    assert (ROOT / "docs" / "tables.md").read_text() == gen_tables.render(), "run: .venv/bin/python docs/gen_tables.py"


def test_cli_commands_named_in_docs_exist():
    """Every `nodewatch <group> <cmd>` mentioned in README/docs is a real command (checked via --help)."""
    from typer.testing import CliRunner

    from nodewatch.flows.cli import app

    runner = CliRunner()
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    seen = set()
    for p in texts:
        text = p.read_text()
        blocks = "\n".join(re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S))
        snippets = re.findall(r"`([^`\n]+)`", text) + re.findall(r"^\s*(?:\$ )?(nodewatch .*)$", blocks, flags=re.M)
        cmds = [c for c in snippets if c.strip().startswith("nodewatch ")]
        for m in (re.match(r"\s*nodewatch ((?:--\S+ \S+ )*)([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", c) for c in cmds):
            if m is None:
                continue
            group, sub = m.group(2), m.group(3)
            key = (group, sub)
            if key in seen:
                continue
            seen.add(key)
            r = runner.invoke(app, [group, "--help"])
            assert r.exit_code == 0, f"{p.name}: `nodewatch {group}` is not a command"
            if sub and "Commands" in r.output and sub not in ("help",):
                r2 = runner.invoke(app, [group, sub, "--help"])
                assert r2.exit_code == 0, f"{p.name}: `nodewatch {group} {sub}` is not a command"
    assert seen


def test_help_runs_without_error():
    out = subprocess.run([sys.executable, "-m", "nodewatch.flows.cli", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "ingest" in out.stdout
