"""Regenerate docs/tables.md (the staged-table reference) from the schemas in ``schemas/``.

Run ``.venv/bin/python docs/gen_tables.py``; ``tests/test_docs.py`` fails when the file is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADER = """# Staged tables

Generated from `schemas/` by `docs/gen_tables.py` — do not edit by hand.

Every staged table lives at `staged/<table>/date=YYYY-MM-DD/part-<run_id>.parquet` (date of the
table's time column, UTC). Besides the columns below, each staged row carries `source_offset`
(line number, or row index for columnar inputs) and `source_sha256` (the raw input it came from,
`raw/<source>/<sha256>.*`), so any row can be traced back to its input bytes.
Rows failing a check are in `quarantine/<table>/date=…/<run_id>.parquet` with `reason` (the GX
expectation or parser rule that failed), `source_offset` and the `raw` row.
"""


def render() -> str:
    """The markdown text of docs/tables.md."""
    from nodewatch.tasks.ingest.registry import sources

    parts = [HEADER]
    seen = set()
    for name, spec in sources().items():
        t = spec.table
        if t.name in seen:
            continue
        seen.add(t.name)
        fmts = ", ".join(f"`{f.name}`" for f in spec.formats)
        parts.append(f"\n## {t.name}\n\nSource `nodewatch ingest {name}` — formats: {fmts}.\n\n{t.markdown()}\n")
    return "".join(parts)


if __name__ == "__main__":
    (ROOT / "docs" / "tables.md").write_text(render())
    print("wrote docs/tables.md")
