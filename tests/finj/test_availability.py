"""Faults this machine cannot produce (``availability.py``): the run-time check and its reasons, the engine
and ``finj generate`` leaving an unavailable fault out with the reason, the opt-in stand-in, and the paper's
``pagefail`` knob handling (on a directory laid out like ``/sys/kernel/debug/fail_page_alloc``: this VM's kernel
has no fault injection, so the real kernel path is not exercised here)."""

from __future__ import annotations

import csv
import gzip
import os
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import app
from nodewatch.tasks.finj import availability
from nodewatch.tasks.finj.engine import EngineConfig, run_campaign
from nodewatch.tasks.finj.programs import FAIL_PAGE_ALLOC_KNOBS, Limits, fail_page_alloc
from nodewatch.tasks.finj.workload import parse_text

HEADER = "timestamp; duration; seqNum; isFault; cores; args\n"


def _debugfs(root: Path) -> Path:
    d = root / "debugfs" / "fail_page_alloc"
    d.mkdir(parents=True)
    for k, v in zip(FAIL_PAGE_ALLOC_KNOBS, ("N", "100", "1", "1", "0"), strict=True):
        (d / k).write_text(v + "\n")
    return d.parent


def test_pagefail_reasons(tmp_path: Path) -> None:
    """Each way the kernel's page-allocation fault injection can be missing gives its own one-line reason."""
    dbg = _debugfs(tmp_path)
    assert availability.pagefail_reason(dbg, euid=0) == ""
    assert "needs root" in availability.pagefail_reason(dbg, euid=1000)
    empty = tmp_path / "nodebugfs"
    empty.mkdir()
    off = tmp_path / "config-off"
    off.write_text("CONFIG_DEBUG_FS=y\n# CONFIG_FAULT_INJECTION is not set\n")
    gz = tmp_path / "config.gz"
    gz.write_bytes(gzip.compress(b"CONFIG_FAULT_INJECTION=y\n# CONFIG_FAIL_PAGE_ALLOC is not set\n"))
    on = tmp_path / "config-on"
    on.write_text("CONFIG_FAULT_INJECTION=y\nCONFIG_FAIL_PAGE_ALLOC=y\n")
    cases = {
        (off,): "CONFIG_FAULT_INJECTION is not set",
        (gz,): "CONFIG_FAIL_PAGE_ALLOC is not set",
        (on,): "debugfs is not mounted",
        (tmp_path / "missing",): "configuration is unreadable",
    }
    for paths, want in cases.items():
        why = availability.pagefail_reason(empty, euid=0, paths=paths)
        assert want in why and "fail_page_alloc absent" in why and "\n" not in why, why
    assert availability.unavailable(("pagefail",), empty, euid=0) == {}
    assert "pagefail" in availability.unavailable((), empty, euid=0)
    assert availability.campaign_stand_ins({"stand_ins": []}) == ()
    assert availability.campaign_stand_ins({}) == ("pagefail",)  # campaigns before the key ran the stand-in


def test_this_machine_is_checked_at_run_time() -> None:
    """The check reads this machine: with no ``fail_page_alloc`` in debugfs, pagefail is unavailable and the
    reason agrees with the running kernel's configuration."""
    have = (availability.DEBUGFS / "fail_page_alloc" / "probability").exists() and os.geteuid() == 0
    why = availability.unavailable().get("pagefail", "")
    assert bool(why) != have
    if availability.kernel_config("CONFIG_FAULT_INJECTION") == "n":
        assert "CONFIG_FAULT_INJECTION is not set" in why


def _events(out: Path) -> list[dict[str, str]]:
    with open(out / "events.csv") as fh:
        return list(csv.DictReader(fh))


def test_engine_reports_pagefail_unavailable(tmp_path: Path) -> None:
    """Without the kernel mechanism and without ``--stand-in``: an ``unavailable`` event with the reason, nothing
    started, no window labelled (the campaign's label set has no pagefail)."""
    wl = HEADER + "0; 1; 1; True; 0; pagefail\n"
    empty = tmp_path / "nodebugfs"
    empty.mkdir()
    summary = run_campaign(parse_text(wl, os.cpu_count() or 1), EngineConfig(out=tmp_path / "c", sample=False, debugfs=empty))
    ev = _events(tmp_path / "c")
    assert [e["event"] for e in ev] == ["unavailable"]
    assert "fail_page_alloc absent" in ev[0]["detail"] and summary["unavailable"]["pagefail"] == ev[0]["detail"]
    assert summary["counts"]["started"] == 0 and summary["stand_ins"] == []


def test_generate_leaves_unavailable_faults_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "nodebugfs"
    empty.mkdir()
    monkeypatch.setattr(availability, "DEBUGFS", empty)
    runner = CliRunner()
    args = ["--store", str(tmp_path / "s"), "finj", "generate", "--span", "3000", "--seed", "3"]
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "w.csv")])
    assert r.exit_code == 0, r.output
    assert "pagefail left out, unavailable on this machine: no kernel page-allocation fault injection" in r.output
    assert "pagefail" not in (tmp_path / "w.csv").read_text()
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "w2.csv"), "--stand-in", "pagefail"])
    assert r.exit_code == 0 and "left out" not in r.output
    assert "pagefail" in (tmp_path / "w2.csv").read_text()


