"""The Prefect UI explains a run: ``nodewatch server start`` (real Prefect server + the read-only store view on
127.0.0.1), a real ingest flow run against it, then headless Chromium (Debian's package, driven by Playwright)
opens the run, which is named by the nodewatch run id, shows its per-file counts in the log, and whose
Data Docs artifact link opens the page over HTTP; then a real (tiny) bootstrap + ``nightly`` run against the same
server, whose nightly report and score heat-map links are clicked too (the page renders, the image loads).
One server and one browser per module. Screenshots go to ``$NODEWATCH_SCREENSHOTS`` (default: the module's
temporary directory); their paths are printed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import httpx
import pandas as pd
import pytest
from alerts_support import REPO, free_port, need

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "PREFECT_UI", "NODEWATCH_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               COLUMNS="200")
    return env


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("ui")
    port, rport = free_port(), free_port()
    store = base / "store"
    store.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "nodewatch.flows.cli", "--store", str(store), "server", "start",
                             "--port", str(port), "--reports-port", str(rport)], env=_env(base),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "nodewatch server start exited"
            assert time.monotonic() < deadline, "Prefect server not up after 120 s"
            time.sleep(0.5)
        shots = Path(os.environ.get("NODEWATCH_SCREENSHOTS") or base / "screens")
        shots.mkdir(parents=True, exist_ok=True)
        yield {"ui": f"http://127.0.0.1:{port}", "api": f"http://127.0.0.1:{port}/api", "reports": f"http://127.0.0.1:{rport}",
               "store": store, "base": base, "shots": shots, "proc": proc,
               "env": {**_env(base), "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
                       "NODEWATCH_REPORTS_URL": f"http://127.0.0.1:{rport}"}}
    finally:
        if proc.poll() is None:  # the last test stops it itself
            os.kill(proc.pid, signal.SIGTERM)  # the command stops its prefect server child itself
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group this fixture started


@pytest.fixture(scope="module")
def browser(ui_server):
    pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install -e .[dev])")
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or need("chromium", "chromium")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def _flow_run(api: str, name: str) -> dict:
    (fr,) = httpx.post(f"{api}/flow_runs/filter", json={"flow_runs": {"name": {"any_": [name]}}}, timeout=30).json()
    return fr


def _open_link_artifact(page, ui: str, flow_run_id: str, key: str, link_text: str):
    """Open the run's Artifacts tab, the artifact ``key`` and click its link; returns (href, new page)."""
    page.goto(f"{ui}/runs/flow-run/{flow_run_id}")
    page.get_by_text("Artifacts", exact=True).first.click()
    page.get_by_text(key, exact=True).first.click()
    link = page.get_by_role("link", name=link_text).first
    link.wait_for(timeout=60_000)
    href = link.get_attribute("href")
    with page.context.expect_page(timeout=30_000) as new:
        link.click()
    target = new.value
    target.wait_for_load_state()
    return href, target


