"""Hostile text from input data never acts on a terminal, Markdown or HTML (issue 24), and user errors are
one line without a traceback (issue 24/16).

The corpus :data:`HOSTILE` holds rich markup, an OSC-8 hyperlink, ANSI/C1 escapes, BEL, CR, bidi
overrides, HTML/JavaScript and Markdown link/table syntax. CLI commands run in-process (Typer's runner,
real store, real flows) or as subprocesses (stderr captured, as a user sees it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nodewatch.tasks.core.escape import html_text, md, md_code, plot_label, strip_control

HOSTILE = (
    "a[/x]",
    "[link=https://evil.example/]maint",
    "[bold red]loud[/]",
    "\x1b[31mred\x1b[0m",
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "\x1b]0;pwned title\x07",
    "\x9b2J",
    "bell\x07 back\x08 cr\rover",
    "\u202eevil\u202c",
    "<img src=x onerror=alert(1)>",
    "<script>document.title='pwned'</script>",
    "[click](javascript:alert(1))",
    "| a | b |\n|---|---|",
    "trailing\\",
)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What must never reach a terminal (tab and newline are allowed between values)."""


def _visible(s: str) -> str:
    """The literal text a hostile value must still show (control characters removed, line breaks as ⏎)."""
    return strip_control(s)


# ----------------------------------------------------------------------------- helpers
@pytest.mark.parametrize("value", HOSTILE)
def test_md_html_terminal_helpers_neutralise_every_value(value):
    m = md(value)
    assert "<" not in m and ">" not in m and CONTROL.search(m) is None
    assert "](" not in m.replace("\\](", "").replace("\\]\\(", "")  # a link needs an unescaped "](" — none left
    assert "|" not in m.replace("\\|", "")
    h = html_text(value)
    assert "<" not in h and ">" not in h and '"' not in h and CONTROL.search(h) is None
    c = md_code(value)
    assert c.count("`") == 2 and "|" not in c and CONTROL.search(c) is None
    assert CONTROL.search(plot_label(value)) is None and "$" not in plot_label("$x$").replace(r"\$", "")


def test_markdown_renders_hostile_values_as_text():
    """Rendered by a real CommonMark engine (markdown-it-py, a dependency of rich) with GFM tables."""
    import markdown_it
    import pandas as pd

    from nodewatch.tasks.states.report import markdown_table

    df = pd.DataFrame({"rack": list(HOSTILE), "n": range(len(HOSTILE))})
    out = markdown_it.MarkdownIt("commonmark").enable("table").render(markdown_table(df))
    assert "<img" not in out and "<script" not in out and "<a " not in out
    assert out.count("<tr>") == len(HOSTILE) + 1  # header + one row per value: no "|" split a row


def test_rich_safe_shows_markup_literally():
    from rich.console import Console

    from nodewatch.flows.cli._safe import safe

    con = Console(record=True, width=200, force_terminal=False)
    for v in HOSTILE:
        con.print(f"value: {safe(v)}")
    out = con.export_text()
    assert CONTROL.search(out) is None
    assert "[link=https://evil.example/]maint" in out and "a[/x]" in out and "[bold red]loud[/]" in out


# ----------------------------------------------------------------------------- CLI in-process
@pytest.fixture
def hostile_store(tmp_path):
    """A store with one run manifest whose every string field is hostile."""
    from nodewatch.schemas.manifest import InputRecord, RowCounts
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.core.store import Store

    st = Store(str(tmp_path / "store"))
    rec = RunRecorder(st, HOSTILE[1], {f"p{i}": v for i, v in enumerate(HOSTILE)})
    for i, v in enumerate(HOSTILE):
        rec.add_input(InputRecord(path=f"/in/{v}", sha256=f"{i:064x}", bytes=1, message=v, format=v))
        rec.error(v)
    rec.add_counts(HOSTILE[0], RowCounts(rows_in=1, staged=1))
    rec.add_output(HOSTILE[4], HOSTILE[5])
    rec.finish("completed")
    return st, rec.run_id


def _invoke(*args: str) -> tuple[int, str]:
    from nodewatch.flows.cli import app

    r = CliRunner().invoke(app, list(args), catch_exceptions=True)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.output


