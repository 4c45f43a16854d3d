"""The ``nodewatch`` console script: hand a short command to the user's warm worker, else run it here.

A small command (``ingest``, ``runs``, ``store``, ...) pays ~4-5 s of Great Expectations import and
context creation before it reads a byte. The warm worker (:mod:`nodewatch.flows.warm`) is one
background process per user and venv that has paid that once; for each command it forks a child
that runs exactly what ``nodewatch.flows.cli.main`` would run here, with this process's arguments,
environment, working directory, umask and standard streams (passed as file descriptors over a Unix
socket only this user can open). The child's exit status becomes this process's; Ctrl-C and
``kill`` of this process reach the child. docs/operations.md, "Warm worker".

This module uses the standard library only (it runs before anything heavy is imported). When the
worker is not running, is stale (its loaded code changed on disk) or anything in the hand-over
fails before the command started, the command runs in this process as before, and a worker is
started in the background for the next command (unless ``NODEWATCH_WARM=0``, ``CI`` is set, or the
command is not one of :data:`WARM_COMMANDS`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

WARM_COMMANDS = frozenset({"ingest", "runs", "store", "states", "checkpoint", "cubes", "jobs"})
"""Command groups handed to the warm worker: short commands whose cost is mostly start-up."""
GLOBAL_OPTIONS_WITH_VALUE = frozenset({"--store", "--config"})
_FALSE = {"0", "false", "no", "off"}
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def warm_enabled(env: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """``NODEWATCH_WARM`` (default on; off when ``CI`` is set and ``NODEWATCH_WARM`` is not)."""
    env = os.environ if env is None else env
    value = env.get("NODEWATCH_WARM")
    if value is None:
        return not env.get("CI")
    return value.strip().lower() not in _FALSE


def command_group(argv: list[str]) -> str | None:
    """The command group of ``argv`` (the first argument that is not a global option), or ``None``."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in GLOBAL_OPTIONS_WITH_VALUE:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return a
    return None


def runtime_dir(create: bool = False) -> Path | None:
    """This user's private directory for worker sockets: 0700, owned by us, not a symlink (else ``None``)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    d = Path(base) / f"nodewatch-warm-{os.getuid()}"
    if create:
        try:
            d.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            return None
    try:
        st = os.lstat(d)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None  # someone else's, a link, or readable by others: never talk through it
    return d


def socket_path(directory: Path) -> Path:
    """The worker socket of this interpreter (one worker per user and venv)."""
    key = hashlib.sha256(f"{sys.prefix}\0{sys.executable}\0{sys.version}".encode()).hexdigest()[:16]
    return directory / f"{key}.sock"


def send_message(sock: socket.socket, payload: dict[str, object], fds: list[int] | None = None) -> None:
    """Length-prefixed JSON, with ``fds`` attached to the first chunk."""
    data = json.dumps(payload).encode()
    frame = struct.pack("!I", len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [frame], fds)
        frame = frame[sent:]
    if frame:
        sock.sendall(frame)


def connect(path: Path, timeout: float = 2.0) -> socket.socket | None:
    """A connection to the worker at ``path``, or ``None`` when none listens there."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except OSError:
        s.close()
        return None
    return s


def run_warm(argv: list[str]) -> int | None:
    """Run ``argv`` in the warm worker: its exit code, or ``None`` when the command did not start there."""
    d = runtime_dir()
    if d is None:
        return None
    sock = connect(socket_path(d))
    if sock is None:
        return None
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
        send_message(sock, {"op": "run", "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                            "umask": _umask()}, [0, 1, 2])
        sock.settimeout(None)
        reader = sock.makefile("rb")
        first = reader.readline()
    except OSError:
        sock.close()
        return None
    if not first.startswith(b"P"):
        sock.close()
        return None  # stale worker or refused: run here
    previous = {s: signal.signal(s, lambda signum, _f: _forward(sock, signum)) for s in FORWARDED_SIGNALS}
    try:
        for line in reader:
            if line.startswith(b"X"):
                return int(line[1:])
    except OSError:
        pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        sock.close()
    sys.stderr.write("error: the warm worker running this command died; see its log in "
                     f"{d} (set NODEWATCH_WARM=0 to run commands in-process)\n")
    return 1


def _forward(sock: socket.socket, signum: int) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(f"S{signum}\n".encode())


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


def start_worker() -> None:
    """Start the worker in the background (detached; it logs to its runtime directory)."""
    d = runtime_dir(create=True)
    if d is None:
        return
    with contextlib.suppress(OSError):
        subprocess.Popen([sys.executable, "-m", "nodewatch.flows.warm", "serve"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                         close_fds=True)


def main() -> None:
    """Console-script entry point (see the module docstring)."""
    argv = sys.argv[1:]
    if warm_enabled() and command_group(argv) in WARM_COMMANDS:
        code = run_warm(argv)
        if code is not None:
            sys.exit(code)
        start_worker()
    from nodewatch.flows.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
