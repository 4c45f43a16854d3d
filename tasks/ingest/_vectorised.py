"""Vectorised column conversion and streaming CSV reading shared by the telemetry, topology and
reservation parsers.

* conversions (:func:`parse_time_strings`, :func:`parse_float_strings`, :func:`time_to_utc`,
  :func:`value_to_float`, :func:`to_utf8`) work on whole Arrow arrays and turn values that cannot
  be parsed into nulls, so a caller rejects exactly those rows; a slow per-value path runs only
  for arrays that contain bad values;
* :class:`CsvBlocks` streams a CSV body (header read by :func:`read_header`) block by block with
  ``pyarrow.csv.open_csv``, all columns as binary (so invalid UTF-8 cannot abort the stream), and
  gives every row its physical 1-based line number; rows with a wrong field count become rejects.
"""

from __future__ import annotations

import csv
import io
import lzma
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from nodewatch.tasks.ingest.base import REJECT_SCHEMA, ParseContext, empty_rejects
from nodewatch.tasks.ingest.inputs import InputError
from nodewatch.tasks.ingest.localtime import is_nonexistent, localize, nonexistent_reason

TS = pa.timestamp("ns", tz="UTC")
CSV_BLOCK = 1 << 22

_ISO_ZONED = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$"
_ISO_NAIVE = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?$"
_EPOCH = r"^[+-]?\d+(\.\d*)?$"
_FLOAT = r"^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[Nn][Aa][Nn]|[Ii]nf(inity)?|INF)$"
_MAX_EPOCH_S = 9.2e9  # int64 nanoseconds overflow beyond ~2262
def file_error(ctx: ParseContext, msg: str) -> InputError:
    """An :class:`InputError` whose message starts with the file name."""
    return InputError(f"{ctx.name}: {msg}")