@pytest.mark.e2e
@pytest.mark.slow
def test_run_named_logged_and_data_docs_link_opens(ui_server, browser, tmp_path):
    s = ui_server
    log = tmp_path / "s.log"
    log.write_text("<13>1 2026-01-02T00:00:00Z cn001 app - - - hello\n<13>1 2026-01-02T00:01:00Z cn002 app - - - hi\n"
                   "not a syslog line\n")
    p = subprocess.run([sys.executable, "-m", "nodewatch.flows.cli", "--store", str(s["store"]), "ingest", "syslog",
                        str(log), "--prefect"], env=s["env"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    (manifest,) = [json.loads(f.read_text()) for f in (s["store"] / "runs").glob("*.json")]
    run_id = manifest["run_id"]

    fr = _flow_run(s["api"], run_id)  # the flow run is named by the nodewatch run id
    assert fr["name"] == run_id
    logs = [x["message"] for x in httpx.post(f"{s['api']}/logs/filter", timeout=10,
                                             json={"logs": {"flow_run_id": {"any_": [fr["id"]]}}}).json()]
    assert any(m.startswith("s.log: ingested, 3 rows in, 2 staged, 1 quarantined, 0 duplicates") for m in logs), logs
    arts = httpx.post(f"{s['api']}/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [fr["id"]]}}},
                      timeout=10).json()
    (docs,) = [a for a in arts if a["key"] == "gx-data-docs-syslog"]
    href = f"{s['reports']}/validation/{run_id}/syslog/index.html"
    assert href in docs["data"]

    shots = s["shots"]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"{s['ui']}/runs/flow-run/{fr['id']}")
        page.get_by_text(run_id).first.wait_for(timeout=60_000)
        page.get_by_text("s.log: ingested, 3 rows in, 2 staged").first.wait_for(timeout=30_000)
        page.screenshot(path=str(shots / "1-flow-run-logs.png"))
        got, docs_page = _open_link_artifact(page, s["ui"], fr["id"], "gx-data-docs-syslog", "GX Data Docs")
        page.screenshot(path=str(shots / "2-data-docs-artifact.png"))
        assert got == href and docs_page.url == href
        assert "Data Docs" in docs_page.inner_text("body")
        docs_page.screenshot(path=str(shots / "3-data-docs-page.png"))
    finally:
        page.context.close()
    print(f"screenshots: {shots}/1-flow-run-logs.png, 2-data-docs-artifact.png, 3-data-docs-page.png")


HISTORY_DAYS = 10  # the fewest the verdicts step calibrates on
SIM = {"n_nodes": 8, "nodes_per_rack": 4, "step_s": 900, "misconfig_rack": 1, "misconfig_start_day": HISTORY_DAYS,
       "anomaly_share": 0.1}
NIGHT = f"""
import sys
from nodewatch.flows.demo import bootstrap
from nodewatch.flows.nightly import nightly
inbox, store = sys.argv[1], sys.argv[2]
bootstrap(inbox, store, {HISTORY_DAYS}, 1, 10, {SIM!r})
m = nightly(demo=True, inbox=inbox, store=store, checkpoint_tables=False, states=False)
print("RUN", m["run_id"], m["parameters"]["day"], m["status"])
"""
INGESTS = """
import json, sys
from nodewatch.flows.ingest import ingest
files = json.loads(sys.argv[1])
print("MANIFESTS", json.dumps({s: ingest(s, fs, store=sys.argv[2], data_docs=False)["run_id"] for s, fs in files.items()}))
"""


@pytest.fixture(scope="module")
def night(ui_server, module_alertmanager) -> dict:
    """A real bootstrap (8 nodes, 10 days, 1 epoch) and ``nightly(demo=True)`` against the module's server, with
    ``[alerts] nightly = true`` posting to a real Alertmanager and writing the textfile; the store is the served one."""
    s = ui_server
    prom = s["base"] / "textfile"
    prom.mkdir()
    env = {**s["env"], "NODEWATCH_ALERTS": json.dumps({"nightly": True, "alertmanager_url": module_alertmanager,
                                                       "textfile_dir": str(prom)})}
    p = subprocess.run([sys.executable, "-c", NIGHT, str(s["base"] / "inbox"), str(s["store"])], env=env,
                       capture_output=True, text=True, timeout=900, cwd=REPO)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("RUN ")]
    _, run_id, day, status = line.split()
    m = json.loads((s["store"] / "runs" / f"{run_id}.json").read_text())
    return {"run_id": run_id, "day": day, "status": status, "manifest": m, "prom": prom, "am": module_alertmanager}


@pytest.mark.e2e
@pytest.mark.slow
def test_nightly_report_and_heat_map_links_open(ui_server, browser, night):
    s = ui_server
    run_id, day = night["run_id"], night["day"]
    assert night["status"] == "completed"
    fr = _flow_run(s["api"], run_id)
    key = f"nightly-{day}"
    shots = s["shots"]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        href, report = _open_link_artifact(page, s["ui"], fr["id"], f"{key}-report", f"nightly report {day}")
        assert href == report.url and unquote(href) == f"{s['reports']}/reports/nightly/date={day}/report.md"
        body = report.inner_text("body")
        assert day in body and "score" in body, body[:500]
        report.screenshot(path=str(shots / "4-nightly-report-page.png"), full_page=True)
        href, heat = _open_link_artifact(page, s["ui"], fr["id"], f"{key}-heatmap", f"score heat map {day}")
        assert href == heat.url and href.startswith(f"{s['reports']}/scores/daily/") and href.endswith("heatmap.png")
        width = heat.evaluate("() => document.images.length && document.images[0].complete ? "
                              "document.images[0].naturalWidth : 0")
        assert width > 0, "the heat map image did not load"
        heat.screenshot(path=str(shots / "5-heatmap-image.png"))
    finally:
        page.context.close()
    print(f"screenshots: {shots}/4-nightly-report-page.png, 5-heatmap-image.png")


