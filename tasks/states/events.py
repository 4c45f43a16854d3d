"""Staged outputs of a state build (Agarwal et al., "SaNSA", Sec. II-C): ``node_states``, ``failure_events``, ``state_carry``.

* :func:`timeline_table` -- the ``node_states`` rows of a timeline (cut at UTC midnight, with
  human evidence per interval);
* :func:`failure_episodes` / :func:`failure_events_table` -- failure events: a DOWN episode (DOWN
  and the BOOTING that ends it) with its own start and end, shadowed when it begins inside an
  ADMIN_RESV / UNSCHEDULED_RESV overlay, with :func:`episode_evidence`;
* :func:`carry_table` -- the losses still in effect at each built day's end;
* :func:`write_staged_by_day` / :func:`write_failure_events` -- date partitions replaced on re-runs;
  an episode that began before the window updates its own earlier partition. All are written into one
  :class:`~nodewatch.tasks.core.commit.StagedCommit` of the build: readers see the previous build's
  partitions until its commit object is written, the new ones after (never two parts of a day).
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.states.machine import loss_table, losses_active_at
from nodewatch.models.states.timeline import NS_PER_S, Events, Source, State, Timeline
from nodewatch.schemas.states import FAILURE_EVENTS, NODE_STATES, STATE_CARRY, STATE_NAMES
from nodewatch.tasks.core.commit import StagedCommit
from nodewatch.tasks.states.common import DAY_NS, _day_ns, _ns
from nodewatch.tasks.states.derive import StateBuild

_SOURCE_TEXT = {
    Source.GAP: "gap",
    Source.LOSS: "slurmctld not responding..now responding",
    Source.LOSS_BOOT: "slurmctld loss + boot",
    Source.LOSS_SILENT: "slurmctld loss, node silent, no recovery",
    Source.LOSS_OPEN: "slurmctld loss, no recovery in data",
    Source.BOOT_SYSTEMD: "systemd Startup finished",
    Source.BOOT_KERNEL: "kernel boot banner",
}


def evidence_strings(tl: Timeline, job_labels: pa.Array | list[str], resv_labels: pa.Array | list[str]) -> pa.Array:
    """Human evidence per interval: fixed text per source, or the job / reservation label (one Arrow take)."""
    base = pa.array([_SOURCE_TEXT.get(Source(i), "") for i in range(len(Source))], pa.string())
    jl = job_labels if isinstance(job_labels, pa.Array) else pa.array(job_labels, pa.string())
    rl = resv_labels if isinstance(resv_labels, pa.Array) else pa.array(resv_labels, pa.string())
    idx = tl.source.astype(np.int64)
    j = tl.source == Source.JOB
    idx[j] = len(base) + tl.ref[j]
    r = tl.source == Source.RESERVATION
    idx[r] = len(base) + len(jl) + tl.ref[r]
    return pa.concat_arrays([base, jl.cast(pa.string()), rl.cast(pa.string())]).take(pa.array(idx))


def split_at_days(tl: Timeline) -> Timeline:
    """Cut intervals at UTC midnight so every piece lies inside one date partition."""
    first_day = tl.start // DAY_NS
    last_day = (tl.end - 1) // DAY_NS
    reps = (last_day - first_day + 1).astype(np.int64)
    idx = np.repeat(np.arange(tl.node.size), reps)
    k = np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps)
    day = first_day[idx] + k
    s = np.maximum(tl.start[idx], day * DAY_NS)
    e = np.minimum(tl.end[idx], (day + 1) * DAY_NS)
    return Timeline(tl.node[idx], s, e, tl.state[idx], tl.source[idx], tl.ref[idx], dict(tl.counts))


def timeline_table(b: StateBuild, overlay: bool = True) -> pa.Table:
    """The ``node_states`` rows of one timeline, split at UTC midnight."""
    tl = split_at_days(b.timeline if overlay else b.timeline_no_overlay)
    names = pa.array(b.nodes, pa.string()).take(pa.array(tl.node))
    state_names = pa.array(STATE_NAMES, pa.string()).take(pa.array(tl.state.astype(np.int64) - 1))
    return pa.table(
        {
            "node": names,
            "start": pa.array(tl.start, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "end": pa.array(tl.end, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "state": state_names,
            "state_code": pa.array(tl.state, pa.int8()),
            "overlay": pa.array(np.full(tl.node.size, overlay), pa.bool_()),
            "evidence": evidence_strings(tl, b.job_labels, b.resv_labels),
        },
        schema=NODE_STATES.arrow_schema(),
    )


def _iso(ns: int) -> str:
    """``2026-01-01T22:00:00Z`` (fractions of a second only when present)."""
    t = np.datetime64(int(ns), "ns").astype("datetime64[ms]")
    txt = str(t)
    return (txt[:-4] if txt.endswith(".000") else txt) + "Z"


def _dur(ns: int) -> str:
    """Duration as systemd prints it: ``1h 2min 3.5s``, ``11min 17.957s``."""
    sec = ns / NS_PER_S
    h, rem = divmod(sec, 3600)
    m, sec = divmod(rem, 60)
    parts = ([f"{int(h)}h"] if h else []) + ([f"{int(m)}min"] if m else []) + [f"{sec:.3f}".rstrip("0").rstrip(".") + "s"]
    return " ".join(parts)


def episode_evidence(b: StateBuild, loss: int, open_at: int | None) -> str:
    """Evidence of one failure episode from its loss: "not responding", the boot (end + duration), "now responding".

    ``open_at``: the episode is unresolved in the data read; it is reported as still down at this time.
    """
    ls, bt = b.losses, b.boots
    if ls is None or bt is None or loss < 0:
        return "DOWN in the derived timeline (no slurmctld loss found)"
    parts = [f"not responding {_iso(ls.start[loss])}"]
    k = int(ls.boot[loss])
    if k >= 0:
        if bt.source[k] == Source.BOOT_SYSTEMD:
            parts.append(f"boot finished {_iso(bt.end[k])} after {_dur(int(bt.end[k] - bt.start[k]))} (systemd)")
        else:
            parts.append(f"kernel boot banner {_iso(bt.start[k])}, boot taken to end {_iso(bt.end[k])}")
    if ls.responding[loss] >= 0:
        parts.append(f"now responding {_iso(ls.responding[loss])}")
    if ls.source[loss] == Source.LOSS_SILENT:
        last = b.last_seen[ls.node[loss]] if b.last_seen is not None else np.iinfo(np.int64).min
        seen = f"last line of the node {_iso(last)}" if last > np.iinfo(np.int64).min else "no line of the node"
        parts.append(f"node silent ({seen})")
    if open_at is not None:
        parts.append(f"no boot or now responding by {_iso(open_at)}")
    return "; ".join(parts)


def failure_episodes(b: StateBuild) -> dict[str, np.ndarray]:
    """Failure episodes of the episode timeline: a DOWN interval plus the DOWN/BOOTING intervals contiguous with it.

    The timeline is the one without overlays, so an overlay never cuts an episode; an episode that
    *begins* inside an ADMIN_RESV / UNSCHEDULED_RESV overlay of its node is shadowed (paper Sec. II-C:
    events during administrative windows are not counted in its statistics, but stay available "under
    the shadowed overlay") and flagged in ``shadowed``; ``shadowed_by`` is the overlay's state code (0:
    none; inside both, UNSCHEDULED_RESV, the higher priority).

    Returns arrays ``node``, ``start``, ``end`` (real, not clipped to the window or an overlay),
    ``open`` (unresolved at the end of the data read; ``end`` is then the window end),
    ``cause_silent``, ``loss`` (index of the loss behind the first DOWN interval, -1 if none),
    ``shadowed`` and ``shadowed_by``.
    """
    tl = b.episodes_timeline if b.episodes_timeline is not None else b.timeline
    ext_end = b.ext_end if b.episodes_timeline is not None else b.t_end
    down_like = (tl.state == State.DOWN) | (tl.state == State.BOOTING)
    same_node_prev = np.zeros(tl.node.size, bool)
    same_node_prev[1:] = (tl.node[1:] == tl.node[:-1]) & (tl.start[1:] == tl.end[:-1])
    prev_down_like = np.zeros(tl.node.size, bool)
    prev_down_like[1:] = down_like[:-1]
    run_start = down_like & ~(same_node_prev & prev_down_like)
    run_id = np.where(down_like, np.cumsum(run_start) - 1, -1)
    n_runs = int(run_start.sum())
    has_down = np.zeros(n_runs, bool)
    dmask = (tl.state == State.DOWN) & (run_id >= 0)
    has_down[run_id[dmask]] = True
    end = np.zeros(n_runs, np.int64)
    np.maximum.at(end, run_id[down_like], tl.end[down_like])
    # first DOWN interval of each run gives the cause and the loss behind it
    first_down = np.full(n_runs, -1, np.int64)
    di = np.nonzero(dmask)[0]
    rid = run_id[di]
    firsts = np.unique(rid, return_index=True)[1]
    first_down[rid[firsts]] = di[firsts]
    sel = np.nonzero(has_down)[0]
    fd = first_down[sel]
    node = tl.node[fd].astype(np.int64)
    start = tl.start[np.nonzero(run_start)[0][sel]]
    end = end[sel]
    is_open = end >= ext_end
    end = np.where(is_open, np.maximum(b.t_end, start), end)
    loss = np.full(node.size, -1, np.int64)
    if b.losses is not None and b.losses.node.size:
        ln, lst = b.losses.node, b.losses.start
        for i, (nd, t) in enumerate(zip(node.tolist(), tl.start[fd].tolist(), strict=True)):
            lo, hi = np.searchsorted(ln, nd, "left"), np.searchsorted(ln, nd, "right")
            j = lo + int(np.searchsorted(lst[lo:hi], t, "right")) - 1
            loss[i] = j if j >= lo else -1
    shadowed_by = np.zeros(node.size, np.int64)
    if b.overlays is not None and b.overlays[0].size:
        on, os_, oe, ost = b.overlays
        for i, (nd, t) in enumerate(zip(node.tolist(), start.tolist(), strict=True)):
            inside = (on == nd) & (os_ <= t) & (oe > t)
            if inside.any():
                # UNSCHEDULED_RESV (8) outranks ADMIN_RESV (6): the overlay in effect at the start
                shadowed_by[i] = int(ost[inside].max())
    shadowed = shadowed_by > 0
    return {
        "node": node,
        "start": start,
        "end": end,
        "open": is_open,
        "cause_silent": tl.source[fd] == Source.LOSS_SILENT,
        "loss": loss,
        "shadowed": shadowed,
        "shadowed_by": shadowed_by,
    }


def failure_events_table(b: StateBuild, racks: dict[str, str] | None = None) -> pa.Table:
    """Failure events of the build: episodes starting in the window or still in effect at its start.

    Paper Sec. II-C: a DOWN episode (DOWN and the BOOTING that ends it). Every episode is listed; one
    that begins inside an ADMIN_RESV / UNSCHEDULED_RESV overlay of its node is shadowed and names the
    overlay in ``shadowed_by`` (kept "under the shadowed overlay"; consumers choose: Table III leaves
    them out, correlated rack failures and the failure fits keep UNSCHEDULED_RESV ones). Start and end
    are the episode's own (not cut at window edges or overlays); an episode unresolved in the data read
    ends at the window end. Rows starting before the window update earlier partitions.
    """
    ep = failure_episodes(b)
    keep = (ep["start"] < b.t_end) & ((ep["start"] >= b.t_start) | (ep["end"] > b.t_start))
    in_window = keep & (ep["start"] >= b.t_start)
    n_shadowed = int((in_window & ep["shadowed"]).sum())
    if n_shadowed:
        b.counts["failure_episodes_shadowed_by_overlay"] = n_shadowed
        for st in (State.ADMIN_RESV, State.UNSCHEDULED_RESV):
            k = int((in_window & (ep["shadowed_by"] == int(st))).sum())
            if k:
                b.counts[f"failure_episodes_shadowed_by_{st.name.lower()}"] = k
    idx = np.nonzero(keep)[0]
    node_names = [b.nodes[i] for i in ep["node"][idx]]
    cause = ["loss+silent" if c else "loss+boot" for c in ep["cause_silent"][idx]]
    evid = [episode_evidence(b, int(ep["loss"][i]), b.t_end if ep["open"][i] else None) for i in idx]
    rack = [racks.get(n) if racks else None for n in node_names]
    shadow = [STATE_NAMES[c - 1] if c > 0 else None for c in ep["shadowed_by"][idx].tolist()]
    return pa.table(
        {
            "node": pa.array(node_names, pa.string()),
            "start": pa.array(ep["start"][idx], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "end": pa.array(ep["end"][idx], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
            "cause": pa.array(cause, pa.string()),
            "evidence": pa.array(evid, pa.string()),
            "rack": pa.array(rack, pa.string()),
            "shadowed_by": pa.array(shadow, pa.string()),
        },
        schema=FAILURE_EVENTS.arrow_schema(),
    )


def carry_table(b: StateBuild, days: list[str]) -> dict[str, pa.Table]:
    """Per built day, the losses still in effect at its end (staged ``state_carry``)."""
    out: dict[str, pa.Table] = {}
    ls = b.losses if b.losses is not None else loss_table(Events.empty(), len(b.nodes), b.t_end)[0]
    names = pa.array(b.nodes, pa.string())
    for day in days:
        at = _day_ns(date.fromisoformat(day)) + DAY_NS
        i = losses_active_at(ls, at)
        seen = b.last_seen[ls.node[i]] if b.last_seen is not None else np.full(i.size, np.iinfo(np.int64).min)
        out[day] = pa.table(
            {
                "node": names.take(pa.array(ls.node[i])),
                "as_of": pa.array(np.full(i.size, at, np.int64), pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
                "loss_start": pa.array(ls.start[i], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
                "last_seen": pa.array(seen, pa.int64(), mask=seen == np.iinfo(np.int64).min).cast(pa.timestamp("ns", tz="UTC")),
                "state": pa.array(np.array(STATE_NAMES, object)[ls.state[i].astype(np.int64) - 1].tolist(), pa.string()),
            },
            schema=STATE_CARRY.arrow_schema(),
        )
    return out


def write_staged_by_day(commit: StagedCommit, table_name: str, table: pa.Table, days: list[str]) -> dict[str, int]:
    """Write ``table`` into one partition per day (by its time column) of ``commit``; returns rows per day."""
    col = "start"
    d = pc.strftime(table[col], format="%Y-%m-%d") if table.num_rows else pa.array([], pa.string())
    out: dict[str, int] = {}
    for day in days:
        part = table.filter(pc.equal(d, day)) if table.num_rows else table
        commit.replace_partition(table_name, day, part)
        out[day] = part.num_rows
    return out


def conform_failure_events(t: pa.Table) -> pa.Table:
    """``t`` in the current ``failure_events`` schema: a partition staged before ``shadowed_by`` existed gets it as null.

    Extra columns (``source_offset`` ...) are dropped, the rest cast to the schema's types.
    """
    schema = FAILURE_EVENTS.arrow_schema()
    cols = [t[f.name] if f.name in t.column_names else pa.nulls(t.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays([c.cast(f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)


def write_failure_events(commit: StagedCommit, fe: pa.Table, days: list[str], t_start: int) -> tuple[int, int]:
    """Failure events into ``commit``: window partitions are replaced; episodes that began earlier update their own partition.

    An episode that began before the window (still in effect at its start, e.g. open at the previous
    day's end) replaces the row(s) of the same node overlapping it in the partition of its start date,
    so day-by-day builds keep one row per episode. Returns (rows in the window, rows updated before it).
    """
    start_ns = pc.cast(fe["start"], pa.int64())
    before = pc.less(start_ns, t_start)
    store = commit.store
    rows = write_staged_by_day(commit, FAILURE_EVENTS.name, fe.filter(pc.invert(before)), days)
    early = fe.filter(before)
    updated = 0
    if early.num_rows:
        d = pc.strftime(early["start"], format="%Y-%m-%d")
        for day in sorted(set(d.to_pylist())):
            new = early.filter(pc.equal(d, day))
            old = store.read_staged(FAILURE_EVENTS.name, [day])
            if old is not None and old.num_rows:
                o_node, o_s, o_e = old["node"].to_pylist(), _ns(old["start"]), _ns(old["end"])
                n_node, n_s, n_e = new["node"].to_pylist(), _ns(new["start"]), _ns(new["end"])
                drop = np.zeros(old.num_rows, bool)
                for nd, a, z in zip(n_node, n_s, n_e, strict=True):
                    drop |= (np.array(o_node, object) == nd) & (o_s <= z) & (o_e >= a)
                new = pa.concat_tables([conform_failure_events(old.filter(pa.array(~drop))), new])
            new = new.sort_by([("start", "ascending"), ("node", "ascending")])
            commit.replace_partition(FAILURE_EVENTS.name, day, new)
            updated += early.filter(pc.equal(d, day)).num_rows
    return sum(rows.values()), updated
