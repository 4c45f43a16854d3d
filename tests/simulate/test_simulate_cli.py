"""`nodewatch simulate` CLI: run, --append, --day, refusal of a different cluster, bad input."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import UserError, app
from nodewatch.schemas.names import UnsafeNameError

ARGS = ["simulate", "--nodes", "30", "--step", "10min", "--scheduler", "synchronous", "--workers", "1"]


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    r = CliRunner().invoke(app, [*ARGS, "--days", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_run_writes_layout(sim_dir):
    doc = json.loads((sim_dir / "simulation.json").read_text())
    assert doc["dates_written"] == ["2026-01-01"]
    assert (sim_dir / "telemetry/ldms/date=2026-01-01/r00.csv").exists()
    assert (sim_dir / "syslog/date=2026-01-01/mgmt.log").exists()
    assert (sim_dir / "jobs/sacct/date=2026-01-01/sacct.txt").exists()


def test_append_then_day_rerender_is_identical(sim_dir):
    r = CliRunner().invoke(app, ["simulate", "--out", str(sim_dir), "--append"])
    assert r.exit_code == 0, r.output
    doc = json.loads((sim_dir / "simulation.json").read_text())
    assert doc["dates_written"] == ["2026-01-01", "2026-01-02"]
    f = sim_dir / "syslog/date=2026-01-02/r00.log"
    before = f.read_bytes()
    r = CliRunner().invoke(app, ["simulate", "--out", str(sim_dir), "--day", "1"])
    assert r.exit_code == 0, r.output
    assert f.read_bytes() == before


def test_refuses_different_cluster_and_bad_input(sim_dir, tmp_path):
    r = CliRunner().invoke(app, [*ARGS, "--seed", "2", "--out", str(sim_dir)])
    assert isinstance(r.exception, UserError) and "different simulated cluster" in str(r.exception)
    r = CliRunner().invoke(app, ["simulate", "--out", str(tmp_path / "none"), "--append"])
    assert isinstance(r.exception, UserError) and "simulation.json" in str(r.exception)
    r = CliRunner().invoke(app, [*ARGS, "--step", "7s", "--out", str(tmp_path / "x")])
    assert isinstance(r.exception, UserError) and "step_s" in str(r.exception)
    r = CliRunner().invoke(app, [*ARGS, "--start", "2026-02-30", "--out", str(tmp_path / "x")])
    assert isinstance(r.exception, UserError) and "YYYY-MM-DD" in str(r.exception)
    r = CliRunner().invoke(app, ["simulate", "plot", "--out", str(sim_dir), "--node", "../../etc"])
    assert isinstance(r.exception, UnsafeNameError)


def test_plot_writes_png(sim_dir, tmp_path):
    png = tmp_path / "week.png"
    r = CliRunner().invoke(app, ["simulate", "plot", "--out", str(sim_dir), "--png", str(png)])
    assert r.exit_code == 0, r.output
    assert png.stat().st_size > 10_000


def test_config_file_and_set_map_onto_simconfig(tmp_path):
    from nodewatch.tasks.simulate.cluster import load_state

    knobs = tmp_path / "knobs.json"
    knobs.write_text(json.dumps({"anomaly_share": 0.03, "ldms_racks": [], "n_nodes": 20}))
    out = tmp_path / "o"
    r = CliRunner().invoke(
        app,
        [
            *ARGS,
            "--config",
            str(knobs),
            "--set",
            "frail_nodes=1",
            "--set",
            "syslog_rfc5424_rows=[1]",
            "--set",
            "alert_warning_share=0.25",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    cfg, _ = load_state(out)
    assert cfg.anomaly_share == 0.03 and cfg.ldms_racks == () and cfg.frail_nodes == 1
    assert cfg.syslog_rfc5424_rows == (1,) and cfg.alert_warning_share == 0.25
    assert cfg.n_nodes == 30  # the explicit --nodes wins over the file
    assert not (out / "telemetry/ldms").exists()


@pytest.mark.parametrize(
    ("item", "msg"),
    [
        ("anomaly_shar=0.1", "unknown simulator knob 'anomaly_shar'"),
        ("frail_nodes=many", "knob frail_nodes: 'many' is not a valid int"),
        ("alert_detect_prob=2", "alert_detect_prob must be in [0, 1]"),
        ("novalue", "expected KNOB=VALUE"),
    ],
)
def test_set_rejects_unknown_keys_and_bad_values(tmp_path, item, msg):
    r = CliRunner().invoke(app, [*ARGS, "--set", item, "--out", str(tmp_path / "x")])
    assert isinstance(r.exception, UserError) and msg in str(r.exception), r.output
    assert "\n" not in str(r.exception)
