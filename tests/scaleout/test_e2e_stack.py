"""End to end on the one-host stack: the store on S3, Prefect on PostgreSQL, the UI in headless Chromium.

No mocks: ``infra/local/cluster.sh`` starts PostgreSQL and an S3 endpoint (moto) on 127.0.0.1;
``nodewatch server start --database postgresql+asyncpg://…`` serves Prefect from that database; the demo
cluster is bootstrapped into ``s3://<bucket>/<prefix>`` and ``nodewatch serve`` registers the deployments.
Then: the nightly deployment on the S3 store (ingest -> cubes -> score -> states -> tables -> manifests,
CURRENT pointers), a backfill on Slurm workers with concurrent task runs on PostgreSQL, the UI pages of the nightly run
and its artifacts rendered by Chromium (screenshots under the test's tmp dir), no test secret anywhere
in the store, the logs or the Prefect database, and the run history after a server restart.
Small on purpose (8 nodes, 3 history days, 1 epoch).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest
from scaleout_helpers import BIN, REPO, Api, free_port, stop

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

START = date(2026, 1, 1)
HISTORY = 3
SIM = {"n_nodes": 8, "nodes_per_rack": 4, "racks_per_row": 2, "anomaly_share": 0.03, "misconfig_rack": -1}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class Stack:
    """What the module fixture started."""

    def __init__(self, base: Path, env: dict[str, str], store: str, port: int, cluster) -> None:
        self.base, self.env, self.store, self.port, self.cluster = base, env, store, port, cluster
        self.api = Api(f"http://127.0.0.1:{port}/api")
        self.server: subprocess.Popen | None = None
        self.runs: dict[str, str] = {}  # name -> flow run id

    def start_server(self, home: Path) -> None:
        """``nodewatch server start --database <pg>`` (URL through the env variable: not visible in ps)."""
        env = {k: v for k, v in self.env.items() if k != "PREFECT_API_URL"}
        env.update(PREFECT_HOME=str(home), NODEWATCH_PREFECT_DATABASE=self.cluster.env["NODEWATCH_LOCAL_PG_URL"])
        log = open(self.base / "server.log", "ab")  # noqa: SIM115 - closed with the process
        self.server = subprocess.Popen([str(BIN / "nodewatch"), "server", "start", "--port", str(self.port)], env=env,
                                       cwd=self.base, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 300
        healthy = 0
        while True:
            try:
                healthy = healthy + 1 if self.api.http.get("/health").status_code == 200 else 0
            except Exception:  # noqa: BLE001 - not up yet
                healthy = 0
            if healthy >= 3 and self.server.poll() is None:  # answered three times by the process we started
                return
            assert self.server.poll() is None, (self.base / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "prefect server did not answer /api/health in 300 s"
            time.sleep(1)

    def s3(self):
        """An s3fs filesystem with the test bed's credentials and endpoint."""
        import s3fs

        e = self.cluster.env
        return s3fs.S3FileSystem(key=e["AWS_ACCESS_KEY_ID"], secret=e["AWS_SECRET_ACCESS_KEY"],
                                 endpoint_url=e["AWS_ENDPOINT_URL"])


