"""Event-driven batch scheduler replay with node co-allocation (Frank, ch. 2, §2.1.1 and §2.2.4).

One event loop (:func:`replay_kernel`) for every setup of Fig. 2.8: FCFS with EASY backfill
(``alg=0``, one reservation for the highest-priority pending job, [56][57]) or First-fit (``alg=1``:
every pending job that fits starts, in priority order), on ``n_nodes`` identical nodes, with exclusive
nodes or co-allocation (COA) restricted by ``allowed[a, b]`` (naive: all pairs; no twins: ``a != b``).

Model (§2.2.4): a job needs ``nodes[j]`` whole nodes. Under COA a node has two hyper-thread sides; a
job either starts alone on free nodes (a *group* of nodes, full speed) or joins a running group with
one member, the same node count and an allowed pair ("jobs share all of their nodes or none", "as long
as ranks are equal", Fig. 2.5). Paired, job ``j`` next to class ``b`` progresses at ``1 / S[j, b]``
(the slowdown of Table 2.1); alone, at full speed again (the thesis: "the already running job will keep
using its cores exclusively (full performance) until a suitable job is found"). A group frees its
nodes when both sides are empty. Pending jobs prefer joining a group to taking free nodes (the
allowed open group created first). Completions at the same instant are handled in job order.

Accounting (§2.2.5): a job uses all ``nodes · C`` cores while alone and half of them while paired, so
``core_s[j]`` integrates ``t_i · c_i`` piecewise.

EASY backfill with rate changes: the reservation of the blocked head job is computed from the
*predicted* end of every group (remaining estimated work ``est - done`` at the current rates). A later
job may start on free nodes if it is predicted to end by the shadow time or fits in the extra nodes;
it may join a group if that group was not counted for the reservation (predicted end after the shadow
time) or still ends by the shadow time with the slowdowns the pairing causes.

The kernel is plain Python over numpy arrays, compiled by numba when available (:func:`replay`);
``replay(..., compiled=False)`` runs the very same code in the interpreter (the benchmark's baseline).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

EASY = 0
FIRST_FIT = 1
ALGORITHMS = {"backfill": EASY, "firstfit": FIRST_FIT}
"""Scheduling algorithms by CLI name."""


def replay_kernel(submit, work, est, nodes, app, slow, allowed, alg, n_nodes, cores):  # noqa: ANN001, ANN201, C901, PLR0912, PLR0915
    """Replay jobs (sorted by submit time = priority) and return ``(start, end, core_s, shared_s)``.

    Args: ``submit``/``work``/``est`` float64 seconds (``est >= work``: the estimate backfill sees),
    ``nodes``/``app`` int64, ``slow`` float64 ``(jobs, classes)``, ``allowed`` bool ``(classes, classes)``,
    ``alg`` 0 EASY / 1 First-fit, ``n_nodes`` and ``cores`` (per node) ints. Every job must fit the machine.
    """
    nj = submit.shape[0]
    na = allowed.shape[0]
    coa = False
    for a in range(na):
        for b in range(na):
            if allowed[a, b]:
                coa = True
    start = np.full(nj, np.nan)
    end = np.full(nj, np.nan)
    core_s = np.zeros(nj)
    shared_s = np.zeros(nj)
    rate = np.ones(nj)
    done = np.zeros(nj)
    last = np.zeros(nj)
    group = np.full(nj, -1, dtype=np.int64)
    ver = np.zeros(nj, dtype=np.int64)
    state = np.zeros(nj, dtype=np.int64)  # 0 not arrived, 1 queued, 2 running, 3 done
    g_k = np.zeros(nj, dtype=np.int64)
    g_m0 = np.full(nj, -1, dtype=np.int64)
    g_m1 = np.full(nj, -1, dtype=np.int64)
    open_list = np.full(nj, -1, dtype=np.int64)
    open_pos = np.full(nj, -1, dtype=np.int64)
    alive_list = np.full(nj, -1, dtype=np.int64)
    alive_pos = np.full(nj, -1, dtype=np.int64)
    cnt = np.zeros((n_nodes + 1, na), dtype=np.int64)  # open groups by node count and member class
    # scalar state in one array: 0 free nodes, 1 open groups, 2 alive groups, 3 groups made
    sc = np.zeros(4, dtype=np.int64)
    sc[0] = n_nodes
    queue = np.empty(nj, dtype=np.int64)
    qn = 0
    heap = [(0.0, 0, 0)]
    heap.pop()
    g_end = np.empty(nj)
    g_ids = np.empty(nj, dtype=np.int64)

    def member_of(g):  # noqa: ANN001, ANN202 - the single member of an open group
        return g_m0[g] if g_m0[g] >= 0 else g_m1[g]

    def advance(j, now):  # noqa: ANN001, ANN202
        dt = now - last[j]
        if dt > 0.0:
            g = group[j]
            paired = g_m0[g] >= 0 and g_m1[g] >= 0
            done[j] += dt * rate[j]
            core_s[j] += dt * nodes[j] * cores * (0.5 if paired else 1.0)
            if paired:
                shared_s[j] += dt
        last[j] = now

    def schedule(j, now):  # noqa: ANN001, ANN202
        rem = work[j] - done[j]
        if rem < 0.0:
            rem = 0.0
        ver[j] += 1
        heapq.heappush(heap, (now + rem / rate[j], j, ver[j]))

    def predicted_end(j, now):  # noqa: ANN001, ANN202
        rem = est[j] - done[j] - (now - last[j]) * rate[j]
        if rem < 0.0:
            rem = 0.0
        return now + rem / rate[j]

    def open_add(g):  # noqa: ANN001, ANN202
        open_pos[g] = sc[1]
        open_list[sc[1]] = g
        sc[1] += 1
        cnt[g_k[g], app[member_of(g)]] += 1

    def open_remove(g):  # noqa: ANN001, ANN202
        cnt[g_k[g], app[member_of(g)]] -= 1
        p = open_pos[g]
        sc[1] -= 1
        last_g = open_list[sc[1]]
        open_list[p] = last_g
        open_pos[last_g] = p
        open_pos[g] = -1

    def find_group(j):  # noqa: ANN001, ANN202
        if not coa or sc[1] == 0:
            return -1
        k = nodes[j]
        any_ok = False
        for b in range(na):
            if allowed[app[j], b] and cnt[k, b] > 0:
                any_ok = True
                break
        if not any_ok:
            return -1
        best = -1
        for i in range(sc[1]):
            g = open_list[i]
            if g_k[g] == k and allowed[app[j], app[member_of(g)]] and (best < 0 or g < best):
                best = g
        return best

    def start_alone(j, now):  # noqa: ANN001, ANN202
        g = sc[3]
        sc[3] += 1
        g_k[g] = nodes[j]
        g_m0[g] = j
        sc[0] -= nodes[j]
        alive_pos[g] = sc[2]
        alive_list[sc[2]] = g
        sc[2] += 1
        group[j] = g
        state[j] = 2
        start[j] = now
        last[j] = now
        rate[j] = 1.0
        if coa:
            open_add(g)
        schedule(j, now)

    def join(j, g, now):  # noqa: ANN001, ANN202
        m = member_of(g)
        open_remove(g)
        advance(m, now)
        if g_m0[g] < 0:
            g_m0[g] = j
        else:
            g_m1[g] = j
        group[j] = g
        state[j] = 2
        start[j] = now
        last[j] = now
        rate[m] = 1.0 / slow[m, app[j]]
        rate[j] = 1.0 / slow[j, app[m]]
        schedule(m, now)
        schedule(j, now)

    def finish(j, now):  # noqa: ANN001, ANN202
        advance(j, now)
        end[j] = now
        state[j] = 3
        g = group[j]
        other = g_m1[g] if g_m0[g] == j else g_m0[g]
        if other >= 0:
            advance(other, now)
            if g_m0[g] == j:
                g_m0[g] = -1
            else:
                g_m1[g] = -1
            rate[other] = 1.0
            schedule(other, now)
            if coa:
                open_add(g)
        else:
            if coa:
                open_remove(g)
            g_m0[g] = -1
            g_m1[g] = -1
            p = alive_pos[g]
            sc[2] -= 1
            last_g = alive_list[sc[2]]
            alive_list[p] = last_g
            alive_pos[last_g] = p
            alive_pos[g] = -1
            sc[0] += g_k[g]

    def try_start(j, now):  # noqa: ANN001, ANN202
        g = find_group(j)
        if g >= 0:
            join(j, g, now)
            return True
        if nodes[j] <= sc[0]:
            start_alone(j, now)
            return True
        return False

    def group_end(g, now):  # noqa: ANN001, ANN202
        e = -math.inf
        if g_m0[g] >= 0:
            e = max(e, predicted_end(g_m0[g], now))
        if g_m1[g] >= 0:
            e = max(e, predicted_end(g_m1[g], now))
        return e

    ai = 0
    while True:
        while len(heap) > 0 and (state[heap[0][1]] != 2 or heap[0][2] != ver[heap[0][1]]):
            heapq.heappop(heap)  # stale completion
        now = math.inf
        if ai < nj:
            now = submit[ai]
        if len(heap) > 0 and heap[0][0] < now:
            now = heap[0][0]
        if now == math.inf:
            break
        while len(heap) > 0 and heap[0][0] <= now:
            t, j, v = heapq.heappop(heap)
            if state[j] == 2 and v == ver[j]:
                finish(j, now)
        while ai < nj and submit[ai] <= now:
            state[ai] = 1
            queue[qn] = ai
            qn += 1
            ai += 1
        # ---- scheduling pass
        i = 0
        while i < qn and try_start(queue[i], now):
            i += 1
        if i < qn and (sc[0] > 0 or sc[1] > 0):
            if alg == 1:
                for r in range(i + 1, qn):
                    if sc[0] == 0 and sc[1] == 0:
                        break
                    try_start(queue[r], now)
            else:
                head = queue[i]
                need = nodes[head]
                ng = sc[2]
                for x in range(ng):
                    g_ids[x] = alive_list[x]
                    g_end[x] = group_end(alive_list[x], now)
                order = np.argsort(g_end[:ng], kind="mergesort")
                avail = sc[0]
                shadow = math.inf
                extra = 0
                for x in range(ng):
                    g = g_ids[order[x]]
                    avail += g_k[g]
                    if avail >= need:
                        shadow = g_end[order[x]]
                        for y in range(x + 1, ng):  # every group ending at the shadow time frees its nodes then
                            if g_end[order[y]] == shadow:
                                avail += g_k[g_ids[order[y]]]
                        extra = avail - need
                        break
                for r in range(i + 1, qn):
                    if sc[0] == 0 and sc[1] == 0:
                        break
                    j = queue[r]
                    g = find_group(j)
                    if g >= 0:
                        m = member_of(g)
                        old_end = predicted_end(m, now)
                        rem_m = est[m] - done[m] - (now - last[m]) * rate[m]
                        if rem_m < 0.0:
                            rem_m = 0.0
                        new_end = max(now + rem_m * slow[m, app[j]], now + est[j] * slow[j, app[m]])
                        if old_end > shadow or new_end <= shadow:
                            join(j, g, now)
                            continue
                    if nodes[j] <= sc[0]:
                        if now + est[j] <= shadow:
                            start_alone(j, now)
                        elif nodes[j] <= extra:
                            start_alone(j, now)
                            extra -= nodes[j]
        w = 0
        for r in range(qn):
            if state[queue[r]] == 1:
                queue[w] = queue[r]
                w += 1
        qn = w
    return start, end, core_s, shared_s


_COMPILED = None


def _compiled():  # noqa: ANN202
    global _COMPILED
    if _COMPILED is None:
        import numba

        _COMPILED = numba.njit(cache=True)(replay_kernel)
    return _COMPILED


@dataclass(frozen=True)
class Schedule:
    """Per-job result of a replay (seconds from the trace's time origin)."""

    start: np.ndarray
    end: np.ndarray
    core_s: np.ndarray
    """Core seconds used: ``nodes · C`` while alone, half of it while paired (§2.2.5)."""
    shared_s: np.ndarray
    """Seconds spent paired with another job."""


def replay(submit: np.ndarray, work: np.ndarray, est: np.ndarray, nodes: np.ndarray, app: np.ndarray,
           slow: np.ndarray, allowed: np.ndarray, algorithm: str, n_nodes: int, cores: int,
           compiled: bool = True) -> Schedule:
    """Run :func:`replay_kernel` (numba-compiled unless ``compiled=False``) after checking the inputs.

    Jobs are replayed in the order given; ``submit`` must be non-decreasing (priority = that order).

    Raises:
        ValueError: mismatched lengths, unsorted submits, a job larger than the machine, negative or
            non-finite work, an estimate below the work, or an unknown algorithm.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    submit = np.ascontiguousarray(submit, dtype=np.float64)
    work = np.ascontiguousarray(work, dtype=np.float64)
    est = np.ascontiguousarray(est, dtype=np.float64)
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    app = np.ascontiguousarray(app, dtype=np.int64)
    slow = np.ascontiguousarray(slow, dtype=np.float64)
    allowed = np.ascontiguousarray(allowed, dtype=np.bool_)
    n = submit.size
    if not (work.size == est.size == nodes.size == app.size == n and slow.shape[0] == n):
        raise ValueError("submit, work, est, nodes, app and slow must describe the same jobs")
    if n and np.any(np.diff(submit) < 0):
        raise ValueError("jobs must be sorted by submit time")
    if n and (not np.all(np.isfinite(work)) or work.min() < 0 or np.any(est < work) or not np.all(np.isfinite(submit))):
        raise ValueError("work must be finite and >= 0, est >= work, submit finite")
    if n and (nodes.min() < 1 or nodes.max() > n_nodes):
        raise ValueError(f"every job needs 1..{n_nodes} nodes")
    if n and (app.min() < 0 or app.max() >= allowed.shape[0] or slow.shape[1] != allowed.shape[0]):
        raise ValueError("application classes out of range")
    if n and not np.all(slow > 0):
        raise ValueError("slowdowns must be > 0")
    fn = _compiled() if compiled else replay_kernel
    s, e, c, sh = fn(submit, work, est, nodes, app, slow, allowed, ALGORITHMS[algorithm], int(n_nodes), int(cores))
    return Schedule(s, e, c, sh)
