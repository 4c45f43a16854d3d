"""Vectorised building blocks for line-oriented log parsers (syslog, Loghub, Nagios).

Line formats are parsed a *block* at a time (megabytes of complete lines), never line by line:

* :func:`iter_blocks` reads the decompressed stream in 1 MiB pieces, cuts at the last newline and
  yields :class:`Block` objects: the bytes (valid UTF-8), one ``numpy`` uint8 view, the start/end
  of every line and its 1-based line number. Lines that cannot be records (NUL bytes, longer than
  ``max_line``) are already turned into rejects here. Invalid UTF-8 lines are decoded as
  ISO-8859-1 (Latin-1) so no byte is lost (mixed files are decided line by line); empty lines are
  not records and are not counted.
* Field positions are found with numpy (positions of delimiters + ``searchsorted``), digits are
  read with array arithmetic, and text fields become Arrow strings through :func:`substrings`,
  which builds a zero-copy ``string_view`` array over the block bytes.
* A line the vectorised pass does not accept falls back to a per-line Python parser that either
  parses it (rare shapes) or returns the precise reason it is rejected.

Host names are normalised by :func:`normalise_hosts`: lower-case, FQDN domain stripped, topology
aliases applied; an invalid name rejects the row with a reason and is never used.
"""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import BinaryIO
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.names import normalise_node
from nodewatch.tasks.ingest import localtime
from nodewatch.tasks.ingest.base import ParseContext, ParseResult, rejects_table
from nodewatch.tasks.ingest.inputs import InputError, TruncatedArchiveError

MAX_LINE = 1 << 20
TRUNCATED_REASON = "truncated archive"
"""Reject reason of the partial last line of a compressed input that breaks off (the complete lines are parsed)."""
"""Longest accepted line in bytes (1 MiB); longer lines are rejected, the rest of the file is read."""

_READ = 1 << 16  # read size (a truncated compressed stream loses nothing: DecompressedStream returns every byte first)
_PAD = 136  # >= the widest window (128) + 8
_PAD_BYTES = b"\0" * _PAD
_NS = 1_000_000_000
MAX_EPOCH_S = 9_223_372_035
"""Latest epoch second a ``timestamp[ns]`` can hold (2262-04-11); later times are rejected, never wrapped."""
MIN_YEAR, MAX_YEAR = 1678, 2261
"""Calendar years representable as ``timestamp[ns]`` (dates outside are rejected with a reason)."""

# ----------------------------------------------------------------------------------------- blocks


@dataclass
class Block:
    """Complete lines of one read block.

    Attributes:
        data: UTF-8 bytes of the lines, each terminated by ``\\n`` (``bytes`` or a zero-copy ``memoryview``).
        buf: ``uint8`` view of ``data`` followed by 136 zero bytes (so fixed-width gathers never overrun).
        starts / ends: byte offsets of each line in ``data`` (``ends`` excludes ``\\r\\n``).
        first_line: 1-based line number of the first line.
        usable: line indices that may hold a record (not empty, no NUL, not over-long).
        rejects: ``(line_number, raw, reason)`` of lines rejected while splitting.
    """

    data: bytes | memoryview
    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    first_line: int
    usable: np.ndarray
    rejects: list[tuple[int, bytes | str, str]] = field(default_factory=list)
    _spaces: np.ndarray | None = None

    @property
    def n_lines(self) -> int:
        """Number of lines in the block (usable or not)."""
        return len(self.starts)

    def line(self, i: int) -> str:
        """Text of line ``i`` (block index)."""
        return str(self.data[int(self.starts[i]) : int(self.ends[i])], "utf-8")

    def lineno(self, idx: np.ndarray) -> np.ndarray:
        """1-based line numbers of block indices ``idx``."""
        return idx.astype(np.int64) + self.first_line

    def positions(self, byte: int) -> np.ndarray:
        """Sorted positions of ``byte`` in the block, followed by the sentinel ``len(data)``.

        Every index derived from it stays inside ``buf`` (which has ``_PAD`` zero bytes of padding).
        """
        if byte == 32 and self._spaces is not None:
            return self._spaces
        pos = np.flatnonzero(self.buf[: len(self.data)] == byte)
        out = np.append(pos, np.int64(len(self.data)))
        if byte == 32:
            self._spaces = out
        return out


