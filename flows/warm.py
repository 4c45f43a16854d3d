"""The warm worker: one background process per user and venv that has imported Great Expectations.

``python -m nodewatch.flows.warm serve`` (started by the ``nodewatch`` console script on first use, see
:mod:`nodewatch.flows.launch`) imports the heavy, environment-independent libraries once and builds the
GX context, then listens on a Unix socket in the user's private runtime directory (0700; peers of
another uid are refused). For each command it forks a session process that forks the command's
process; the command process takes the client's standard streams, environment, working directory
and umask, applies nodewatch's process defaults again, and runs ``nodewatch.flows.cli.main`` with the
client's arguments, exactly as a cold start would from that point. Nothing of nodewatch that reads the
environment at import time is preloaded (not Prefect, not the CLI), so a command sees its own
environment. The session process relays the exit status and the client's signals, and terminates the
command's process group when the client goes away.

Staleness: every file of a module loaded at preload is fingerprinted (path, mtime, size); a session
finding one changed refuses the command (the client runs it in-process) and stops the worker, so an
edited checkout or an upgraded library is never served by old code.

The worker exits after ``NODEWATCH_WARM_IDLE`` seconds (default 900) without a command, on
``nodewatch-warm stop`` (``python -m nodewatch.flows.warm stop``) or SIGTERM.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from nodewatch.flows.launch import connect, runtime_dir, send_message, socket_path

PRELOAD = ("numpy", "pandas", "pyarrow", "pyarrow.compute", "typer", "rich.console", "pydantic", "pydantic_settings",
           "great_expectations", "numba")
"""Third-party modules imported once by the worker (they read no nodewatch/Prefect settings at import)."""
DEFAULT_IDLE_S = 900.0


def preload() -> list[tuple[str, float, int]]:
    """Import :data:`PRELOAD`, build the GX context; the fingerprint of every loaded module file."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from nodewatch.tasks.core.validate import gx_context

    gx_context()
    return fingerprint()


def fingerprint() -> list[tuple[str, float, int]]:
    """(file, mtime, size) of every loaded module that has a file."""
    out = []
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if not f:
            continue
        try:
            st = os.stat(f)
        except OSError:
            continue
        out.append((f, st.st_mtime, st.st_size))
    return out


def stale(prints: list[tuple[str, float, int]]) -> str | None:
    """The first preloaded file that changed since preload, or ``None``."""
    for f, mtime, size in prints:
        try:
            st = os.stat(f)
        except OSError:
            return f
        if st.st_mtime != mtime or st.st_size != size:
            return f
    return None


def _recv_message(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if len(data) < 4:
        raise ConnectionError("short header")
    (n,) = struct.unpack("!I", data[:4])
    body = data[4:]
    while len(body) < n:
        chunk = conn.recv(n - len(body))
        if not chunk:
            raise ConnectionError("client went away")
        body += chunk
    return json.loads(body[:n]), fds


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _run_command(msg: dict[str, Any], fds: list[int]) -> None:
    """In the command process: become the client's process and run the CLI (never returns)."""
    code = 1
    try:
        os.setpgid(0, 0)
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in msg["env"].items()})
        os.chdir(msg["cwd"])
        os.umask(int(msg["umask"]))
        _reopen_std_streams()
        import nodewatch.flows as flows_pkg

        flows_pkg.apply_process_defaults()
        sys.argv = ["nodewatch", *[str(a) for a in msg["argv"]]]
        from nodewatch.flows.cli import main as cli_main

        try:
            cli_main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = 130
        except BaseException:  # noqa: BLE001 - as the interpreter would: traceback, exit 1
            import traceback

            traceback.print_exc()
            code = 1
        import atexit

        atexit._run_exitfuncs()
    finally:
        for f in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                f.flush()
        os._exit(code)


def _reopen_std_streams() -> None:
    enc = os.environ.get("PYTHONIOENCODING", "utf-8").split(":")[0] or "utf-8"
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=enc)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding=enc, line_buffering=os.isatty(1))
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding=enc, errors="backslashreplace",
                                  line_buffering=True)


