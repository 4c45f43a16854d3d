"""End to end: simulated syslog ingested by the real pipeline -> `nodewatch syslog templates|detect|anonymise|reveal`
and the nightly step; bad CLI arguments are one-line errors (exit 2)."""

from __future__ import annotations

import gzip
import json
from datetime import date

import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import app
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources

DAY = "2026-01-02"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from nodewatch.tasks.simulate.config import SimConfig
    from nodewatch.tasks.simulate.schedule import build_schedule
    from nodewatch.tasks.simulate.syslog import render_rack

    d = tmp_path_factory.mktemp("syslog_e2e")
    sim = SimConfig(n_nodes=48, start=date(2026, 1, 1), seed=3, syslog_precursor_lines_per_min=2.0)
    sched = build_schedule(sim, 2)
    files = []
    for day in (0, 1):
        nodes = sched.topo.nodes_of_rack(0)
        p = d / f"r00-{day}.log"
        p.write_text("\n".join(render_rack(sched, sched.node_events(nodes), nodes, day, "5424")) + "\n")
        files.append(p)
    st = Store(str(d / "store"))
    rec = RunRecorder(st, "test", {})
    res = ingest_files(st, sources()["syslog"], files, rec, data_docs=False)
    rec.finish()
    assert res.counts.staged > 10_000
    # the simulator's own sacct dumps (jobs ending days 0-1): the resource-allocation vicinity reads them
    from nodewatch.tasks.simulate.records import sacct_text

    jfiles = []
    for day in (0, 1):
        p = d / f"sacct-{day}.txt"
        p.write_text(sacct_text(sched, day))
        jfiles.append(p)
    rec = RunRecorder(st, "test-jobs", {})
    assert ingest_files(st, sources()["jobs"], jfiles, rec, data_docs=False).counts.staged > 0
    rec.finish()
    return st


class _R:
    def __init__(self, r):
        from nodewatch.flows.cli import user_errors

        self.stdout = r.stdout
        if r.exception is not None and isinstance(r.exception, user_errors()):
            self.exit_code, self.output = 2, str(r.exception)  # what main() prints as one line, exit 2
            assert "\n" not in self.output.strip()
        else:
            self.exit_code, self.output = r.exit_code, r.output


def _cli(store, *args, env=None):
    return _R(CliRunner().invoke(app, ["--store", store.url, "syslog", *args], env=env or {}))


def test_user_error_through_the_console_script(store):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "nodewatch.flows.cli", "--store", store.url, "syslog", "detect", "--day",
                        "2026-99-99"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "invalid --day" in p.stderr and "Traceback" not in p.stderr + p.stdout


