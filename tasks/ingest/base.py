"""The parser contract shared by every source.

A parser is a function ``parse(stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]``
that reads a (decompressed) binary stream and yields batches (bounded size, e.g. 100k rows, so
memory stays bounded for any file size). Each batch has

* ``rows``: an Arrow table whose columns are those of the target staged table's schema
  (``schemas/<table>.py``) plus ``source_offset`` (int64: 1-based line number, or row index for
  columnar inputs) so every staged or quarantined row can be traced to its origin;
* ``rejects``: an Arrow table ``(source_offset int64, raw string, reason string)`` of input
  lines that could not be parsed into a row at all (the reason starts with ``parse:``).

``rows_in`` for a file is the sum of both over all batches; validation later splits ``rows``
into staged / quarantined / duplicates so that rows_in = staged + quarantined + duplicates.

A parser raises :class:`nodewatch.tasks.ingest.inputs.InputError` when the *file* cannot be parsed at all
(wrong format, missing header columns, binary garbage before any valid row); the pipeline then
moves the file to ``quarantine/files/`` with that message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO, Protocol

import pyarrow as pa

from nodewatch.schemas.table import TableSchema

REJECT_SCHEMA = pa.schema(
    [
        pa.field("source_offset", pa.int64(), nullable=False),
        pa.field("raw", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
    ]
)


@dataclass
class ParseResult:
    """One batch from a parser: parsed rows and unparseable lines."""

    rows: pa.Table
    rejects: pa.Table

    @property
    def rows_in(self) -> int:
        """Input rows represented by this batch."""
        return self.rows.num_rows + self.rejects.num_rows


@dataclass(frozen=True)
class ParseContext:
    """What a parser may know besides the bytes.

    Attributes:
        name: file name (for messages and e.g. the SWF system name fallback).
        reference_time: when the file was produced (file mtime, or now); RFC 3164 year inference uses it.
        tz: IANA time zone for inputs whose timestamps carry none (RFC 3164, LANL records).
        aliases: host alias -> canonical node name (from topology), applied by syslog/telemetry parsers.
        batch_rows: rows per yielded batch.
        counters: counter series carried across files (telemetry; see ``tasks/core/counters.py``): the
            parser reads ``counters.seed`` and leaves the file's newest samples in ``counters.out``.
    """

    name: str
    reference_time: datetime = field(default_factory=lambda: datetime.now(UTC))
    tz: str = "UTC"
    aliases: Mapping[str, str] = field(default_factory=dict)
    batch_rows: int = 200_000
    counters: Any = None


class Parser(Protocol):
    """Callable signature of a parser."""

    def __call__(self, stream: BinaryIO, ctx: ParseContext) -> Iterator[ParseResult]: ...


@dataclass(frozen=True)
class Format:
    """One input format of a source.

    ``sniff`` gets the first 64 KiB of decompressed bytes and returns a confidence in [0, 1];
    auto-detection picks the best format and refuses (clear message) when the best is < 0.5
    or two formats tie.
    """

    name: str
    parse: Parser
    sniff: Callable[[bytes], float]
    description: str = ""


@dataclass(frozen=True)
class SourceSpec:
    """A source the ingest pipeline knows: ``nodewatch ingest <name> PATHS... [--format F]``.

    Any module under ``tasks/ingest/`` that defines ``SOURCES: list[SourceSpec]`` is discovered by
    :func:`nodewatch.tasks.ingest.registry.sources`.

    Attributes:
        name: CLI name and raw landing folder (``raw/<name>/``).
        table: staged table schema (rows of every format conform to it).
        formats: accepted formats.
        node_column: column holding a node name (validated against the pattern and, if a topology is
            staged, against the known nodes); ``None`` if the table has none.
        node_list_column: a list<string> column of node names (e.g. a job's expanded node list),
            checked like ``node_column``.
        row_checks: extra vectorised row checks run after the GX suite. Each takes the batch
            (Arrow table) and returns ``(label, failing_mask)`` pairs: ``label`` names the check
            like a GX expectation (e.g. ``expect_metric_values_in_catalogue_range(value)``) and
            ``failing_mask`` is a boolean numpy array (True = row fails). Use them only for rules GX
            cannot express per column (per-metric ranges, list columns).
        help: one-paragraph CLI help.
        carries_counters: the pipeline keeps counter series across files and runs for this source
            (``ParseContext.counters``; state in ``state/counters/<name>.parquet``).
        identity_columns: columns naming people (user, group, ...) that the setting ``hash_users``
            replaces by keyed hashes before validation (``tasks/ingest/run.py: new_ingestor``).
    """

    name: str
    table: TableSchema
    formats: tuple[Format, ...]
    node_column: str | None = "node"
    node_list_column: str | None = None
    row_checks: tuple[Callable[[pa.Table], list[tuple[str, Any]]], ...] = ()
    help: str = ""
    carries_counters: bool = False
    identity_columns: tuple[str, ...] = ()


def rejects_table(offsets: list[int], raws: list[bytes | str], reasons: list[str]) -> pa.Table:
    """Build a rejects table; raw bytes are decoded with replacement and capped at 4 KiB."""
    raw_s = [
        (r.decode("utf-8", "replace") if isinstance(r, bytes) else r)[:4096] for r in raws
    ]
    return pa.table(
        {"source_offset": pa.array(offsets, pa.int64()), "raw": pa.array(raw_s, pa.string()), "reason": reasons},
        schema=REJECT_SCHEMA,
    )


def empty_rejects() -> pa.Table:
    """A rejects table with no rows."""
    return REJECT_SCHEMA.empty_table()


ParserFn = Callable[..., Iterator[ParseResult]]
