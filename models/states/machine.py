"""SaNSA node-state derivation: pure, vectorised numpy (Agarwal et al., "SaNSA", Sec. II-B/II-C).

Inputs are plain arrays (node index, time in int64 ns UTC) of

* syslog *events* already classified by :mod:`nodewatch.tasks.states.classify` (slurmctld "not responding, setting
  DOWN" / "now responding", systemd "Startup finished in ..." with its total boot duration, kernel
  boot banner lines),
* job allocations (node, start, end, job id) and reservations (node, start, end, state, ref).

The output is a per-node timeline that tiles ``[t_start, t_end)`` exactly: consecutive intervals
``(node, start, end, state, source, ref)``.

Semantics (paper Sec. II-C, "patchwork" of states with priorities):

1. CONNECTION_LOSS starts at the first "not responding" of a node (repeats are merged) and ends at
   the next "now responding" of that node (Sec. II-C, the gr0084 example).
2. BOOTING spans ``[t - d, t]`` of every systemd "Startup finished ... = d" line at time ``t``; a
   kernel banner with no such line within ``max_boot`` gives BOOTING ``[b, min(b + max_boot,
   next "now responding")]``.
3. A connection loss that is followed by a boot (boot overlapping ``[loss start - pre, loss end +
   grace]``) is DOWN instead (Sec. II-B footnote 2, Fig. 2, "pass 2"). A loss still open at the end
   of the data is DOWN if the node logged nothing after the loss began (not "still active"),
   otherwise it stays CONNECTION_LOSS. An open loss that a boot resolves ends at that boot's end.
4. JOB_RUNNING from job allocations; user reservations give RESERVED_IDLE (a job inside it is
   JOB_RUNNING, Sec. II-C last paragraph); ADMIN_RESV and UNSCHEDULED_RESV are overlays with the
   highest priorities (Sec. II-C); every remaining gap is IDLE (Sec. II-C).
5. The state of every instant is the highest-priority layer covering it (:data:`PRIORITY`);
   ``overlay=False`` leaves out the two administrative overlays ("w/o overlay" of Table II).

:func:`derive_states` is the vectorised implementation (sort by node/time, segment operations,
priority resolution as a max over layers); :mod:`nodewatch.models.states.reference` holds the
per-event Python state machine with the same semantics (test oracle, ``benchmarks/states.py``
baseline) and :mod:`nodewatch.models.states.timeline` the states, inputs and Timeline output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nodewatch.models.states.timeline import (
    NS_PER_S,
    OVERLAY_STATES,
    PRIORITY,
    Event,
    Events,
    Layers,
    Params,
    Source,
    State,
    Timeline,
)


# ------------------------------------------------------------------ segment helpers
def _next_in_group(ga: np.ndarray, ka: np.ndarray, gb: np.ndarray, kb: np.ndarray, strict: bool = False) -> np.ndarray:
    """For each a, index of the first b with the same group and key >= ka (> if ``strict``); -1 if none.

    One lexsort of both arrays plus a reverse minimum-accumulate: no per-element Python.
    """
    na, nb = ga.size, gb.size
    if na == 0:
        return np.zeros(0, np.int64)
    if nb == 0:
        return np.full(na, -1, np.int64)
    g = np.concatenate([ga, gb]).astype(np.int64)
    k = np.concatenate([ka, kb]).astype(np.int64)
    # on equal keys a sorts first (so b == ka counts as "at or after") unless strict
    tie = np.concatenate([np.full(na, 1 if strict else 0, np.int8), np.full(nb, 0 if strict else 1, np.int8)])
    order = np.lexsort((tie, k, g))
    is_b = order >= na
    m = order.size
    pos = np.where(is_b, np.arange(m), m)
    nxt = np.minimum.accumulate(pos[::-1])[::-1]  # sorted position of the first b at or after each position
    res = np.empty(na, np.int64)
    a_mask = ~is_b
    res[order[a_mask]] = nxt[a_mask]
    ok = res < m
    out = np.full(na, -1, np.int64)
    out[ok] = order[res[ok]] - na
    res = out.copy()
    same = np.zeros(na, bool)
    same[ok] = gb[res[ok]] == ga[ok]
    out[~same] = -1
    return out


def _prev_in_group(ga: np.ndarray, ka: np.ndarray, gb: np.ndarray, kb: np.ndarray) -> np.ndarray:
    """For each a, index of the last b with the same group and key <= ka; -1 if none."""
    na, nb = ga.size, gb.size
    if na == 0:
        return np.zeros(0, np.int64)
    if nb == 0:
        return np.full(na, -1, np.int64)
    g = np.concatenate([ga, gb]).astype(np.int64)
    k = np.concatenate([ka, kb]).astype(np.int64)
    tie = np.concatenate([np.ones(na, np.int8), np.zeros(nb, np.int8)])  # b before a on equal keys
    order = np.lexsort((tie, k, g))
    is_b = order >= na
    pos = np.where(is_b, np.arange(order.size), -1)
    prv = np.maximum.accumulate(pos)  # sorted position of the last b at or before each position
    res = np.empty(na, np.int64)
    res[order[~is_b]] = prv[~is_b]
    out = np.full(na, -1, np.int64)
    ok = res >= 0
    out[ok] = order[res[ok]] - na
    same = np.zeros(na, bool)
    same[ok] = gb[out[ok]] == ga[ok]
    out[~same] = -1
    return out


# ------------------------------------------------------------------ pass 1: syslog -> losses and boots
@dataclass
class _Intervals:
    node: np.ndarray
    start: np.ndarray
    end: np.ndarray
    state: np.ndarray
    source: np.ndarray
    ref: np.ndarray


def _boots(ev: Events, p: Params, t_end: int) -> tuple[_Intervals, dict[str, int]]:
    """BOOTING intervals from systemd Startup finished and unmatched kernel banners (Sec. II-C)."""
    sf = ev.kind == Event.STARTUP_FINISHED
    sf_node, sf_t, sf_d = ev.node[sf], ev.time[sf], ev.duration[sf]
    kb = ev.kind == Event.KERNEL_BOOT
    b_node, b_t = ev.node[kb], ev.time[kb]
    o = np.lexsort((b_t, b_node))
    b_node, b_t = b_node[o], b_t[o]
    new = np.ones(b_node.size, bool)
    if b_node.size > 1:
        new[1:] = (b_node[1:] != b_node[:-1]) | (b_t[1:] - b_t[:-1] > p.banner_merge_s * NS_PER_S)
    b_node, b_t = b_node[new], b_t[new]
    nxt_sf = _next_in_group(b_node, b_t, sf_node, sf_t)
    matched = nxt_sf >= 0
    matched[matched] = sf_t[nxt_sf[matched]] - b_t[matched] <= p.max_boot_s * NS_PER_S
    ub_node, ub_t = b_node[~matched], b_t[~matched]
    now = ev.kind == Event.NOW_RESPONDING
    nxt_now = _next_in_group(ub_node, ub_t, ev.node[now], ev.time[now], strict=True)
    ub_end = ub_t + p.max_boot_s * NS_PER_S
    has = nxt_now >= 0
    ub_end[has] = np.minimum(ub_end[has], ev.time[now][nxt_now[has]])
    node = np.concatenate([sf_node, ub_node]).astype(np.int64)
    start = np.concatenate([sf_t - sf_d, ub_t]).astype(np.int64)
    end = np.concatenate([sf_t, ub_end]).astype(np.int64)
    src = np.concatenate(
        [np.full(sf_node.size, Source.BOOT_SYSTEMD, np.int8), np.full(ub_node.size, Source.BOOT_KERNEL, np.int8)]
    )
    o = np.lexsort((start, end, node))
    n = node.size
    out = _Intervals(node[o], start[o], end[o], np.full(n, State.BOOTING, np.int8), src[o], np.full(n, -1, np.int64))
    return out, {"boots_systemd": int(sf_node.size), "boots_kernel_only": int(ub_node.size), "kernel_banner_lines": int(kb.sum())}


@dataclass
class Losses:
    """One row per connection loss (paper Sec. II-C, Fig. 2), before splitting off a post-boot tail.

    ``start`` is the first "not responding"; ``end`` the "now responding" that closed it, else the end
    of the boot that resolved it, else ``max(t_end, start)`` (``open``: unresolved in the data).
    ``state`` is DOWN or CONNECTION_LOSS, ``source`` a :class:`Source`; ``responding`` the time of
    the closing "now responding" (-1 if none); ``boot`` the index into the boots table of the boot
    that explains the loss (-1 if none).
    """

    node: np.ndarray
    start: np.ndarray
    end: np.ndarray
    open: np.ndarray
    state: np.ndarray
    source: np.ndarray
    responding: np.ndarray
    boot: np.ndarray


@dataclass
class Boots:
    """BOOTING intervals sorted by (node, end, start); ``source`` BOOT_SYSTEMD or BOOT_KERNEL."""

    node: np.ndarray
    start: np.ndarray
    end: np.ndarray
    source: np.ndarray


def _losses(
    ev: Events, boots: _Intervals, last_seen: np.ndarray, p: Params, t_end: int
) -> tuple[_Intervals, dict[str, int], Losses]:
    """CONNECTION_LOSS / DOWN intervals from slurmctld events, boots and node activity (Sec. II-C, Fig. 2)."""
    m = (ev.kind == Event.NOT_RESPONDING) | (ev.kind == Event.NOW_RESPONDING)
    node, t, kind = ev.node[m], ev.time[m], ev.kind[m]
    o = np.lexsort((kind, t, node))  # NOT_RESPONDING (1) before NOW_RESPONDING (2) at equal times
    node, t, kind = node[o], t[o], kind[o]
    is_nr = kind == Event.NOT_RESPONDING
    is_now = ~is_nr
    first = np.ones(node.size, bool)
    first[1:] = node[1:] != node[:-1]
    prev_nr = np.zeros(node.size, bool)
    prev_nr[1:] = is_nr[:-1]
    start_mask = is_nr & (first | ~prev_nr)
    # a "now responding" closes a loss iff the previous event of the node is "not responding"
    closes = is_now & ~first & prev_nr
    counts = {
        "not_responding_events": int(is_nr.sum()),
        "not_responding_repeats": int((is_nr & ~start_mask).sum()),
        "now_responding_events": int(is_now.sum()),
        "now_responding_without_loss": int((is_now & ~closes).sum()),
    }
    ls_node, ls_t = node[start_mask], t[start_mask]
    nxt = _next_in_group(ls_node, ls_t, node[is_now], t[is_now])
    closed = nxt >= 0
    le = np.full(ls_t.size, np.iinfo(np.int64).max, np.int64)
    le[closed] = t[is_now][nxt[closed]]
    responding = np.where(closed, le, -1)
    # boots overlapping [ls - pre, le + grace]: first boot (sorted by end) ending at/after ls - pre
    fb = _next_in_group(ls_node, ls_t - p.pre_s * NS_PER_S, boots.node, boots.end)
    assoc = fb >= 0
    le_g = np.where(closed, le, le - p.grace_s * NS_PER_S) + p.grace_s * NS_PER_S
    assoc[assoc] = boots.start[fb[assoc]] <= le_g[assoc]
    boot_idx = np.where(assoc, fb, -1)
    # DOWN ends with the last boot of a resolved loss; a tail until "now responding" longer than the
    # grace is CONNECTION_LOSS (booted, Slurm not yet in contact), a shorter one is dropped
    split_at = np.zeros(ls_t.size, np.int64)
    has_split = np.zeros(ls_t.size, bool)
    resolved = assoc & closed
    lb = _prev_in_group(ls_node[resolved], le[resolved] + p.grace_s * NS_PER_S, boots.node, boots.end)
    ri = np.nonzero(resolved)[0][lb >= 0]
    bend = boots.end[lb[lb >= 0]]
    ok = bend > ls_t[ri]
    ri, bend = ri[ok], bend[ok]
    split_at[ri] = np.minimum(le[ri], bend)
    has_split[ri] = True
    boot_idx[ri] = lb[lb >= 0][ok]
    # an open loss is closed by the first boot ending after it started
    fb2 = _next_in_group(ls_node, ls_t, boots.node, boots.end, strict=True)
    open_ = ~closed
    by_boot = open_ & (fb2 >= 0)
    le[by_boot] = boots.end[fb2[by_boot]]
    boot_idx[by_boot] = fb2[by_boot]
    assoc |= by_boot
    still_open = open_ & ~by_boot
    silent = np.zeros(ls_t.size, bool)
    if ls_t.size:
        cand = still_open & ~assoc
        silent[cand] = last_seen[ls_node[cand]] <= ls_t[cand]
    le[still_open] = np.maximum(t_end, ls_t[still_open])
    state = np.where(assoc | silent, State.DOWN, State.CONNECTION_LOSS).astype(np.int8)
    src = np.full(ls_t.size, Source.LOSS, np.int8)
    src[assoc] = Source.LOSS_BOOT
    src[silent] = Source.LOSS_SILENT
    src[still_open & ~assoc & ~silent] = Source.LOSS_OPEN
    tail = np.where(has_split, le - split_at, 0)
    long_tail = has_split & (tail > p.grace_s * NS_PER_S)
    counts.update(
        losses=int(ls_t.size),
        losses_down_boot=int(assoc.sum()),
        losses_down_silent=int(silent.sum()),
        losses_open=int(still_open.sum()),
        losses_tail_connection_loss=int(long_tail.sum()),
    )
    table = Losses(ls_node.astype(np.int64), ls_t.astype(np.int64), le.copy(), still_open, state, src, responding, boot_idx)
    tail_start, tail_end = split_at[long_tail], le[long_tail]
    le = np.where(has_split, split_at, le)
    k = int(long_tail.sum())
    node = np.concatenate([ls_node, ls_node[long_tail]]).astype(np.int64)
    return (
        _Intervals(
            node,
            np.concatenate([ls_t, tail_start]).astype(np.int64),
            np.concatenate([le, tail_end]),
            np.concatenate([state, np.full(k, State.CONNECTION_LOSS, np.int8)]),
            np.concatenate([src, np.full(k, Source.LOSS, np.int8)]),
            np.full(node.size, -1, np.int64),
        ),
        counts,
        table,
    )


def loss_table(
    events: Events, n_nodes: int, t_end: int, last_seen: np.ndarray | None = None, params: Params | None = None
) -> tuple[Losses, Boots]:
    """The connection losses and boots behind :func:`derive_states` (same semantics, unclipped).

    Paper Sec. II-C / Fig. 2: each loss runs from the first "not responding" to the closing "now
    responding", or to the end of the boot that resolves it, or (still open) to ``max(t_end, start)``.
    Used to carry open losses across day-by-day builds and to write failure-event evidence.
    """
    p = params or Params()
    if last_seen is None:
        last_seen = np.full(n_nodes, np.iinfo(np.int64).min, np.int64)
    boots, _ = _boots(events, p, t_end)
    _, _, table = _losses(events, boots, last_seen, p, t_end)
    return table, Boots(boots.node, boots.start, boots.end, boots.source)


def losses_active_at(losses: Losses, at: int) -> np.ndarray:
    """Indices of the losses in effect at instant ``at``: started before it and not closed by then.

    A loss still open at the end of the data counts as in effect at ``at`` if it started before it.
    """
    act = (losses.start < at) & ((losses.end > at) | losses.open)
    return np.nonzero(act)[0]


# ------------------------------------------------------------------ pass 2: layers -> resolved timeline
def _layer_intervals(ev: Events, layers: Layers, last_seen: np.ndarray, p: Params, t_end: int) -> tuple[_Intervals, dict]:
    boots, c1 = _boots(ev, p, t_end)
    losses, c2, _ = _losses(ev, boots, last_seen, p, t_end)
    jobs = _Intervals(
        np.asarray(layers.job_node, np.int64),
        np.asarray(layers.job_start, np.int64),
        np.asarray(layers.job_end, np.int64),
        np.full(len(layers.job_node), State.JOB_RUNNING, np.int8),
        np.full(len(layers.job_node), Source.JOB, np.int8),
        np.asarray(layers.job_ref, np.int64),
    )
    resv = _Intervals(
        np.asarray(layers.resv_node, np.int64),
        np.asarray(layers.resv_start, np.int64),
        np.asarray(layers.resv_end, np.int64),
        np.asarray(layers.resv_state, np.int8),
        np.full(len(layers.resv_node), Source.RESERVATION, np.int8),
        np.asarray(layers.resv_ref, np.int64),
    )
    cat = _Intervals(
        *(
            np.concatenate([getattr(x, f) for x in (losses, boots, jobs, resv)])
            for f in ("node", "start", "end", "state", "source", "ref")
        )
    )
    return cat, {**c1, **c2}


def derive_states(
    events: Events,
    layers: Layers,
    n_nodes: int,
    t_start: int,
    t_end: int,
    last_seen: np.ndarray | None = None,
    overlay: bool = True,
    params: Params | None = None,
) -> Timeline:
    """Vectorised SaNSA state derivation (paper Sec. II-B states, Sec. II-C priorities and overlays).

    Args:
        events: classified syslog events (node indices in ``[0, n_nodes)``).
        layers: job allocations and reservations.
        n_nodes: number of nodes; every node gets a timeline tiling ``[t_start, t_end)``.
        t_start, t_end: observation window, int64 ns.
        last_seen: per node, time of its last syslog line (ns); an unresolved loss of a node silent
            after the loss began is DOWN. ``None``: every node counts as silent.
        overlay: apply ADMIN_RESV / UNSCHEDULED_RESV overlays (Table II "w/ overlay").
        params: tunables.

    Returns:
        :class:`Timeline` sorted by (node, start), with ``counts`` of merged/ignored evidence.
    """
    p = params or Params()
    if last_seen is None:
        last_seen = np.full(n_nodes, np.iinfo(np.int64).min, np.int64)
    iv, counts = _layer_intervals(events, layers, last_seen, p, t_end)
    keep = (iv.end > t_start) & (iv.start < t_end) & (iv.end > iv.start)
    counts["intervals_outside_window_or_empty"] = int((~keep).sum())
    if not overlay:
        shadow = np.isin(iv.state, [int(s) for s in OVERLAY_STATES])
        counts["overlay_intervals_left_out"] = int((keep & shadow).sum())
        keep &= ~shadow
    node, s, e = iv.node[keep], np.clip(iv.start[keep], t_start, t_end), np.clip(iv.end[keep], t_start, t_end)
    st, src, ref = iv.state[keep], iv.source[keep], iv.ref[keep]
    n = node.size
    # boundary points: every node's window ends plus every interval start/end
    all_nodes = np.arange(n_nodes, dtype=np.int64)
    pn = np.concatenate([all_nodes, all_nodes, node, node])
    pt = np.concatenate([np.full(n_nodes, t_start, np.int64), np.full(n_nodes, t_end, np.int64), s, e])
    span = int(t_end) - int(t_start) + 1
    if n_nodes * span < 2**62:  # one int64 key (node, time): a sort + searchsorted instead of a lexsort
        key = pn * span + (pt - t_start)
        order = np.argsort(key)
        sk = key[order]
        new = np.concatenate([[True], sk[1:] != sk[:-1]])
        uniq = sk[new]
        rank = np.empty(key.size, np.int64)
        rank[order] = np.cumsum(new) - 1
        P = int(uniq.size)
        pnode, ptime = uniq // span, uniq % span + t_start
    else:
        order = np.lexsort((pt, pn))
        spn, spt = pn[order], pt[order]
        new = np.ones(spn.size, bool)
        new[1:] = (spn[1:] != spn[:-1]) | (spt[1:] != spt[:-1])
        rank_sorted = np.cumsum(new) - 1
        rank = np.empty_like(rank_sorted)
        rank[order] = rank_sorted
        P = int(rank_sorted[-1]) + 1
        pnode, ptime = spn[new], spt[new]
    off = 2 * n_nodes
    r_start, r_end = rank[off : off + n], rank[off + n :]
    # priority resolution: max over layers (later layers overwrite)
    state = np.full(P, State.IDLE, np.int8)
    source = np.full(P, Source.GAP, np.int8)
    sref = np.full(P, -1, np.int64)
    overlap_key = {
        State.JOB_RUNNING: "overlapping_jobs",
        State.RESERVED_IDLE: "overlapping_reservations",
        State.ADMIN_RESV: "overlapping_reservations",
        State.UNSCHEDULED_RESV: "overlapping_reservations",
        State.CONNECTION_LOSS: "overlapping_losses_boots",
        State.DOWN: "overlapping_losses_boots",
        State.BOOTING: "overlapping_losses_boots",
    }
    for k in set(overlap_key.values()):
        counts[k] = 0
    # evidence packs (end rank, ref, source) into one int64 so "the covering interval reaching furthest"
    # is a prefix maximum over points (no per-layer sort); ties on end go to the larger (ref, source)
    ref_off = int(ref.min(initial=0))
    ref_bits = max(1, int(ref.max(initial=0) - ref_off).bit_length())
    if P.bit_length() + ref_bits + 4 > 62:
        raise ValueError("too many boundary points or too large refs to pack evidence into int64")
    for lay in PRIORITY[1:]:
        m = st == lay
        if not m.any():
            continue
        rs, re_ = r_start[m], r_end[m]
        n_start = np.bincount(rs, minlength=P + 1)[:P]
        cov = np.cumsum(n_start - np.bincount(re_, minlength=P + 1)[:P])
        # started while another interval of the same layer was active (e.g. two reservations of one class)
        counts[overlap_key[State(lay)]] += int((cov[rs] > 1).sum())
        packed = (re_ << (ref_bits + 4)) | ((ref[m] - ref_off) << 4) | src[m].astype(np.int64)
        best = np.full(P, -1, np.int64)
        np.maximum.at(best, rs, packed)
        best = np.maximum.accumulate(best)
        pts = np.nonzero(cov > 0)[0]
        h = best[pts]
        state[pts] = lay
        source[pts] = (h & 15).astype(np.int8)
        sref[pts] = ((h >> 4) & ((1 << ref_bits) - 1)) + ref_off
    # drop each node's final point (t_end), merge equal neighbours
    last = np.ones(P, bool)
    last[:-1] = pnode[1:] != pnode[:-1]
    seg = ~last
    segn, segs, segst, segsrc, segref = pnode[seg], ptime[seg], state[seg], source[seg], sref[seg]
    sege = ptime[np.nonzero(seg)[0] + 1]
    startm = np.ones(segn.size, bool)
    startm[1:] = (segn[1:] != segn[:-1]) | (segst[1:] != segst[:-1]) | (segsrc[1:] != segsrc[:-1]) | (segref[1:] != segref[:-1])
    idx = np.nonzero(startm)[0]
    ends_idx = np.append(idx[1:], segn.size) - 1
    return Timeline(segn[idx], segs[idx], sege[ends_idx], segst[idx], segsrc[idx], segref[idx], counts)
