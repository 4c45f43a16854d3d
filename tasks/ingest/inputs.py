"""Opening inputs: compression detection, globs/directories, line iteration with offsets.

Inputs may be plain, gzip, xz, bz2 or zstd compressed; compression is detected from the magic
bytes, not the file name. Everything streams: nothing reads a whole file into memory.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa

from nodewatch.tasks.core.files import UnsafeInputError, fd_path, open_regular

MAGIC = {
    b"\x1f\x8b": "gzip",
    b"\xfd7zXZ\x00": "xz",
    b"BZh": "bz2",
    b"\x28\xb5\x2f\xfd": "zstd",
}


class InputError(ValueError):
    """A file (not a row) cannot be read; the message names the file and what to do."""


def _open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """The file behind ``path`` opened read-only, never through a link nor a special file (:class:`InputError`)."""
    try:
        return os.fdopen(open_regular(path), "rb")
    except UnsafeInputError as e:
        raise InputError(str(e)) from None


def _compression_of(head: bytes) -> str | None:
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            return name
    return None


def detect_compression(path: str | os.PathLike[str]) -> str | None:
    """Compression of a file from its magic bytes (``None`` for plain files)."""
    with _open_input(path) as f:
        return _compression_of(f.read(6))


def open_binary(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a possibly compressed file for streaming binary reads (no link followed, regular files only)."""
    f = _open_input(path)
    comp = _compression_of(f.read(6))
    f.seek(0)
    if comp is None:
        return f
    same = fd_path(f.fileno(), path)  # reopens the file already opened, not whatever the path names now
    try:
        if comp == "gzip":
            return gzip.open(same, "rb")  # type: ignore[return-value]
        if comp == "xz":
            return lzma.open(same, "rb")  # type: ignore[return-value]
        if comp == "bz2":
            return bz2.open(same, "rb")  # type: ignore[return-value]
        return pa.CompressedInputStream(pa.OSFile(same, "rb"), "zstd")  # type: ignore[return-value]
    finally:
        f.close()


def read_head(path: str | os.PathLike[str], n: int = 65536) -> bytes:
    """First ``n`` decompressed bytes (for format detection); corrupt streams give what could be read."""
    try:
        with open_binary(path) as f:
            return f.read(n)
    except (OSError, EOFError, lzma.LZMAError, pa.ArrowException):
        return b""


def iter_lines(stream: BinaryIO, max_line: int = 1 << 20, block: int = 1 << 16) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line_without_eol)`` (1-based); CRLF is normalised.

    Reads ``block`` bytes at a time, so when a compressed stream turns out to be truncated every
    complete line decompressed before the break is still yielded; then :class:`InputError` is
    raised naming the last good line. Lines longer than ``max_line`` bytes are yielded truncated
    to ``max_line`` bytes followed by the marker ``b"\\x00<truncated>"`` so the parser can reject
    them with a reason.
    """
    n = 0
    buf = b""
    skipping = False  # inside an over-long line whose head was already yielded
    while True:
        try:
            chunk = stream.read(block)
        except (EOFError, OSError, lzma.LZMAError, pa.ArrowException) as e:
            raise InputError(f"stream ends unexpectedly after line {n}: {e}") from e
        if not chunk:
            if buf and not skipping:
                n += 1
                yield n, buf.rstrip(b"\r")
            return
        buf += chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            if skipping:
                skipping = False
            else:
                n += 1
                yield n, buf[start:nl].rstrip(b"\r")
            start = nl + 1
        buf = buf[start:]
        if len(buf) > max_line and not skipping:
            n += 1
            yield n, buf[:max_line] + b"\x00<truncated>"
            buf = b""
            skipping = True
        elif skipping:
            buf = b""
