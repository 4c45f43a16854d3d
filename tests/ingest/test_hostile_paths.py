"""Hostile paths in an input directory or the nightly inbox: links, special files, link loops.

Each case was reproduced on the code before ``nodewatch.tasks.ingest.discovery``: a symlink to
``/proc/self/environ`` or to a secret outside the input tree landed its bytes in ``raw/``, a FIFO
blocked the run, and a recursive glob over a directory holding ``a -> .`` never returned.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nodewatch.tasks.core.files import UnsafeInputError, open_regular
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.discovery import discover_inputs, glob_regex
from nodewatch.tasks.ingest.inbox import day_files
from nodewatch.tasks.ingest.inputs import InputError, detect_compression, open_binary

LINE = b"2026-01-05T00:00:01+00:00 cn0001 kernel: hello\n"
SECRET = b"NODEWATCH_HASH_SALT=do-not-leak-this-0123456789\n"


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """An input dir with one good file, links out of the tree, a FIFO, a link loop; and a secret outside."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    (d / "good.log").write_bytes(LINE)
    (d / "sub" / "inner.log").write_bytes(LINE.replace(b"hello", b"inner"))
    (d / "environ.log").symlink_to("/proc/self/environ")
    (d / "secret.log").symlink_to(secret)
    (d / "inside.log").symlink_to(d / "good.log")
    (d / "loop").symlink_to(".")  # a -> . : any walk that follows it never ends
    (d / "out").symlink_to(tmp_path)  # directory link out of the tree
    os.mkfifo(d / "fifo.log")
    return d, secret


