"""Run every parser of every source over one bomb in this process and report peak memory (a subprocess of tests).

``python bomb_probe.py BOMB [SOURCE:FORMAT …]`` prints one JSON object: ``base_rss`` (peak RSS after
imports, bytes), ``peak_rss`` (peak RSS at the end) and ``outcomes`` (per ``source:format``: the one-line
:class:`InputError` message, or ``"ok <rows>"``). Limits come from the environment
(``NODEWATCH_MAX_DECOMPRESSED_BYTES``, ``NODEWATCH_MAX_COMPRESSION_RATIO``).
"""

from __future__ import annotations

import faulthandler
import json
import os
import resource
import sys
from datetime import UTC, datetime
from pathlib import Path

from nodewatch.tasks.ingest.base import ParseContext
from nodewatch.tasks.ingest.inputs import InputError, open_binary
from nodewatch.tasks.ingest.registry import sources


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(bomb: Path, which: list[str]) -> None:
    """Parse ``bomb`` with each ``source:format`` of ``which`` (every format when empty)."""
    faulthandler.dump_traceback_later(240, exit=True)  # a hang prints where it is stuck, then fails
    forms = {f"{s}:{f.name}": f for s, spec in sources().items() for f in spec.formats}
    base = _rss()
    out: dict[str, str] = {}
    for key in which or sorted(forms):
        ctx = ParseContext(name=bomb.name, reference_time=datetime(2026, 1, 2, tzinfo=UTC))
        rows = 0
        try:
            with open_binary(bomb) as stream:
                for res in forms[key].parse(stream, ctx):
                    rows += res.rows_in
            out[key] = f"ok {rows}"
        except InputError as e:
            out[key] = str(e)
    print(json.dumps({"base_rss": base, "peak_rss": _rss(), "outcomes": out}), flush=True)
    # a pyarrow CSV streaming reader left by a parse error can hang interpreter shutdown (its read-ahead
    # thread calls back into the Python stream): the probe's work is done, leave without finalizing
    os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
