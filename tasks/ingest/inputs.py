"""Opening inputs: compression detection, globs/directories, line iteration with offsets.

Inputs may be plain, gzip, xz, bz2 or zstd compressed; compression is detected from the magic
bytes, not the file name. Everything streams: nothing reads a whole file into memory.

Compressed inputs are read through :class:`DecompressedStream`, which bounds what a hostile file can
make the service do:

* **decompressed size**: more than the setting ``max_decompressed_bytes`` (env
  ``NODEWATCH_MAX_DECOMPRESSED_BYTES``) raises :class:`DecompressionLimitError`
  (``decompressed size exceeds …``);
* **compression ratio**: once more than :data:`RATIO_MIN_BYTES` were decompressed, a ratio of
  decompressed to compressed bytes above ``max_compression_ratio`` raises it too
  (``compression ratio … exceeds …``);
* **truncation**: every byte decompressed before the break is returned first, then
  :class:`TruncatedArchiveError` (``truncated archive``) is raised, so parsers keep every complete
  line and quarantine only the partial tail;
* memory: one decompression step (at most :data:`STEP_BYTES` of output) is held at a time.

The ingest pipeline quarantines a file whose stream raises any of these (they are :class:`InputError`).
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa

from nodewatch.tasks.core.files import UnsafeInputError, open_regular

MAGIC = {
    b"\x1f\x8b": "gzip",
    b"\xfd7zXZ\x00": "xz",
    b"BZh": "bz2",
    b"\x28\xb5\x2f\xfd": "zstd",
}

STEP_BYTES = 1 << 20
"""Most decompressed bytes produced by one decompression step (the memory a stream holds)."""
RATIO_MIN_BYTES = 64 << 20
"""The compression ratio is checked only once this many bytes were decompressed (small files compress well)."""
_RAW_READ = 1 << 16


class InputError(ValueError):
    """A file (not a row) cannot be read; the message names the file and what to do."""


class ArchiveError(InputError, EOFError):
    """A compressed stream breaks off (truncated or corrupt); every byte before the break was returned.

    Also an :class:`EOFError`, so readers that keep what they read before a broken stream do so.
    """


class TruncatedArchiveError(ArchiveError):
    """The compressed stream ends before its end marker (``truncated archive``)."""


class DecompressionLimitError(InputError):
    """A compressed input decompresses to more bytes, or at a higher ratio, than the settings allow."""


@dataclass(frozen=True)
class Limits:
    """Caps on what one compressed input may decompress to (settings ``max_decompressed_bytes``,
    ``max_compression_ratio``)."""

    max_bytes: int = 64 << 30
    max_ratio: float = 1000.0

    @classmethod
    def from_settings(cls) -> Limits:
        """The limits of the current settings (env ``NODEWATCH_*``, the TOML file)."""
        from nodewatch.tasks.core.settings import load_settings

        s = load_settings()
        return cls(
            max_bytes=int(getattr(s, "max_decompressed_bytes", cls.max_bytes)),
            max_ratio=float(getattr(s, "max_compression_ratio", cls.max_ratio)),
        )


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


_NEW = {"gzip": lambda: zlib.decompressobj(wbits=31), "xz": lzma.LZMADecompressor, "bz2": bz2.BZ2Decompressor}
_CODEC_ERRORS = (zlib.error, lzma.LZMAError, OSError, EOFError, ValueError, pa.ArrowException)


class DecompressedStream(io.RawIOBase):
    """Bounded, truncation-tolerant decompression of one gzip/xz/bz2/zstd file (see module doc).

    Concatenated members/streams (``cat a.gz b.gz``) are read in turn; zero padding after the last
    one is ignored. Errors are deferred: a read returns what was decompressed before the error,
    the next read raises it.
    """

    def __init__(self, raw: BinaryIO, comp: str, name: str, limits: Limits) -> None:
        super().__init__()
        self.comp, self.name, self.limits = comp, name, limits
        self._raw = raw
        self._buf = b""
        self._pos = 0
        self._pending: InputError | None = None
        self._done = False
        self.produced = 0  # decompressed bytes so far
        self._consumed = 0  # compressed bytes read so far
        self._zstd = pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd") if comp == "zstd" else None
        self._d = None if self._zstd is not None else _NEW[comp]()
        self._in = b""  # compressed bytes not yet given to the decompressor
        self._member_started = False

    def readable(self) -> bool:
        """Always readable."""
        return True

    def seekable(self) -> bool:
        """Never seekable (parsers that need random access spool to disk)."""
        return False

    def close(self) -> None:
        """Close the underlying file."""
        try:
            self._raw.close()
        finally:
            super().close()

    # ---------------------------------------------------------------- decompression steps
    def _read_raw(self) -> bytes:
        chunk = self._raw.read(_RAW_READ)
        self._consumed += len(chunk)
        return chunk

    def _step(self) -> bytes:
        """The next decompressed piece (``b""`` at a clean end); raises on truncation/corruption."""
        if self._zstd is not None:
            try:
                out = self._zstd.read(_RAW_READ)  # (larger reads lose pyarrow's buffered output at a truncation)
            except (OSError, pa.ArrowException) as e:
                if "runcated" in str(e):
                    raise self._truncated() from None
                raise self._corrupt(e) from None
            self._consumed = self._raw.tell()
            return out
        d = self._d
        assert d is not None
        while True:
            if self.comp == "gzip":
                if d.unconsumed_tail:
                    return d.decompress(d.unconsumed_tail, STEP_BYTES)
            elif not d.eof and not d.needs_input:
                out = d.decompress(b"", STEP_BYTES)
                if out:
                    return out
            if d.eof:  # end of one member: another may follow
                rest = d.unused_data + self._in
                self._in = b""
                while not rest.strip(b"\0"):
                    more = self._read_raw()
                    if not more:
                        return b""  # clean end (zero padding ignored)
                    rest += more
                d = self._d = _NEW[self.comp]()
                self._member_started = False
                self._in = rest.lstrip(b"\0")
                continue
            data, self._in = (self._in, b"") if self._in else (self._read_raw(), b"")
            if not data:
                raise self._truncated()
            self._member_started = True
            out = d.decompress(data, STEP_BYTES)
            if out:
                return out

    def _truncated(self) -> TruncatedArchiveError:
        return TruncatedArchiveError(
            f"{self.name}: truncated archive ({self.comp} stream ends before its end marker after "
            f"{self.produced} decompressed bytes); re-fetch the file for the rest"
        )

    def _corrupt(self, e: BaseException) -> ArchiveError:
        return ArchiveError(f"{self.name}: corrupt {self.comp} data after {self.produced} decompressed bytes: {e}")

    def _check_limits(self) -> None:
        lim = self.limits
        if self.produced > lim.max_bytes:
            raise DecompressionLimitError(
                f"{self.name}: decompressed size exceeds {lim.max_bytes} bytes (setting max_decompressed_bytes; "
                f"{self._consumed} compressed bytes read); not ingested"
            )
        if self.produced > RATIO_MIN_BYTES and self.produced > lim.max_ratio * max(self._consumed, 1):
            ratio = self.produced / max(self._consumed, 1)
            raise DecompressionLimitError(
                f"{self.name}: compression ratio {ratio:.0f}:1 exceeds {lim.max_ratio:g}:1 (setting "
                f"max_compression_ratio) after {self.produced} decompressed bytes; not ingested"
            )

    def _fill(self) -> bool:
        """Make buffered data available; ``False`` at the end or when an error is pending."""
        if self._pos < len(self._buf):
            return True
        if self._done or self._pending is not None:
            return False
        try:
            out = self._step()
        except InputError as e:
            self._pending = e
            return False
        except _CODEC_ERRORS as e:
            self._pending = self._corrupt(e)
            return False
        if not out:
            self._done = True
            return False
        self.produced += len(out)
        self._check_limits()
        self._buf, self._pos = out, 0
        return True

    def _raise_pending(self) -> None:
        if self._pending is not None:
            e, self._pending = self._pending, None
            self._done = True
            raise e

    def _take(self, n: int) -> bytes:
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    # ---------------------------------------------------------------- file protocol
    def read(self, n: int | None = -1) -> bytes:
        """Up to ``n`` bytes (all when ``n < 0``); fewer only at the end or before a deferred error."""
        parts: list[bytes] = []
        want = (1 << 62) if n is None or n < 0 else n
        while want > 0 and self._fill():
            piece = self._take(want)
            parts.append(piece)
            want -= len(piece)
        if not parts:
            self._raise_pending()
        return b"".join(parts)

    def read1(self, n: int = -1) -> bytes:
        """What one decompression step gives (at most ``n`` bytes)."""
        if not self._fill():
            self._raise_pending()
            return b""
        return self._take(STEP_BYTES if n is None or n < 0 else n)

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        """``io.RawIOBase`` protocol on top of :meth:`read`."""
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readline(self, limit: int | None = -1) -> bytes:
        """One line including its ``\\n`` (at most ``limit`` bytes)."""
        lim = (1 << 62) if limit is None or limit < 0 else limit
        parts: list[bytes] = []
        size = 0
        while size < lim and self._fill():
            nl = self._buf.find(b"\n", self._pos, self._pos + (lim - size))
            piece = self._take((nl + 1 - self._pos) if nl >= 0 else lim - size)
            parts.append(piece)
            size += len(piece)
            if nl >= 0:
                break
        if not parts:
            self._raise_pending()
        return b"".join(parts)


def open_binary(path: str | os.PathLike[str], limits: Limits | None = None) -> BinaryIO:
    """Open a possibly compressed file for streaming binary reads (no link followed, regular files only).

    A compressed file is a :class:`DecompressedStream` bounded by ``limits`` (default: the settings).
    """
    f = _open_input(path)
    comp = _compression_of(f.read(6))
    f.seek(0)
    if comp is None:
        return f
    # the stream reads the descriptor already opened (and checked), never the path again
    return DecompressedStream(f, comp, os.path.basename(path), limits or Limits.from_settings())  # type: ignore[return-value]


def read_head(path: str | os.PathLike[str], n: int = 65536) -> bytes:
    """First ``n`` decompressed bytes (for format detection); a truncated or corrupt stream gives
    what could be decompressed before the break."""
    try:
        with open_binary(path) as f:
            return f.read(n)
    except (OSError, EOFError, lzma.LZMAError, pa.ArrowException):
        return b""


def iter_lines(stream: BinaryIO, max_line: int = 1 << 20, block: int = 1 << 16) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_line_without_eol)`` (1-based); CRLF is normalised.

    Reads ``block`` bytes at a time, so when a compressed stream turns out to be truncated every
    complete line decompressed before the break is still yielded; the partial last line is not
    (it is cut, never parsed as if complete): :class:`InputError` is then raised naming the last
    good line and, for a truncated archive, the size of the partial tail (``truncated archive``).
    Lines longer than ``max_line`` bytes are yielded truncated to ``max_line`` bytes followed by
    the marker ``b"\\x00<truncated>"`` so the parser can reject them with a reason.
    """
    n = 0
    buf = b""
    skipping = False  # inside an over-long line whose head was already yielded
    while True:
        try:
            chunk = stream.read(block)
        except TruncatedArchiveError as e:
            tail = "" if skipping or not buf else f"; the partial line {n + 1} ({len(buf)} bytes) is cut"
            raise TruncatedArchiveError(f"stream ends unexpectedly after line {n}: {e}{tail}") from e
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
