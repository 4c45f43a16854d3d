"""build_cubes flow (Prefect harness), run manifest, and the ``nodewatch cubes`` CLI."""

from __future__ import annotations

from datetime import date

import pytest
from typer.testing import CliRunner

from nodewatch.tasks.core.runs import load_manifest
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.synth import node_names, syslog_table, write_telemetry_day, write_topology

D1, D2 = date(2026, 5, 1), date(2026, 5, 2)


def _stage(store: Store) -> None:
    nodes = node_names(3)
    write_topology(store, nodes)
    for d in (D1, D2):
        write_telemetry_day(store, d, nodes, ["power_node", "temp_inlet"], freq="1min", seed=3)
    t = syslog_table(["2026-05-01T10:00Z", "2026-05-01T10:00:30Z"], ["cn0000", "cn0001"], [4, None])
    store.write_parquet(t, store.staged_key("syslog", "2026-05-01", "r1"))


@pytest.mark.slow
def test_build_cubes_flow_manifest_and_rerun(tmp_path, prefect_harness):
    from nodewatch.flows.cubes import build_cubes

    st = Store(str(tmp_path / "store"))
    _stage(st)
    m = build_cubes(D1, D2, store=st.url, processes=False)
    assert m["status"] == "completed"
    days = {(r["cube"], r["day"]): r for r in m["outputs"]["days"]}
    assert days[("telemetry", "2026-05-01")]["status"] == "built"
    assert days[("telemetry", "2026-05-01")]["rows_used"] == 3 * 2 * 1440
    assert days[("syslog", "2026-05-01")]["rows_used"] == 2 and days[("syslog", "2026-05-02")]["status"] == "no-data"
    assert m["outputs"]["telemetry_cube"].endswith("cubes/telemetry.zarr") and m["outputs"]["days_built"] == 3
    assert {"dask_start", "build_telemetry", "build_syslog"} <= set(m["timings"])
    assert load_manifest(st, m["run_id"]).status == "completed"
    again = build_cubes(D1, D2, store=st.url, processes=False)
    assert {r["status"] for r in again["outputs"]["days"] if r["cube"] == "telemetry"} == {"up-to-date"}

    from nodewatch.flows.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["--store", st.url, "cubes", "info"])
    assert r.exit_code == 0, r.output
    assert "2026-05-01" in r.output and "complete" in r.output and "100.0%" in r.output
    png = tmp_path / "p.png"
    r = runner.invoke(app, ["--store", st.url, "cubes", "plot", "--node", "cn0001", "--metric", "power_node", "--out", str(png)])
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    r = runner.invoke(app, ["--store", st.url, "cubes", "plot", "--node", "cn9999", "--metric", "power_node"])
    assert r.exit_code != 0 and "cn9999" in str(r.exception) and "not in the telemetry cube" in str(r.exception)
    r = runner.invoke(app, ["--store", st.url, "cubes", "plot", "--node", "../../etc", "--metric", "power_node"])
    assert r.exit_code != 0 and "invalid node name" in str(r.exception)
    r = runner.invoke(app, ["--store", st.url, "cubes", "build", "--start", "2026-05-03", "--end", "2026-05-01"])
    assert r.exit_code != 0 and "before --start" in str(r.exception)
    r = runner.invoke(app, ["--store", st.url, "cubes", "build", "--start", "yesterday", "--end", "2026-05-01"])
    assert r.exit_code != 0 and "not a date" in str(r.exception)
    r = runner.invoke(app, ["--store", st.url, "cubes", "build", "--start", "2026-05-01", "--end", "2026-05-02", "--processes"])
    assert r.exit_code == 0, r.output
    assert "up-to-date" in r.output


def test_info_on_missing_cube_is_a_one_line_error(tmp_path):
    from nodewatch.flows.cli import app

    r = CliRunner().invoke(app, ["--store", str(tmp_path / "empty"), "cubes", "info"])
    assert r.exit_code != 0 and "no telemetry cube" in str(r.exception)


def test_info_reports_missing_and_stale_days(tmp_path):
    from nodewatch.tasks.cubes.build import build_days, dask_client
    from nodewatch.tasks.cubes.info import cube_info

    st = Store(str(tmp_path / "s"))
    _stage(st)
    with dask_client(n_workers=1, processes=False) as c:
        build_days(st, "telemetry", [D1], c)
    write_telemetry_day(st, D1, ["cn0000"], ["load1"], freq="1h", run_id="late")
    inf = cube_info(st, "telemetry")
    assert [(d["day"], d["status"]) for d in inf["days"]] == [("2026-05-01", "stale"), ("2026-05-02", "missing")]
    assert inf["variables"]["mean"]["chunks"] == [inf["node_chunk"], 96, 2] and inf["size_bytes"] > 0
    assert inf["days"][0]["coverage"] == 1.0 and inf["days"][0]["nodes_with_data"] == 3
