"""Opening inputs: compression detection, globs/directories, line iteration with offsets.

Inputs may be plain, gzip, xz, bz2 or zstd compressed; compression is detected from the magic
bytes, not the file name. Everything streams: nothing reads a whole file into memory.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import lzma
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

MAGIC = {
    b"\x1f\x8b": "gzip",
    b"\xfd7zXZ\x00": "xz",
    b"BZh": "bz2",
    b"\x28\xb5\x2f\xfd": "zstd",
}


class InputError(ValueError):
    """A file (not a row) cannot be read; the message names the file and what to do."""


def detect_compression(path: str | os.PathLike[str]) -> str | None:
    """Compression of a file from its magic bytes (``None`` for plain files)."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            return name
    return None


def open_binary(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a possibly compressed file for streaming binary reads."""
    comp = detect_compression(path)
    if comp == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if comp == "xz":
        return lzma.open(path, "rb")  # type: ignore[return-value]
    if comp == "bz2":
        return bz2.open(path, "rb")  # type: ignore[return-value]
    if comp == "zstd":
        raw = pa.OSFile(str(path), "rb")
        return pa.CompressedInputStream(raw, "zstd")  # type: ignore[return-value]
    return open(path, "rb")


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


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand directories (recursively) and globs into a sorted, de-duplicated list of files.

    Raises :class:`InputError` naming the first argument that matches nothing.
    """
    out: list[Path] = []
    for p in paths:
        s = str(p)
        if any(ch in s for ch in "*?["):
            matches = [Path(m) for m in glob.glob(s, recursive=True)]
            files = [m for m in matches if m.is_file()]
            if not files:
                raise InputError(f"{s}: glob matches no file")
            out.extend(files)
        elif Path(s).is_dir():
            files = [f for f in Path(s).rglob("*") if f.is_file() and not f.name.startswith(".")]
            if not files:
                raise InputError(f"{s}: directory holds no file")
            out.extend(files)
        elif Path(s).is_file():
            out.append(Path(s))
        else:
            raise InputError(f"{s}: no such file")
    seen: set[Path] = set()
    uniq = []
    for f in sorted(out):
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            uniq.append(f)
    return uniq
