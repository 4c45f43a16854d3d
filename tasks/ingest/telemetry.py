"""Telemetry parsers: long parquet/CSV, LDMS-style wide CSV, Turin per-node parquet.

Every format yields batches of the staged ``telemetry`` table (``schemas/telemetry.py``):
``time, node, metric, value, source_offset``. Everything is vectorised with pyarrow/numpy (no
per-row Python on valid input) and streams in bounded memory: parquet by row batches
(``ParquetFile.iter_batches``), CSV with ``pyarrow.csv.open_csv`` (one block at a time). A
compressed parquet file (``.parquet.zst``…) cannot be read without seeking: it is spooled to an
unlinked temporary file on disk (at most the setting ``max_decompressed_bytes``), never read into
memory; a parquet file whose column data decompress beyond the limits is refused (a bomb).

Formats
-------
``long-parquet``
    columns ``timestamp`` (or ``time``), ``node``, ``metric``, ``value``; other columns ignored.
    A parquet file with the Turin layout is parsed as ``turin-parquet`` (the 64 KiB the sniffer
    sees does not hold a large parquet file's footer, so auto-detection cannot always tell).
    ``source_offset`` = 0-based row index.
``long-csv``
    header ``timestamp|time,node,metric,value`` (any order, extra columns ignored).
    ``source_offset`` = 1-based physical line number.
``ldms-csv``
    LDMS ``store_csv`` layout ``#Time,Time_usec,ProducerName,component_id,job_id,<metric>...``:
    ``#Time`` is epoch seconds (fraction allowed), ``Time_usec`` the microseconds (used when
    present), ``ProducerName`` the node; every other column except ``component_id``/``job_id``
    is a metric and is melted into long rows (one input row per cell; all cells of a line share
    its line number as ``source_offset``).
``turin-parquet``
    the real ADMIRE Turin per-node files ``<node>.parquet`` with columns ``power, cpu1, cpu2,
    cpus_alloc, date`` (``date`` UTC): the node is the file name (validated with
    ``nodewatch.schemas.names``; a hostile file name is a file error); each value column is melted (``<c>_std``: turin_units).

Times: timestamp columns with a zone are converted to UTC; zone-less timestamps are read in
``ParseContext.tz``; strings are ISO 8601 (``T`` or space, optional fraction and ``Z``/offset);
numbers are epoch seconds.

Rows that cannot be parsed (wrong field count, invalid UTF-8, a value that is not a number, an
unparseable time, an empty cell) become rejects with a ``parse:`` reason. Counters (catalogue
``kind="counter"``) are converted to per-second rates here (``tasks/core/counters.py``: state carried
across the batches of a file; the first sample of a series in a file has no rate and is rejected
with that reason). Range, finiteness, unknown metric, node name, known node and time-window rules
are the pipeline's validation (``schemas/telemetry.py`` ``ROW_CHECKS`` + the GX suite).
Host aliases from the topology (``ParseContext.aliases``) are applied to node names.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nodewatch.schemas.metrics import COUNTERS
from nodewatch.schemas.names import is_valid_node_name
from nodewatch.schemas.telemetry import ROW_CHECKS, TELEMETRY
from nodewatch.tasks.core.counters import CounterState, rates_with_state, status_reason
from nodewatch.tasks.ingest._vectorised import (
    TS,
    CsvBlocks,
    apply_aliases,
    combine,
    csv_header,
    empty_line_mask,
    epoch_seconds_to_ts,
    file_error,
    parse_float_strings,
    parse_time_strings,
    read_header,
    reject_table,
    time_reason,
    time_to_utc,
    to_numpy,
    to_utf8,
    utf8_columns,
    value_to_float,
)
from nodewatch.tasks.ingest.base import REJECT_SCHEMA, Format, ParseContext, ParseResult, SourceSpec, empty_rejects
from nodewatch.tasks.ingest.inputs import RATIO_MIN_BYTES, ArchiveError, DecompressionLimitError, Limits
from nodewatch.tasks.ingest.turin_units import turin_metric_names

ROW_SCHEMA = TELEMETRY.arrow_schema()
TIME_NAMES = ("timestamp", "time")
TURIN_METRICS = ("power", "cpu1", "cpu2", "cpus_alloc")
TURIN_TIME = "date"
LDMS_META = ("#Time", "Time_usec", "ProducerName", "component_id", "job_id")
_SPOOL_CHUNK = 1 << 20



# ---------------------------------------------------------------------------------------- helpers
_DICT = pa.dictionary(pa.int32(), pa.string())


def _row_schema(node: pa.Array, metric: pa.Array) -> pa.Schema:
    """:data:`ROW_SCHEMA`, with ``node``/``metric`` as ``dictionary<int32, string>`` where they are:
    a dictionary-encoded input column (parquet) is passed on as such, and the pipeline keeps it
    (it would dictionary-encode the strings again); CSV inputs give plain strings."""
    schema = ROW_SCHEMA
    for name, arr in (("node", node), ("metric", metric)):
        if arr.type == _DICT:
            i = schema.get_field_index(name)
            schema = schema.set(i, schema.field(i).with_type(_DICT))
    return schema

def _raw_lines(time: pa.Array, node: pa.Array, metric: pa.Array, value: np.ndarray) -> list[str]:
    ts = pc.fill_null(pc.strftime(time, format="%Y-%m-%dT%H:%M:%S.%f%z"), "").to_pylist() if len(time) else []
    return [f"{t},{n},{m},{v!r}" for t, n, m, v in zip(ts, node.to_pylist(), metric.to_pylist(), value.tolist(), strict=True)]


class _Emitter:
    """Turns parsed columns into telemetry row batches: aliases, counter rates, reject collection."""

    def __init__(self, ctx: ParseContext) -> None:
        self.ctx = ctx
        self.state = CounterState()
        self.carry = ctx.counters  # CounterCarry or None (see tasks/core/counters.py)
        self._seeded = False
        self._counters = pa.array(sorted(COUNTERS), pa.string())

    def _nodes(self, node: pa.Array) -> pa.Array:
        """Node names with host aliases applied (on the dictionary when there is one; a
        dictionary-encoded input stays dictionary-encoded, see :func:`_row_schema`)."""
        aliases = dict(self.ctx.aliases)
        if pa.types.is_dictionary(node.type):
            d = apply_aliases(node.dictionary.cast(pa.string()), aliases)
            return pa.DictionaryArray.from_arrays(node.indices.cast(pa.int32()), d)
        return apply_aliases(node.cast(pa.string()), aliases)

    def emit(
        self,
        time: pa.Array,
        node: pa.Array,
        metric: pa.Array,
        value: pa.Array,
        offset: np.ndarray,
        rejects: Sequence[pa.Table] = (),
    ) -> Iterator[ParseResult]:
        """Yield ParseResults (at most ``ctx.batch_rows`` rows each) for parsed columns."""
        node = self._nodes(combine(node))
        # metric names are few: work on the dictionary (counter lookup and "_rate" renaming)
        mdict = combine(metric)
        metric_is_dict = pa.types.is_dictionary(mdict.type)
        if not metric_is_dict:
            mdict = pc.dictionary_encode(mdict.cast(pa.string()))
        names = mdict.dictionary.cast(pa.string())
        midx = to_numpy(pc.fill_null(mdict.indices, -1)).astype(np.int64)
        name_is_counter = to_numpy(pc.fill_null(pc.is_in(names, value_set=self._counters), False)).astype(bool)
        time = combine(time)
        value = combine(value)
        value_np = to_numpy(pc.fill_null(value.cast(pa.float64()), np.nan)).astype(np.float64, copy=True)
        value_null = to_numpy(pc.is_null(value)).astype(bool) if value.null_count else np.zeros(len(value_np), bool)
        offset = np.asarray(offset, np.int64)
        rej = [r for r in rejects if r.num_rows]
        keep = np.ones(len(value_np), bool)
        if name_is_counter.any():
            is_counter = np.append(name_is_counter, False)[midx]  # index -1 (null metric) -> False
            ci = np.flatnonzero(is_counter)
            take = pa.array(ci)
            c_node = node.take(take)
            c_metric = pa.DictionaryArray.from_arrays(pa.array(midx[ci].astype(np.int32)), names)
            c_time = time.take(take)
            t_ns = to_numpy(pc.fill_null(c_time.cast(pa.int64()), np.iinfo(np.int64).min)).astype(np.int64)
            v = np.where(value_null[ci], np.nan, value_np[ci])
            v[t_ns == np.iinfo(np.int64).min] = np.nan  # no time: cannot be placed in a series
            if self.carry is not None and not self._seeded:
                placed = t_ns[t_ns != np.iinfo(np.int64).min]
                if placed.size:  # seed from earlier runs, relative to the file's first counter sample
                    self.state = self.carry.seed_for(int(placed.min()))
                    self._seeded = True
            rate, status, self.state = rates_with_state(c_node, c_metric, t_ns, v, self.state)
            if self.carry is not None:
                self.carry.out = self.state
            failed = ~np.isfinite(rate)
            value_np[ci] = rate
            value_null[ci] = False
            names = pc.if_else(pa.array(name_is_counter), pc.binary_join_element_wise(names, "_rate", ""), names)
            if failed.any():
                fi = np.flatnonzero(failed)
                keep[ci[fi]] = False
                reasons = [
                    f"parse: counter {m}: {status_reason(s)}"
                    for m, s in zip(c_metric.take(pa.array(fi)).to_pylist(), status[fi].tolist(), strict=True)
                ]
                raws = _raw_lines(c_time.take(pa.array(fi)), c_node.take(pa.array(fi)), c_metric.take(pa.array(fi)), v[fi])
                rej.append(
                    pa.table(
                        {"source_offset": pa.array(offset[ci[fi]], pa.int64()), "raw": raws, "reason": reasons},
                        schema=REJECT_SCHEMA,
                    )
                )
        metric = pa.DictionaryArray.from_arrays(mdict.indices.cast(pa.int32()), names)
        if not metric_is_dict:
            metric = metric.cast(pa.string())
        values = pa.array(value_np, pa.float64(), mask=value_null)
        rows = pa.table(
            [time.cast(TS), node, metric, values, pa.array(offset, pa.int64())], schema=_row_schema(node, metric)
        )
        if not keep.all():
            rows = rows.filter(pa.array(keep))
        rejects_t = pa.concat_tables(rej) if rej else empty_rejects()
        step = max(1, self.ctx.batch_rows)
        if rows.num_rows <= step:
            yield ParseResult(rows, rejects_t)
            return
        for i, start in enumerate(range(0, rows.num_rows, step)):
            yield ParseResult(rows.slice(start, step), rejects_t if i == 0 else empty_rejects())


# ---------------------------------------------------------------------------------------- parquet
def _spool_to_disk(stream: BinaryIO, limits: Limits) -> pa.NativeFile:
    """Copy a non-seekable (decompressed) stream to an anonymous temporary file, at most
    ``limits.max_bytes`` bytes (:class:`DecompressionLimitError` beyond), and open it for random access.

    The file is unlinked at once: its disk space is freed when the returned file is closed or collected.
    """
    fd, name = tempfile.mkstemp(prefix="nodewatch-parquet-", suffix=".parquet")
    try:
        size = 0
        with os.fdopen(fd, "wb") as out:
            while chunk := stream.read(_SPOOL_CHUNK):
                size += len(chunk)
                if size > limits.max_bytes:
                    raise DecompressionLimitError(
                        f"decompressed size exceeds {limits.max_bytes} bytes (setting max_decompressed_bytes); not ingested"
                    )
                out.write(chunk)
        return pa.OSFile(name, "r")
    finally:
        os.unlink(name)


def _check_parquet_limits(pf: pq.ParquetFile, ctx: ParseContext, limits: Limits) -> None:
    """Refuse a parquet file whose column chunks decompress to more than the limits allow (a parquet bomb)."""
    md = pf.metadata
    plain = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    packed = sum(
        md.row_group(i).column(j).total_compressed_size for i in range(md.num_row_groups) for j in range(md.num_columns)
    )
    if plain > limits.max_bytes:
        raise DecompressionLimitError(
            f"{ctx.name}: decompressed size exceeds {limits.max_bytes} bytes (parquet column data: {plain} bytes; "
            "setting max_decompressed_bytes); not ingested"
        )
    if plain > RATIO_MIN_BYTES and plain > limits.max_ratio * max(packed, 1):
        raise DecompressionLimitError(
            f"{ctx.name}: compression ratio {plain / max(packed, 1):.0f}:1 of its parquet column data exceeds "
            f"{limits.max_ratio:g}:1 (setting max_compression_ratio); not ingested"
        )


def _open_parquet(stream: BinaryIO, ctx: ParseContext) -> pq.ParquetFile:
    """A parquet reader over ``stream``; a compressed (non-seekable) input is spooled to disk first, in
    bounded memory and at most ``max_decompressed_bytes`` (:mod:`nodewatch.tasks.ingest.inputs`)."""
    limits = getattr(stream, "limits", None) or Limits.from_settings()
    try:
        source: BinaryIO | pa.NativeFile = stream
        if not (hasattr(stream, "seekable") and stream.seekable()):
            source = _spool_to_disk(stream, limits)  # compressed parquet: must be random access
        pf = pq.ParquetFile(source)
    except DecompressionLimitError as e:
        raise file_error(ctx, str(e).removeprefix(f"{ctx.name}: ")) from None
    except ArchiveError as e:
        raise file_error(ctx, f"not a readable parquet file: {str(e).removeprefix(f'{ctx.name}: ')}") from None
    except (pa.ArrowException, OSError, EOFError) as e:
        raise file_error(ctx, f"not a readable parquet file (truncated or corrupt?): {e}") from e
    _check_parquet_limits(pf, ctx, limits)
    return pf


def _iter_parquet(pf: pq.ParquetFile, ctx: ParseContext, columns: list[str]) -> Iterator[pa.RecordBatch]:
    done = 0
    try:
        for rb in pf.iter_batches(batch_size=ctx.batch_rows, columns=columns):
            yield rb
            done += rb.num_rows
    except (pa.ArrowException, OSError, EOFError) as e:
        raise file_error(ctx, f"corrupt parquet data after row {done}: {e}") from e


def _time_name(names: Sequence[str]) -> str | None:
    return next((n for n in TIME_NAMES if n in names), None)


def parse_long_parquet(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse a long-format parquet file (``timestamp|time, node, metric, value``)."""
    pf = _open_parquet(stream, ctx)
    names = pf.schema_arrow.names
    if TURIN_TIME in names and set(TURIN_METRICS) & set(names) and "metric" not in names:
        yield from _parse_turin_file(pf, ctx)
        return
    tcol = _time_name(names)
    missing = [n for n in ("node", "metric", "value") if n not in names] + ([] if tcol else ["timestamp|time"])
    if missing:
        raise file_error(
            ctx, f"missing columns {missing} for long-format telemetry (found {names[:12]}); expected timestamp,node,metric,value"
        )
    em = _Emitter(ctx)
    offset = 0
    for rb in _iter_parquet(pf, ctx, [tcol, "node", "metric", "value"]):
        n = rb.num_rows
        off = np.arange(offset, offset + n, dtype=np.int64)
        offset += n
        time = time_to_utc(rb.column(tcol), ctx.tz)
        value = value_to_float(rb.column("value"))
        node = rb.column("node")
        metric = rb.column("metric")
        node = _string_column(node)
        metric = _string_column(metric)
        rej = _unparsed(rb.column(tcol), time, rb.column("value"), value, node, metric, off, ctx.tz)
        if rej is not None:
            ok, rtab = rej
            idx = pa.array(np.flatnonzero(ok))
            time, node, metric, value = time.take(idx), node.take(idx), metric.take(idx), value.take(idx)
            off = off[ok]
            yield from em.emit(time, node, metric, value, off, [rtab])
        else:
            yield from em.emit(time, node, metric, value, off)


