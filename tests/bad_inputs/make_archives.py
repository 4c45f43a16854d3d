"""Hostile compressed inputs, generated (nothing large is committed): truncated archives and bombs.

* :func:`compress` / :func:`truncated`: ``data`` compressed with gzip, xz, bz2 or zstd, and cut at a
  fraction of the compressed bytes (a truncated download);
* :func:`recoverable` : the bytes an independent one-shot decoder recovers from a cut archive
  (the reference for "every complete line before the break is staged");
* :func:`write_bomb`: ``size`` bytes (zeros after an optional ``head``) compressed *while generated*,
  in 1 MiB pieces, so a 1 GB bomb costs a few MB of memory and about 1 MB of disk;
* :func:`write_parquet_bomb`: a real parquet file (long telemetry columns, all zeros, no parquet
  compression) streamed through the compressor: a ``.parquet.zst`` that can only be read by
  decompressing it whole.

``python tests/bad_inputs/make_archives.py OUT_DIR`` writes a small sample set for a person to look at.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

COMPRESSIONS = ("gzip", "xz", "bz2", "zstd")
SUFFIX = {"gzip": ".gz", "xz": ".xz", "bz2": ".bz2", "zstd": ".zst"}


def compress(data: bytes, comp: str) -> bytes:
    """``data`` compressed with ``comp``."""
    if comp == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if comp == "xz":
        return lzma.compress(data, preset=1)
    if comp == "bz2":
        return bz2.compress(data, 9)
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as s:
        s.write(data)
    return sink.getvalue().to_pybytes()


def truncated(data: bytes, comp: str, frac: float = 0.6) -> bytes:
    """``data`` compressed, then cut after ``frac`` of the compressed bytes."""
    z = compress(data, comp)
    return z[: int(len(z) * frac)]


def recoverable(cut: bytes, comp: str) -> bytes | None:
    """What an independent decoder recovers from the cut archive ``cut`` (``None``: no reference here).

    gzip/xz/bz2: one ``decompressobj`` call over all bytes; zstd: the ``zstd -dc`` command when installed.
    """
    if comp == "gzip":
        return zlib.decompressobj(wbits=31).decompress(cut)
    if comp == "xz":
        return lzma.LZMADecompressor().decompress(cut)
    if comp == "bz2":
        return bz2.BZ2Decompressor().decompress(cut)
    exe = shutil.which("zstd")
    if exe is None:
        return None
    return subprocess.run([exe, "-dc"], input=cut, capture_output=True, check=False).stdout


class _Sink:
    """A writable file object compressing into ``path`` as it is written."""

    def __init__(self, path: Path, comp: str) -> None:
        self.comp = comp
        if comp == "zstd":
            self._f = pa.CompressedOutputStream(str(path), "zstd")
        else:
            self._f = {"gzip": lambda: gzip.open(path, "wb", compresslevel=1),  # noqa: SIM115 - closed by close()
                       "xz": lambda: lzma.open(path, "wb", preset=0),  # noqa: SIM115
                       "bz2": lambda: bz2.open(path, "wb", compresslevel=1)}[comp]()  # noqa: SIM115

    def write(self, b: bytes) -> int:
        self._f.write(b)
        return len(b)

    def close(self) -> None:
        self._f.close()


def write_bomb(path: Path, comp: str, size: int, head: bytes = b"") -> Path:
    """Write ``head`` then zeros up to ``size`` decompressed bytes, compressed with ``comp``, to ``path``."""
    sink = _Sink(path, comp)
    sink.write(head)
    zeros = b"\0" * (1 << 20)
    left = size - len(head)
    while left > 0:
        sink.write(zeros[: min(left, len(zeros))])
        left -= len(zeros)
    sink.close()
    return path


def write_parquet_bomb(path: Path, comp: str, size: int) -> Path:
    """A valid long-telemetry parquet file of about ``size`` bytes of zeros (no parquet compression, one
    row group per 64 MiB), compressed with ``comp`` while written (see module doc)."""
    schema = pa.schema([("timestamp", pa.int64()), ("node", pa.int64()), ("metric", pa.int64()), ("value", pa.float64())])
    rows = (64 << 20) // 32
    zeros = pa.array(np.zeros(rows, np.int64))
    batch = pa.record_batch([zeros, zeros, zeros, pa.array(np.zeros(rows))], schema=schema)
    sink = _Sink(path, comp)
    f = sink._f if isinstance(sink._f, pa.NativeFile) else pa.PythonFile(sink._f, mode="w")
    with pq.ParquetWriter(f, schema, compression="none", use_dictionary=False, write_statistics=False) as w:
        written = 0
        while written < size:
            w.write_batch(batch, row_group_size=rows)
            written += rows * 32
    sink.close()
    return path


def main(out: Path) -> None:
    """Write sample truncated archives and 64 MiB bombs of every compression to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    lines = b"".join(b"<165>1 2026-01-01T00:00:%02d.000Z cn001 slurmd %d - - job %d step completed\n" % (i % 60, i, i)
                     for i in range(20000))
    for comp in COMPRESSIONS:
        (out / f"trunc.log{SUFFIX[comp]}").write_bytes(truncated(lines, comp))
        write_bomb(out / f"bomb.log{SUFFIX[comp]}", comp, 64 << 20)
        write_parquet_bomb(out / f"bomb.parquet{SUFFIX[comp]}", comp, 64 << 20)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
