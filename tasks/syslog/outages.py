"""Outages and regular failures from staged syslog, jobs and reservations (rule of :mod:`nodewatch.models.syslog.outages`).

Boot markers are the ones the state build uses (kernel ``Linux version`` / ``Command line: BOOT_IMAGE=``, systemd
``Startup finished in``, optionally behind a ``[timestamp]`` prefix). Maintenance = reservations with the ``MAINT``
flag (on their nodes, or all nodes when the reservation lists none). "No job could be accomplished on that node at
that time" = no job of the node ended ``COMPLETED`` within ``tol`` of the outage.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.syslog.outages import outages, regular_failures

BOOT_RE = r"^(?:\[[^\]]*\] )?(?:Linux version |Command line: BOOT_IMAGE=|Startup finished in )"
OUTAGE_SCHEMA = pa.schema([
    pa.field("node", pa.string(), nullable=False),
    pa.field("outage", pa.timestamp("ns", tz="UTC"), nullable=False),
    pa.field("boot", pa.timestamp("ns", tz="UTC")),
    pa.field("kind", pa.string(), nullable=False),
    pa.field("regular_failure", pa.bool_(), nullable=False),
    pa.field("reason", pa.string(), nullable=False),
])
"""Outages found in syslog: ``kind`` boot (last line before a boot) or silent (no line until the end)."""


def _ns(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return pc.cast(col, pa.timestamp("ns", tz="UTC")).cast(pa.int64()).to_numpy(zero_copy_only=False)


def syslog_outages(syslog: pa.Table, end_ns: int, silent_s: int = 3 * 3600, jobs: pa.Table | None = None,
                   reservations: pa.Table | None = None, tol_s: int = 300,
                   nodes: set[str] | None = None) -> pa.Table:
    """Outages of the nodes in ``syslog`` (columns ``time, node, message``) up to ``end_ns`` (module doc).

    ``nodes``: only these nodes (e.g. the topology's compute nodes; the controller host is not a node).
    """
    if syslog is None or syslog.num_rows == 0:
        return OUTAGE_SCHEMA.empty_table()
    names = syslog["node"].combine_chunks()
    enc = names.dictionary_encode()
    dictionary = enc.dictionary.to_pylist()
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    t = _ns(syslog["time"])
    boot = pc.fill_null(pc.match_substring_regex(syslog["message"], BOOT_RE), False).to_numpy(zero_copy_only=False)
    o_node, o_time, o_boot, kind = outages(codes, t, boot, end_ns, silent_s * 1_000_000_000)
    if nodes is not None:
        keep = np.array([dictionary[i] in nodes for i in o_node.tolist()], bool)
        o_node, o_time, o_boot, kind = o_node[keep], o_time[keep], o_boot[keep], kind[keep]
    idx = {n: i for i, n in enumerate(dictionary)}
    maint: list[tuple[int, int, int]] = []
    if reservations is not None and reservations.num_rows:
        for r in reservations.select(["start", "end", "node_list", "flags"]).to_pylist():
            if "MAINT" not in (r["flags"] or []):
                continue
            a, z = int(r["start"].timestamp() * 1e9), int(r["end"].timestamp() * 1e9)
            nl = r["node_list"] or []
            maint += [(-1, a, z)] if not nl else [(idx[n], a, z) for n in nl if n in idx]
    completed: list[tuple[int, int]] = []
    if jobs is not None and jobs.num_rows:
        done = jobs.filter(pc.equal(jobs["state"], "COMPLETED")).select(["end_time", "node_list"])
        done = done.filter(pc.is_valid(done["end_time"]))
        ends = _ns(done["end_time"]) if done.num_rows else np.zeros(0, np.int64)
        for e, nl in zip(ends.tolist(), done["node_list"].to_pylist(), strict=True):
            completed += [(idx[n], e) for n in (nl or []) if n in idx]
    reg = regular_failures(o_node, o_time, maint, completed, tol_s * 1_000_000_000)
    reason = []
    for i, (n, ot) in enumerate(zip(o_node.tolist(), o_time.tolist(), strict=True)):
        if reg[i]:
            reason.append("outside maintenance, no job completed on the node then")
        elif any(mn in (-1, n) and a <= ot <= z for mn, a, z in maint):
            reason.append("inside a MAINT reservation")
        else:
            reason.append("a job completed on the node then")
    return pa.table({
        "node": [dictionary[i] for i in o_node.tolist()],
        "outage": pa.array(o_time, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        "boot": pa.array(np.where(o_boot >= 0, o_boot, 0), pa.int64(), mask=o_boot < 0).cast(pa.timestamp("ns", tz="UTC")),
        "kind": ["boot" if k == 0 else "silent" for k in kind.tolist()],
        "regular_failure": pa.array(reg, pa.bool_()),
        "reason": reason,
    }, schema=OUTAGE_SCHEMA)
