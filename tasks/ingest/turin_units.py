"""Which Turin per-node parquet files hold physical units and which were standardised upstream.

The ADMIRE Turin data exists twice (``../shared/data/PROVENANCE.md``): the ``raw/`` files hold
``power`` in W (136–608), ``cpu1``/``cpu2`` socket temperatures in degC (28–88) and ``cpus_alloc``
CPU counts (whole numbers 0–48); the older files hold the same columns after an upstream scaling
(``power`` ≈ −0.281 in all 132 files, ``cpus_alloc`` 0 or 0.000434). Both have the same column names.

Rule (per file, from the values, before any row is emitted): a file is **standardised** when at
least half of its non-null ``power`` values are negative (a node's input power cannot be), or at
least half of its non-null ``cpus_alloc`` values are not whole numbers (a CPU count cannot be).
Its metrics are then staged as ``<name>_std`` (unit ``"1"``, :data:`nodewatch.schemas.metrics.STD_SUFFIX`);
otherwise under the physical names, range-checked in their units. A majority, not one value, decides,
so a physical file with a few faulty readings stays physical (the faulty readings are quarantined by
the range check) and a standardised file is never staged as watts.

Deliberately *not* evidence: the column type (float32 in the standardised files, float64 in ``raw/``:
a writer's choice, not a unit), the ``__index_level_0__`` column (a pandas artefact) and the
directory (a landed file keeps only its name). The read is one pass over two columns, by row batch
(bounded memory).
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nodewatch.schemas.metrics import STD_SUFFIX

POWER = "power"
ALLOC = "cpus_alloc"


def turin_standardised(pf: pq.ParquetFile) -> bool:
    """True if the Turin file ``pf`` holds standardised values (see the module doc for the rule)."""
    names = pf.schema_arrow.names
    cols = [c for c in (POWER, ALLOC) if c in names]
    if not cols:
        return False
    n = {c: 0 for c in cols}
    hits = {c: 0 for c in cols}
    for rb in pf.iter_batches(batch_size=65_536, columns=cols):
        for c in cols:
            v = np.asarray(pc.fill_null(rb.column(c).cast("float64"), np.nan).to_numpy(zero_copy_only=False))
            v = v[np.isfinite(v)]
            n[c] += v.size
            hits[c] += int((v < 0).sum()) if c == POWER else int((v != np.round(v)).sum())
    return any(n[c] and 2 * hits[c] >= n[c] for c in cols)


def turin_metric_names(pf: pq.ParquetFile, columns: list[str]) -> list[str]:
    """Staged metric names of the Turin value ``columns`` of ``pf``: ``<column>_std`` for a standardised file."""
    suffix = STD_SUFFIX if turin_standardised(pf) else ""
    return [f"{c}{suffix}" for c in columns]