def _session(conn: socket.socket, prints: list[tuple[str, float, int]], server_pid: int) -> None:
    """In the session process: check, fork the command, relay signals and the exit status (never returns)."""
    code = 0
    try:
        msg, fds = _recv_message(conn)
        if msg.get("op") == "ping":
            conn.sendall(json.dumps({"pid": server_pid, "modules": len(prints)}).encode() + b"\n")
            return
        if msg.get("op") == "stop":
            os.kill(server_pid, signal.SIGTERM)
            conn.sendall(b"stopping\n")
            return
        changed = stale(prints)
        if changed is not None or len(fds) != 3:
            conn.sendall(f"R stale: {changed}\n".encode())
            os.kill(server_pid, signal.SIGTERM)
            return
        pid = os.fork()
        if pid == 0:
            conn.close()
            _run_command(msg, fds)
        group = next((a for a in msg["argv"] if not str(a).startswith("-")), "")
        print(f"{time.strftime('%FT%T')} served pid {pid}: {str(group)[:40]!r}", flush=True)
        for fd in fds:
            os.close(fd)
        conn.sendall(f"P{pid}\n".encode())
        threading.Thread(target=_relay_signals, args=(conn, pid), daemon=True).start()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code
        with contextlib.suppress(OSError):
            conn.sendall(f"X{code}\n".encode())
    except Exception:  # noqa: BLE001 - a broken hand-over is the client's fallback, never the worker's crash
        code = 1
    finally:
        os._exit(code)


def _relay_signals(conn: socket.socket, pid: int) -> None:
    reader = conn.makefile("rb")
    try:
        for line in reader:
            if line.startswith(b"S"):
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.killpg(pid, int(line[1:]))
    except OSError:
        pass
    # the client went away (EOF) before the command finished: stop the command's process group
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    time.sleep(5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def serve(idle_s: float | None = None) -> int:
    """Run the worker until idle for ``idle_s`` seconds; 0 when it ran, 1 when another one already runs."""
    d = runtime_dir(create=True)
    if d is None:
        print("warm worker: no private runtime directory (XDG_RUNTIME_DIR or the temp dir)", file=sys.stderr)
        return 1
    path = socket_path(d)
    existing = connect(path)
    if existing is not None:
        existing.close()
        return 1
    idle_s = float(os.environ.get("NODEWATCH_WARM_IDLE", DEFAULT_IDLE_S)) if idle_s is None else idle_s
    log = open(d / f"{path.stem}.log", "a", buffering=1)  # noqa: SIM115 - the worker's lifetime
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    t0 = time.perf_counter()
    prints = preload()
    print(f"{time.strftime('%FT%T')} warm worker {os.getpid()}: preloaded {len(prints)} modules in "
          f"{time.perf_counter() - t0:.1f} s; threads {threading.active_count()}", flush=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        srv.bind(str(path))
    finally:
        os.umask(old)
    srv.listen(16)
    srv.settimeout(1.0)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    signal.signal(signal.SIGINT, lambda *_: stop.update(now=True))
    last = time.monotonic()
    me = os.getpid()
    try:
        while not stop["now"] and time.monotonic() - last < idle_s:
            _reap()
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                continue
            last = time.monotonic()
            if _peer_uid(conn) != os.getuid():
                conn.close()
                continue
            if os.fork() == 0:
                srv.close()
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _session(conn, prints, me)
            conn.close()
    finally:
        srv.close()
        try:
            if path.exists() and Path(path).is_socket():
                path.unlink()
        except OSError:
            pass
        print(f"{time.strftime('%FT%T')} warm worker {me}: stopped", flush=True)
    return 0


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def request(op: str) -> dict[str, Any] | None:
    """``ping`` or ``stop`` the worker of this venv; its answer, or ``None`` when none runs."""
    d = runtime_dir()
    sock = connect(socket_path(d)) if d is not None else None
    if sock is None:
        return None
    with sock:
        send_message(sock, {"op": op})
        line = sock.makefile("rb").readline()
    if op == "ping":
        return json.loads(line) if line else None
    return {"stopping": bool(line)}


def main(argv: list[str] | None = None) -> int:
    """``python -m nodewatch.flows.warm serve|status|stop``."""
    args = sys.argv[1:] if argv is None else argv
    cmd = args[0] if args else "status"
    if cmd == "serve":
        return serve()
    if cmd in ("status", "stop"):
        answer = request("ping" if cmd == "status" else "stop")
        print(json.dumps(answer))
        return 0 if answer is not None else 1
    print("usage: python -m nodewatch.flows.warm serve|status|stop", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