def _in_thread(fn, timeout: float = 20.0):
    """Run ``fn`` with a deadline: a hang (FIFO read, link loop) fails the test instead of blocking CI."""
    box: dict = {}

    def run() -> None:
        try:
            box["v"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test thread
            box["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"{fn} did not return within {timeout} s"
    if "e" in box:
        raise box["e"]
    return box["v"]


def test_directory_walk_takes_regular_files_only(tmp_path: Path) -> None:
    d, _ = _tree(tmp_path)
    found = _in_thread(lambda: discover_inputs([d]))
    assert sorted(p.name for p in found.files) == ["good.log", "inner.log"]
    reasons = {Path(r.path).name: r.reason for r in found.refused}
    assert set(reasons) == {"environ.log", "secret.log", "inside.log", "fifo.log", "loop", "out"}
    assert reasons["environ.log"].startswith("symbolic link") and reasons["fifo.log"] == "a FIFO"
    assert reasons["loop"] == "symbolic link to a directory (not walked)"


def test_follow_symlinks_only_to_regular_files_under_the_roots(tmp_path: Path) -> None:
    d, secret = _tree(tmp_path)
    found = _in_thread(lambda: discover_inputs([d], follow_symlinks=True))
    # inside.log resolves to good.log (same file once); the links out of the tree stay refused
    assert sorted(str(p) for p in found.files) == sorted([str(d / "good.log"), str(d / "sub" / "inner.log")])
    reasons = {Path(r.path).name: r.reason for r in found.refused}
    assert reasons["secret.log"] == f"symbolic link to {secret}, outside the input paths"
    assert "outside the input paths" in reasons["environ.log"]


def test_recursive_glob_does_not_follow_a_link_loop(tmp_path: Path) -> None:
    d, _ = _tree(tmp_path)
    found = _in_thread(lambda: discover_inputs([str(d / "**" / "*.log")]))
    assert sorted(p.name for p in found.files) == ["good.log", "inner.log"]
    found = _in_thread(lambda: discover_inputs([str(d / "*.log")]))
    assert [p.name for p in found.files] == ["good.log"]


@pytest.mark.parametrize(("pattern", "path", "hit"), [
    ("a/*.log", "a/x.log", True), ("a/*.log", "a/b/x.log", False), ("a/**/*.log", "a/x.log", True),
    ("a/**/*.log", "a/b/c/x.log", True), ("a/*.log", "a/.x.log", False), ("a/.*.log", "a/.x.log", True),
    ("a/[ab].log", "a/b.log", True), ("a/[!ab].log", "a/b.log", False), ("a/?.log", "a/xy.log", False),
    ("a/**/*.log", "a/.hidden/x.log", False), ("/abs/*.gz", "/abs/f.gz", True),
])
def test_glob_regex_follows_glob_semantics(pattern: str, path: str, hit: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is hit


def test_named_link_or_special_file_is_a_one_line_error(tmp_path: Path) -> None:
    d, _ = _tree(tmp_path)
    for name, words in (("environ.log", "symbolic link"), ("secret.log", "symbolic link"), ("fifo.log", "a FIFO")):
        with pytest.raises(InputError, match=words):
            _in_thread(lambda n=name: discover_inputs([d / n]))
    with pytest.raises(InputError, match="special file system"):
        discover_inputs(["/proc/self/environ"])
    with pytest.raises(InputError, match="special file system"):
        discover_inputs(["/dev/null"])
    os.symlink("/dev/null", d / "null.log")
    with pytest.raises(InputError, match="outside the input paths"):
        discover_inputs([d / "null.log"], follow_symlinks=True)


def test_readers_never_open_through_a_link(tmp_path: Path) -> None:
    """A path swapped for a link after discovery is still refused by every reader (O_NOFOLLOW + fstat)."""
    d, _ = _tree(tmp_path)
    for name in ("secret.log", "environ.log"):
        with pytest.raises(UnsafeInputError, match="symbolic link|special file system"):
            open_regular(d / name)
        with pytest.raises(InputError, match="symbolic link|special file system"):
            open_binary(d / name)
        with pytest.raises(InputError):
            detect_compression(d / name)
    with pytest.raises(UnsafeInputError, match="a FIFO"):
        _in_thread(lambda: open_regular(d / "fifo.log"))
    store = Store(str(tmp_path / "store"))
    with pytest.raises(UnsafeInputError):
        store.land_raw("syslog", d / "secret.log")
    assert not store.exists("raw", "syslog")


def test_raw_and_quarantine_are_owner_only(tmp_path: Path) -> None:
    d, _ = _tree(tmp_path)
    store = Store(str(tmp_path / "store"))
    raw = store.land_raw("syslog", d / "good.log")
    assert raw.new
    import pyarrow as pa

    store.write_parquet(pa.table({"reason": ["x"]}), store.quarantine_key("syslog", "2026-01-05", "r1"))
    for area in ("raw", "quarantine"):
        for dirpath, _dirs, files in os.walk(store.path(area)):
            assert stat.S_IMODE(os.stat(dirpath).st_mode) == 0o700, dirpath
            for f in files:
                assert stat.S_IMODE(os.stat(os.path.join(dirpath, f)).st_mode) == 0o600, f
    assert (Path(store.path(raw.key))).read_bytes() == LINE


def test_inbox_skips_links_and_special_files(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    day = inbox / "syslog" / "date=2026-01-05"
    day.mkdir(parents=True)
    (day / "a.log").write_bytes(LINE)
    (day / "b.log").symlink_to("/proc/self/environ")
    (day / "c.log").symlink_to(day / "a.log")
    os.mkfifo(day / "d.log")
    files = _in_thread(lambda: day_files(inbox, date(2026, 1, 5)))
    assert files == {"syslog": [str(day / "a.log")]}


def test_cli_ingest_refuses_links_and_lands_no_secret(prefect_harness, tmp_path: Path) -> None:
    """End to end through the CLI: refused entries listed in the manifest, no secret byte in the store."""
    from nodewatch.flows.cli import app

    d, _ = _tree(tmp_path)
    store = tmp_path / "store"
    runner = CliRunner()
    r = runner.invoke(app, ["--store", str(store), "ingest", "syslog", str(d), "--no-data-docs"])
    assert r.exit_code == 0, r.output
    assert "refused input" in r.output and "Traceback" not in r.output
    blobs = [p.read_bytes() for p in store.rglob("*") if p.is_file()]
    assert not any(b"do-not-leak" in b or b"NODEWATCH_" in b or b"PATH=" in b for b in blobs)
    import json

    (man,) = [json.loads(p.read_text()) for p in (store / "runs").glob("*.json")]
    refused = {Path(x["path"]).name for x in man["notes"]["refused_inputs"]}
    assert refused == {"environ.log", "secret.log", "inside.log", "fifo.log", "loop", "out"}
    # a link named on the command line: one line, exit 2, before any flow (or Prefect) starts
    r2 = subprocess.run([sys.executable, "-m", "nodewatch.flows.cli", "--store", str(store), "ingest", "syslog",
                         str(d / "secret.log")], capture_output=True, text=True, timeout=300)
    out = (r2.stdout + r2.stderr).strip()
    assert r2.returncode == 2 and "symbolic link" in out and "Traceback" not in out
    assert len(out.splitlines()) == 1, out
