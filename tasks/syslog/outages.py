"""Outages and regular failures from staged syslog, jobs and reservations (rule of :mod:`nodewatch.models.syslog.outages`).

Boot markers are the ones the state build uses (kernel ``Linux version`` / ``Command line: BOOT_IMAGE=``, systemd
``Startup finished in``, optionally behind a ``[timestamp]`` prefix). Maintenance = reservations with the ``MAINT``
flag (on their nodes, or all nodes when the reservation lists none). "No job could be accomplished on that node at
that time" = no job of the node ended ``COMPLETED`` within ``tol`` of the outage. External causes (§II-D: power
outages, ...): outages chained in time across a whole rack (:func:`~nodewatch.models.syslog.outages.external_events`,
``racks`` given) are not regular failures; :func:`mark_external` tags the same events in the failure-events table.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.syslog.outages import external_events, outages, regular_failures

EXTERNAL_GAP_S = 300
"""Chain gap of a rack-wide event: a node's last syslog line comes up to one inter-line gap (~5 min) before it."""

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
                   nodes: set[str] | None = None, racks: dict[str, str | None] | None = None) -> pa.Table:
    """Outages of the nodes in ``syslog`` (columns ``time, node, message``) up to ``end_ns`` (module doc).

    ``nodes``: only these nodes (e.g. the topology's compute nodes; the controller host is not a node).
    ``racks``: node -> rack of every node of the site; rack-wide outage events are external, not regular failures.
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
    ext = _external([dictionary[i] for i in o_node.tolist()], o_time, racks)
    reason = []
    for i, (n, ot) in enumerate(zip(o_node.tolist(), o_time.tolist(), strict=True)):
        if ext[i]:
            reg[i] = False
            reason.append(f"external: rack-wide event (rack {racks[dictionary[n]]})")
        elif reg[i]:
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


def _external(nodes: list[str], t_ns: np.ndarray, racks: dict[str, str | None] | None) -> np.ndarray:
    """External (rack-wide) flag per outage; nodes without a rack are never external."""
    if not racks or not nodes:
        return np.zeros(len(nodes), bool)
    names = sorted({r for r in racks.values() if r is not None})
    gid = {r: i for i, r in enumerate(names)}
    size = np.bincount([gid[r] for r in racks.values() if r is not None], minlength=len(names) + 1).astype(float)
    grp = np.array([gid.get(racks.get(n), len(names)) if racks.get(n) is not None else len(names) for n in nodes])
    size[len(names)] = 0.0
    node_id = np.unique(np.array(nodes, dtype=object), return_inverse=True)[1]
    ext = external_events(node_id, np.asarray(t_ns, np.int64), grp, size, EXTERNAL_GAP_S * 1_000_000_000)
    return ext & (grp < len(names))


def mark_external(fe: pa.Table, outages: pa.Table, tol_s: int = 1800) -> tuple[pa.Table, int]:
    """``fe`` (failure_events) with ``; external: rack-wide event (rack R)`` appended to the evidence of each event
    that an *external* syslog outage of :func:`syslog_outages` overlaps (same node, interval last line .. boot
    overlapping the event's ``start .. end`` with ``tol_s`` of slack, as in the reconciliation); returns the table
    and how many events were marked. One events table: the external ones stay rows, told apart by their evidence.
    """
    if fe.num_rows == 0 or outages is None or outages.num_rows == 0:
        return fe, 0
    ext = outages.filter(pc.starts_with(outages["reason"], "external:"))
    if ext.num_rows == 0:
        return fe, 0
    tol = tol_s * 1_000_000_000
    o_t = _ns(ext["outage"])
    o_b = pc.fill_null(pc.cast(ext["boot"], pa.int64()), np.iinfo(np.int64).max).to_numpy(zero_copy_only=False)
    f_node = np.array(fe["node"].to_pylist(), dtype=object)
    f_s, f_e = _ns(fe["start"]), _ns(fe["end"])
    ev = fe["evidence"].to_pylist()
    marked = 0
    for node, t, b, why in zip(ext["node"].to_pylist(), o_t.tolist(), o_b.tolist(), ext["reason"].to_pylist(),
                               strict=True):
        for j in np.flatnonzero((f_node == node) & (t <= f_e + tol) & (b >= f_s - tol)).tolist():
            if "external:" not in (ev[j] or ""):
                ev[j] = f"{ev[j]}; {why}"
                marked += 1
    i_ev = fe.schema.get_field_index("evidence")
    return fe.set_column(i_ev, fe.schema.field("evidence"), pa.array(ev, pa.string())), marked
