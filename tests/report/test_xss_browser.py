"""Stored XSS (issue 24): input values never run as script in the GX Data Docs or the nightly report.

Hostile values go into every string field of a tickets CSV (a real ingest flow writes the Data Docs)
and into every data-derived field of the nightly report; the pages are checked for raw tags and then
opened in headless Chromium (Debian's package, installed by ``infra/install-test-deps.sh``), where a
script that ran would have set ``document.title`` to ``PWNED``. A positive control proves the
detector sees a script that does run.
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
XSS = (
    "<img src=x onerror=\"document.title='PWNED'\">",
    "<script>document.title='PWNED'</script>",
    "<svg onload=\"document.title='PWNED'\">",
    "[click](javascript:document.title='PWNED')",
    "| a | b |",
    "\x1b[31mansi\x07",
)
RAW_TAG = re.compile(r"<(img|script|svg)\b[^>]*(onerror|onload|>document)", re.I)


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        p = subprocess.run([str(REPO / "infra" / "install-test-deps.sh")], capture_output=True, text=True, timeout=900)
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            pytest.skip(f"chromium not available and not installable: {p.stderr.strip().splitlines()[-1:] or p.returncode}")
    return exe


def _title_after_load(exe: str, page: Path) -> str:
    """``document.title`` after the page loaded and its scripts (if any) ran, from Chromium's DOM dump."""
    p = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--virtual-time-budget=3000", "--run-all-compositor-stages-before-draw", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    m = re.search(r"<title>(.*?)</title>", p.stdout, re.S)
    return m.group(1) if m else ""


@pytest.fixture(scope="module")
def chromium() -> str:
    return _chromium()


def test_positive_control_a_raw_payload_is_detected(tmp_path, chromium):
    page = tmp_path / "raw.html"
    page.write_text(f"<html><head><title>ok</title></head><body>{XSS[0]}</body></html>")
    assert _title_after_load(chromium, page) == "PWNED"


def test_data_docs_of_hostile_tickets_run_no_script(tmp_path, prefect_harness, chromium):
    from nodewatch.flows.ingest import ingest

    t0 = 1_767_225_600
    f = tmp_path / "tickets.csv"
    with f.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ticket_id", "node", "alert_time", "false_positive", "opened"])
        w.writerow(["T1", "cn001", t0, "no", t0])
        for i, v in enumerate(XSS):
            w.writerow([v, "cn001", t0 + i, "no", t0])  # hostile id
            w.writerow([f"T{i}x", v, t0 + i, "no", t0])  # hostile node
            w.writerow([f"T{i}y", "cn001", v, "no", t0])  # hostile time
            w.writerow([f"T{i}z", "cn001", t0 + i, v, t0])  # hostile flag
    store = tmp_path / "store"
    m = ingest("tickets", [str(f)], store=str(store))
    assert m["counts"]["tickets"]["quarantined"] > 0
    pages = list((store / "validation").rglob("*.html"))
    assert pages, "no Data Docs written"
    for page in pages:
        text = page.read_text(errors="replace")
        assert RAW_TAG.search(text) is None, page
    shown = [p for p in pages if "&lt;img src=x" in p.read_text()]
    assert shown, "the hostile ticket id should be shown (escaped) among the unexpected values"
    for page in shown:
        assert _title_after_load(chromium, page) != "PWNED", page


def test_nightly_report_markdown_runs_no_script(tmp_path, chromium):
    import markdown_it

    from nodewatch.tasks.report.nightly import report_markdown

    steps = {v: {"status": v, "details": f"ingest tickets: {v}"} for v in XSS}
    score = {"model_kind": XSS[0], "model_run": XSS[1], "nodes": 3, "scored": 2, "flagged": 1, "no_model": list(XSS),
             "no_data": list(XSS), "failed_batches": [XSS[2]], "failed_nodes": list(XSS), "heatmap": XSS[3],
             "alerts": XSS[0]}
    alerts = pd.DataFrame({"node": list(XSS), "first_time": pd.Timestamp("2026-01-01T01:00Z"),
                           "peak_time": pd.Timestamp("2026-01-01T02:00Z"), "peak_score": 0.9,
                           "anomalous_windows": 3, "top_metrics": [list(XSS)] * len(XSS)})
    ckpt = [{"failure_model": v, "ckpt_cost": v, "checkpointable_shapes": v, "mean_saving_vs_daly_pct": v,
             "mean_saving_vs_young_pct": v} for v in XSS]
    md = report_markdown(date(2026, 1, 1), steps, score, alerts, None, ckpt)
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(md)  # raw HTML allowed, as in Prefect's UI
    assert RAW_TAG.search(html) is None and "<a " not in html  # no tag, no link from the data
    assert "&lt;img src=x" in html  # shown as text
    page = tmp_path / "report.html"
    page.write_text(f"<html><head><title>ok</title></head><body>{html}</body></html>")
    assert _title_after_load(chromium, page) == "ok"