def to_numpy(a: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Arrow array -> numpy (copies when needed, nulls as the type allows)."""
    return np.asarray(a.to_numpy(zero_copy_only=False))


def combine(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A ChunkedArray as one contiguous Array (Arrays unchanged)."""
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def to_utf8(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Binary -> string; returns ``(strings, invalid_mask)`` with invalid UTF-8 values as null."""
    arr = combine(arr)
    try:
        return arr.cast(pa.string()), np.zeros(len(arr), bool)
    except pa.ArrowInvalid:
        vals = arr.to_pylist()
        bad = np.zeros(len(vals), bool)
        out: list[str | None] = []
        for i, v in enumerate(vals):
            try:
                out.append(None if v is None else v.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
                bad[i] = True
        return pa.array(out, pa.string()), bad


def _cast_or_per_value(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """Cast; if the cast fails as a whole, cast value by value (nulls for failures). Bad data only."""
    try:
        return arr.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for v in arr:
            try:
                out.append(pa.array([v.as_py()], arr.type).cast(typ)[0].as_py())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                out.append(None)
        return pa.array(out, typ)


def parse_float_strings(arr: pa.Array) -> pa.Array:
    """Strings -> float64 (``nan``/``inf`` accepted, surrounding blanks stripped); unparseable -> null."""
    arr = pc.utf8_trim_whitespace(combine(arr))
    try:
        return arr.cast(pa.float64())
    except pa.ArrowInvalid:
        ok = pc.fill_null(pc.match_substring_regex(arr, _FLOAT), False)
        good = pc.if_else(ok, arr, pa.scalar(None, pa.string()))
        return _cast_or_per_value(good, pa.float64())


def parse_time_strings(arr: pa.Array, tz: str) -> pa.Array:
    """ISO 8601 strings (zoned or read in ``tz``) or epoch seconds -> ``timestamp[ns, UTC]``; bad -> null."""
    arr = pc.utf8_trim_whitespace(combine(arr))
    try:
        return arr.cast(TS)
    except pa.ArrowInvalid:
        pass
    try:
        return _localize(arr.cast(pa.timestamp("ns")), tz)
    except pa.ArrowInvalid:
        pass
    out = pa.nulls(len(arr), TS)
    zoned = pc.fill_null(pc.match_substring_regex(arr, _ISO_ZONED), False)
    if pc.any(zoned).as_py():
        part = _cast_or_per_value(pc.if_else(zoned, arr, pa.scalar(None, pa.string())), TS)
        out = pc.if_else(zoned, part, out)
    naive = pc.fill_null(pc.match_substring_regex(arr, _ISO_NAIVE), False)
    if pc.any(naive).as_py():
        part = _cast_or_per_value(pc.if_else(naive, arr, pa.scalar(None, pa.string())), pa.timestamp("ns"))
        part = _localize(part, tz)
        out = pc.if_else(naive, part, out)
    epoch = pc.fill_null(pc.match_substring_regex(arr, _EPOCH), False)
    if pc.any(epoch).as_py():
        secs = parse_float_strings(pc.if_else(epoch, arr, pa.scalar(None, pa.string())))
        out = pc.if_else(epoch, epoch_seconds_to_ts(secs), out)
    return out


def time_reason(raw: str, tz: str) -> str:
    """Reject reason of a time string that gave no timestamp: a DST-skipped local time, else unparseable."""
    if is_nonexistent(raw, tz):
        return nonexistent_reason(repr(raw), tz)
    return f"parse: unparseable time {raw!r}"


def epoch_seconds_to_ts(secs: pa.Array) -> pa.Array:
    """Float epoch seconds -> ``timestamp[ns, UTC]`` (microsecond rounding; out-of-range -> null)."""
    s = to_numpy(pc.fill_null(secs.cast(pa.float64()), np.nan)).astype(np.float64)
    ok = np.isfinite(s) & (np.abs(s) < _MAX_EPOCH_S)
    us = np.round(np.where(ok, s, 0.0) * 1e6).astype(np.int64)
    return pa.array(us * 1000, pa.int64(), mask=~ok).cast(TS)


def _localize(naive: pa.Array, tz: str) -> pa.Array:
    """Zone-less timestamps read as wall time in ``tz`` -> UTC: DST-ambiguous times resolved by order,
    nonexistent ones null (so the row is rejected); see :mod:`nodewatch.tasks.ingest.localtime`."""
    return localize(naive, tz)


def time_to_utc(col: pa.Array, tz: str) -> pa.Array:
    """Any time-like Arrow column -> ``timestamp[ns, UTC]`` (bad values -> null)."""
    col = combine(col)
    t = col.type
    if pa.types.is_dictionary(t):
        col, t = col.cast(t.value_type), t.value_type
    if pa.types.is_timestamp(t):
        if t.tz is None:
            try:
                col = _localize(col, tz)
            except pa.ArrowInvalid:  # out of the ns range: per value
                col = _localize(_cast_or_per_value(col, pa.timestamp("ns")), tz)
        try:
            return col.cast(TS)
        except pa.ArrowInvalid:  # out of the ns range (e.g. year 3000 in a us column)
            us = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            lim = int(_MAX_EPOCH_S * 1e6)
            ok = pc.and_(pc.less(us, lim), pc.greater(us, -lim))
            return pc.if_else(ok, us, pa.scalar(None, pa.int64())).cast(pa.timestamp("us", tz="UTC")).cast(TS)
    if pa.types.is_date(t):
        return _localize(col.cast(pa.timestamp("ns")), tz)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return epoch_seconds_to_ts(col)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return parse_time_strings(col, tz)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return parse_time_strings(to_utf8(col)[0], tz)
    raise InputError(f"time column has unsupported type {t}")


def value_to_float(col: pa.Array) -> pa.Array:
    """Numeric or string column -> float64 (unparseable -> null)."""
    col = combine(col)
    t = col.type
    if pa.types.is_dictionary(t):
        col, t = col.cast(t.value_type), t.value_type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t):
        return col.cast(pa.float64())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return parse_float_strings(col)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return parse_float_strings(to_utf8(col)[0])
    raise InputError(f"value column has unsupported type {t}")


def apply_aliases(node: pa.Array, aliases: dict[str, str] | None) -> pa.Array:
    """Replace host aliases by canonical node names (vectorised lookup)."""
    if not aliases:
        return node
    keys = pa.array(list(aliases.keys()), pa.string())
    vals = pa.array(list(aliases.values()), pa.string())
    idx = pc.index_in(node, value_set=keys)
    return pc.if_else(pc.is_null(idx), node, vals.take(idx))


def reject_table(offsets: np.ndarray, raws: list[str], reasons: list[str] | str) -> pa.Table:
    """Rejects table (``REJECT_SCHEMA``); ``raw`` capped at 4 KiB, one reason for all or one per row."""
    if isinstance(reasons, str):
        reasons = [reasons] * len(raws)
    return pa.table(
        {
            "source_offset": pa.array(np.asarray(offsets, np.int64), pa.int64()),
            "raw": pa.array([r[:4096] for r in raws], pa.string()),
            "reason": pa.array(reasons, pa.string()),
        },
        schema=REJECT_SCHEMA,
    )


def read_header(stream: BinaryIO, ctx: ParseContext) -> list[str]:
    """Read and check the header line of a CSV (UTF-8, no NUL, unique names); returns the column names."""
    try:
        line = stream.readline(1 << 16)
    except _STREAM_ERRORS as e:
        raise file_error(ctx, f"line 1: stream ends unexpectedly (truncated or corrupt compressed input): {e}") from e
    if not line:
        raise file_error(ctx, "empty file (no header line)")
    if not line.endswith(b"\n") and len(line) >= 1 << 16:
        raise file_error(ctx, "line 1: header longer than 64 KiB; not a telemetry CSV")
    try:
        text = line.decode("utf-8").lstrip("\ufeff").rstrip("\r\n")
    except UnicodeDecodeError as e:
        raise file_error(ctx, f"line 1: header is not UTF-8 ({e.reason} at byte {e.start}); not a telemetry CSV") from e
    if "\x00" in text:
        raise file_error(ctx, "line 1: header contains NUL bytes; not a telemetry CSV")
    try:
        cols = [c.strip() for c in next(csv.reader([text]))] if text else [""]
    except csv.Error as e:
        raise file_error(ctx, f"line 1: malformed CSV header: {e}") from e
    dup = sorted({c for c in cols if cols.count(c) > 1})
    if dup:
        raise file_error(ctx, f"line 1: duplicate header columns {dup}")
    return cols


_STREAM_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError, pa.ArrowException)


class TruncationGuard(io.RawIOBase):
    """Read-only wrapper that turns a truncated/corrupt (compressed) stream into a clean end of data.

    Data is released only up to the last complete line, so when the stream breaks the partial last
    line is held back (never parsed as if it were complete, e.g. ``40.5`` cut to ``40``) and
    :attr:`error` records what happened; the caller then reports the file as truncated after the
    rows it could read.
    """

    def __init__(self, stream: BinaryIO, chunk: int = 1 << 16) -> None:
        super().__init__()
        self._s = stream
        # read1 returns what one decompression step gives, so a break loses at most that step
        self._read = getattr(stream, "read1", None) or stream.read
        self._chunk = chunk
        self._tail = b""
        self._ready = b""
        self._eof = False
        self.error: BaseException | None = None

    def readable(self) -> bool:
        """Always readable."""
        return True

    def _fill(self, want: int) -> None:
        """Read until ``want`` bytes of complete lines are ready, or the end / a break of the stream."""
        parts = [self._ready]
        have = len(self._ready)
        while have < want and not self._eof:
            try:
                chunk = self._read(max(self._chunk, want - have))
            except _STREAM_ERRORS as e:
                self.error, self._eof, self._tail = e, True, b""
                break
            if not chunk:
                self._eof = True
                parts.append(self._tail)
                have += len(self._tail)
                self._tail = b""
                break
            data = self._tail + chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(data) < 1 << 26:
                self._tail = data
                continue
            cut = cut or len(data)
            parts.append(data[:cut])
            have += cut
            self._tail = data[cut:]
        self._ready = b"".join(parts)

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes of complete lines (fewer only at the end or after a break)."""
        if n is None or n < 0:
            self._fill(1 << 62)
            out, self._ready = self._ready, b""
            return out
        self._fill(n)
        out, self._ready = self._ready[:n], self._ready[n:]
        return out

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        """``io.RawIOBase`` protocol on top of :meth:`read`."""
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class CsvBlocks:
    """Streams a CSV body (header already read) as binary columns with physical line numbers."""

    def __init__(self, stream: BinaryIO, ctx: ParseContext, columns: list[str], include: list[str]) -> None:
        self.ctx = ctx
        self.columns = columns
        self.invalid: list[tuple[int, str]] = []
        self._skipped_u: list[int] = []  # u_j = s_j - j for skipped rows s_j (0-based body line)
        self._rows_seen = 0
        self.guard = TruncationGuard(stream)

        def handler(row: pcsv.InvalidRow) -> str:
            num = int(row.number) if row.number is not None else -1
            self.invalid.append((num, row.text))
            self._skipped_u.append(num - 1 - len(self._skipped_u))
            return "skip"

        try:
            self.reader = pcsv.open_csv(
                self.guard,
                read_options=pcsv.ReadOptions(column_names=columns, block_size=CSV_BLOCK, use_threads=False),
                parse_options=pcsv.ParseOptions(invalid_row_handler=handler, ignore_empty_lines=False),
                convert_options=pcsv.ConvertOptions(
                    column_types={c: pa.binary() for c in columns}, include_columns=include, strings_can_be_null=False
                ),
            )
        except (pa.ArrowException, OSError, EOFError) as e:
            raise file_error(ctx, f"cannot read CSV: {e}") from e

    def __iter__(self) -> Iterator[tuple[pa.RecordBatch, np.ndarray, pa.Table]]:
        while True:
            try:
                rb = self.reader.read_next_batch()
            except StopIteration:
                rej = self._take_invalid()
                if rej.num_rows:
                    yield pa.RecordBatch.from_pylist([], schema=self.reader.schema), np.empty(0, np.int64), rej
                if self.guard.error is not None:
                    raise file_error(
                        self.ctx,
                        f"stream ends unexpectedly after line {self._last_line()} (truncated or corrupt compressed input; "
                        f"the {self._rows_seen} rows before were read): {self.guard.error}",
                    ) from self.guard.error
                return
            except (pa.ArrowException, OSError, EOFError) as e:
                raise file_error(self.ctx, f"stream ends unexpectedly or is corrupt after line {self._last_line()}: {e}") from e
            n = rb.num_rows
            g = np.arange(self._rows_seen, self._rows_seen + n, dtype=np.int64)
            self._rows_seen += n
            u = np.asarray(self._skipped_u, np.int64)
            body_line = g + np.searchsorted(u, g, side="right")  # 0-based body line
            yield rb, body_line + 2, self._take_invalid()

    def _last_line(self) -> int:
        return self._rows_seen + len(self._skipped_u) + 1

    def _take_invalid(self) -> pa.Table:
        if not self.invalid:
            return empty_rejects()
        inv, self.invalid = self.invalid, []
        n_cols = len(self.columns)
        reasons = [
            f"parse: expected {n_cols} fields, found {t.count(',') + 1}" if num >= 0 else "parse: malformed CSV row"
            for num, t in inv
        ]
        return reject_table(np.array([num + 1 for num, _ in inv]), [t for _, t in inv], reasons)


def empty_line_mask(rb: pa.RecordBatch) -> np.ndarray:
    """True for rows whose every column is empty (blank input lines)."""
    m = np.ones(rb.num_rows, bool)
    for c in rb.columns:
        m &= to_numpy(pc.equal(pc.binary_length(c), 0)).astype(bool)
    return m


def utf8_columns(
    rb: pa.RecordBatch, names: list[str], lines: np.ndarray
) -> tuple[dict[str, pa.Array], np.ndarray, list[pa.Table]]:
    """Decode binary columns; rows with invalid UTF-8 in any of them are returned as rejects."""
    out: dict[str, pa.Array] = {}
    bad = np.zeros(rb.num_rows, bool)
    which: dict[int, str] = {}
    for c in names:
        s, b = to_utf8(rb.column(c))
        out[c] = s
        for i in np.flatnonzero(b & ~bad).tolist():
            which[i] = c
        bad |= b
    rej = []
    if bad.any():
        bi = np.flatnonzero(bad)
        raws = [",".join((rb.column(c)[i].as_py() or b"").decode("utf-8", "replace") for c in names) for i in bi.tolist()]
        rej.append(reject_table(lines[bi], raws, [f"parse: invalid UTF-8 in column {which[i]}" for i in bi.tolist()]))
    return out, bad, rej


def csv_header(head: bytes) -> list[str] | None:
    """Column names of the first line of ``head`` (for sniffers); ``None`` if it is not a UTF-8 text line."""
    first = head.split(b"\n", 1)[0]
    if head.startswith(b"PAR1") or b"\x00" in first:
        return None
    try:
        text = first.decode("utf-8").lstrip("\ufeff").rstrip("\r")
    except UnicodeDecodeError:
        return None
    try:
        return [c.strip() for c in next(csv.reader([text]))] if text else None
    except csv.Error:
        return None




def iter_csv_text(
    stream: BinaryIO, ctx: ParseContext, columns: list[str], use: list[str]
) -> Iterator[tuple[dict[str, pa.Array], np.ndarray, list[pa.Table]]]:
    """Stream a CSV body as UTF-8 string columns ``use`` with line numbers; blank lines skipped.

    Yields ``(columns, line_numbers, rejects)``: rows with a wrong field count or invalid UTF-8 are
    in ``rejects`` (with their line and reason), the others in ``columns``.
    """
    for rb, lines, inv in CsvBlocks(stream, ctx, columns, use):
        if rb.num_rows == 0:
            yield {c: pa.array([], pa.string()) for c in use}, np.empty(0, np.int64), [inv]
            continue
        empty = empty_line_mask(rb.select(use))
        if empty.any():
            rb, lines = rb.filter(pa.array(~empty)), lines[~empty]
        dec, bad, rej = utf8_columns(rb, use, lines)
        if bad.any():
            keep = pa.array(np.flatnonzero(~bad))
            dec = {k: v.take(keep) for k, v in dec.items()}
            lines = lines[~bad]
        yield dec, lines, [inv, *rej]


def split_list(arr: pa.Array, pattern: str = r"[;,|\s]+") -> pa.Array:
    """Split strings into ``list<string>`` on ``pattern``, dropping empty items (null -> [])."""
    parts = pc.split_pattern_regex(pc.fill_null(pc.utf8_trim_whitespace(arr), ""), pattern)
    flat = pc.list_flatten(parts)
    parents = pc.list_parent_indices(parts).to_numpy()
    keep = to_numpy(pc.not_equal(flat, "")).astype(bool)
    counts = np.bincount(parents[keep], minlength=len(arr))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(pa.array(keep)))