def _string_column(col: pa.Array) -> pa.Array:
    """A node/metric column as strings; ``dictionary<string>`` stays encoded (decoded only at write)."""
    if pa.types.is_dictionary(col.type) and pa.types.is_string(col.type.value_type):
        return col
    return col.cast(pa.string()) if not pa.types.is_binary(col.type) else to_utf8(col)[0]


def _unparsed(
    raw_t: pa.Array, time: pa.Array, raw_v: pa.Array, value: pa.Array, node: pa.Array, metric: pa.Array, off: np.ndarray,
    tz: str = "UTC",
) -> tuple[np.ndarray, pa.Table] | None:
    """Rows whose time or value could not be parsed (the input was not null but the result is)."""
    bad_t = to_numpy(pc.and_(pc.is_null(time), pc.is_valid(raw_t))).astype(bool)
    bad_v = to_numpy(pc.and_(pc.is_null(value), pc.is_valid(raw_v))).astype(bool)
    bad = bad_t | bad_v
    if not bad.any():
        return None
    bi = np.flatnonzero(bad)
    take = pa.array(bi)
    rt = [str(x) for x in combine(raw_t).take(take).to_pylist()]
    rv = [str(x) for x in combine(raw_v).take(take).to_pylist()]
    nn, mm = node.take(take).to_pylist(), metric.take(take).to_pylist()
    raws = [f"{a},{b},{c},{d}" for a, b, c, d in zip(rt, nn, mm, rv, strict=True)]
    reasons = [
        time_reason(a, tz) if bad_t[i] else f"parse: value {d!r} is not a number"
        for i, a, d in zip(bi.tolist(), rt, rv, strict=True)
    ]
    return ~bad, reject_table(off[bi], raws, reasons)


