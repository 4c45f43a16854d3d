"""``nodewatch coalloc pairs|replay``: outputs in the store (commit protocol, manifest, PNG), JSON, bad arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import app, user_errors
from nodewatch.tasks.core.store import Store

runner = CliRunner()
HEADER = "; Version: 2.2\n; UnixStartTime: 946684800\n; MaxNodes: 4\n; MaxProcs: 32\n"


def _run(store: Path, *args: str):  # noqa: ANN202
    return runner.invoke(app, ["--store", str(store), "coalloc", *args])


def _subprocess(store: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nodewatch.flows.cli", "--store", str(store), "coalloc", *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def test_pairs_json_and_png(tmp_path: Path) -> None:
    png = tmp_path / "pairs.png"
    r = _run(tmp_path / "s", "pairs", "--json", "--ranks", "768", "--png", str(png))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [tuple(p) for p in out["forbidden_measured"]] == sorted(
        [("ghost", "ghost"), ("ghost", "snap"), ("milc", "ghost"), ("milc", "snap"), ("snap", "snap")])
    rows = out["pairs"]
    assert len(rows) == 15 * 5 and {r["source"] for r in rows} == {"table", "fit"}
    gtc_amg = next(r for r in rows if r["app"] == "gtc" and r["partner"] == "amg" and r["ranks"] == 512)
    assert gtc_amg["std_core_h"] == pytest.approx(42.6, abs=0.05) and gtc_amg["coa_core_h"] == pytest.approx(32.9, abs=0.05)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pairs_slowdown_view(tmp_path: Path) -> None:
    r = _run(tmp_path / "s", "pairs", "--values", "slowdown", "--ranks", "3000")
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if "gtc" in line and "amg" in line.split("│")[2])
    assert "1.54" in row  # 341.8 / 222.3 at 512 ranks


def test_pairs_table_default_png_in_store(tmp_path: Path) -> None:
    r = _run(tmp_path / "s", "pairs", "--min-saving", "0.2")
    assert r.exit_code == 0, r.output
    assert "milc+milc" in r.output and "leave-one-rank-out" in r.output
    assert (tmp_path / "s" / "tables" / "coalloc" / "pairs" / "pairs.png").exists()


def test_replay_synthetic_writes_committed_tables_manifest_png(tmp_path: Path) -> None:
    store = tmp_path / "s"
    r = _run(store, "replay", "--n-jobs", "300", "--seeds", "3", "--nodes", "128", "--policy", "exclusive,no_twins,exclusive",
             "--algorithm", "backfill", "--horizon", "0", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["status"] == "completed" and len(out["summary"]) == 2
    by = {s["policy"]: s for s in out["summary"]}
    assert by["exclusive"]["e_comp"] == pytest.approx(1.0) and by["no_twins"]["e_comp"] > 1.05
    assert by["no_twins"]["e_comp_lo"] < by["no_twins"]["e_comp"] < by["no_twins"]["e_comp_hi"]
    assert by["no_twins"]["thesis_e_comp"] == 1.13 and by["no_twins"]["seeds"] == 3
    st = Store(str(store))
    runs = st.read_staged("coalloc_runs").to_pandas()
    assert len(runs) == 6 and set(runs["run_id"]) == {out["run_id"]}
    summ = st.read_staged("coalloc_summary").to_pandas()
    assert len(summ) == 2
    import nodewatch

    assert len(nodewatch.read_table("coalloc_summary", store=str(store))) == 2
    assert (store / "staged" / "_commits" / f"{out['run_id']}--coalloc.json").exists()
    m = json.loads((store / "runs" / f"{out['run_id']}.json").read_text())
    assert m["flow"] == "coalloc_replay" and m["status"] == "completed" and m["parameters"]["seeds"] == [1, 2, 3]
    assert Path(out["outputs"]["png"]).read_bytes()[:4] == b"\x89PNG"
    assert "| backfill | no_twins | 3 |" in Path(out["outputs"]["markdown"]).read_text()


def test_replay_csv_trace_quarantines_and_continues(tmp_path: Path) -> None:
    store = tmp_path / "s"
    p = tmp_path / "jobs.csv"
    p.write_text("submit_s,app,ranks,runtime_s,job_id\n0,gtc,512,100,a\n0,amg,512,50,b\n1,hpl,512,10,c\n"
                 "2,milc,512,-3,d\n3,snap,99999,5,e\n4,\x1b[2Jghost,512,5,|x|\n")
    r = _run(store, "replay", "--trace", str(p), "--nodes", "64", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    c = out["job_counts"]
    assert c["rows_in"] == 6 and c["replayed"] == 2 and c["quarantined"] == 4
    assert c["quarantined: unknown application class"] == 2 and c["quarantined: negative run time"] == 1
    q = Store(str(store)).live_keys("quarantine", "coalloc_jobs")
    assert len(q) == 1
    import pyarrow.parquet as pq

    qt = pq.read_table(store / q[0]).to_pandas()
    assert sorted(qt["reason"]) == sorted(["unknown application class", "negative run time",
                                           "larger than the machine (> 64 nodes)", "unknown application class"])
    assert len(out["summary"]) == 6


def test_replay_swf_trace_table(tmp_path: Path) -> None:
    p = tmp_path / "t.swf"
    p.write_text(HEADER + "".join(f"{i} {i * 10} 0 {20 + i} 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1\n" for i in range(1, 40))
                 + "99 500 0 -7 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1\n")
    r = _run(tmp_path / "s", "replay", "--trace", str(p), "--nodes", "4", "--cores-per-node", "8")
    assert r.exit_code == 0, r.output
    assert "negative run time 1" in " ".join(r.output.split()) and "no_twins" in r.output


def test_replay_swf_random_class_rule_gives_ci_over_seeds(tmp_path: Path) -> None:
    p = tmp_path / "t.swf"
    p.write_text(HEADER + "".join(f"{i} {i * 5} 0 {20 + (i * 7) % 50} {8 * (1 + i % 2)} -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1\n"
                                  for i in range(1, 80)))
    r = _run(tmp_path / "s", "replay", "--trace", str(p), "--nodes", "4", "--cores-per-node", "8", "--class-rule", "random",
             "--seeds", "3", "--algorithm", "backfill", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    naive = next(s for s in out["summary"] if s["policy"] == "naive")
    assert naive["seeds"] == 3 and naive["e_comp_lo"] is not None and naive["e_comp_lo"] <= naive["e_comp_hi"]


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "--policy", "share_all"],
        ["replay", "--algorithm", "sjf"],
        ["replay", "--nodes", "0"],
        ["replay", "--nodes", "-5"],
        ["replay", "--cores-per-node", "0"],
        ["replay", "--seeds", "0"],
        ["replay", "--n-jobs", "0"],
        ["replay", "--horizon", "-1"],
        ["replay", "--horizon", "nan"],
        ["replay", "--min-saving", "5"],
        ["replay", "--trace", "x.swf"],  # no --nodes
        ["replay", "--trace", "/nonexistent/x.swf", "--nodes", "4"],
        ["replay", "--trace", "x.swf", "--jobs", "staged", "--nodes", "4"],
        ["replay", "--jobs", "run1", "--nodes", "4"],
        ["replay", "--jobs", "staged", "--nodes", "4"],  # nothing staged
        ["replay", "--system", "x"],
        ["replay", "--policy", "\x1b[31m;rm -rf"],
        ["replay", "--class-rule", "size"],
        ["replay", "--class-rule", "random"],  # synthetic queue: not applicable
        ["replay", "--trace", "j.csv", "--nodes", "4", "--class-rule", "random"],
        ["pairs", "--ranks", "0"],
        ["pairs", "--values", "speedup"],
        ["pairs", "--min-saving", "-2"],
        ["pairs", "--png", "/nonexistent/dir/p.png"],
    ],
)
def test_bad_arguments_are_user_errors(tmp_path: Path, args: list[str]) -> None:
    r = _run(tmp_path / "s", *args)
    assert r.exit_code != 0
    assert isinstance(r.exception, user_errors()), repr(r.exception)
    assert "\n" not in str(r.exception).strip()


def test_real_process_one_line_error_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_bytes("submit_s,app,ranks,runtime_s\n0,gtc,512,10\n".encode("utf-16"))
    r = _subprocess(tmp_path / "s", "replay", "--trace", str(p), "--nodes", "4")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "not UTF-8" in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_killed_before_commit_publishes_nothing(tmp_path: Path) -> None:
    """SIGKILL between writing the parts and the commit object: readers see no coalloc table at all."""
    store = tmp_path / "s"
    r = _subprocess(store, "replay", "--n-jobs", "50", "--seeds", "1", "--nodes", "128", "--json",
                    env={"NODEWATCH_FAULT_AT": "coalloc:before-commit:1"})
    assert r.returncode == -9, r.stderr
    st = Store(str(store))
    assert st.read_staged("coalloc_runs") is None and st.read_staged("coalloc_summary") is None
    assert list((store / "staged" / "coalloc_runs").rglob("*.parquet"))  # the part exists, uncommitted


def test_replay_staged_jobs(tmp_path: Path) -> None:
    """--jobs staged reads the committed jobs table (here: an SWF trace parsed and staged as one part)."""
    import io

    import pyarrow as pa

    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.jobs_swf import parse_swf

    body = HEADER + "".join(f"{i} {i * 10} 0 {30 + i} 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1\n" for i in range(1, 30))
    body += "77 400 -1 -1 -1 -1 -1 8 100 -1 5 1 1 -1 1 -1 -1 -1\n"  # never started
    parts = [r.rows for r in parse_swf(io.BytesIO(body.encode()), ParseContext(name="mini.swf"))]
    t = pa.concat_tables(parts).drop(["source_offset"])
    store = tmp_path / "s"
    st = Store(str(store))
    st.write_parquet(t, "staged", "jobs", "date=2000-01-01", "part-r1.parquet")
    r = _run(store, "replay", "--jobs", "staged", "--system", "mini", "--nodes", "4", "--cores-per-node", "8", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["job_counts"]["replayed"] == 29 and out["job_counts"]["never_started"] == 1
    assert out["source"] == "staged jobs" and len(out["summary"]) == 6
    r2 = _run(store, "replay", "--jobs", "staged", "--system", "other", "--nodes", "4")
    assert isinstance(r2.exception, user_errors()) and "no staged jobs of system 'other'" in str(r2.exception)


def test_hostile_trace_name_is_shown_literally(tmp_path: Path) -> None:
    p = tmp_path / "$\\x$[red]evil|`a`.csv"
    p.write_text("submit_s,app,ranks,runtime_s\n0,gtc,512,10\n0,amg,512,5\n")
    store = tmp_path / "s"
    r = _run(store, "replay", "--trace", str(p), "--nodes", "64", "--algorithm", "backfill", "--policy", "naive")
    assert r.exit_code == 0, r.output
    assert "[red]evil" in r.output  # rich markup shown, not applied
    md = next((store / "tables" / "coalloc").rglob("summary.md")).read_text()
    assert "\\|" in md and "`a`" not in md.replace("\\`", "")
