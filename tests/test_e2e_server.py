"""End to end on a real Prefect server: ``nodewatch server start`` + ``nodewatch serve``, runs via the REST API.

No mocks: a real ``prefect server start`` on 127.0.0.1 (random free port, temporary PREFECT_HOME,
SQLite), the deployments served by ``nodewatch serve`` as a subprocess with PREFECT_API_URL
exported, flow runs created through ``/api/deployments/{id}/create_flow_run`` and awaited by
polling ``/api/flow_runs/{id}``. Small on purpose (8 simulated nodes, 3 history days, 1 epoch):
one server and one serve process for the whole module.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import pytest
from localcluster import Api, free_port, stop

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
START = date(2026, 1, 1)
HISTORY = 3
SIM = {"n_nodes": 8, "nodes_per_rack": 4, "racks_per_row": 2, "anomaly_share": 0.03, "misconfig_rack": -1}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Prefect server + bootstrapped demo store + ``nodewatch serve``; torn down at the end."""
    base = tmp_path_factory.mktemp("e2e")
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    e = {**os.environ, "PREFECT_HOME": str(base / "prefect-home"), "PREFECT_API_URL": api_url,
         "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", "PREFECT_LOGGING_LEVEL": "WARNING",
         "NODEWATCH_STORE": str(base / "store"), "TORCH_NUM_THREADS": "1",
         "NODEWATCH_SERVICE_HOSTS": '["slurmctl01"]'}
    procs: list[subprocess.Popen] = []
    logs = {n: open(base / f"{n}.log", "wb") for n in ("server", "serve")}  # noqa: SIM115
    try:
        server_env = {k: v for k, v in e.items() if k != "PREFECT_API_URL"}
        procs.append(subprocess.Popen([str(BIN / "nodewatch"), "server", "start", "--port", str(port)], env=server_env,
                                      cwd=REPO, stdout=logs["server"], stderr=subprocess.STDOUT, start_new_session=True))
        api = Api(api_url)
        deadline = time.monotonic() + 300
        while True:
            try:
                if api.http.get("/health").status_code == 200:
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            assert procs[0].poll() is None, (base / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "prefect server did not answer /api/health in 300 s"
            time.sleep(1)
        inbox = base / "inbox"
        boot = subprocess.run(
            [sys.executable, "-c", "import json,sys; from nodewatch.flows.demo import bootstrap; "
             f"r = bootstrap({str(inbox)!r}, {str(base / 'store')!r}, {HISTORY}, 1, 10, json.loads(sys.argv[1])); "
             "print(json.dumps(r['train'], default=str))", json.dumps(SIM)],
            env=e, cwd=REPO, capture_output=True, text=True, timeout=900)
        assert boot.returncode == 0, boot.stderr[-3000:]
        procs.append(subprocess.Popen([str(BIN / "nodewatch"), "serve", "--inbox", str(inbox), "--demo", "--paused"],
                                      env=e, cwd=REPO, stdout=logs["serve"], stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 300
        while set(api.deployments()) < {"nightly", "train", "backfill"}:
            assert procs[1].poll() is None, (base / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "deployments did not appear in 300 s"
            time.sleep(2)
        yield {"api": api, "store": base / "store", "inbox": inbox, "base": base}
    finally:
        for p in reversed(procs):
            stop(p)
        for f in logs.values():
            f.close()


def _chunks(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "/c/" in str(p)}


def _manifest(store: Path, flow_name: str, n: int = -1) -> dict:
    ms = [json.loads(p.read_text()) for p in sorted((store / "runs").glob("*.json"))]
    ms = [m for m in ms if m["flow"] == flow_name]
    return ms[n]


def test_deployments_schedules_and_ui_api(env):
    api: Api = env["api"]
    deps = api.deployments()
    crons = {n: [s["schedule"].get("cron") for s in d.get("schedules", [])] for n, d in deps.items()}
    assert crons["nightly"] == ["0 2 * * *"] and crons["train"] == ["0 3 * * 0"] and crons["backfill"] == []
    assert deps["backfill"]["parameter_openapi_schema"]["properties"]["start"]["format"] == "date"
    import prefect

    assert api.get("/health") is True
    assert api.get("/admin/version") == prefect.__version__
    # what the UI's flow-run list calls: the runs of the deployments so far (none yet) and the flows registered
    flows = {f["name"] for f in api.post("/flows/filter", {})}  # type: ignore[union-attr]
    assert {"nightly", "train_weekly", "backfill", "demo_bootstrap"} <= flows


def test_nightly_run_through_the_api(env):
    api: Api = env["api"]
    fr = api.run(api.deployments()["nightly"], {})
    assert fr["state"]["type"] == "COMPLETED", fr["state"]
    day = START + timedelta(days=HISTORY)
    keys = {a["key"] for a in api.artifacts(fr["id"]) if a.get("key")}
    assert {f"nightly-{day}", f"nightly-{day}-alerts", f"nightly-{day}-heatmap"} <= keys
    m = _manifest(env["store"], "nightly")
    assert m["status"] == "completed" and m["parameters"]["day"] == day.isoformat(), m["errors"]
    assert {"ingest", "validate", "cubes", "score", "checkpoint_tables", "report"} <= set(m["outputs"])
    assert m["outputs"]["validate"]["balanced"] and m["outputs"]["score"]["scored"] == 8
    assert "node_precision" in m["outputs"]["report"]["evaluation"]
    assert Path(m["outputs"]["score"]["summary"]).is_file()  # scores/daily/date=D/v-<token>/ (the committed version)
    assert Path(m["outputs"]["score"]["heatmap"]).read_bytes()[:4] == b"\x89PNG"


def test_backfill_and_idempotent_rerun(env):
    api: Api = env["api"]
    bf = api.deployments()["backfill"]
    last = START + timedelta(days=HISTORY - 1)
    fr = api.run(bf, {"start": START.isoformat(), "end": last.isoformat()})
    assert fr["state"]["type"] == "COMPLETED", fr["state"]
    m1 = _manifest(env["store"], "backfill")
    assert sorted(m1["outputs"]["days_scored"]) == [(START + timedelta(days=i)).isoformat() for i in range(HISTORY)]
    before = {c: _chunks(env["store"] / "cubes" / c) for c in ("scores.zarr", "telemetry.zarr")}
    # the same day again without force: skipped; with force: rewritten byte-identically, same counts
    fr = api.run(bf, {"start": last.isoformat(), "end": last.isoformat()})
    assert fr["state"]["type"] == "COMPLETED"
    assert _manifest(env["store"], "backfill")["outputs"]["days_skipped"] == [last.isoformat()]
    fr = api.run(bf, {"start": last.isoformat(), "end": last.isoformat(), "force": True})
    assert fr["state"]["type"] == "COMPLETED", fr["state"]
    m3 = _manifest(env["store"], "backfill")
    assert m3["outputs"]["days_scored"][last.isoformat()] == m1["outputs"]["days_scored"][last.isoformat()]
    after = {c: _chunks(env["store"] / "cubes" / c) for c in ("scores.zarr", "telemetry.zarr")}
    assert after == before
    assert any(k.startswith("backfill-") for k in (a.get("key") or "" for a in api.artifacts(fr["id"])))
