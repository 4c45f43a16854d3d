"""Landing side of the ingest pipeline: which format a landed file is read with.

:func:`detect_format` picks one of a source's formats for a file: the one named with ``--format``,
or the best sniffer score over the file's first (decompressed) lines. The bytes themselves are
landed by :meth:`nodewatch.tasks.core.store.Store.land_raw`; the wiring is in
:mod:`nodewatch.tasks.ingest.ingestor`.
"""

from __future__ import annotations

from pathlib import Path

from nodewatch.tasks.ingest.base import Format, SourceSpec
from nodewatch.tasks.ingest.inputs import InputError, read_head


def detect_format(spec: SourceSpec, path: Path, fmt: str = "auto") -> Format:
    """Pick the format of ``path``: the named one, or the best sniffer score (≥ 0.5, no tie)."""
    by_name = {f.name: f for f in spec.formats}
    if fmt != "auto":
        if fmt not in by_name:
            raise InputError(f"{path}: unknown format {fmt!r} for {spec.name}; choose one of {', '.join(by_name)}")
        return by_name[fmt]
    head = read_head(path)
    if not head:
        raise InputError(f"{path}:1: empty or unreadable file (0 bytes after decompression)")
    scores = sorted(((f.sniff(head), f.name) for f in spec.formats), reverse=True)
    best, name = scores[0]
    if best < 0.5:
        raise InputError(
            f"{path}:1: cannot tell the format of this {spec.name} file from its first lines "
            f"(best guess {name} at {best:.2f}); pass --format {'|'.join(by_name)}"
        )
    if len(scores) > 1 and scores[1][0] == best:
        raise InputError(f"{path}:1: ambiguous format ({name} or {scores[1][1]}) from its first lines; pass --format")
    return by_name[name]
