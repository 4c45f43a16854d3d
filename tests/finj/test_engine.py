"""The engine with real processes: a mini campaign (features + labels + the product's LDMS parser on its
output) and cleanup after a normal end, a stop, Ctrl-C and a SIGKILL of the engine."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from nodewatch.tasks.finj import cgroup as cgmod
from nodewatch.tasks.finj.engine import EngineConfig, run_campaign
from nodewatch.tasks.finj.workload import parse_text

HEADER = "timestamp; duration; seqNum; isFault; cores; args\n"
NCORES = os.cpu_count() or 1
LAST = NCORES - 1


def _events(out: Path) -> list[dict[str, str]]:
    with open(out / "events.csv") as fh:
        return list(csv.DictReader(fh))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _task_pids(out: Path) -> list[int]:
    return [int(e["pid"]) for e in _events(out) if e["event"] == "start"]


@pytest.mark.slow
def test_mini_campaign(tmp_path: Path) -> None:
    """~26 s of real faults on this machine, sampled every second, turned into labelled windows (20-s windows
    every 5 s here: the pipeline is the same as with the paper's 60 s, the test stays short)."""
    from nodewatch.tasks.finj.dataset import CLASSES, build, per_second_state, read_raw
    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.telemetry import parse_ldms_csv

    wl = HEADER + (
        f"0; 26; 1; False; None; dgemm\n2; 8; 2; True; 0; leak\n12; 6; 3; True; {LAST}; dial l\n20; 5; 4; True; 0; copy l\n"
    )
    out = tmp_path / "c"
    summary = run_campaign(parse_text(wl, NCORES), EngineConfig(out=out, node="minicn01", disk_cap=64 * 2**20))
    ev = _events(out)
    assert [e["event"] for e in ev].count("start") == 4 and [e["event"] for e in ev].count("end") == 4
    assert all(e["status"] == "ok" for e in ev if e["event"] == "end"), ev
    assert summary["counts"]["started"] == 4 and not summary["interrupted"]
    # every task process is gone, the run's cgroups too, the scratch dir is empty
    assert not any(_alive(p) for p in _task_pids(out))
    assert not [p for p in cgmod.ROOT.rglob("nwfinj-" + summary["run_id"])] if cgmod.detect()[0] else True
    assert not any((out / "scratch").iterdir())
    # the sampler wrote ~1 row per second
    raw = read_raw(out)
    assert 21 <= raw.values.shape[0] <= 36
    labels, alloc_node, _ = per_second_state(raw)
    leak_s = int((labels == CLASSES.index("leak")).sum())
    assert 6 <= leak_s <= 10 and (labels == CLASSES.index("dial")).sum() >= 4
    assert alloc_node.mean() > 0.8
    # memory really leaked (16 MiB/s for ~7 s): charged to the run's fault cgroup (node-wide free memory also
    # moves with everything else on a shared machine, so it is only the fallback without cgroups)
    on = np.flatnonzero(labels == CLASSES.index("leak"))
    col = raw.columns.index
    if cgmod.detect()[0]:
        # the campaign's own cgroups were sampled: the job (dgemm) used CPU; the fault group is not a feature,
        # the derived non-job CPU time is
        assert raw.values[on, col("cgroup.faults.mem_usage")].max() > 50 * 2**20
        job_cpu = raw.values[:, col("cgroup.apps.cpu_usage")]
        assert job_cpu[-1] - job_cpu[0] > 1.0
        assert "derived.nonjob_cpu" in raw.columns and f"derived.nonjob_cpu#{LAST}" in raw.columns
        # the target node's memory (campaign view) = the run's groups summed: the leak shows in it; the sampler
        # also read the sys group and the processes' own I/O (copy wrote its file through the fault group)
        used = raw.values[:, col("target.mem_usage")]
        assert used[on].max() - used[on[0] - 1] > 50 * 2**20 and "meminfo.MemFree" not in raw.columns
        assert "cgroup.sys.mem_usage" in raw.columns
        wchar = raw.values[:, col("cgroup.faults.task_wchar")]
        assert wchar[-1] - wchar[0] > 2**20
    else:
        free = raw.values[:, col("meminfo.MemFree")]
        assert free[on[0] - 1] - free[on[-1]] > 50 * 2**20
    ds = build(out, window=20, step=5)
    assert ds.features.shape[1] == NCORES and ds.features.shape[2] == len(ds.names)
    assert np.isfinite(ds.features).all()
    assert CLASSES.index("leak") in set(ds.mode.tolist()) and ds.ambiguous.any()
    assert not any(n.startswith("cgroup.faults.") for n in ds.names)
    # the catalogue file goes through the product's own LDMS parser
    rows = rejects = 0
    with open(out / "ldms" / "minicn01.csv", "rb") as fh:
        for res in parse_ldms_csv(fh, ParseContext("minicn01.csv")):
            rows += res.rows.num_rows
            rejects += res.rejects.num_rows
            assert set(res.rows.column("node").to_pylist()) <= {"minicn01"}
    assert rows > 20 * 20 and rejects <= 12  # counters: the first sample has no rate


def _engine_subprocess(tmp_path: Path, wl: str) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "w.csv").write_text(wl)
    out = tmp_path / "c"
    code = (
        "import sys; from pathlib import Path\n"
        "from nodewatch.tasks.finj.workload import read_workload\n"
        "from nodewatch.tasks.finj.engine import run_campaign, EngineConfig\n"
        "run_campaign(read_workload(sys.argv[1]), EngineConfig(out=Path(sys.argv[2]), sample=True))\n"
    )
    # SIGINT back to its default in the engine: a test run started in the background (``cmd &`` in a
    # non-interactive shell, as CI scripts do) ignores SIGINT, and Python keeps an inherited SIG_IGN.
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "w.csv"), str(out)],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return proc, out


