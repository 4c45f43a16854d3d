"""Fixtures of the alerts tests: a webhook receiver and a real Alertmanager on 127.0.0.1 (see alerts_support.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from alerts_support import Webhook, free_port, need, stop, wait_http  # noqa: E402


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    w = Webhook()
    yield w
    w.close()


@pytest.fixture
def alertmanager(tmp_path, webhook) -> Iterator[str]:
    """A real Alertmanager on a free loopback port (notifications to :func:`webhook`, resolved ones too)."""
    yield from run_alertmanager(tmp_path, webhook.url)


@pytest.fixture(scope="module")
def module_alertmanager(tmp_path_factory) -> Iterator[str]:
    """One real Alertmanager for a whole test module (its webhook receives nothing: ``http://127.0.0.1:9``)."""
    yield from run_alertmanager(tmp_path_factory.mktemp("am"), "http://127.0.0.1:9/hook")


def run_alertmanager(directory: Path, hook_url: str) -> Iterator[str]:
    """Start Debian's Alertmanager on a free 127.0.0.1 port with its data in ``directory``; yield its URL; stop it."""
    exe = shutil.which("alertmanager") or need("prometheus-alertmanager", "alertmanager")
    port = free_port()
    cfg = directory / "am.yml"
    cfg.write_text(
        "route:\n  receiver: hook\n  group_by: ['alertname', 'node', 'group']\n  group_wait: 1s\n  group_interval: 1s\n"
        "  repeat_interval: 4h\nreceivers:\n  - name: hook\n    webhook_configs:\n"
        f"      - url: {hook_url}\n        send_resolved: true\n")
    proc = subprocess.Popen([str(exe), f"--config.file={cfg}", f"--storage.path={directory / 'am-data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/-/ready", proc)
        yield url
    finally:
        stop(proc)


@pytest.fixture
def prometheus_scraping(tmp_path):
    """Start a real Prometheus on loopback scraping ``<dir>/nodewatch.prom`` through a tiny static HTTP server.

    Returns ``start(directory) -> api_url``; both processes are stopped at the end of the test.
    """
    procs: list[subprocess.Popen] = []

    def start(directory: Path) -> str:
        exe = need("prometheus", "prometheus")
        http_port, prom_port = free_port(), free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "http.server", str(http_port), "--bind", "127.0.0.1",
                                       "--directory", str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_http(f"http://127.0.0.1:{http_port}/nodewatch.prom", procs[-1])
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: nodewatch\n"
                       f"    metrics_path: /nodewatch.prom\n    static_configs:\n      - targets: ['127.0.0.1:{http_port}']\n")
        procs.append(subprocess.Popen([exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", procs[-1], timeout=30)
        return f"http://127.0.0.1:{prom_port}/api/v1"

    yield start
    for p in reversed(procs):
        stop(p)