@pytest.fixture(scope="module")
def stack(local_cluster):
    local_cluster.need("postgres")
    local_cluster.need("s3")
    base = local_cluster.base / f"e2e-{uuid.uuid4().hex[:6]}"
    base.mkdir()
    port = free_port()
    store = f"s3://{local_cluster.env['NODEWATCH_LOCAL_BUCKET']}/e2e-{uuid.uuid4().hex[:8]}"
    env = local_cluster.full_env(
        PREFECT_API_URL=f"http://127.0.0.1:{port}/api", PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
        PREFECT_LOGGING_LEVEL="INFO", NODEWATCH_STORE=store, TORCH_NUM_THREADS="1",
        NODEWATCH_SERVICE_HOSTS='["slurmctl01"]', PREFECT_HOME=str(base / "client-home"))
    env.pop("NODEWATCH_DASK", None)
    st = Stack(base, env, store, port, local_cluster)
    serve: subprocess.Popen | None = None
    try:
        t0 = time.monotonic()
        st.start_server(base / "server-home")
        print(f"\n[scaleout] prefect server on postgres up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        inbox = base / "inbox"
        t0 = time.monotonic()
        with open(base / "bootstrap.log", "wb") as log:
            boot = subprocess.run(
                [sys.executable, "-c", "import json,sys; from nodewatch.flows.demo import bootstrap; "
                 f"r = bootstrap({str(inbox)!r}, {store!r}, {HISTORY}, 1, 10, json.loads(sys.argv[1])); "
                 "print(json.dumps(r['train'], default=str))", json.dumps(SIM)],
                env=env, cwd=base, stdout=log, stderr=subprocess.STDOUT, timeout=900)
        assert boot.returncode == 0, (base / "bootstrap.log").read_text()[-3000:]
        print(f"[scaleout] bootstrap into {store}: {time.monotonic() - t0:.1f} s", file=sys.stderr)
        log = open(base / "serve.log", "wb")  # noqa: SIM115 - closed at the end
        serve = subprocess.Popen([str(BIN / "nodewatch"), "serve", "--inbox", str(inbox), "--demo", "--paused"],
                                 env=env, cwd=base, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 300
        while set(st.api.deployments()) < {"nightly", "train", "backfill"}:
            assert serve.poll() is None, (base / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "deployments did not appear in 300 s"
            time.sleep(2)
        yield st
    finally:
        if serve is not None:
            stop(serve)
        if st.server is not None:
            stop(st.server)


def _manifest(stack: Stack, flow: str) -> dict:
    from nodewatch.tasks.core.store import Store

    s = Store(stack.store)
    s.fs.invalidate_cache()  # fsspec shares one filesystem (and its listing cache) per URL and credentials
    ms = [s.read_json("runs", f"{r}.json") for r in s.list_runs()]
    return [m for m in ms if m["flow"] == flow][-1]


def test_nightly_deployment_on_the_s3_store(stack, monkeypatch):
    for k, v in stack.cluster.env.items():
        monkeypatch.setenv(k, v)
    fr = stack.api.run(stack.api.deployments()["nightly"], {})
    assert fr["state"]["type"] == "COMPLETED", fr["state"]
    stack.runs["nightly"] = fr["id"]
    day = START + timedelta(days=HISTORY)
    m = _manifest(stack, "nightly")
    assert m["status"] == "completed" and m["parameters"]["day"] == day.isoformat(), m["errors"]
    assert {"ingest", "validate", "cubes", "score", "checkpoint_tables", "report"} <= set(m["outputs"])
    assert m["outputs"]["validate"]["balanced"] and m["outputs"]["score"]["scored"] == 8
    assert m["outputs"]["score"]["heatmap"].startswith("s3://")
    fs = stack.s3()
    root = stack.store[len("s3://"):]
    for area in ("models/ruad", "tables/checkpoint"):  # CURRENT pointers name a run that exists
        cur = fs.cat(f"{root}/{area}/CURRENT").decode().strip()
        assert fs.exists(f"{root}/{area}/{cur}"), area
    assert fs.find(f"{root}/staged/_commits")  # the staged tables were published by commit objects
    assert not [p for p in fs.find(root) if "/.tmp-" in p]  # nothing left half-written
    import nodewatch

    scores = nodewatch.open_cube("scores", store=stack.store)  # downstream readers open the cube by URL
    tele = nodewatch.open_cube("telemetry", store=stack.store)
    assert scores.sizes["node"] == 8 and tele.sizes["node"] == 8
    assert float(tele["count"].sum()) > 0 and "score" in scores
    keys = {a["key"] for a in stack.api.artifacts(fr["id"]) if a.get("key")}
    assert {f"nightly-{day}", f"nightly-{day}-heatmap"} <= keys


FAILING_BACKFILL = """
import sys
from datetime import date
import nodewatch.flows.nightly as n
n._states_range = lambda st, first, last: (first, last, False)  # the states step as it was: never rebuilds the cube
n.states_task = n.states_task.with_options(retries=0)  # the claim is the flow's final state, not its retries
try:
    n.backfill(start=date.fromisoformat(sys.argv[1]), end=date.fromisoformat(sys.argv[2]), force=True)
except n.PartialRunError as e:
    print("PartialRunError:", e)
    sys.exit(4)
"""


def test_a_failed_states_step_fails_the_backfill_run(stack):
    """After the nightly, the state cube starts at its day: states of an earlier day fail; the flow run must end Failed."""
    # all history days, scored on local workers before the states step fails: the reference bytes of the Slurm backfill
    last = START + timedelta(days=HISTORY - 1)
    r = subprocess.run([sys.executable, "-c", FAILING_BACKFILL, START.isoformat(), last.isoformat()], env=stack.env,
                       cwd=stack.base,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 4, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "earlier days need --rebuild" in r.stdout
    m = _manifest(stack, "backfill")
    assert m["status"] == "partial" and any("states" in e for e in m["errors"]), m["errors"]
    runs = stack.api.post("/flow_runs/filter", {"flows": {"name": {"any_": ["backfill"]}}, "sort": "START_TIME_DESC",
                                                "limit": 1})
    assert runs and runs[0]["state"]["type"] == "FAILED", runs[0]["state"] if runs else None


SLURM_BACKFILL = """
import sys
from datetime import date
from nodewatch.flows.nightly import backfill
backfill(start=date.fromisoformat(sys.argv[1]), end=date.fromisoformat(sys.argv[2]), force=True)
"""


def _reader_env(stack: Stack, monkeypatch) -> None:
    """This process reads the S3 store as a downstream reader would: endpoint, region, credentials from the env."""
    for k, v in stack.cluster.env.items():
        monkeypatch.setenv(k, v)


def test_backfill_on_slurm_workers_concurrent_task_runs_on_postgres_same_bytes(stack, monkeypatch):
    """One forced 3-day backfill for three claims (it was two backfills, one per claim, until 28 Nov):

    NODEWATCH_DASK=slurm: cube days and scoring groups run as sbatch jobs and the cubes are the same bytes;
    its task runs, recorded by the PostgreSQL-backed server, overlap (concurrent) without "database is
    locked"; after the nightly moved the state cube's start, the backfill of earlier days rebuilds it.
    """
    slurm = "slurm" not in stack.cluster.skipped  # without Slurm the PostgreSQL and states claims still run here
    _reader_env(stack, monkeypatch)
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes import repo

    st = Store(stack.store)
    last = START + timedelta(days=HISTORY - 1)
    before = {k: repo.chunk_bytes(st, k) for k in ("telemetry.zarr", "scores.zarr")}
    logs = Path(stack.env["DASK_JOBQUEUE__SLURM__LOG_DIRECTORY"])
    jobs_before = set(logs.glob("*.out")) if logs.is_dir() else set()
    r = subprocess.run([sys.executable, "-c", SLURM_BACKFILL, START.isoformat(), last.isoformat()],
                       env={**stack.env, "NODEWATCH_DASK": "slurm" if slurm else "local",
                            "NODEWATCH_DASK_WORKERS": "1"},  # one cube job (its 3 days one task); scoring: 2 jobs
                       cwd=stack.base,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    m = _manifest(stack, "backfill")
    assert m["status"] == "completed" and not m["errors"], m["errors"]
    assert sorted(m["outputs"]["days_scored"]) == [(START + timedelta(days=i)).isoformat() for i in range(HISTORY)]
    assert m["outputs"]["states"]["status"] == "completed"  # rebuilt from START although the nightly moved its start
    if slurm:
        assert len(set(logs.glob("*.out")) - jobs_before) >= 2, "no sbatch worker job ran (cubes and scoring clusters)"
    else:
        print(f"\n[scaleout] slurm unavailable ({stack.cluster.skipped['slurm']}): backfill on local workers")
    st.fs.invalidate_cache()
    after = {k: repo.chunk_bytes(st, k) for k in ("telemetry.zarr", "scores.zarr")}
    for k in after:
        assert len(after[k]) > 5 and after[k].keys() == before[k].keys(), k
        assert [c for c in after[k] if after[k][c] != before[k][c]] == [], k
    # the same run as the PostgreSQL-backed server saw it
    fr = stack.api.post("/flow_runs/filter", {"flows": {"name": {"any_": ["backfill"]}}, "sort": "START_TIME_DESC",
                                              "limit": 1})[0]
    assert fr["state"]["type"] == "COMPLETED", fr["state"]
    stack.runs["backfill"] = fr["id"]
    trs = stack.api.post("/task_runs/filter", {"task_runs": {}, "flow_runs": {"id": {"any_": [fr["id"]]}}, "limit": 200})
    states = Counter(t["state"]["type"] for t in trs)  # type: ignore[union-attr]
    failed = [(t["name"], (t["state"].get("message") or "")[:300]) for t in trs  # type: ignore[union-attr]
              if t["state"]["type"] in ("FAILED", "CRASHED")]
    print(f"\n[scaleout] backfill task runs: {dict(states)}; failed (handled by the flow): {failed}")
    assert states["COMPLETED"] >= HISTORY * 2 and "CRASHED" not in states, states
    assert not [f for f in failed if "database" in f[1].lower() or "locked" in f[1].lower()], failed
    assert not [f for f in failed if "states" in f[0]], failed
    spans = sorted((t["start_time"], t["end_time"]) for t in trs if t["start_time"] and t["end_time"])  # type: ignore[union-attr]
    overlap = any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))
    assert overlap, "no two task runs overlapped: the backfill ran nothing concurrently"
    assert "database is locked" not in (stack.base / "server.log").read_text()


NIGHTLY = """
import sys
from datetime import date
from nodewatch.flows.nightly import nightly
nightly(day=date.fromisoformat(sys.argv[1]), inbox=sys.argv[2], force=True)
"""


def _published(stack: Stack, day: date) -> dict:
    """What a reader sees of the store: cube chunks, CURRENT pointers, the day's score summary."""
    from nodewatch.tasks.anomaly.score import read_summary
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes import repo

    st = Store(stack.store)
    st.fs.invalidate_cache()
    root = stack.store[len("s3://"):]
    view: dict = {k: repo.chunk_bytes(st, k) for k in ("telemetry.zarr", "scores.zarr")}
    view["CURRENT"] = {p[len(root):]: st.fs.cat(p) for p in st.fs.find(root) if p.endswith("/CURRENT")}
    view["summary"] = json.dumps(read_summary(st, day).to_dict("records"), sort_keys=True,
                                 default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    return view


def _moved_to_completed_runs(stack: Stack, now: dict, before: dict) -> None:
    """Every CURRENT pointer is the old one or names a run whose manifest says completed (a step that finished)."""
    from nodewatch.tasks.core.store import Store

    st = Store(stack.store)
    assert now.keys() == before.keys()
    for area, rid in now.items():
        if rid != before[area]:
            m = st.read_json("runs", f"{rid.decode().strip()}.json")
            assert m["status"] == "completed", (area, m["status"])


def test_nightly_killed_mid_run_on_s3_then_rerun(stack, monkeypatch):
    """SIGKILL of a whole nightly at a random point: readers see the published state; the re-run gives the same."""
    import os
    import random
    import signal

    _reader_env(stack, monkeypatch)

    day = START + timedelta(days=HISTORY)  # the day the nightly deployment published
    before = _published(stack, day)
    delay = random.uniform(3.0, 25.0)
    p = subprocess.Popen([sys.executable, "-c", NIGHTLY, day.isoformat(), str(stack.base / "inbox")], env=stack.env,
                         cwd=stack.base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.wait(delay)
        print(f"\n[scaleout] nightly finished before the kill at {delay:.1f} s")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
        print(f"\n[scaleout] nightly SIGKILLed after {delay:.1f} s")
    seen = _published(stack, day)  # cube chunks and the day's summary: the old ones or identical new ones
    _moved_to_completed_runs(stack, seen.pop("CURRENT"), before["CURRENT"])
    assert seen == {k: v for k, v in before.items() if k != "CURRENT"}
    r = subprocess.run([sys.executable, "-c", NIGHTLY, day.isoformat(), str(stack.base / "inbox")], env=stack.env,
                       cwd=stack.base, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    m = _manifest(stack, "nightly")
    assert m["status"] == "completed" and m["parameters"]["day"] == day.isoformat(), m["errors"]
    after = _published(stack, day)  # the same bytes; the re-run's derived tables are new runs (new CURRENT ids)
    assert after.pop("CURRENT").keys() == before.pop("CURRENT").keys()
    assert after == before


def test_ui_renders_the_nightly_run_and_artifacts_in_chromium(stack, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:  # install Debian's package as CI does (root + apt), else skip with the reason
        p = subprocess.run([str(REPO / "infra" / "install-test-deps.sh"), "chromium"], capture_output=True, text=True,
                           timeout=900)
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is None:
            pytest.skip(f"chromium not available and not installable: {p.stderr.strip().splitlines()[-1:] or p.returncode}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -c constraints.txt playwright)")
    run_id = stack.runs.get("nightly")
    if run_id is None:
        pytest.skip("the nightly deployment did not run (see test_nightly_deployment_on_the_s3_store)")
    arts = {a["key"]: a for a in stack.api.artifacts(run_id) if a.get("key")}
    day = START + timedelta(days=HISTORY)
    table = arts[f"nightly-{day}"]
    heat = arts[f"nightly-{day}-heatmap"]
    png = tmp_path / "heatmap.png"
    png.write_bytes(stack.s3().cat(heat["data"].split("](", 1)[-1].rstrip(")")[len("s3://"):]))
    ui = f"http://127.0.0.1:{stack.port}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{ui}/runs/flow-run/{run_id}", wait_until="networkidle", timeout=120_000)
            page.get_by_text("nightly", exact=False).first.wait_for(timeout=60_000)
            page.get_by_text("Completed", exact=False).first.wait_for(timeout=60_000)
            page.screenshot(path=str(tmp_path / "flow-run.png"), full_page=True)
            page.goto(f"{ui}/artifacts/artifact/{table['id']}", wait_until="networkidle", timeout=120_000)
            page.locator("table tbody tr").first.wait_for(timeout=60_000)
            rows = page.locator("table tbody tr").count()
            page.screenshot(path=str(tmp_path / "artifact-table.png"), full_page=True)
            assert rows > 0
            page.goto(f"{ui}/artifacts/artifact/{heat['id']}", wait_until="networkidle", timeout=120_000)
            page.get_by_text(f"score heat map {day}", exact=False).first.wait_for(timeout=60_000)
            page.screenshot(path=str(tmp_path / "artifact-heatmap-link.png"), full_page=True)
            page.goto(png.as_uri())  # the heat map itself (on S3: the link is an s3:// URL) decodes as an image
            width = page.evaluate("() => document.images.length && document.images[0].naturalWidth")
            assert width and width > 100
        finally:
            browser.close()
    for name in ("flow-run.png", "artifact-table.png", "artifact-heatmap-link.png"):
        assert (tmp_path / name).stat().st_size > 10_000, name
    print(f"\n[scaleout] UI screenshots in {tmp_path}")


def test_no_secret_in_store_logs_reports_or_database(stack):
    secrets = [s for s in stack.cluster.secrets() if len(s) >= 16]
    assert len(secrets) >= 2
    fs = stack.s3()
    root = stack.store[len("s3://"):]
    leaks = []
    fs.invalidate_cache()
    for p in fs.find(root):
        try:
            data = fs.cat(p)
        except FileNotFoundError:  # a cache entry replaced since the listing
            continue
        leaks += [p for s in secrets if s.encode() in data]
    for f in stack.base.rglob("*"):  # logs, the local report directory, Prefect homes
        if f.is_file() and f.stat().st_size < 50_000_000:
            data = f.read_bytes()
            leaks += [str(f) for s in secrets if s.encode() in data]
    logs = json.dumps(stack.api.post("/logs/filter", {"limit": 200}))
    runs = json.dumps(stack.api.post("/flow_runs/filter", {"limit": 200}))
    leaks += [what for what, text in (("prefect logs", logs), ("flow runs", runs)) for s in secrets if s in text]
    assert leaks == []


def test_run_history_survives_a_server_restart(stack):
    assert stack.runs, "no run to look for"
    before = {rid: stack.api.get(f"/flow_runs/{rid}") for rid in stack.runs.values()}
    stop(stack.server)
    deadline = time.monotonic() + 60  # the old server's workers are gone and the port is free again
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", stack.port)) != 0:
                break
        time.sleep(0.5)
    stack.start_server(stack.base / "server-home-2")  # a new, empty PREFECT_HOME: the history is in PostgreSQL
    for rid, fr in before.items():
        again = stack.api.get(f"/flow_runs/{rid}")
        assert again["state"]["type"] == fr["state"]["type"] == "COMPLETED"
        assert again["name"] == fr["name"]
        assert len(stack.api.artifacts(rid)) > 0, rid  # artifacts (report table, heat-map link) kept too
    assert not (stack.base / "server-home-2" / "prefect.db").exists()
