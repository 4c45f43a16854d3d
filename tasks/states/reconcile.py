"""One failure-events table: the state build's DOWN episodes reconciled with the syslog outage rule of Ghiasvand &
Ciorba (§II-D; :mod:`nodewatch.tasks.syslog.outages`).

* a syslog *regular failure* (last line before a boot, or silent until the end; outside maintenance; no job
  completed on the node then) whose interval (last line .. boot) overlaps an episode of its node (``tol`` of
  slack) adds its evidence to that row (``; syslog: ...``): the same failure is never two rows;
* one that matches no episode (the controller never declared the node DOWN: a node that rebooted faster than
  the slurmd timeout, a site without slurmctld logs) becomes a row of its own with cause ``syslog+boot`` (end =
  the boot) or ``syslog+silent`` (end = the end of the build window);
* syslog outages that are not regular failures (maintenance, a job completed then) add nothing.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.states import FAILURE_EVENTS


def _ns(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return pc.cast(col, pa.timestamp("ns", tz="UTC")).cast(pa.int64()).to_numpy(zero_copy_only=False)


def _fmt(ns: int) -> str:
    return str(np.datetime64(int(ns), "ns").astype("datetime64[s]")) + "Z"


def reconcile(fe: pa.Table, outages: pa.Table, t_start: int, t_end: int, racks: dict[str, str] | None = None,
              tol_s: int = 1800) -> tuple[pa.Table, dict[str, int]]:
    """``fe`` (failure_events rows) with the syslog regular failures of ``[t_start, t_end)`` merged in (module doc)."""
    counts = {"syslog_outages": 0, "syslog_failures_matched": 0, "syslog_failures_added": 0}
    if outages is None or outages.num_rows == 0:
        return fe, counts
    o = outages.filter(pc.field("regular_failure"))
    o_t = _ns(o["outage"])
    o_bt = pc.fill_null(pc.cast(o["boot"], pa.int64()), t_end).to_numpy(zero_copy_only=False)
    # like the episodes: an outage that began before the window but ends in it (or is still open) is emitted
    # again, so day-by-day builds give the rows of one build of the whole range
    inside = (o_t < t_end) & ((o_t >= t_start) | (o_bt >= t_start))
    o = o.filter(pa.array(inside))
    counts["syslog_outages"] = int(outages.num_rows)
    if o.num_rows == 0:
        return fe, counts
    o_t = _ns(o["outage"])
    o_b = o["boot"].to_pylist()
    f_node = fe["node"].to_pylist()
    f_s, f_e = _ns(fe["start"]), _ns(fe["end"])
    evidence = fe["evidence"].to_pylist()
    tol = tol_s * 1_000_000_000
    new: list[dict] = []
    for i, (node, kind) in enumerate(zip(o["node"].to_pylist(), o["kind"].to_pylist(), strict=True)):
        t = int(o_t[i])
        boot = o_b[i]
        text = f"syslog: last line {_fmt(t)}"
        b_ns = int(boot.timestamp() * 1e9) if boot is not None else t_end
        # the outage [last line, boot] overlaps the episode [start, end] (a quiet node's last line can come long
        # before the controller notices; the boot ends both)
        hit = [j for j, n in enumerate(f_node) if n == node and t <= f_e[j] + tol and b_ns >= f_s[j] - tol]
        if hit:
            j = hit[0]
            if "syslog:" not in evidence[j]:
                evidence[j] = f"{evidence[j]}; {text}"
            counts["syslog_failures_matched"] += 1
            continue
        end = b_ns
        new.append({"node": node, "start": t, "end": max(end, t + 1), "cause": f"syslog+{kind}",
                    "evidence": f"{text}, " + (f"boot {_fmt(b_ns)}" if boot is not None else "silent since")
                    + "; outside maintenance, no job completed on the node then",
                    "rack": racks.get(node) if racks else None, "shadowed_by": None})
        counts["syslog_failures_added"] += 1
    schema = FAILURE_EVENTS.arrow_schema()
    i_ev = fe.schema.get_field_index("evidence")
    out = fe.set_column(i_ev, schema.field("evidence"), pa.array(evidence, pa.string())).cast(schema)
    if new:
        add = pa.table({
            "node": [r["node"] for r in new],
            "start": pa.array([r["start"] for r in new], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "end": pa.array([r["end"] for r in new], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "cause": [r["cause"] for r in new],
            "evidence": [r["evidence"] for r in new],
            "rack": pa.array([r["rack"] for r in new], pa.string()),
            "shadowed_by": pa.array([None] * len(new), pa.string()),
        }, schema=FAILURE_EVENTS.arrow_schema())
        out = pa.concat_tables([out, add])
        out = out.sort_by([("node", "ascending"), ("start", "ascending")])
    return out, counts
