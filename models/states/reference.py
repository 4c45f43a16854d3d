"""Reference SaNSA state derivation: a per-event Python state machine (Agarwal et al., "SaNSA", Sec. II-B/II-C).

:func:`derive_states_reference` walks every node's events one at a time with the semantics of the
vectorised :func:`nodewatch.models.states.machine.derive_states`; it is the oracle in tests and the
baseline in ``benchmarks/states.py``.
"""

from __future__ import annotations

import numpy as np

from nodewatch.models.states.timeline import NS_PER_S, PRIORITY, Event, Events, Layers, Params, Source, State, Timeline


# ------------------------------------------------------------------ baseline: per-event Python state machine
def derive_states_reference(
    events: Events,
    layers: Layers,
    n_nodes: int,
    t_start: int,
    t_end: int,
    last_seen: np.ndarray | None = None,
    overlay: bool = True,
    params: Params | None = None,
) -> Timeline:
    """Straightforward per-event Python state machine with the semantics of :func:`derive_states`.

    Same paper sections (II-B, II-C). Walks every node's events one at a time; used as the test
    oracle and as the benchmark baseline.
    """
    p = params or Params()
    big = np.iinfo(np.int64).max
    ev_by_node: dict[int, list[tuple[int, int, int]]] = {}
    for nd, t, k, d in zip(
        events.node.tolist(), events.time.tolist(), events.kind.tolist(), events.duration.tolist(), strict=True
    ):
        ev_by_node.setdefault(nd, []).append((t, k, d))
    iv_by_node: dict[int, list[tuple[int, int, int, int, int]]] = {n: [] for n in range(n_nodes)}
    for n, evs in ev_by_node.items():
        evs.sort(key=lambda x: (x[0], x[1]))
        # boots
        boots: list[tuple[int, int, int]] = []  # (start, end, source)
        banners: list[int] = []
        sfs = [(t, d) for t, k, d in evs if k == Event.STARTUP_FINISHED]
        nows = [t for t, k, _ in evs if k == Event.NOW_RESPONDING]
        for t, d in sfs:
            boots.append((t - d, t, int(Source.BOOT_SYSTEMD)))
        last_b = None
        for t, k, _ in evs:
            if k == Event.KERNEL_BOOT:
                if last_b is None or t - last_b > p.banner_merge_s * NS_PER_S:
                    banners.append(t)
                last_b = t
        for b in banners:
            nxt = next((t for t, _ in sfs if t >= b), None)
            if nxt is not None and nxt - b <= p.max_boot_s * NS_PER_S:
                continue
            end = b + p.max_boot_s * NS_PER_S
            nn = next((t for t in nows if t > b), None)
            if nn is not None:
                end = min(end, nn)
            boots.append((b, end, int(Source.BOOT_KERNEL)))
        boots.sort(key=lambda x: (x[1], x[0]))
        # losses: state machine over slurmctld events
        in_loss, ls = False, 0
        losses: list[tuple[int, int | None]] = []
        for t, k, _ in evs:
            if k == Event.NOT_RESPONDING and not in_loss:
                in_loss, ls = True, t
            elif k == Event.NOW_RESPONDING and in_loss:
                losses.append((ls, t))
                in_loss = False
        if in_loss:
            losses.append((ls, None))
        for ls, le in losses:
            src = int(Source.LOSS)
            fb = next((b for b in boots if b[1] >= ls - p.pre_s * NS_PER_S), None)
            down = fb is not None and fb[0] <= (le if le is not None else big - p.grace_s * NS_PER_S) + p.grace_s * NS_PER_S
            if le is not None and down:
                before = [b for b in boots if b[1] <= le + p.grace_s * NS_PER_S]
                if before and before[-1][1] > ls:
                    cut = min(le, before[-1][1])
                    if le - cut > p.grace_s * NS_PER_S:
                        iv_by_node[n].append((cut, le, int(State.CONNECTION_LOSS), int(Source.LOSS), -1))
                    le = cut
            if le is None:
                fb2 = next((b for b in boots if b[1] > ls), None)
                if fb2 is not None:
                    le, down = fb2[1], True
                else:
                    le = max(t_end, ls)
                    seen = last_seen[n] if last_seen is not None else np.iinfo(np.int64).min
                    if not down and seen <= ls:
                        src = int(Source.LOSS_SILENT)
                        down = True
                    elif not down:
                        src = int(Source.LOSS_OPEN)
            if down and src == int(Source.LOSS):
                src = int(Source.LOSS_BOOT)
            iv_by_node[n].append((ls, le, int(State.DOWN if down else State.CONNECTION_LOSS), src, -1))
        for b in boots:
            iv_by_node[n].append((b[0], b[1], int(State.BOOTING), b[2], -1))
    for nd, s, e, r in zip(
        layers.job_node.tolist(), layers.job_start.tolist(), layers.job_end.tolist(), layers.job_ref.tolist(), strict=True
    ):
        iv_by_node[nd].append((s, e, int(State.JOB_RUNNING), int(Source.JOB), r))
    for nd, s, e, st, r in zip(
        layers.resv_node.tolist(),
        layers.resv_start.tolist(),
        layers.resv_end.tolist(),
        layers.resv_state.tolist(),
        layers.resv_ref.tolist(),
        strict=True,
    ):
        iv_by_node[nd].append((s, e, int(st), int(Source.RESERVATION), r))
    prio = {int(s): i for i, s in enumerate(PRIORITY)}
    out: list[tuple[int, int, int, int, int, int]] = []
    for n in range(n_nodes):
        ivs = []
        for s, e, st, src, r in iv_by_node[n]:
            if not overlay and st in (State.ADMIN_RESV, State.UNSCHEDULED_RESV):
                continue
            s, e = max(s, t_start), min(e, t_end)
            if e > s:
                ivs.append((s, e, st, src, r))
        points = sorted({t_start, t_end, *(x[0] for x in ivs), *(x[1] for x in ivs)})
        # sweep: at each point pick the highest-priority active interval; evidence = the active
        # interval of that state reaching furthest (ties: larger ref, then larger source)
        ivs.sort(key=lambda x: (x[0], x[1], x[4], x[3]))
        active: list[tuple[int, int, int, int, int, int]] = []
        j = 0
        cur = None
        for a, bnd in zip(points[:-1], points[1:], strict=True):
            while j < len(ivs) and ivs[j][0] <= a:
                active.append((*ivs[j], j))
                j += 1
            active = [x for x in active if x[1] > a]
            if active:
                top = max(prio[x[2]] for x in active)
                cand = [x for x in active if prio[x[2]] == top]
                win = max(cand, key=lambda x: (x[1], x[4], x[3]))
                key = (win[2], win[3], win[4])
            else:
                key = (int(State.IDLE), int(Source.GAP), -1)
            if cur is not None and tuple(cur[3:]) == key:
                cur[2] = bnd
            else:
                if cur is not None:
                    out.append(tuple(cur))
                cur = [n, a, bnd, *key]
        if cur is not None:
            out.append(tuple(cur))
    arr = np.array(out, dtype=np.int64).reshape(-1, 6)
    return Timeline(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3].astype(np.int8), arr[:, 4].astype(np.int8), arr[:, 5])
