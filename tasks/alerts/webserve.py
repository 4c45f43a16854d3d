"""Read-only HTTP view of the store's reports, Data Docs, score heat maps and checkpoint tables.

``nodewatch server start`` runs it next to the Prefect server (127.0.0.1) so the UI's link artifacts
(nightly report, verdicts, heat map, GX Data Docs) open over HTTP instead of as ``file://`` links a page
served over HTTP cannot open (and that mean nothing for an ``s3://`` store).

Only the areas in :data:`SERVED` are visible (never ``raw/``, ``quarantine/``, ``keys/``, ``runs/``...).
A request path is decoded once and refused when a component is empty, ``.``, ``..``, or holds a NUL, a
backslash or a control character; on a local store any symbolic link on the path is refused (the resolved
path must be the path itself) and files are opened with :func:`~nodewatch.tasks.core.files.open_regular`
(no link following, regular files only). Only GET and HEAD are answered. Markdown is rendered with
markdown-it (raw HTML off, so data in a report cannot become markup; ``javascript:`` links are dropped)
into a page whose Content-Security-Policy allows no script; everything else is sent with
``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import html
import mimetypes
import os
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nodewatch.tasks.core.store import Store

SERVED = ("reports", "validation", "scores/daily", "tables/checkpoint")
"""Store areas served (prefixes of store keys)."""
CHUNK = 1 << 16
PAGE_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"
_TYPES = {".md": "text/markdown", ".txt": "text/plain", ".csv": "text/plain", ".json": "application/json",
          ".html": "text/html", ".png": "image/png", ".css": "text/css", ".js": "text/javascript",
          ".svg": "image/svg+xml", ".parquet": "application/octet-stream"}


def url_for(base_url: str | None, store: Store | None, path: str) -> str | None:
    """The URL under ``base_url`` of a store path in a served area, else ``None``.

    Without ``store`` the area is found by its name in the path (the last ``/<area>/`` in it).
    """
    if not base_url or not path:
        return None
    p = path.split("://", 1)[-1]
    if store is not None:
        root = store.root.split("://", 1)[-1].rstrip("/")
        if not p.startswith(root + "/"):
            return None
        rel = p[len(root) + 1:]
    else:
        hits = [(p.rfind(f"/{a}/"), a) for a in SERVED if p.rfind(f"/{a}/") >= 0]
        if not hits:
            return None
        rel = p[max(hits)[0] + 1:]
    if not any(rel.startswith(a + "/") for a in SERVED) or _parts("/" + rel) is None:
        return None
    return base_url.rstrip("/") + "/" + urllib.parse.quote(rel)


def _parts(raw: str) -> list[str] | None:
    """Decoded path components of a request path, or ``None`` when the path is unsafe."""
    path = urllib.parse.urlsplit(raw).path
    dec = urllib.parse.unquote(path, errors="strict") if "%" in path else path
    if not dec.startswith("/"):
        return None
    parts = dec[1:].split("/")
    if parts and parts[-1] == "":
        parts = parts[:-1]  # a trailing slash (directory)
    for p in parts:
        if p in ("", ".", "..") or "\\" in p or any(ord(c) < 32 or ord(c) == 127 for c in p):
            return None
    return parts


def _served(parts: list[str]) -> bool:
    rel = "/".join(parts)
    return any(rel == a or rel.startswith(a + "/") for a in SERVED)


class _Handler(BaseHTTPRequestHandler):
    store: Store
    server_version = "nodewatch-reports"
    sys_version = ""

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet; errors go to the response
        pass

    def _send(self, code: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _page(self, code: int, title: str, body_html: str) -> None:
        doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
               "<style>body{font-family:sans-serif;max-width:70em;margin:1em auto}table{border-collapse:collapse}"
               "td,th{border:1px solid #ccc;padding:2px 6px}</style></head>"
               f"<body>{body_html}</body></html>").encode()
        self._send(code, doc, "text/html; charset=utf-8", {"Content-Security-Policy": PAGE_CSP})

    def _error(self, code: int, msg: str) -> None:
        self._page(code, f"{code}", f"<h1>{code}</h1><p>{html.escape(msg)}</p>")

    def do_POST(self) -> None:  # noqa: N802
        self._error(405, "read-only")

    do_PUT = do_DELETE = do_PATCH = do_POST  # noqa: N815

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        try:
            parts = _parts(self.path)
        except UnicodeDecodeError:
            parts = None
        if parts is None:
            return self._error(400, "unsafe path")
        if not parts:
            items = "".join(f"<li><a href='/{html.escape(a)}/'>{html.escape(a)}/</a></li>" for a in SERVED)
            return self._page(200, "nodewatch", f"<h1>nodewatch store (read-only)</h1><ul>{items}</ul>")
        if not _served(parts) and not any(a.startswith("/".join(parts) + "/") for a in SERVED):
            return self._error(404, "not a served area")
        st = self.store
        try:
            full = st.path(*parts)
        except ValueError:
            return self._error(400, "unsafe path")
        if st.is_local:
            real_root = os.path.realpath(st.root)
            want = os.path.join(real_root, *parts)
            if os.path.realpath(want) != want:
                return self._error(403, "symbolic links are not served")
            full = want
        if st.is_local and not os.path.lexists(full):
            return self._error(404, "not found")
        try:
            if st.fs.isdir(full):
                return self._listing(parts, full)
            if not _served(parts):
                return self._error(404, "not found")
            data = self._read(full)
        except FileNotFoundError:
            return self._error(404, "not found")
        except (OSError, ValueError) as e:
            return self._error(403, f"refused: {type(e).__name__}")
        ext = os.path.splitext(parts[-1])[1].lower()
        ctype = _TYPES.get(ext) or mimetypes.guess_type(parts[-1])[0] or "application/octet-stream"
        if ext == ".md":
            return self._markdown(parts, data)
        extra: dict[str, str] = {}
        if ext == ".svg":
            extra["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
        if ctype == "application/octet-stream":
            extra["Content-Disposition"] = "attachment"
        charset = "; charset=utf-8" if ctype.startswith("text/") or ctype == "application/json" else ""
        self._send(200, data, ctype + charset, extra)

    def _read(self, full: str) -> bytes:
        from nodewatch.tasks.core.files import open_regular

        if self.store.is_local:
            fd = open_regular(full)
            with os.fdopen(fd, "rb") as f:
                return f.read()
        with self.store.fs.open(full, "rb") as f:
            return f.read()

    def _markdown(self, parts: list[str], data: bytes) -> None:
        from markdown_it import MarkdownIt

        md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
        body = md.render(data.decode("utf-8", errors="replace"))
        self._page(200, "/".join(parts), body)

    def _listing(self, parts: list[str], full: str) -> None:
        entries = []
        for p in sorted(self.store.fs.ls(full, detail=False)):
            name = p.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith(".") or (self.store.is_local and os.path.islink(p)):
                continue
            sub = [*parts, name]
            if not _served(sub) and not any(a.startswith("/".join(sub) + "/") or a == "/".join(sub) for a in SERVED):
                continue
            slash = "/" if self.store.fs.isdir(p) else ""
            href = "/" + "/".join(urllib.parse.quote(x) for x in sub) + slash
            entries.append(f"<li><a href='{html.escape(href)}'>{html.escape(name)}{slash}</a></li>")
        title = "/" + "/".join(parts) + "/"
        self._page(200, title, f"<h1>{html.escape(title)}</h1><ul>{''.join(entries)}</ul>")


def make_server(store: Store, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A read-only server of the store's :data:`SERVED` areas (not started; ``serve_forever`` it)."""
    handler = type("StoreHandler", (_Handler,), {"store": store})
    srv = ThreadingHTTPServer((host, port), handler)
    srv.daemon_threads = True
    return srv


def serve_in_thread(store: Store, host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    """Start :func:`make_server` in a daemon thread; returns the server and its base URL."""
    srv = make_server(store, host, port)
    threading.Thread(target=srv.serve_forever, name="nodewatch-reports", daemon=True).start()
    h, p = srv.server_address[:2]
    return srv, f"http://{h}:{p}"