def test_templates_detect_anonymise_reveal(store, monkeypatch):
    monkeypatch.delenv("NODEWATCH_SYSLOG_SECRET", raising=False)
    r = _cli(store, "templates", "--day", DAY, "--json", "--top", "5")
    assert r.exit_code == 0, r.output
    t = json.loads(r.stdout)
    assert t["rows"] > 5000 and 50 < t["templates"] < 2000 and len(t["top"]) == 5 and t["overflow"] == 0
    r = _cli(store, "detect", "--day", DAY, "--export", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["counts"]["filtered_templates"] > 0 and set(d) >= {"abnormal", "outages", "run_id"}
    for v in d["abnormal"].values():
        assert set(v) == {"score", "vicinity", "window_end"} and v["vicinity"] == "global"
    assert store.read_staged("syslog_abnormal", dates=[DAY]) is not None
    assert store.read_staged("syslog_filters", dates=[DAY]).num_rows == d["counts"]["filtered_templates"]
    # the anonymised export: one line per staged line, no user name in clear, re-mined to the same grouping
    r = _cli(store, "anonymise", "--day", DAY, "--json")
    assert r.exit_code == 0, r.output
    a = json.loads(r.stdout)
    text = gzip.decompress(store.fs.cat_file(store.path(*a["export"].split("/")))).decode()
    lines = text.splitlines()
    assert len(lines) == a["lines"] == t["rows"]
    staged = store.read_staged("syslog", dates=[DAY], columns=["message"])["message"].to_pylist()
    users = {w for m in staged for w in m.split() if w.startswith("u0") and w[1:].isdigit()}
    assert users and not any(u in text for u in users)
    # the key never reaches an output; reveal works with it
    key = (store.fs.cat_file(store.path("keys", "syslog-anon.key"))).decode()
    assert key not in text and key not in json.dumps(store.read_json("runs", f"{a['run_id']}.json"))
    tok = next(w for ln in lines for w in ln.split() if w.startswith("a0") and len(w) == 12)
    r = _cli(store, "reveal", "--run", a["run_id"], tok, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)[tok] is not None
    # with another site secret the mapping does not open
    r = _cli(store, "reveal", "--run", a["run_id"], tok, env={"NODEWATCH_SYSLOG_SECRET": "x" * 40})
    assert r.exit_code == 2 and "wrong key" in r.output


@pytest.mark.parametrize("args, msg", [
    (["templates", "--day", "2026-13-01"], "invalid --day"),
    (["templates", "--day", "../../etc"], "invalid --day"),
    (["templates", "--day", "1999-01-01"], "no staged syslog rows"),
    (["detect", "--day", ""], "invalid --day"),
    (["reveal", "--run", "../x", "a0"], "run id"),
    (["reveal", "--run", "20990101T000000.000000Z-abcdef", "a0"], "no mapping"),
    (["templates", "--day", "2026-01-02", "--top", "-1"], "Invalid value"),
])
def test_bad_arguments_are_one_line_errors(store, args, msg):
    r = _cli(store, *args)
    assert r.exit_code == 2, r.output
    assert msg in r.output and "Traceback" not in r.output


def test_bad_settings_section(store):
    r = _cli(store, "templates", "--day", DAY, env={"NODEWATCH_SYSLOG": '{"sim_th": 7}'})
    assert r.exit_code == 2 and "syslog.sim_th" in r.output
    r = _cli(store, "templates", "--day", DAY, env={"NODEWATCH_SYSLOG": '{"nope": 1}'})
    assert r.exit_code == 2 and "syslog.nope" in r.output


def test_nightly_step_contract(store):
    from nodewatch.tasks.core.nightly_steps import StepContext, discover
    from nodewatch.tasks.core.settings import Settings

    step = next(s for s in discover() if s.name == "syslog")
    assert step.order == 10
    settings = Settings(store=store.url)
    assert step.enabled(settings)
    rec = RunRecorder(store, "nightly-test", {})
    ctx = StepContext(store=store, day=date(2026, 1, 2), settings=settings, rec=rec, run_id=rec.run_id)
    row = step.run(ctx)
    assert row["status"] == "ok" and "templates" in row["details"]
    # the run's row names the commit object that published its filters, alarms and vicinity events (one version)
    commit = json.loads(store.fs.cat_file(store.path(row["syslog"]["detect_commit"])))
    assert commit["run_id"] == rec.run_id and commit["label"] == "syslog-detect"
    assert {k.split("/")[1] for k in commit["add"]} == {"syslog_filters", "syslog_abnormal", "syslog_vicinity_events"}
    sh = ctx.shared["syslog"]
    assert {"abnormal", "outages"} <= set(sh) and isinstance(sh["outages"], list)
    for v in sh["abnormal"].values():  # the fuse step reads score, vicinity, window_end; the report the evidence
        assert {"score", "vicinity", "window_end", "sg", "peer_median_sg", "peers"} <= set(v)
        assert v["sg"] > v["peer_median_sg"] and v["peers"] >= 3
    # the report section: stored by the step, appended to the night's report.md by write_report
    from nodewatch.tasks.report.nightly import write_report

    sec = row["syslog"]["report_section"]
    with store.fs.open(sec, "rb") as f:
        text = f.read().decode()
    assert "## Syslog" in text and "### Outages" in text and "### New templates of the night" in text
    assert f"### Abnormal nodes ({len(sh['abnormal'])})" in text
    with store.fs.open(write_report(store, date(2026, 1, 2), "# report\n", None)["report"], "rb") as f:
        assert f.read().decode() == "# report\n\n" + text
    ctx2 = StepContext(store=store, day=date(2026, 2, 1), settings=settings, rec=rec, run_id=rec.run_id + "x")
    assert step.run(ctx2)["status"] == "skipped" and ctx2.shared["syslog"] == {"abnormal": {}, "outages": []}
    rec.finish()


def test_section_markdown_escapes_data():
    from nodewatch.tasks.syslog.report import section_markdown

    sh = {"abnormal": {"cn|01": {"score": 9.5, "vicinity": "rack <b>r1</b>", "window_end": "2026-01-02T10:30:00+00:00",
                                 "sg": 40, "peer_median_sg": 2.0, "peers": 12}},
          "outages": [{"node": "cn02", "outage": "2026-01-02T03:00:00", "kind": "boot", "boot": None,
                       "regular_failure": True}],
          "new_templates": [{"template_id": 7, "template": "evil [x](http://e) <*>", "lines": 3}]}
    text = section_markdown(sh, {"rows": 1000, "templates": 9})
    assert "<b>" not in text and "](http" not in text and "cn\\|01" in text
    assert "| 9.5 |" in text and "(1, 1 regular failures)" in text and "1,000 lines" in text
    assert "No node departed" in section_markdown({"abnormal": {}, "outages": []})
    ev = {"vicinity": "job <i>7</i>", "start": "2026-01-02T03:10:00+00:00", "end": "2026-01-02T03:15:00+00:00",
          "nodes": 3, "peak": "2026-01-02T03:15:00+00:00", "window_min": 30, "live": 8, "median_sg": 3.0, "max_sg": 18}
    text = section_markdown({"abnormal": {}, "outages": [], "vicinity_events": [ev]})
    assert "### Vicinity-wide events (1:" in text and "<i>" not in text
    assert "| 2026-01-02T03:10 | 2026-01-02T03:15 | 3 | 8 | 3.0 | 18 | 30 min |" in text


@pytest.mark.slow
def test_syslog_days_flow_with_artifacts(store, prefect_harness):
    import anyio
    from prefect.client.orchestration import get_client

    from nodewatch.flows.syslog import run_syslog_days, syslog_days

    m = syslog_days(date(2026, 1, 1), date(2026, 1, 3), store=store.url, export=False)
    assert m["status"] == "completed"
    assert [d["day"] for d in m["outputs"]["days"]] == ["2026-01-01", "2026-01-02"]
    assert m["notes"]["skipped_days"] == ["2026-01-03"]
    assert all(d["rows"] > 1000 for d in m["outputs"]["days"])

    async def _keys() -> set[str]:
        async with get_client() as c:
            return {a.key for a in await c.read_artifacts()}

    assert {"syslog-days-2026-01-01-2026-01-03", "syslog-summary-2026-01-01-2026-01-03"} <= anyio.run(_keys)
    with pytest.raises(ValueError, match="end must be >= start"):
        run_syslog_days(date(2026, 1, 3), date(2026, 1, 1), store=store.url)


def test_job_vicinity_reads_the_staged_allocations(store):
    """vicinity="job" on the simulated store: every abnormal row's vicinity is a staged job that held the node at
    that moment (its node list and start/end), and the step's job labels come from those rows, not a schedule."""
    from datetime import UTC, datetime

    import numpy as np

    from nodewatch.tasks.core.runs import new_run_id
    from nodewatch.tasks.syslog.detect import analyse_day, job_labels
    from nodewatch.tasks.syslog.settings import SyslogSettings

    day = date.fromisoformat(DAY)
    jobs = store.read_staged("jobs", columns=["job_id", "start_time", "end_time", "node_list"]).to_pylist()
    held = {(str(j["job_id"]), n): (j["start_time"], j["end_time"]) for j in jobs if j["start_time"]
            for n in (j["node_list"] or [])}
    nodes = sorted({n for _, n in held})
    d0 = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * 10**9
    moments = d0 + (np.arange(288) + 1) * 300 * 10**9
    jl, ids = job_labels(store, nodes, day, moments)
    assert ids and (jl >= 0).mean() > 0.3  # the simulated cluster is busy
    i, w = map(int, np.argwhere(jl >= 0)[0])
    a, b = held[(ids[jl[i, w]], nodes[i])]
    assert a.timestamp() * 10**9 <= moments[w] and (b is None or moments[w] < b.timestamp() * 10**9)
    res = analyse_day(store, day, new_run_id("t", {}), SyslogSettings(vicinity="job", filtered=False))
    rows = res.abnormal.to_pylist()
    assert rows  # the simulator's syslog precursors (2 lines/min) depart from the job's other nodes
    for r in rows:
        assert r["vicinity"].startswith("job ")
        a, b = held[(r["vicinity"][4:], r["node"])]
        assert a <= r["window_end"] and (b is None or r["window_end"] < b)
    assert all(e["vicinity"].startswith("job ") for e in res.vicinity_events)
