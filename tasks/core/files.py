"""Opening input files without following links: the one way nodewatch reads a file it was handed.

:func:`open_regular` opens with ``O_NOFOLLOW | O_NONBLOCK`` and checks the open descriptor with
``fstat``: a path that is (or was swapped for) a symbolic link, a FIFO, a socket or a device is
refused, and nothing under ``/proc``, ``/sys`` or ``/dev`` is read. Discovery
(:mod:`nodewatch.tasks.ingest.discovery`) decides which paths are inputs; this module makes sure the
bytes read are those of that regular file, whatever happens to the path in between.
"""

from __future__ import annotations

import errno
import os
import stat

SPECIAL_ROOTS = ("/proc", "/sys", "/dev")
FOLLOW_HINT = "refused; --follow-symlinks takes links to regular files under the given paths"


class UnsafeInputError(ValueError):
    """An input path is a link, a special file or on a special file system; the message names it."""


def under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or inside it (plain string test on normalised absolute paths)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def kind_of(mode: int) -> str:
    """A short description of a non-regular file mode."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> int:
    """Open ``path`` read-only without following a final symlink: the fd of a regular file, else :class:`UnsafeInputError`.

    ``O_NONBLOCK`` keeps a FIFO from blocking the open (the ``fstat`` check then refuses it); the
    descriptor is switched back to blocking before it is returned.
    """
    p = os.fspath(path)
    real = os.path.realpath(p)
    if any(under(real, s) for s in SPECIAL_ROOTS):
        raise UnsafeInputError(f"{p}: on a special file system ({real}), not an input file")
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ELOOP or os.path.islink(p):
            raise UnsafeInputError(f"{p}: symbolic link ({FOLLOW_HINT})") from None
        raise UnsafeInputError(f"{p}: cannot open: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeInputError(f"{p}: {kind_of(st.st_mode)}, not an input file")
    os.set_blocking(fd, True)
    return fd