def _decode_mixed(chunk: bytes) -> bytes:
    """Re-encode ``chunk`` as UTF-8, decoding each line that is not valid UTF-8 as Latin-1."""
    out = []
    for ln in chunk.split(b"\n"):
        try:
            ln.decode("utf-8")
            out.append(ln)
        except UnicodeDecodeError:
            out.append(ln.decode("latin-1").encode("utf-8"))
    return b"\n".join(out)


def _make_block(chunk: bytes, first_line: int, max_line: int) -> Block:
    """Split a chunk of complete lines (ending with ``\\n``) into a :class:`Block`."""
    return _block_from_padded(chunk + _PAD_BYTES, first_line, max_line)


def _block_from_padded(padded: bytes, first_line: int, max_line: int) -> Block:
    """:func:`_make_block` of ``padded[:-_PAD]`` where ``padded`` already ends with ``_PAD`` zero bytes.

    The block's ``data`` is a zero-copy view of ``padded`` (one copy of the bytes fewer per block).
    """
    n = len(padded) - _PAD
    if not padded.isascii():  # ASCII is valid UTF-8 (the zero padding too): no need to decode a copy to check
        try:
            padded.decode("utf-8")
        except UnicodeDecodeError:
            padded = _decode_mixed(padded[:n]) + _PAD_BYTES
            n = len(padded) - _PAD
    data = memoryview(padded)[:n]
    buf = np.frombuffer(padded, np.uint8)
    body = buf[:n]
    nl = np.flatnonzero(body == 10)
    starts = np.empty(len(nl), np.int64)
    if len(nl):
        starts[0] = 0
        starts[1:] = nl[:-1] + 1
    ends = nl.astype(np.int64)
    has_cr = (ends > starts) & (buf[np.maximum(ends - 1, 0)] == 13)
    ends[has_cr] -= 1
    bad = np.zeros(len(nl), bool)
    rejects: list[tuple[int, bytes | str, str]] = []
    nul = np.flatnonzero(body == 0) if padded.find(b"\0", 0, n) >= 0 else ()
    if len(nul):
        for i in np.unique(np.searchsorted(starts, nul, side="right") - 1):
            bad[i] = True
            raw = bytes(data[starts[i] : ends[i]])
            rejects.append((first_line + int(i), raw.replace(b"\0", b"\\0"), "parse: NUL byte in line"))
    long = np.flatnonzero((ends - starts > max_line) & ~bad)
    for i in long:
        bad[i] = True
        rejects.append(
            (first_line + int(i), bytes(data[starts[i] : starts[i] + 200]), f"parse: line longer than {max_line} bytes")
        )
    usable = np.flatnonzero(~bad & (ends > starts))
    return Block(data, buf, starts, ends, first_line, usable, rejects)


def _split_tail(parts: list[bytes], tail: int) -> tuple[bytes, list[bytes]]:
    """Join ``parts`` without their last ``tail`` bytes, plus the zero padding, in one copy.

    Returns ``(padded complete lines, the parts holding the tail)``.
    """
    i = len(parts)
    rest: list[bytes] = []
    head_last: list[bytes] = []
    while tail > 0:
        i -= 1
        p = parts[i]
        if len(p) <= tail:
            rest.insert(0, p)
            tail -= len(p)
        else:
            head_last = [p[: len(p) - tail]]
            rest.insert(0, p[len(p) - tail :])
            tail = 0
    return b"".join([*parts[:i], *head_last, _PAD_BYTES]), rest


_READ_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, pa.ArrowException)


