"""Helpers of the alerts tests (real components: Debian's prometheus-alertmanager and prometheus on 127.0.0.1.

A missing binary is installed with ``infra/install-test-deps.sh`` (apt, as on a fresh CI clone); only if
that fails is the test skipped, with the reason printed. Every component gets a free port, a temporary
storage directory and is stopped (its own pid) at the end of the test.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
DAY = date(2026, 1, 22)


def need(binary: str, dep: str) -> str:
    """Path of ``binary``, installing Debian's package through infra/install-test-deps.sh when missing."""
    exe = shutil.which(binary)
    if exe is None:
        p = subprocess.run([str(REPO / "infra" / "install-test-deps.sh"), dep], capture_output=True, text=True, timeout=900)
        exe = shutil.which(binary)
        if exe is None:
            why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            print(f"SKIP: {binary} not installable: {why}")
            pytest.skip(f"{binary} not available and not installable: {why}")
    return exe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} not up after {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class Webhook:
    """A webhook receiver on 127.0.0.1 recording every notification Alertmanager sends."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        hook = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hook.received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def verdict_rows() -> list[dict[str, Any]]:
    """Three verdicts as issue 15's table holds them: a rack alert, two node alerts."""
    t = pd.Timestamp("2026-01-22T01:15:00")  # naive UTC, as the verdict model returns them
    base = {"suspected_group": "", "architecture": "icelake", "model_peak": float("nan"), "vicinity_outlier": None}
    return [
        {**base, "kind": "rack", "subject": "r01", "severity": "high", "score": 150.0, "threshold": 6.0, "first_time": t,
         "last_time": t + pd.Timedelta(hours=20), "windows": 57, "top_metrics": ["procs_running", "mem_used"],
         "rack": "r01", "members": [f"cn00{i}" for i in range(17, 33)]},
        {**base, "kind": "node", "subject": "cn0048", "severity": "high", "score": 30.0, "threshold": 6.0, "first_time": t,
         "last_time": t + pd.Timedelta(hours=1), "windows": 5, "top_metrics": ["ib_errors_rate"], "rack": "r02",
         "members": ["cn0048"], "vicinity_outlier": True, "model_peak": 0.92},
        {**base, "kind": "node", "subject": "cn0005", "severity": "low", "score": 10.0, "threshold": 6.0,
         "first_time": t + pd.Timedelta(hours=3), "last_time": t + pd.Timedelta(hours=4), "windows": 3,
         "top_metrics": ["temp_cpu0"], "rack": "r00", "members": ["cn0005"], "suspected_group": "job 4711"},
    ]


def write_verdicts(store, day: date, rows: list[dict[str, Any]], run_id: str | None = None) -> str:
    """Write ``reports/<day>/verdicts.parquet`` as the verdicts step does, and a nightly manifest naming it."""
    import pyarrow as pa

    from nodewatch.tasks.anomaly.verdicts import COLUMNS, verdicts_frame

    df = verdicts_frame(day, [{k: v for k, v in r.items() if k in COLUMNS} for r in rows])
    path = store.write_parquet(pa.Table.from_pandas(df, preserve_index=False), "reports", day.isoformat(), "verdicts.parquet")
    store.write_bytes(b"# verdicts\n", "reports", day.isoformat(), "verdicts.md")
    if run_id:
        store.write_json({"run_id": run_id, "flow": "nightly", "status": "completed",
                          "finished": f"{day.isoformat()}T23:59:00+00:00", "counts": {},
                          "outputs": {"verdicts": {"verdicts": path}}}, "runs", f"{run_id}.json")
    return path
