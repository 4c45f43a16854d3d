"""Prometheus textfile metrics: values against hand-made inputs, ``promtool check metrics`` (Debian's
prometheus package) and a real Prometheus on loopback scraping the file, read back from its API."""

from __future__ import annotations

import os
import subprocess
import time

import httpx
import pytest
from alerts_support import DAY, need, verdict_rows, write_verdicts

from nodewatch.tasks.alerts.metrics import TextfileDirError, build_registry, verdict_levels, write_metrics


def _manifests(store):
    store.write_json({"run_id": "a", "flow": "ingest_telemetry", "status": "completed", "finished": "2026-01-22T01:00:00Z",
                      "counts": {"telemetry": {"rows_in": 10, "staged": 7, "quarantined": 3, "duplicates": 0}}}, "runs", "a.json")
    store.write_json({"run_id": "b", "flow": "ingest_telemetry", "status": "partial", "finished": "2026-01-23T01:00:00Z",
                      "counts": {"telemetry": {"rows_in": 5, "staged": 3, "quarantined": 2, "duplicates": 0}}}, "runs", "b.json")
    store.write_json({"run_id": "c", "flow": "checkpoint_tables", "status": "completed", "finished": "2026-01-23T02:00:00Z",
                      "counts": {"jobs": {"rows_in": 5, "staged": 4, "quarantined": 1, "duplicates": 0}}}, "runs", "c.json")
    store.write_json({"run_id": "d", "flow": "nightly", "status": "running", "finished": None}, "runs", "d.json")
    store.write_bytes(b"{truncated", "runs", "e.json")


def _samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line and line[0] != "#"}


def test_metric_values(store, tmp_path):
    _manifests(store)
    write_verdicts(store, DAY, verdict_rows())
    out = write_metrics(store, DAY, verdict_rows(), str(tmp_path))
    s = _samples((tmp_path / "nodewatch.prom").read_text())
    assert s['nodewatch_node_verdict{kind="node",node="cn0048"}'] == 3.0  # high
    assert s['nodewatch_node_verdict{kind="node",node="cn0005"}'] == 1.0  # low
    assert s['nodewatch_node_verdict{kind="rack",node="cn0017"}'] == 3.0  # member of the rack alert
    assert s['nodewatch_node_verdict{kind="node",node="cn0017"}'] == 0.0  # no node verdict of its own
    assert s['nodewatch_rows_quarantined_total{table="telemetry"}'] == 5.0  # 3 + 2, ingest runs only
    assert not any("jobs" in k for k in s if k.startswith("nodewatch_rows_quarantined"))
    assert s['nodewatch_last_run_timestamp_seconds{flow="ingest_telemetry"}'] == 1769130000.0  # 2026-01-23T01:00Z
    assert not any('flow="nightly"' in k for k in s)  # still running
    assert out["scored_nodes"] == 0  # no scoring in this store: no score series


def test_scores_and_racks_from_registry():
    from prometheus_client import generate_latest

    text = generate_latest(build_registry({"cn1": 0.25}, {"cn1": "r07"}, verdict_levels([]), {}, {})).decode()
    assert 'nodewatch_node_anomaly_score{node="cn1",rack="r07"} 0.25' in text
    assert 'nodewatch_node_verdict{kind="node",node="cn1"} 0.0' in text


def test_textfile_dir_is_checked(store, tmp_path):
    with pytest.raises(TextfileDirError, match="No such file"):
        write_metrics(store, None, [], str(tmp_path / "missing"))
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(TextfileDirError, match="symbolic link"):
        write_metrics(store, None, [], str(tmp_path / "link"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(TextfileDirError, match="not a directory"):
        write_metrics(store, None, [], str(tmp_path / "file"))
    # a nodewatch.prom planted as a link is replaced by the rename, its target is not written
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "real" / "nodewatch.prom")
    write_metrics(store, None, [], str(tmp_path / "real"))
    assert victim.read_text() == "keep" and not (tmp_path / "real" / "nodewatch.prom").is_symlink()
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["nodewatch.prom"]  # no temporary file left


@pytest.mark.e2e
def test_promtool_accepts_the_file_and_prometheus_scrapes_it(store, tmp_path, prometheus_scraping):
    _manifests(store)
    write_verdicts(store, DAY, verdict_rows())
    d = tmp_path / "textfile"
    d.mkdir()
    write_metrics(store, DAY, verdict_rows(), str(d))
    promtool = need("promtool", "prometheus")
    p = subprocess.run([promtool, "check", "metrics"], stdin=(d / "nodewatch.prom").open("rb"), capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "" and p.stderr.strip() == "", "promtool's linter has remarks"

    api = prometheus_scraping(d)
    deadline = time.monotonic() + 20
    result = []
    while time.monotonic() < deadline and not result:
        r = httpx.get(f"{api}/query", params={"query": 'nodewatch_node_verdict{kind="node"} > 0'}, timeout=5).json()
        result = r["data"]["result"]
        time.sleep(0.3)
    assert {x["metric"]["node"]: float(x["value"][1]) for x in result} == {"cn0048": 3.0, "cn0005": 1.0}
    q = httpx.get(f"{api}/query", params={"query": "nodewatch_rows_quarantined_total"}, timeout=5).json()["data"]["result"]
    assert [(x["metric"]["table"], x["value"][1]) for x in q] == [("telemetry", "5")]
    up = httpx.get(f"{api}/query", params={"query": 'up{job="nodewatch"}'}, timeout=5).json()["data"]["result"]
    assert up and up[0]["value"][1] == "1"
