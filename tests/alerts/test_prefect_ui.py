"""The Prefect UI explains a run: ``nodewatch server start`` (real Prefect server + the read-only store view on
127.0.0.1), a real ingest flow run against it, then headless Chromium (Debian's package, driven by Playwright)
opens the run, which is named by the nodewatch run id, shows its per-file counts in the log, and whose
Data Docs artifact link opens the page over HTTP. Screenshots go to ``$NODEWATCH_SCREENSHOTS`` (default: the
test's temporary directory); their paths are printed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from alerts_support import REPO, free_port, need

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "PREFECT_UI", "NODEWATCH_"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               COLUMNS="200")
    return env


@pytest.fixture
def ui_server(tmp_path):
    pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install -e .[dev])")
    chromium = shutil.which("chromium") or need("chromium", "chromium")
    port, rport = free_port(), free_port()
    store = tmp_path / "store"
    store.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "nodewatch.flows.cli", "--store", str(store), "server", "start",
                             "--port", str(port), "--reports-port", str(rport)], env=_env(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "nodewatch server start exited"
            assert time.monotonic() < deadline, "Prefect server not up after 90 s"
            time.sleep(0.5)
        yield {"ui": f"http://127.0.0.1:{port}", "api": f"http://127.0.0.1:{port}/api", "reports": f"http://127.0.0.1:{rport}",
               "store": store, "chromium": chromium}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the nodewatch process and the prefect server it started
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.e2e
@pytest.mark.slow
def test_run_named_logged_and_data_docs_link_opens(ui_server, tmp_path):
    from playwright.sync_api import sync_playwright

    s = ui_server
    log = tmp_path / "s.log"
    log.write_text("<13>1 2026-01-02T00:00:00Z cn001 app - - - hello\n<13>1 2026-01-02T00:01:00Z cn002 app - - - hi\n"
                   "not a syslog line\n")
    env = {**_env(tmp_path), "PREFECT_API_URL": s["api"], "NODEWATCH_REPORTS_URL": s["reports"]}
    p = subprocess.run([sys.executable, "-m", "nodewatch.flows.cli", "--store", str(s["store"]), "ingest", "syslog",
                        str(log), "--prefect"], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    (manifest,) = [json.loads(f.read_text()) for f in (s["store"] / "runs").glob("*.json")]
    run_id = manifest["run_id"]

    (fr,) = httpx.post(f"{s['api']}/flow_runs/filter", json={"limit": 5}, timeout=10).json()
    assert fr["name"] == run_id, "the flow run is named by the nodewatch run id"
    logs = [x["message"] for x in httpx.post(f"{s['api']}/logs/filter", timeout=10,
                                             json={"logs": {"flow_run_id": {"any_": [fr["id"]]}}}).json()]
    assert any(m.startswith("s.log: ingested, 3 rows in, 2 staged, 1 quarantined, 0 duplicates") for m in logs), logs
    arts = httpx.post(f"{s['api']}/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [fr["id"]]}}},
                      timeout=10).json()
    (docs,) = [a for a in arts if a["key"] == "gx-data-docs-syslog"]
    href = f"{s['reports']}/validation/{run_id}/syslog/index.html"
    assert href in docs["data"]

    shots = Path(os.environ.get("NODEWATCH_SCREENSHOTS") or tmp_path / "screens")
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=s["chromium"], args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{s['ui']}/runs/flow-run/{fr['id']}")
            page.get_by_text(run_id).first.wait_for(timeout=60_000)
            page.get_by_text("s.log: ingested, 3 rows in, 2 staged").first.wait_for(timeout=30_000)
            page.screenshot(path=str(shots / "1-flow-run-logs.png"))
            page.get_by_text("Artifacts", exact=True).first.click()
            page.get_by_text("gx-data-docs-syslog", exact=True).first.click()
            link = page.get_by_role("link", name="GX Data Docs").first
            link.wait_for(timeout=30_000)
            assert link.get_attribute("href") == href
            page.screenshot(path=str(shots / "2-data-docs-artifact.png"))
            with page.context.expect_page(timeout=30_000) as new:
                link.click()
            docs_page = new.value
            docs_page.wait_for_load_state()
            assert docs_page.url == href
            assert "Data Docs" in docs_page.inner_text("body")
            docs_page.screenshot(path=str(shots / "3-data-docs-page.png"))
        finally:
            browser.close()
    print(f"screenshots: {shots}/1-flow-run-logs.png, 2-data-docs-artifact.png, 3-data-docs-page.png")
