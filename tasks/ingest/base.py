"""The parser contract shared by every source.

A parser is a function ``parse(stream: BinaryIO, *, name: str, **options) -> Iterator[ParseResult]``
that reads a (decompressed) binary stream and yields batches. Each batch has

* ``rows``: an Arrow table whose columns are those of the target staged table's schema
  (``schemas/<table>.py``) plus ``source_offset`` (int64: 1-based line number, or row index for
  columnar inputs) so every staged or quarantined row can be traced to its origin;
* ``rejects``: an Arrow table ``(source_offset int64, raw string, reason string)`` of input
  lines that could not be parsed into a row at all (the reason starts with ``parse:``).

``rows_in`` for a file is the sum of both over all batches; validation later splits ``rows``
into staged / quarantined / duplicates so that rows_in = staged + quarantined + duplicates.

A parser raises :class:`tasks.ingest.inputs.InputError` when the *file* cannot be parsed at all
(wrong format, missing header columns, binary garbage before any valid row); the pipeline then
moves the file to ``quarantine/files/`` with that message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import pyarrow as pa

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


class Parser(Protocol):
    """Callable signature of a parser."""

    def __call__(self, stream: BinaryIO, *, name: str) -> Iterator[ParseResult]: ...


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