def iter_blocks(stream: BinaryIO, name: str, block_bytes: int = 16 << 20, max_line: int = MAX_LINE) -> Iterator[Block]:
    """Yield :class:`Block` s of complete lines from a binary stream in bounded memory.

    Memory is bounded by about ``block_bytes + max_line``. A line longer than ``max_line`` is
    rejected (its first 200 bytes kept as ``raw``) and skipped up to its newline. A stream that
    fails mid-way (truncated gzip, I/O error) first yields every complete line read, then raises
    :class:`InputError` naming the file and the last good line. A truncated archive
    (:class:`~nodewatch.tasks.ingest.inputs.TruncatedArchiveError`) also yields its partial last line
    as a reject with the reason :data:`TRUNCATED_REASON` and raises ``TruncatedArchiveError``.
    """
    parts: list[bytes] = []
    size = 0  # bytes held in parts
    tail = 0  # bytes after the last newline held in parts
    next_line = 1  # line number of the first line held in parts
    skipping = False  # draining an over-long line
    while True:
        try:
            piece = stream.read(_READ)
        except _READ_ERRORS as e:
            chunk = b"".join(parts)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                blk = _make_block(chunk[: cut + 1], next_line, max_line)
                next_line += blk.n_lines
                yield blk
            if isinstance(e, TruncatedArchiveError):
                partial = chunk[cut + 1 :]
                cut_line = f", the partial line {next_line} ({len(partial)} bytes) is quarantined" if partial else ""
                if partial and not skipping:  # the cut last line: quarantined as a row, never parsed
                    yield _reject_only(next_line, partial[:4096], TRUNCATED_REASON)
                else:
                    cut_line = ""
                raise TruncatedArchiveError(
                    f"{name}: stream ends unexpectedly after line {next_line - 1}: truncated archive, every complete "
                    f"line before the break was read{cut_line}; re-fetch the file for the rest"
                ) from e
            raise InputError(
                f"{name}: stream ends unexpectedly after line {next_line - 1} ({type(e).__name__}: {e}); "
                f"the lines before were read, re-fetch the file for the rest"
            ) from e
        if not piece:
            if size:
                last = b"" if parts[-1].endswith(b"\n") else b"\n"
                yield _block_from_padded(b"".join([*parts, last, _PAD_BYTES]), next_line, max_line)
            return
        if skipping:
            nlp = piece.find(b"\n")
            if nlp < 0:
                continue
            piece = piece[nlp + 1 :]
            skipping = False
            next_line += 1
            if not piece:
                continue
        parts.append(piece)
        size += len(piece)
        nlp = piece.rfind(b"\n")
        tail = tail + len(piece) if nlp < 0 else len(piece) - nlp - 1
        if tail > max_line or size >= block_bytes:
            padded, rest = _split_tail(parts, tail)
            if len(padded) > _PAD:
                blk = _block_from_padded(padded, next_line, max_line)
                next_line += blk.n_lines
                yield blk
            del padded
            if tail > max_line:
                yield _reject_only(next_line, b"".join(rest)[:200], f"parse: line longer than {max_line} bytes")
                parts, size, tail, skipping = [], 0, 0, True
            else:
                parts = rest
                size = tail


def _reject_only(line_no: int, raw: bytes, reason: str) -> Block:
    """A block holding no line, only one reject (for over-long lines drained while streaming)."""
    empty = np.zeros(0, np.int64)
    return Block(b"", np.zeros(_PAD, np.uint8), empty, empty, line_no, empty, [(line_no, raw, reason)])


# ------------------------------------------------------------------------------------- fields