@pytest.mark.e2e
@pytest.mark.slow
def test_nightly_flow_pushes_its_verdicts_to_alertmanager(ui_server, night):
    from nodewatch.tasks.alerts.alertmanager import get_alerts
    from nodewatch.tasks.core.store import Store

    m, day = night["manifest"], night["day"]
    assert m["status"] == "completed", m["errors"]
    step = m["outputs"]["alerts"]
    assert step["firing"] >= 1, step
    st = Store(str(ui_server["store"]))
    src = st.path("reports", day, "fused_verdicts.parquet")
    table = pd.read_parquet(src if Path(src).exists() else st.path("reports", day, "verdicts.parquet"))
    got = [a for a in get_alerts(night["am"]) if a["labels"].get("run_id") == m["run_id"]]
    assert len(got) == step["firing"], (got, step)
    subjects = {str(a["labels"].get("node") or a["labels"].get("group")) for a in got}
    assert subjects <= set(table["subject"].astype(str)), (subjects, set(table["subject"]))
    for a in got:
        assert a["status"]["state"] == "active" and a["labels"]["alertname"].startswith("Nodewatch")
        assert day in a["annotations"]["summary"]
        assert a["annotations"]["report"].startswith(ui_server["env"]["NODEWATCH_REPORTS_URL"])  # served, not file://
    text = (night["prom"] / "nodewatch.prom").read_text()  # written by the same step, before this run finished
    assert "nodewatch_node_verdict{" in text and 'nodewatch_last_run_timestamp_seconds{flow="ingest_telemetry"}' in text


def _flows_of_runs(api: str) -> dict[str, str]:
    """Flow run name -> flow name, from the server's API (what the UI shows)."""
    flows = {f["id"]: f["name"] for f in httpx.post(f"{api}/flows/filter", json={"limit": 200}, timeout=30).json()}
    runs = httpx.post(f"{api}/flow_runs/filter", json={"limit": 200}, timeout=30).json()
    return {r["name"]: flows[r["flow_id"]] for r in runs}


@pytest.mark.e2e
@pytest.mark.slow
def test_every_flow_and_manifest_follows_the_naming_scheme(ui_server, night, tmp_path):
    from nodewatch.tasks.core.flow_names import FLOW_NAME
    from nodewatch.tasks.ingest.inbox import day_files, header_only
    from nodewatch.tasks.ingest.registry import sources

    s = ui_server
    manifests = [json.loads(f.read_text()) for f in (s["store"] / "runs").glob("*.json")]
    names = {x["flow"] for x in manifests}
    assert {"demo_bootstrap", "nightly", "build_cubes", "train", "ingest_syslog"} <= names, names
    assert all(FLOW_NAME.match(f) for f in names), names
    ingests = [x for x in manifests if x["flow"].startswith("ingest")]
    assert all(x["flow"] == f"ingest_{x['parameters']['source']}" for x in ingests), names
    # an ingest of each source the simulator writes, through Prefect: flow ingest_<source>, run named by its manifest
    files = day_files(s["base"] / "inbox", pd.Timestamp(night["day"]).date())
    files = {k: [str(f) for f in fs if not header_only(f)] for k, fs in files.items() if k in sources()}
    files = {k: fs for k, fs in files.items() if fs}
    assert {"telemetry", "jobs", "syslog"} <= set(files), files
    p = subprocess.run([sys.executable, "-c", INGESTS, json.dumps(files), str(tmp_path / "st")], env=s["env"],
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("MANIFESTS ")]
    ids = json.loads(line.split(" ", 1)[1])
    runs = _flows_of_runs(s["api"])
    assert runs[night["run_id"]] == "nightly"
    for src, rid in ids.items():
        m = json.loads((tmp_path / "st" / "runs" / f"{rid}.json").read_text())
        assert m["flow"] == f"ingest_{src}" and runs[rid] == f"ingest_{src}", (src, m["flow"], runs.get(rid))
    assert all(FLOW_NAME.match(f) for f in set(runs.values())), set(runs.values())


@pytest.mark.e2e
def test_sigterm_stops_the_command_and_its_prefect_server(ui_server):
    """Last test of the module (it stops the module's server): ``kill PID`` of ``nodewatch server start`` stops its
    ``prefect server`` child and exits 0 (``kill -9``: tests/alerts/test_server_signals.py)."""
    import psutil

    proc = ui_server["proc"]
    (child,) = psutil.Process(proc.pid).children()
    assert "server" in child.cmdline() and "start" in child.cmdline(), child.cmdline()
    os.kill(proc.pid, signal.SIGTERM)  # the parent only, not its process group
    assert proc.wait(60) == 0
    try:
        child.wait(60)
    except psutil.TimeoutExpired:
        pytest.fail(f"prefect server child {child.pid} still running after SIGTERM of its parent")
