"""The ingest_jobs Prefect flow (ephemeral API via the session harness) and the CLI around it."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "jobs"


def _artifact_keys() -> set[str]:
    from prefect.client.orchestration import get_client

    async def _keys() -> set[str]:
        async with get_client() as c:
            return {a.key for a in await c.read_artifacts() if a.key}

    return anyio.run(_keys)


@pytest.mark.slow
def test_ingest_jobs_flow_manifest_artifacts_and_idempotence(prefect_harness, tmp_path):
    from nodewatch.flows.ingest import ingest_jobs
    from nodewatch.tasks.core.runs import load_manifest
    from nodewatch.tasks.core.store import Store

    files = [str(FIX / "sacct_simple.log"), str(FIX / "KTH-SP2-1996-2.1-cln-head.swf")]
    store = str(tmp_path / "store")
    m1 = ingest_jobs(files, store=store)
    assert m1["status"] == "completed" and m1["flow"] == "ingest_jobs"
    c = m1["counts"]["jobs"]
    assert c["rows_in"] == c["staged"] + c["quarantined"] + c["duplicates"] and c["staged"] > 0
    assert m1["outputs"]["data_docs_jobs"].endswith("index.html") and Path(m1["outputs"]["data_docs_jobs"]).exists()
    assert {"ingest-jobs", "ingest-jobs-summary", "gx-data-docs-jobs"} <= _artifact_keys()
    st = Store(store)
    n = st.read_staged("jobs").num_rows
    # same bytes again: nothing added, inputs listed as skipped
    m2 = ingest_jobs(files, store=store)
    assert m2["counts"]["jobs"]["rows_in"] == 0 and st.read_staged("jobs").num_rows == n
    assert {i["status"] for i in m2["inputs"]} == {"skipped-duplicate-file"}
    assert load_manifest(st, m2["run_id"]).parameters["paths"] == files


@pytest.mark.slow
def test_cli_ingest_summary_and_exit_codes(prefect_harness, tmp_path):
    from typer.testing import CliRunner

    from nodewatch.flows.cli import app
    from nodewatch.tasks.core.store import Store

    good = tmp_path / "in"
    good.mkdir()
    shutil.copy(FIX / "sacct_simple.log", good)
    bad = tmp_path / "garbage.log"
    bad.write_bytes(b"\x00\xff" * 100)
    runner = CliRunner()
    store = str(tmp_path / "s")
    r = runner.invoke(app, ["--store", store, "ingest", "jobs", str(good), "--no-data-docs"])
    assert r.exit_code == 0, r.output
    assert "total jobs" in r.output and "nodewatch runs show" in r.output
    st = Store(store)
    manifest = st.read_json("runs", f"{st.list_runs()[-1]}.json")
    assert manifest["flow"] == "ingest_jobs"
    assert manifest["parameters"]["hash_users"] is True  # users are hashed by default (issue 24)
    r2 = runner.invoke(app, ["--store", store, "ingest", "jobs", str(bad), "--no-data-docs"])
    assert r2.exit_code == 1 and "partial" in r2.output and "cannot tell the format" in r2.output
    r3 = runner.invoke(app, ["--store", store, "runs", "list"])
    assert r3.exit_code == 0 and "ingest" in r3.output
    r4 = runner.invoke(app, ["--store", store, "jobs", "shapes", "all", "--png", str(tmp_path / "s.png")])
    assert r4.exit_code == 0 and (tmp_path / "s.png").stat().st_size > 1000


@pytest.mark.slow
def test_cli_ingest_jobs_hashes_users_from_config_file(prefect_harness, tmp_path, monkeypatch):
    """hash_users and hash_salt from the --config TOML file reach the ingest_jobs flow; the manifest says
    hashing was on and holds no salt; a salt shorter than 16 characters is refused."""
    from typer.testing import CliRunner

    from nodewatch.flows.cli import app
    from nodewatch.tasks.core.settings import SettingsError
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.ingest.jobs import keyed_hash

    for k in ("NODEWATCH_HASH_USERS", "NODEWATCH_HASH_SALT", "NODEWATCH_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    salt = "cli-test-salt-0123456789"
    cfg = tmp_path / "nodewatch.toml"
    cfg.write_text(f'hash_users = true\nhash_salt = "{salt}"\n')
    store = str(tmp_path / "s")
    runner = CliRunner()
    r = runner.invoke(
        app, ["--store", store, "--config", str(cfg), "ingest", "jobs", str(FIX / "sacct_simple.log"), "--no-data-docs"]
    )
    assert r.exit_code == 0, r.output
    st = Store(store)
    run_id = st.list_runs()[-1]
    text = st.fs.cat_file(st.path("runs", f"{run_id}.json")).decode()
    manifest = st.read_json("runs", f"{run_id}.json")
    assert manifest["flow"] == "ingest_jobs" and manifest["parameters"]["hash_users"] is True
    assert salt not in text
    users = set(st.read_staged("jobs").column("user").to_pylist())
    assert "user001" not in users and keyed_hash("user001", salt) in users
    monkeypatch.setenv("NODEWATCH_HASH_SALT", "short")
    r2 = runner.invoke(app, ["--store", str(tmp_path / "s2"), "ingest", "jobs", str(FIX / "sacct_simple.log"), "--hash-users"])
    assert r2.exit_code != 0 and isinstance(r2.exception, SettingsError)
    assert "hash_salt is shorter than 16" in str(r2.exception)