def turin_node(name: str) -> str:
    """Node name of a Turin file: the file name without ``.parquet`` (and compression suffix)."""
    base = Path(name).name
    stem = re.sub(r"\.parquet(\.(gz|zst|zstd|xz|bz2))?$", "", base, flags=re.IGNORECASE)
    return stem


def _parse_turin_file(pf: pq.ParquetFile, ctx: ParseContext) -> Iterator[ParseResult]:
    node_name = turin_node(ctx.name)
    if not is_valid_node_name(node_name):
        raise file_error(
            ctx, f"file name does not give a valid node name ({node_name[:80]!r}); rename the file to <node>.parquet"
        )
    names = pf.schema_arrow.names
    missing = [c for c in (*TURIN_METRICS, TURIN_TIME) if c not in names]
    if missing:
        raise file_error(ctx, f"missing columns {missing} for a Turin per-node file (found {names[:12]})")
    metrics = [c for c in names if c != TURIN_TIME and not c.startswith("__index_level_")]
    em = _Emitter(ctx)
    offset = 0
    m_arr = pa.array(turin_metric_names(pf, metrics), pa.string())  # <name>_std for a standardised file
    for rb in _iter_parquet(pf, ctx, [TURIN_TIME, *metrics]):
        n = rb.num_rows
        k = len(metrics)
        time = time_to_utc(rb.column(TURIN_TIME), ctx.tz)
        vals = np.empty((n, k), np.float64)
        nulls = np.empty((n, k), bool)
        for j, m in enumerate(metrics):
            col = value_to_float(rb.column(m))
            vals[:, j] = to_numpy(pc.fill_null(col, np.nan))
            nulls[:, j] = to_numpy(pc.is_null(col))
        rows_off = np.arange(offset, offset + n, dtype=np.int64)
        offset += n
        rep = pa.array(np.repeat(np.arange(n), k))
        t_long = time.take(rep)
        off_long = np.repeat(rows_off, k)
        metric_long = m_arr.take(pa.array(np.tile(np.arange(k), n)))
        v_long = pa.array(vals.ravel(), pa.float64(), mask=nulls.ravel())
        node_long = pa.array(np.full(n * k, node_name, dtype=object), pa.string())
        bad_t = to_numpy(pc.is_null(t_long)).astype(bool)
        rej = []
        if bad_t.any():
            bi = np.flatnonzero(bad_t)
            rej.append(reject_table(off_long[bi], [f"{node_name},{m}" for m in metric_long.take(pa.array(bi)).to_pylist()],
                               "parse: missing or out-of-range date"))
            keep = pa.array(np.flatnonzero(~bad_t))
            t_long, node_long, metric_long, v_long, off_long = (
                t_long.take(keep), node_long.take(keep), metric_long.take(keep), v_long.take(keep), off_long[~bad_t]
            )
        yield from em.emit(t_long, node_long, metric_long, v_long, off_long, rej)


