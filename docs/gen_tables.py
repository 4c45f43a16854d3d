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


CATALOGUE_INTRO = """
### Metric catalogue (`schemas/metrics.py`)

The `metric` column holds one of these names; `value` is in the metric's unit (UDUNITS/CF spelling,
`"1"` = a count or ratio) and inside its physical range, else the row is quarantined with the reason
`expect_metric_values_in_catalogue_range(value): <metric> outside [<min>, <max>] <unit>`. Counters are
staged as their `<name>_rate` gauges. A metric standardised upstream is its own name `<name>_std`
(unit `"1"`), never mixed with the physical values. The telemetry cube carries the same `units`,
`long_name`, `valid_min` and `valid_max` per metric (`metric_units`, `metric_long_name`).

"""


def render() -> str:
    """The markdown text of docs/tables.md."""
    from nodewatch.schemas.metrics import markdown as metric_markdown
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
        if t.name == "telemetry":
            parts.append(CATALOGUE_INTRO + metric_markdown() + "\n")
    return "".join(parts)


if __name__ == "__main__":
    (ROOT / "docs" / "tables.md").write_text(render())
    print("wrote docs/tables.md")
