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


def check_format(spec: SourceSpec, fmt: str) -> None:
    """Refuse a ``--format`` value that is not ``auto`` nor a format of ``spec`` (before anything lands)."""
    names = [f.name for f in spec.formats]
    if fmt != "auto" and fmt not in names:
        raise InputError(f"unknown --format {fmt!r} for {spec.name}; choose auto or one of: {', '.join(names)}")


def check_forced_format(spec: SourceSpec, path: Path, fmt: str) -> None:
    """Refuse ``--format fmt`` for a file none of whose first lines is that format (a usage error, before
    anything lands), naming the format the file looks like. ``auto`` and empty/unreadable heads pass
    (the pipeline reports those)."""
    check_format(spec, fmt)
    if fmt == "auto":
        return
    head = read_head(path)
    form = next(f for f in spec.formats if f.name == fmt)
    if not head or form.sniff(head) > 0:
        return
    best, name = max((f.sniff(head), f.name) for f in spec.formats)
    if best >= 0.5:
        looks = f"it looks like {name}: pass --format {name} (or auto)"
    else:
        other = sources_formats(head)
        looks = f"it looks like no {spec.name} format" + (
            f" but like {other[0][0]} {other[0][1].name} (nodewatch ingest {other[0][0]})" if other else ""
        )
    raise InputError(f"{path}: --format {fmt} does not match this file (none of its first lines is {fmt}); {looks}")


def sources_formats(head: bytes) -> list[tuple[str, Format]]:
    """``(source, format)`` of every source whose format sniffs ``head`` at 0.5 or more, best first."""
    from nodewatch.tasks.ingest.registry import sources

    found = [(f.sniff(head), src, f) for src, spec in sources().items() for f in spec.formats]
    return [(src, f) for score, src, f in sorted(found, key=lambda x: -x[0]) if score >= 0.5]


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