def parse_turin_parquet(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse a Turin per-node parquet file (``power, cpu1, cpu2, cpus_alloc, date``; node = file name)."""
    pf = _open_parquet(stream, ctx)
    yield from _parse_turin_file(pf, ctx)


# ---------------------------------------------------------------------------------------- CSV
def parse_long_csv(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse a long-format CSV (header ``timestamp|time,node,metric,value``)."""
    cols = read_header(stream, ctx)
    low = [c.lower() for c in cols]
    tcol = next((cols[low.index(n)] for n in TIME_NAMES if n in low), None)
    need = {n: cols[low.index(n)] for n in ("node", "metric", "value") if n in low}
    missing = [n for n in ("node", "metric", "value") if n not in need] + ([] if tcol else ["timestamp|time"])
    if missing:
        raise file_error(ctx, f"line 1: missing columns {missing} (header {cols[:12]}); expected timestamp,node,metric,value")
    assert tcol is not None
    use = [tcol, need["node"], need["metric"], need["value"]]
    em = _Emitter(ctx)
    for rb, lines, inv in CsvBlocks(stream, ctx, cols, use):
        if rb.num_rows == 0:
            yield ParseResult(ROW_SCHEMA.empty_table(), inv)
            continue
        empty = empty_line_mask(rb.select(use))
        if empty.any():
            rb, lines = rb.filter(pa.array(~empty)), lines[~empty]
        dec, bad, rej = utf8_columns(rb, use, lines)
        rej = [inv, *rej]
        if bad.any():
            keep = pa.array(np.flatnonzero(~bad))
            dec = {k: v.take(keep) for k, v in dec.items()}
            lines = lines[~bad]
        raw_t, raw_v = dec[tcol], dec[need["value"]]
        time = parse_time_strings(raw_t, ctx.tz)
        value = parse_float_strings(raw_v)
        node, metric = dec[need["node"]], dec[need["metric"]]
        un = _unparsed(raw_t, time, raw_v, value, node, metric, lines, ctx.tz)
        if un is not None:
            ok, rtab = un
            rej.append(rtab)
            keep = pa.array(np.flatnonzero(ok))
            time, node, metric, value, lines = time.take(keep), node.take(keep), metric.take(keep), value.take(keep), lines[ok]
        yield from em.emit(time, node, metric, value, lines, rej)


def parse_ldms_csv(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]:
    """Parse an LDMS ``store_csv`` wide file and melt it to long rows (see module doc)."""
    cols = read_header(stream, ctx)
    if "#Time" not in cols or "ProducerName" not in cols:
        raise file_error(ctx, f"line 1: not an LDMS CSV header: needs #Time and ProducerName (header {cols[:12]})")
    metrics = [c for c in cols if c not in LDMS_META]
    if not metrics:
        raise file_error(ctx, "line 1: LDMS header has no metric columns")
    has_usec = "Time_usec" in cols
    use = ["#Time", "ProducerName", *(["Time_usec"] if has_usec else []), *metrics]
    em = _Emitter(ctx)
    k = len(metrics)
    m_arr = pa.array(metrics, pa.string())
    for rb, lines, inv in CsvBlocks(stream, ctx, cols, use):
        if rb.num_rows == 0:
            yield ParseResult(ROW_SCHEMA.empty_table(), inv)
            continue
        empty = empty_line_mask(rb)
        if empty.any():
            rb, lines = rb.filter(pa.array(~empty)), lines[~empty]
        dec, bad, rej = utf8_columns(rb, use, lines)
        rej = [inv, *rej]
        if bad.any():
            keep = pa.array(np.flatnonzero(~bad))
            dec = {c: v.take(keep) for c, v in dec.items()}
            lines = lines[~bad]
        n = len(lines)
        secs = parse_float_strings(dec["#Time"])
        if has_usec:
            usec = parse_float_strings(dec["Time_usec"])
            whole = pc.floor(secs)
            usec_ok = pc.and_(pc.is_valid(usec), pc.less(pc.fill_null(usec, -1.0), 1e6))
            secs = pc.if_else(usec_ok, pc.add(whole, pc.divide(pc.fill_null(usec, 0.0), 1e6)), secs)
        time = epoch_seconds_to_ts(secs)
        bad_t = to_numpy(pc.is_null(time)).astype(bool)
        if bad_t.any():
            bi = np.flatnonzero(bad_t)
            rej.append(reject_table(lines[bi], [str(dec["#Time"][i].as_py()) for i in bi.tolist()],
                               [f"parse: unparseable #Time {dec['#Time'][i].as_py()!r} ({k} values)" for i in bi.tolist()]))
        vals = np.empty((n, k), np.float64)
        bad_v = np.zeros((n, k), bool)
        raws_v: list[pa.Array] = []
        for j, m in enumerate(metrics):
            raw = dec[m]
            f = parse_float_strings(raw)
            vals[:, j] = to_numpy(pc.fill_null(f, np.nan))
            bad_v[:, j] = to_numpy(pc.is_null(f)).astype(bool)
            raws_v.append(raw)
        # a line with an unparseable time rejects all its cells (counted once per cell)
        keep_cell = ~bad_v & ~bad_t[:, None]
        cell_rej = bad_v & ~bad_t[:, None]
        if cell_rej.any():
            ri, rj = np.nonzero(cell_rej)
            raws = [f"{metrics[j]}={raws_v[j][i].as_py()}" for i, j in zip(ri.tolist(), rj.tolist(), strict=True)]
            reasons = [
                f"parse: value of {metrics[j]} {'is empty' if not raws_v[j][i].as_py() else 'is not a number'}"
                for i, j in zip(ri.tolist(), rj.tolist(), strict=True)
            ]
            rej.append(reject_table(lines[ri], raws, reasons))
        if bad_t.any():  # account every cell of a bad-time line: one reject per cell
            bi = np.flatnonzero(bad_t)
            extra = k - 1
            if extra:
                rej.append(reject_table(np.repeat(lines[bi], extra), ["(same line)"] * (len(bi) * extra),
                                   "parse: unparseable #Time (further values of the line)"))
        flat = np.flatnonzero(keep_cell.ravel())
        ri, rj = flat // k, flat % k
        t_long = time.take(pa.array(ri))
        node_long = dec["ProducerName"].take(pa.array(ri))
        metric_long = m_arr.take(pa.array(rj))
        v_long = pa.array(vals.ravel()[flat], pa.float64())
        yield from em.emit(t_long, node_long, metric_long, v_long, lines[ri], rej)


# ---------------------------------------------------------------------------------------- sniffing
def _parquet_names(head: bytes) -> list[str] | None:
    """Column names if ``head`` is a complete parquet file, else ``None``."""
    if len(head) >= 12 and head.startswith(b"PAR1") and head.endswith(b"PAR1"):
        try:
            return pq.read_schema(io.BytesIO(head)).names
        except (pa.ArrowException, OSError):
            return None
    return None


def sniff_long_parquet(head: bytes) -> float:
    """Parquet with long columns (1.0); any parquet whose footer is beyond the head (0.6)."""
    if not head.startswith(b"PAR1"):
        return 0.0
    names = _parquet_names(head)
    if names is None:
        return 0.6
    return 1.0 if {"node", "metric", "value"} <= set(names) and _time_name(names) else 0.0


def sniff_turin_parquet(head: bytes) -> float:
    """Parquet with the Turin columns (1.0); a large parquet (0.4, the long parser also handles Turin)."""
    if not head.startswith(b"PAR1"):
        return 0.0
    names = _parquet_names(head)
    if names is None:
        return 0.4
    return 1.0 if set(TURIN_METRICS) | {TURIN_TIME} <= set(names) else 0.0


def sniff_long_csv(head: bytes) -> float:
    """Header with timestamp|time, node, metric, value."""
    cols = csv_header(head)
    if not cols:
        return 0.0
    low = {c.lower() for c in cols}
    return 1.0 if {"node", "metric", "value"} <= low and low & set(TIME_NAMES) else 0.0


def sniff_ldms_csv(head: bytes) -> float:
    """Header starting ``#Time`` with a ``ProducerName`` column."""
    cols = csv_header(head)
    if not cols:
        return 0.0
    return 1.0 if cols[0] == "#Time" and "ProducerName" in cols else 0.0


FORMATS = (
    Format("long-parquet", parse_long_parquet, sniff_long_parquet, "parquet: timestamp|time, node, metric, value"),
    Format("long-csv", parse_long_csv, sniff_long_csv, "CSV: timestamp|time,node,metric,value"),
    Format(
        "ldms-csv", parse_ldms_csv, sniff_ldms_csv, "LDMS store_csv: #Time,Time_usec,ProducerName,component_id,job_id,<metrics>"
    ),
    Format("turin-parquet", parse_turin_parquet, sniff_turin_parquet, "ADMIRE Turin per-node parquet <node>.parquet"),
)

SOURCES = [
    SourceSpec(
        name="telemetry",
        table=TELEMETRY,
        formats=FORMATS,
        node_column="node",
        row_checks=ROW_CHECKS,
        carries_counters=True,
        help=(
            "Node telemetry: long parquet/CSV (timestamp,node,metric,value), LDMS wide CSV, or Turin per-node "
            "parquet. Metrics must be in the catalogue (schemas/metrics.py); counters are staged as per-second "
            "<name>_rate; values are range-checked per metric; unknown metrics are quarantined."
        ),
    )
]
