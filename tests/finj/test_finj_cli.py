"""``nodewatch finj``: bad arguments and inputs are one-line user errors (exit 2, nothing started)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import UserError, app

runner = CliRunner()
HEADER = "timestamp; duration; seqNum; isFault; cores; args\n"


def _err(args: list[str], store: Path) -> str:
    r = runner.invoke(app, ["--store", str(store), *args])
    assert r.exit_code != 0, r.output
    exc = r.exception
    if isinstance(exc, SystemExit):  # click usage errors (bad option type)
        assert exc.code == 2
        return r.output
    assert isinstance(exc, (UserError, ValueError)), repr(exc)
    msg = str(exc)
    assert "\n" not in msg.strip()
    return msg


@pytest.fixture
def store(tmp_path: Path) -> Path:
    p = tmp_path / "store"
    p.mkdir()
    return p


@pytest.mark.parametrize(
    "body,msg",
    [
        ("0; 10; 1; True; 9; leak\n", "w.csv:2: core 9 out of range"),
        ("0; -1; 1; True; 0; leak\n", "w.csv:2: negative duration"),
        ("0; 1; 1; True; 0\n", "w.csv:2: expected 6"),
        ("0; 1; 1; True; 0; reboot\n", "w.csv:2: unknown fault program 'reboot'"),
        ("0; 1; 1; True; 0; leak\n0; 1; 1; True; 0; dial\n", "w.csv:3: duplicate seqNum"),
    ],
)
def test_run_refuses_bad_workloads_before_starting(tmp_path: Path, store: Path, body: str, msg: str) -> None:
    (tmp_path / "w.csv").write_text(HEADER + body)
    out = tmp_path / "out"
    assert msg in _err(["finj", "run", str(tmp_path / "w.csv"), "--out", str(out)], store)
    assert not out.exists()  # nothing started, nothing written


def test_run_refuses_bad_arguments(tmp_path: Path, store: Path) -> None:
    (tmp_path / "w.csv").write_text(HEADER + "0; 1; 1; True; 0; leak\n")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    assert "not an empty directory" in _err(["finj", "run", str(tmp_path / "w.csv"), "--out", str(busy)], store)
    assert "invalid node name" in _err(
        ["finj", "run", str(tmp_path / "w.csv"), "--out", str(tmp_path / "o"), "--node", "../x"], store
    )
    assert "cannot open" in _err(["finj", "run", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o")], store)
    assert "--cpu-shares must be in 0..262144" in _err(
        ["finj", "run", str(tmp_path / "w.csv"), "--out", str(tmp_path / "o"), "--cpu-shares", "300000"], store
    )
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00garbage")
    assert "bin.csv" in _err(["finj", "run", str(tmp_path / "bin.csv"), "--out", str(tmp_path / "o")], store)


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--span", "0"], "--span must be > 0"),
        (["--span", "nan"], "--span must be > 0"),
        (["--span", "1e12"], "longer than 30 days"),
        (["--fault-gap", "-5"], "--fault-gap must be > 0"),
        (["--fault-duration", "5"], "--fault-duration must be >= 20"),
        (["--cores", "-3"], "--cores must be in 1..4096"),
        (["--cores", "2", "--pin", "2"], "--pin: core 2 out of range"),
        (["--pin", "1-x"], "--pin: invalid cores"),
        (["--span", "abc"], "Invalid value"),
    ],
)
def test_generate_refuses_bad_arguments(tmp_path: Path, store: Path, args: list[str], msg: str) -> None:
    assert msg in _err(["finj", "generate", "--out", str(tmp_path / "w.csv"), *args], store)
    assert not (tmp_path / "w.csv").exists()


def test_generate_writes_a_workload_run_accepts(tmp_path: Path, store: Path) -> None:
    from nodewatch.tasks.finj.workload import read_workload

    r = runner.invoke(
        app, ["--store", str(store), "finj", "generate", "--out", str(tmp_path / "w.csv"), "--span", "3600", "--seed", "4"]
    )
    assert r.exit_code == 0, r.output
    tasks = read_workload(tmp_path / "w.csv")
    assert any(t.is_fault for t in tasks) and any(not t.is_fault for t in tasks)
    assert "exists" in _err(["finj", "generate", "--out", str(tmp_path / "w.csv")], store)


def test_train_refuses_bad_arguments(tmp_path: Path, store: Path) -> None:
    assert "--models: unknown xgb" in _err(["finj", "train", str(tmp_path), "--models", "rf,xgb"], store)
    assert "--source must be raw or staged" in _err(["finj", "train", str(tmp_path), "--source", "cloud"], store)
    assert "--levels must be all or derivative" in _err(["finj", "train", str(tmp_path), "--levels", "abs"], store)
    assert "--view must be campaign or node" in _err(["finj", "train", str(tmp_path), "--view", "tenant"], store)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "raw.csv").write_text("#Time,Time_usec,ProducerName,component_id,job_id,a\n1,0,n,0,0,1\n" * 2)
    (tmp_path / "x" / "events.csv").write_text("time,event,seq,is_fault,program,low,cores,pid,status,detail\n")
    (tmp_path / "x" / "exclude.csv").write_text("start,end,reason\nsoon,later,x\n")
    assert "exclude.csv: bad row" in _err(["finj", "train", str(tmp_path / "x")], store)
    assert "not a campaign directory" in _err(["finj", "train", str(tmp_path / "nope")], store)
    (tmp_path / "c").mkdir()
    assert "raw.csv" in _err(["finj", "train", str(tmp_path / "c")], store)
    (tmp_path / "c" / "raw.csv").write_text("garbage\n\x00\x01")
    assert "raw.csv" in _err(["finj", "train", str(tmp_path / "c")], store)


def test_real_entry_point_prints_one_line(tmp_path: Path) -> None:
    (tmp_path / "w.csv").write_text(HEADER + "0; 5; 1; True; 0; leak\n5; nan; 2; True; 0; ddot\n")
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "from nodewatch.flows.cli import main; main()",
            "--store",
            str(tmp_path / "s"),
            "finj",
            "run",
            str(tmp_path / "w.csv"),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "w.csv:3: duration 'nan' is not finite" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