def substrings(block: Block, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """Arrow ``string`` array of ``block.data[starts[i]:ends[i]]`` for every i (vectorised).

    Builds a ``string_view`` array (16-byte views: length, then 12 inline bytes or a 4-byte prefix
    + buffer index + offset into the block bytes) with one 12-byte gather per row, then casts it
    to ``string``. Cuts must fall on UTF-8 character boundaries (ASCII delimiters do).
    """
    n = len(starts)
    if n == 0:
        return pa.array([], pa.string())
    size = len(block.data)
    starts = np.clip(starts.astype(np.int64), 0, size)  # never point outside the data (no crash on bad rows)
    lens = np.clip(ends, starts, size) - starts
    views = np.empty((n, 16), np.uint8)
    views[:, 4:] = window(block, starts, 12)
    views = views.view(np.uint32)
    views[:, 0] = lens
    long = lens > 12
    views[long, 2] = 0  # buffer index; word 1 keeps the 4-byte prefix
    views[long, 3] = starts[long]
    # inline strings (<= 12 bytes): zero the bytes past the length (word k holds inline bytes 4k..4k+3)
    short = np.flatnonzero(~long)
    if len(short):
        ls = lens[short].astype(np.uint64)
        for k in range(3):
            keep = np.clip(ls, 4 * k, 4 * k + 4) - np.uint64(4 * k)
            mask = ((np.uint64(1) << (np.uint64(8) * keep)) - np.uint64(1)).astype(np.uint32)
            views[short, k + 1] &= mask
    arr = pa.Array.from_buffers(pa.string_view(), n, [None, pa.py_buffer(views), pa.py_buffer(block.data)])
    return arr.cast(pa.string())


def window(block: Block | np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """``(n, width)`` uint8 matrix of the ``width`` (<= 128) bytes starting at each ``pos``.

    ``block`` is a :class:`Block` or its padded ``buf``; positions are clipped into the data.
    """
    buf = block.buf if isinstance(block, Block) else block
    pos = np.clip(pos.astype(np.int64), 0, len(buf) - _PAD)
    # one ``width``-byte item per position (an unaligned view with a stride of 1 byte): a 1-D
    # gather of whole items, about twice as fast as indexing a 2-D sliding window view
    items = np.ndarray((len(buf) - width + 1,), dtype=_ITEM.get(width) or np.dtype((np.void, width)), buffer=buf, strides=(1,))
    return items[pos].view(np.uint8).reshape(len(pos), width)


_ITEM = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def digit_columns(win: np.ndarray, cols: list[int] | range) -> tuple[np.ndarray, np.ndarray]:
    """Number formed by the ASCII digits at columns ``cols`` of ``win``: (value int64, all-digits mask)."""
    d = win[:, cols].astype(np.int64) - 48
    ok = ((d >= 0) & (d <= 9)).all(axis=1)
    return d @ (10 ** np.arange(len(cols) - 1, -1, -1, dtype=np.int64)), ok


def digits(buf: np.ndarray, pos: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Read ``width`` ASCII digits at ``pos``: (value int64, all-digits mask)."""
    return digit_columns(window(buf, pos, width), range(width))


_POW10 = 10 ** np.arange(19, dtype=np.int64)


def var_digits(buf: np.ndarray, start: np.ndarray, end: np.ndarray, max_width: int = 18) -> tuple[np.ndarray, np.ndarray]:
    """Digits in ``[start, end)`` of variable length 1..max_width (<= 18): (value, valid mask)."""
    width = end - start
    ok = (width >= 1) & (width <= max_width)
    w = np.clip(width, 0, max_width)
    win = window(buf, start, max_width)
    inside = np.arange(max_width)[None, :] < w[:, None]
    isdig = (win >= 48) & (win <= 57)
    ok &= (isdig | ~inside).all(axis=1)
    d = np.where(inside & isdig, win - np.uint8(48), np.uint8(0)).astype(np.int64)
    # as if every number had max_width digits (zeros after the end), then drop the extra decimal places
    full = d @ _POW10[max_width - 1 :: -1][:max_width]
    return full // _POW10[max_width - w], ok


def split_tokens(block: Block, idx: np.ndarray, start: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the first ``k`` single spaces after ``start`` in each line.

    Returns ``(spaces (n, k), ok)``; ``ok`` is False where a line has fewer than ``k`` spaces or
    two consecutive spaces (an empty token) among them.
    """
    sp = block.positions(32)
    first = np.searchsorted(sp, start)
    cols = np.minimum(first[:, None] + np.arange(k)[None, :], len(sp) - 1)
    spaces = sp[cols]
    ends = block.ends[idx]
    ok = spaces[:, -1] < ends
    if k > 1:
        ok &= np.all(np.diff(spaces, axis=1) > 1, axis=1)
    ok &= spaces[:, 0] > start
    return spaces, ok


def masked(values: np.ndarray, null: np.ndarray) -> pa.Array:
    """Arrow array of ``values`` with nulls where ``null`` is True."""
    return pa.array(values, mask=null)


def masked_str(arr: pa.Array, null: np.ndarray) -> pa.Array:
    """``arr`` with nulls where ``null`` is True."""
    if not null.any():
        return arr
    return pc.if_else(pa.array(null), pa.nulls(len(arr), arr.type), arr)


def optional_substrings(block: Block, starts: np.ndarray, ends: np.ndarray, null: np.ndarray) -> pa.Array:
    """:func:`substrings` with nulls where ``null`` is True (no work at all when every row is null)."""
    if null.all():
        return pa.nulls(len(starts), pa.string())
    return masked_str(substrings(block, starts, ends), null)


def const_str(value: str, n: int) -> pa.Array:
    """A string array repeating ``value`` ``n`` times."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value])).cast(pa.string())


# --------------------------------------------------------------------------------------- time


def days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm), vectorised."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def days_in_month(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Number of days of month ``m`` in year ``y``."""
    dim = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)[m]
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    return dim + ((m == 2) & leap)


def local_to_utc_ns(local_ns: np.ndarray, tz: str) -> np.ndarray:
    """Naive local wall-clock epoch-ns in IANA zone ``tz`` -> UTC epoch-ns (DST rules in one place:
    :mod:`nodewatch.tasks.ingest.localtime`: ambiguous times by order, nonexistent ones
    :data:`~nodewatch.tasks.ingest.localtime.NONEXISTENT_NS`, rejected by :func:`parse_blocks`)."""
    return localtime.local_to_utc_ns(local_ns, tz)


def local_now(ref: datetime, tz: str) -> datetime:
    """``ref`` as naive wall-clock time in ``tz``."""
    return ref.astimezone(ZoneInfo(tz)).replace(tzinfo=None)


# -------------------------------------------------------------------------------------- hosts

def normalise_host(raw: str, aliases: Mapping[str, str]) -> tuple[str | None, str | None]:
    """Canonical node name of a host field: ``(name, None)`` or ``(None, reason)``; the one rule of
    every source, :func:`nodewatch.schemas.names.normalise_node` (case, domain, topology aliases)."""
    return normalise_node(raw, aliases)


_HOST_CACHE_MAX = 1 << 16


def normalise_hosts(
    raw: pa.Array,
    aliases: Mapping[str, str],
    rule: Callable[[str, Mapping[str, str]], tuple[str | None, str | None]] = normalise_host,
    cache: dict[str, tuple[str | None, str | None]] | None = None,
) -> tuple[pa.Array, pa.Array]:
    """Vectorised :func:`normalise_host` over a string array (each distinct value handled once).

    ``cache`` (optional, filled here) keeps ``rule`` results of earlier calls with the same
    ``aliases`` and ``rule`` (the batches of one file), so each distinct host is checked once per file.
    Returns ``(node, reason)`` arrays: ``node`` is null exactly where ``reason`` is set.
    """
    low_aliases = {k.lower(): v for k, v in aliases.items()}
    enc = pc.dictionary_encode(raw).combine_chunks() if isinstance(raw, pa.ChunkedArray) else pc.dictionary_encode(raw)
    names, reasons = [], []
    if cache is None:
        cache = {}
    elif len(cache) > _HOST_CACHE_MAX:
        cache.clear()
    for h in enc.dictionary.to_pylist():
        res = cache.get(h)
        if res is None:
            res = cache[h] = rule(h, low_aliases)
        n, r = res
        names.append(n)
        reasons.append(r)
    idx = enc.indices
    return pc.take(pa.array(names, pa.string()), idx), pc.take(pa.array(reasons, pa.string()), idx)


# ------------------------------------------------------------------------------------- driver

RawRow = dict
"""A row from a per-line fallback parser: schema columns plus ``host`` (raw host field)."""

FastParser = Callable[[Block, np.ndarray, ParseContext], tuple[dict[str, pa.Array | np.ndarray], np.ndarray]]
SlowParser = Callable[[str, ParseContext], "RawRow | str"]


def parse_blocks(
    stream: BinaryIO,
    ctx: ParseContext,
    *,
    schema: pa.Schema,
    fmt: str,
    fast: FastParser,
    slow: SlowParser,
    host_rule: Callable[[str, Mapping[str, str]], tuple[str | None, str | None]] = normalise_host,
    not_format_prefix: str = "parse: not ",
) -> Iterator[ParseResult]:
    """Run a vectorised line parser over a stream and yield :class:`ParseResult` batches.

    ``fast(block, idx, ctx)`` parses the lines ``idx`` it accepts and returns ``(columns, ok)``:
    ``columns`` maps column names (plus ``host``) to arrays over the accepted lines ``idx[ok]``.
    Lines it does not accept go to ``slow(line, ctx)``, which returns a raw row dict or a reject
    reason. Host names are normalised for all rows; invalid ones become rejects.

    If the first batch holds no row and every reject says the line is not of this format (reason
    starts with ``not_format_prefix``) or is binary (NUL bytes, over-long), the file is the wrong
    format or garbage: :class:`InputError` names the file and first line.
    """
    block_bytes = int(min(max(ctx.batch_rows * 128, 1 << 20), 64 << 20))
    first = True
    host_cache: dict[str, tuple[str | None, str | None]] = {}
    for block in iter_blocks(stream, ctx.name, block_bytes=block_bytes):
        rej_off: list[int] = [r[0] for r in block.rejects]
        rej_raw: list[bytes | str] = [r[1] for r in block.rejects]
        rej_why: list[str] = [r[2] for r in block.rejects]
        idx = block.usable
        cols, ok = fast(block, idx, ctx) if len(idx) else ({}, np.zeros(0, bool))
        tables = []
        if len(idx) and ok.any():
            cols = dict(cols)
            cols["source_offset"] = block.lineno(idx[ok])
            tables.append(_to_table(cols, schema))
        slow_rows: list[dict] = []
        for i in idx[~ok]:
            text = block.line(int(i))
            res = slow(text, ctx)
            line_no = block.first_line + int(i)
            if isinstance(res, str):
                rej_off.append(line_no)
                rej_raw.append(text)
                rej_why.append(res)
            else:
                res["source_offset"] = line_no
                slow_rows.append(res)
        if slow_rows:
            tables.append(_rows_to_table(slow_rows, schema))
        if tables:
            rows = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            if len(tables) > 1:
                rows = rows.take(pc.sort_indices(rows["source_offset"]))
            node, reason = normalise_hosts(rows["host"], ctx.aliases, host_rule, host_cache)
            reason = localtime.reject_nonexistent(rows["time"], reason, ctx.tz)
            bad = pc.is_valid(reason)
            if pc.any(bad).as_py():
                bad_rows = rows.filter(bad)
                offs = bad_rows["source_offset"].to_pylist()
                rej_off += offs
                rej_raw += [block.line(o - block.first_line) for o in offs]
                rej_why += reason.filter(bad).to_pylist()
                good = pc.invert(bad)
                rows, node = rows.filter(good), node.filter(good)
            rows = rows.set_column(rows.schema.get_field_index("node"), "node", node).drop_columns(["host"])
            rows = rows.select(schema.names).cast(schema)
        else:
            rows = schema.empty_table()
        garbage = (not_format_prefix, "parse: NUL byte", "parse: line longer")
        if first and rows.num_rows == 0 and rej_why and all(w.startswith(garbage) for w in rej_why):
            order = int(np.argmin(rej_off))
            raise InputError(
                f"{ctx.name}:{rej_off[order]}: {rej_why[order].removeprefix('parse: ')}; no line of the first "
                f"{len(rej_why)} is {fmt} - wrong --format or not a log file"
            )
        first = first and rows.num_rows == 0 and not rej_why
        yield ParseResult(rows, rejects_table(rej_off, rej_raw, rej_why))


def _to_table(cols: dict[str, pa.Array | np.ndarray], schema: pa.Schema) -> pa.Table:
    """Table of the schema's columns (missing ones null) plus ``host``."""
    n = len(cols["source_offset"])
    arrays, names = [], []
    for f in schema:
        v = cols.get(f.name)
        if f.name == "node":
            v = None
        if v is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(v, np.ndarray):
            arrays.append(pa.array(v, f.type))
        else:
            arrays.append(v.cast(f.type) if v.type != f.type else v)
        names.append(f.name)
    arrays.append(cols["host"])
    names.append("host")
    return pa.Table.from_arrays(arrays, names=names)


def _rows_to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Table from fallback row dicts (same layout as :func:`_to_table`)."""
    arrays = [pa.array([r.get(f.name) if f.name != "node" else None for r in rows], f.type) for f in schema]
    arrays.append(pa.array([r["host"] for r in rows], pa.string()))
    return pa.Table.from_arrays(arrays, names=[*schema.names, "host"])