def test_runs_list_and_show_print_hostile_manifest_literally(hostile_store):
    st, run_id = hostile_store
    for args in (("runs", "list"), ("runs", "show", run_id), ("runs", "show", "latest")):
        code, out = _invoke("--store", st.url, *args)
        assert code == 0, out
        assert CONTROL.search(out) is None, (args, repr(out))
    code, out = _invoke("--store", st.url, "runs", "show", run_id)
    flat = " ".join(out.split())
    assert "[link=https://evil.example/]maint" in flat and "a[/x]" in out
    code, out = _invoke("--store", st.url, "runs", "show", run_id, "--json")
    assert code == 0 and CONTROL.search(out) is None
    assert json.loads(out)["flow"] == HOSTILE[1]  # JSON keeps the value exactly (escaped as \\u001b etc.)


def test_ingest_summary_of_hostile_file_names(tmp_path, prefect_harness):
    """Real ingest (Prefect flow) of files whose names carry markup and escapes: summary printed literally."""
    d = tmp_path / "in"
    d.mkdir()
    line = "<13>1 2026-01-01T00:00:00Z cn001 app - - - hello\n"
    names = ["x[bold]y.log", "[link=https:evil.example]m.log", "\x1b[31mred.log", "\x9b2Jc1.log", "<img src=x>.log"]
    for i, n in enumerate(names):
        (d / n).write_text(line.replace("hello", f"hello {i}"))
    code, out = _invoke("--store", str(tmp_path / "store"), "ingest", "syslog", str(d), "--no-data-docs")
    assert code in (0, 1), out
    assert CONTROL.search(out) is None, repr(out)
    assert "x[bold]" in out and "[link=" in out, out  # shown literally (the narrow file column may cut the rest)


# ----------------------------------------------------------------------------- CLI as a user runs it
NODEWATCH = [sys.executable, "-m", "nodewatch.flows.cli"]


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "PREFECT_LOGGING_LEVEL": "INFO", **(env or {})}
    return subprocess.run(NODEWATCH + args, cwd=cwd, env=e, capture_output=True, text=True, timeout=300)


def _assert_one_line_error(p: subprocess.CompletedProcess[str], needle: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if needle in ln or "error" in ln.lower()]
    assert len(errors) == 1 and errors[0].startswith("error:"), p.stderr  # Prefect's INFO lines may surround it
    assert CONTROL.search(p.stderr) is None


@pytest.mark.slow
def test_user_errors_are_one_line_without_traceback(tmp_path):
    (tmp_path / "f.log").write_text("<13>1 2026-01-01T00:00:00Z cn001 app - - - hello\n")
    _assert_one_line_error(_run(["runs", "list"], tmp_path, {"NODEWATCH_SERVICE_HOSTS": "not json"}), "service_hosts")
    _assert_one_line_error(_run(["ingest", "syslog", "f.log"], tmp_path, {"NODEWATCH_STORE": "/proc/x"}), "not writable")
    _assert_one_line_error(_run(["--store", "foo://bar", "ingest", "syslog", "f.log"], tmp_path), "unknown protocol 'foo'")
    _assert_one_line_error(_run(["--store", "st", "ingest", "syslog", "missing.log"], tmp_path), "missing.log")
    (tmp_path / "empty").mkdir()
    _assert_one_line_error(_run(["--store", "st", "ingest", "syslog", "empty"], tmp_path), "holds no file")
    # an error raised inside a Prefect flow (StatesError in the derive task): Prefect's traceback is not shown
    _assert_one_line_error(_run(["--store", "st", "states", "build", "--start", "2026-01-01", "--end", "2026-01-01"],
                                tmp_path), "no nodes")
    # a hostile value inside an error message is shown literally, never as markup
    p = _run(["--store", "st", "runs", "show", "[link=https://evil.example/]x\x1b[31m"], tmp_path)
    _assert_one_line_error(p, "[link=https://evil.example/]x")


@pytest.mark.slow
def test_ingest_never_reads_the_store_under_the_input_directory(tmp_path):
    """Issue 16: `nodewatch ingest syslog .` with the default store ./nodewatch-data under `.`."""
    (tmp_path / "a.log").write_text("<13>1 2026-01-01T00:00:00Z cn001 app - - - hello\n")
    first = _run(["ingest", "syslog", "."], tmp_path)
    assert first.returncode == 0, first.stderr
    second = _run(["ingest", "syslog", ".", "--no-data-docs"], tmp_path)
    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr
    runs = sorted((tmp_path / "nodewatch-data" / "runs").glob("*.json"))
    m = json.loads(runs[-1].read_text())
    assert [Path(i["path"]).name for i in m["inputs"]] == ["a.log"]  # no runs/*.json, no raw/ copy
    refused = m["notes"].get("refused_inputs", [])
    assert any("inside the store" in r["reason"] for r in refused)
