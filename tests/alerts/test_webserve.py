"""The read-only store view of ``nodewatch server start``: served areas only, no traversal, no links,
GET/HEAD only, markdown rendered without raw HTML or script links."""

from __future__ import annotations

import http.client
import os

import pytest

from nodewatch.tasks.alerts.webserve import serve_in_thread, url_for


@pytest.fixture
def served(store):
    root = store.root
    page = b"# Night\n\n<script>alert(1)</script> [x](javascript:alert(1)) | a |\n\n| n | s |\n|---|---|\n| cn1 | 2 |\n"
    store.write_bytes(page, "reports", "2026-01-22", "verdicts.md")
    store.write_bytes(b"<html><body>docs</body></html>", "validation", "RUN", "syslog", "index.html")
    store.write_bytes(b"\x89PNG....", "scores", "daily", "date=2026-01-22", "v-1", "heatmap.png")
    os.makedirs(f"{root}/keys", exist_ok=True)
    with open(f"{root}/keys/user-hash.key", "w") as f:
        f.write("SECRET")
    os.symlink(f"{root}/keys/user-hash.key", f"{root}/reports/2026-01-22/leak.md")
    os.symlink(f"{root}/keys", f"{root}/reports/keysdir")
    srv, url = serve_in_thread(store)
    yield store, url, srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _get(port: int, path: str, method: str = "GET") -> tuple[int, dict, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.putrequest(method, path, skip_accept_encoding=True)  # the path is sent as is (no client normalisation)
    c.endheaders()
    r = c.getresponse()
    return r.status, dict(r.getheaders()), r.read()


def test_served_pages(served):
    store, url, port = served
    code, h, body = _get(port, "/reports/2026-01-22/verdicts.md")
    assert code == 200 and h["Content-Type"].startswith("text/html") and "script-src" not in h["Content-Security-Policy"]
    assert "default-src 'none'" in h["Content-Security-Policy"]
    assert b"<script>" not in body and b"&lt;script&gt;" in body and b'href="javascript:' not in body
    assert b"<table>" in body and b"<td>cn1</td>" in body
    code, h, body = _get(port, "/validation/RUN/syslog/index.html")
    assert code == 200 and body == b"<html><body>docs</body></html>" and h["X-Content-Type-Options"] == "nosniff"
    code, h, _ = _get(port, "/scores/daily/date=2026-01-22/v-1/heatmap.png")
    assert code == 200 and h["Content-Type"] == "image/png"
    code, _, body = _get(port, "/reports/")
    assert code == 200 and b"2026-01-22/" in body and b"keysdir" not in body  # links are not listed
    assert _get(port, "/reports/2026-01-22/verdicts.md", "HEAD")[2] == b""


@pytest.mark.parametrize("path, code", [
    ("/keys/user-hash.key", 404), ("/raw/", 404), ("/runs/", 404), ("/quarantine/x", 404),
    ("/reports/../keys/user-hash.key", 400), ("/reports/%2e%2e/keys/user-hash.key", 400),
    ("/reports/..%2fkeys/user-hash.key", 400), ("/reports/2026-01-22/%00.md", 400), ("/reports//x", 400),
    ("/reports/..\\keys", 400), ("/reports/%ff%fe", 400), ("/reports/2026-01-22/leak.md", 403),
    ("/reports/keysdir/user-hash.key", 403), ("/reports/nope.md", 404), ("/reports/a%0d%0aSet-Cookie:x", 400),
])
def test_refused_paths(served, path, code):
    _, _, port = served
    got, _, body = _get(port, path)
    assert got == code and b"SECRET" not in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_read_only(served, method):
    assert _get(served[2], "/reports/2026-01-22/verdicts.md", method)[0] == 405


def test_url_for(store):
    base = "http://127.0.0.1:4201"
    p = store.path("reports", "nightly", "date=2026-01-22", "report.md")
    assert url_for(base, store, p) == f"{base}/reports/nightly/date%3D2026-01-22/report.md"
    assert url_for(base, None, "/x/reports/y/validation/RUN/t/index.html") == f"{base}/validation/RUN/t/index.html"
    assert url_for(base, store, store.path("keys", "user-hash.key")) is None
    assert url_for(None, store, p) is None and url_for(base, store, "/elsewhere/reports/a.md") is None
