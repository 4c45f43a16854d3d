"""``nodewatch checkpoint interval|tables|show`` and the Prefect flow ``checkpoint_tables``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import app

runner = CliRunner()


def _run(*args: str):  # noqa: ANN202
    return runner.invoke(app, list(args))


def test_interval_recommendation() -> None:
    r = _run(
        "checkpoint",
        "interval",
        "--nodes",
        "128",
        "--hours",
        "24",
        "--ckpt-cost",
        "10m",
        "--mtbf-node",
        "5y",
        "--weibull-shape",
        "0.8",
    )
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "128 nodes x 24 h" in out and "job MTBF 342.42 h" in out  # 5 y * 8766 h / 128
    assert "aware: checkpoint every 7.850 h" in out
    assert "Daly: every 10.573 h" in out and "Young: every 10.684 h" in out
    assert "2 checkpoint(s) = 23.667 h of compute" in out and "expected makespan 24.461 h" in out


def test_interval_never_and_machine_mtbf() -> None:
    r = _run(
        "checkpoint",
        "interval",
        "--nodes",
        "2",
        "--hours",
        "2",
        "--ckpt-cost",
        "15m",
        "--mtbf-machine",
        "24h",
        "--machine-nodes",
        "2",
    )
    assert r.exit_code == 0, r.output
    assert "do not checkpoint" in r.output


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--ckpt-cost", "10parsec", "--mtbf-node", "5y"], "unknown unit 'parsec'"),
        (["--ckpt-cost", "10m", "--mtbf-node", "-5y"], "cannot parse"),
        (["--ckpt-cost", "30h", "--mtbf-node", "5y"], "shorter than the runtime"),
        (["--ckpt-cost", "10m", "--mtbf-node", "5y", "--weibull-shape", "0"], "Weibull shape must be > 0"),
        (["--ckpt-cost", "10m"], "exactly one of --mtbf-node"),
        (["--ckpt-cost", "10m", "--mtbf-machine", "24h"], "needs --machine-nodes"),
        (["--ckpt-cost", "10m", "--mtbf-machine", "24h", "--machine-nodes", "64"], "more nodes"),
        (["--ckpt-cost", "1e-12s", "--mtbf-node", "5y"], "checkpoint cost 2.78e-16 h is outside the supported range"),
        (["--ckpt-cost", "10m", "--mtbf-node", "1e-9s"], "job MTBF 2.17e-15 h is outside the supported range"),
        (["--ckpt-cost", "10m", "--mtbf-node", "5y", "--weibull-shape", "1e-6"], "Weibull shape 1e-06 is outside"),
    ],
)
def test_interval_bad_input_one_line(args: list[str], msg: str) -> None:
    from nodewatch.flows.cli import UserError

    r = _run("checkpoint", "interval", "--nodes", "128", "--hours", "24", *args)
    assert isinstance(r.exception, UserError), r.output
    assert msg in str(r.exception) and "\n" not in str(r.exception)


@pytest.mark.slow
def test_interval_error_through_console_script() -> None:
    # the real entry point prints user errors as one line on stderr with exit code 2, no traceback
    cmd = [
        sys.executable,
        "-c",
        "from nodewatch.flows.cli import main; main()",
        "checkpoint",
        "interval",
        "--nodes",
        "128",
        "--hours",
        "24",
        "--ckpt-cost",
        "10parsec",
        "--mtbf-node",
        "5y",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={"COLUMNS": "300", "PATH": ""})
    assert p.returncode == 2, p.stdout + p.stderr
    assert "unknown unit 'parsec'" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_tables_cli_without_prefect(tmp_path) -> None:
    st = str(tmp_path / "s")
    r = _run(
        "--store", st, "checkpoint", "tables", "--mtbf-node", "5y", "--weibull-shape", "0.8", "--ckpt-cost", "15m", "--no-prefect"
    )
    assert r.exit_code == 0, r.output
    assert "completed" in r.output and "table.zarr" in r.output
    r = _run("--store", st, "checkpoint", "show")
    assert r.exit_code == 0 and "weibull0.8-node-mtbf-5y" in r.output
    r = _run("--store", st, "checkpoint", "tables", "--weibull-shape", "0.8", "--no-prefect")
    assert r.exit_code != 0


@pytest.mark.slow
def test_flow_with_artifacts(prefect_harness, tmp_path) -> None:
    from prefect.client.orchestration import get_client

    from nodewatch.flows.checkpoint import checkpoint_tables

    m = checkpoint_tables(
        store=str(tmp_path / "s"), models=[{"name": "w08", "mtbf_node_h": 43830.0, "shape": 0.8}], ckpt_costs_h=[0.25]
    )
    assert m["status"] == "completed"

    import anyio

    async def _keys() -> set[str]:
        async with get_client() as c:
            arts = await c.read_artifacts()
        return {a.key for a in arts}

    keys = anyio.run(_keys)
    assert {"checkpoint-tables", "checkpoint-tables-summary"} <= keys


def test_tables_bad_window_one_line() -> None:
    from nodewatch.flows.cli import UserError

    r = _run("checkpoint", "tables", "--failures", "lanl-s20", "--window-end", "soonish", "--no-prefect")
    assert isinstance(r.exception, UserError), r.output
    assert "--window-end: cannot parse 'soonish'" in str(r.exception) and "\n" not in str(r.exception)


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--mtbf-node", "5y", "--ckpt-cost", "1e-12s"], "checkpoint cost 2.78e-16 h is outside the supported range"),
        (["--mtbf-node", "1e-9s"], "job MTBF 2.78e-13 h is outside the supported range"),
        (["--mtbf-node", "5y", "--weibull-shape", "1e-6"], "Weibull shape 1e-06 is outside"),
    ],
)
def test_tables_absurd_magnitudes_one_line(tmp_path, args: list[str], msg: str) -> None:
    from nodewatch.flows.cli import UserError

    r = _run("--store", str(tmp_path / "s"), "checkpoint", "tables", "--no-prefect", *args)
    assert isinstance(r.exception, UserError), r.output
    assert msg in str(r.exception) and "\n" not in str(r.exception)