def test_fail_page_alloc_knobs_set_for_the_applications_and_restored(tmp_path: Path) -> None:
    """The paper's pagefail (probability 50 %, interval 1, unlimited times, min-order 0) with ``task-filter`` on,
    ``make-it-fail`` = 1 for the applications' processes only while it holds, every knob restored after."""
    dbg = _debugfs(tmp_path)
    proc = tmp_path / "proc"
    for pid in (101, 102, 999):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "make-it-fail").write_text("0")
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "cgroup.procs").write_text("101\n102\n")
    d = dbg / "fail_page_alloc"
    before = {k: (d / k).read_text() for k in FAIL_PAGE_ALLOC_KNOBS}
    th = threading.Thread(target=fail_page_alloc, args=(Limits(0.6, 2**30, 2**20, tmp_path), False, dbg, (str(apps),), proc))
    th.start()
    deadline = time.monotonic() + 5
    while any((proc / p / "make-it-fail").read_text() != "1" for p in ("101", "102")) and time.monotonic() < deadline:
        time.sleep(0.01)
    seen = {k: (d / k).read_text() for k in FAIL_PAGE_ALLOC_KNOBS}
    marks = {pid: (proc / str(pid) / "make-it-fail").read_text() for pid in (101, 102, 999)}
    th.join(5)
    assert not th.is_alive()
    assert seen == {"task-filter": "Y", "interval": "1", "times": "-1", "min-order": "0", "probability": "50"}
    assert marks == {101: "1", 102: "1", 999: "0"}
    assert {k: (d / k).read_text().strip() for k in FAIL_PAGE_ALLOC_KNOBS} == {k: v.strip() for k, v in before.items()}
    assert all((proc / str(pid) / "make-it-fail").read_text() == "0" for pid in (101, 102))


def test_run_says_pagefail_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nodewatch finj run`` names the unavailable fault and its reason before starting, and at the end."""
    empty = tmp_path / "nodebugfs"
    empty.mkdir()
    monkeypatch.setattr(availability, "DEBUGFS", empty)
    (tmp_path / "w.csv").write_text(HEADER + "0; 1; 1; True; 0; pagefail l\n")
    args = ["--store", str(tmp_path / "s"), "finj", "run", str(tmp_path / "w.csv"), "--out", str(tmp_path / "c"), "--no-sample"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "pagefail unavailable on this machine, its tasks will not run: no kernel page-allocation" in r.output
    assert "0 tasks started" in r.output and "1 unavailable" in r.output
    assert [e["event"] for e in _events(tmp_path / "c")] == ["unavailable"]


def test_train_knows_which_faults_ran_as_stand_ins(tmp_path: Path) -> None:
    """``finj train``'s table over the faults the machine produces drops the windows of stand-in instances:
    ``summary.json`` ``stand_ins`` names them; a campaign older than the key ran pagefail as its stand-in."""
    import numpy as np

    from nodewatch.models.finj.features import FeatureLayout
    from nodewatch.tasks.finj.dataset import Dataset, without_faults
    from nodewatch.tasks.finj.train import stand_in_faults

    c = tmp_path / "c"
    c.mkdir()
    rows = ["time,event,seq,is_fault,program,low,cores,pid,status,detail"]
    for seq, prog, a, b in (("1", "pagefail", 1000, 1100), ("2", "leak", 1300, 1400), ("3", "pagefail", 1600, 1650)):
        rows += [f"{a},start,{seq},True,{prog},False,0,1,,", f"{b},end,{seq},True,{prog},False,0,1,ok,"]
    rows.append("oops")  # a malformed row is skipped
    (c / "events.csv").write_text("\n".join(rows) + "\n")
    assert stand_in_faults([c]) == (["pagefail"], [(1000.0, 1100.0), (1600.0, 1650.0)])
    (c / "summary.json").write_text('{"stand_ins": []}')
    assert stand_in_faults([c]) == ([], [])
    ends = np.arange(1000, 1800, 10)
    n = ends.size
    lab = np.zeros(n, int)
    ds = Dataset(np.zeros((n, 1, 2)), ["a", "b"], ends, lab, lab, lab.astype(bool), FeatureLayout((), (), frozenset()))
    sub = without_faults(ds, [(1000.0, 1100.0), (1600.0, 1650.0)])
    # a window [end - 59, end] overlaps [a, b] iff a <= end <= b + 59: ends 1000..1150 (16) and 1600..1700 (11) go
    assert sub.ends.min() == 1160 and 1590 in sub.ends and not ((sub.ends >= 1600) & (sub.ends <= 1709)).any()
    assert len(sub.ends) == n - 16 - 11