def _wait_started(out: Path, n: int, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (out / "events.csv").exists():
            pids = _task_pids(out)
            if len(pids) >= n and all(_alive(p) for p in pids):
                time.sleep(0.5)
                return pids
        time.sleep(0.1)
    raise AssertionError("tasks did not start")


def _wait_gone(pids: list[int], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "orphan task processes survived"


WL_LONG = HEADER + "0; 60; 1; False; None; stream\n0; 60; 2; True; 0; leak l\n"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_no_orphans_when_the_engine_dies(tmp_path: Path, sig: int) -> None:
    proc, out = _engine_subprocess(tmp_path, WL_LONG)
    try:
        pids = _wait_started(out, 2)
        state = [json.loads(x) for x in (out / ".finj-state.jsonl").read_text().splitlines()]
        sampler = [d["pgid"] for d in state if "pgid" in d][0]
        proc.send_signal(sig)
        proc.wait(timeout=90)  # a graceful stop under a loaded 2-core CI machine
        _wait_gone([*pids, sampler])
        deadline = time.monotonic() + 10
        while not (out / ".finj-state.done").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (out / ".finj-state.done").exists(), "the watchdog did not run"
        cg = [d["cgroups"] for d in state if "cgroups" in d]
        if cg:
            assert not any(os.path.exists(d) for d in cg[0]["base"]), "run cgroups left behind"
        if sig == signal.SIGINT:
            assert any(e["event"] == "stopped" for e in _events(out))
    finally:
        if proc.poll() is None:
            proc.kill()


def test_stop_callback_cleans_up(tmp_path: Path) -> None:
    first: list[float] = []

    def stop() -> bool:  # 1 s after the loop's first check (both tasks start in that first iteration)
        first.append(time.monotonic())
        return first[-1] - first[0] > 1.0

    summary = run_campaign(parse_text(WL_LONG, NCORES), EngineConfig(out=tmp_path / "c", sample=False), stop=stop)
    assert summary["interrupted"] and summary["counts"]["stopped"] == 2
    assert not any(_alive(p) for p in _task_pids(tmp_path / "c"))


def test_time_limit_kills_and_faults_never_overlap(tmp_path: Path) -> None:
    wl = HEADER + "0; 2; 1; True; 0; dial\n1; 2; 2; True; 0; ddot l\n"
    summary = run_campaign(parse_text(wl, NCORES), EngineConfig(out=tmp_path / "c", sample=False, time_scale=2.0))
    ev = _events(tmp_path / "c")
    kinds = [(e["event"], e["seq"]) for e in ev]
    assert ("delayed", "2") in kinds
    assert kinds.index(("end", "1")) < kinds.index(("start", "2"))
    assert summary["counts"]["delayed"] == 1


def test_fault_without_cgroups_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgmod, "detect", lambda: (0, "no cgroups in this test"))
    wl = HEADER + "0; 1; 1; True; 0; cpufreq\n0; 1; 2; True; 0; pagefail l\n"
    summary = run_campaign(parse_text(wl, NCORES), EngineConfig(out=tmp_path / "c", sample=False))
    ev = _events(tmp_path / "c")
    assert [e["event"] for e in ev] == ["unavailable", "unavailable"]
    assert ev[0]["detail"] == "no cgroups in this test" and summary["unavailable"]["cpufreq"]


def test_output_dir_must_be_empty(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x").write_text("x")
    with pytest.raises(FileExistsError):
        run_campaign([], EngineConfig(out=tmp_path / "c", sample=False))
