"""A second, deliberately plain implementation of the replay model of :mod:`nodewatch.models.coalloc.engine`.

Objects per job and per node group, Python lists, no heap and no index structures: every step scans
the running jobs for the next completion and the open groups for a partner. It is the baseline of
``benchmarks/coalloc_replay.py`` and the cross-check of the tests: written from the model description
(Frank ch. 2, §2.1.1 EASY backfill / First-fit, §2.2.4 co-allocation, §2.2.5 accounting), not from the
kernel's code, it must give the same schedule. The arithmetic of progress, completion and predicted end
times uses the same formulas (so results are compared exactly):

* progress over ``dt``: ``done += dt · rate``; core seconds ``dt · nodes · C · (0.5 if paired else 1)``;
* completion: ``now + max(work - done, 0) / rate``, recomputed whenever the rate changes;
* predicted end for backfill: ``now + max(est - done - (now - last) · rate, 0) / rate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class _Job:
    i: int
    submit: float
    work: float
    est: float
    nodes: int
    app: int
    start: float = math.nan
    end: float = math.nan
    done: float = 0.0
    last: float = 0.0
    rate: float = 1.0
    t_end: float = math.inf
    core_s: float = 0.0
    shared_s: float = 0.0
    group: _Group | None = None


@dataclass
class _Group:
    gid: int
    nodes: int
    members: list[_Job] = field(default_factory=list)


def replay_reference(submit: np.ndarray, work: np.ndarray, est: np.ndarray, nodes: np.ndarray, app: np.ndarray,
                     slow: np.ndarray, allowed: np.ndarray, algorithm: str, n_nodes: int,
                     cores: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Same inputs and outputs as :func:`nodewatch.models.coalloc.engine.replay` (``start, end, core_s, shared_s``)."""
    jobs = [_Job(i, float(submit[i]), float(work[i]), float(est[i]), int(nodes[i]), int(app[i])) for i in range(len(submit))]
    coa = bool(np.asarray(allowed).any())
    free = n_nodes
    groups: list[_Group] = []  # alive groups
    next_gid = 0
    running: list[_Job] = []
    queue: list[_Job] = []
    arrived = 0

    def paired(j: _Job) -> bool:
        return j.group is not None and len(j.group.members) == 2

    def advance(j: _Job, now: float) -> None:
        dt = now - j.last
        if dt > 0.0:
            both = paired(j)
            j.done += dt * j.rate
            j.core_s += dt * j.nodes * cores * (0.5 if both else 1.0)
            if both:
                j.shared_s += dt
        j.last = now

    def set_rate(j: _Job, rate: float, now: float) -> None:
        j.rate = rate
        j.t_end = now + max(j.work - j.done, 0.0) / j.rate

    def predicted_end(j: _Job, now: float) -> float:
        return now + max(j.est - j.done - (now - j.last) * j.rate, 0.0) / j.rate

    def partner_group(j: _Job) -> _Group | None:
        if not coa:
            return None
        cands = [g for g in groups if len(g.members) == 1 and g.nodes == j.nodes and allowed[j.app, g.members[0].app]]
        return min(cands, key=lambda g: g.gid) if cands else None

    def open_groups() -> int:
        return sum(1 for g in groups if len(g.members) == 1) if coa else 0

    def start_alone(j: _Job, now: float) -> None:
        nonlocal free, next_gid
        g = _Group(next_gid, j.nodes, [j])
        next_gid += 1
        groups.append(g)
        free -= j.nodes
        j.group, j.start, j.last = g, now, now
        set_rate(j, 1.0, now)
        running.append(j)

    def join(j: _Job, g: _Group, now: float) -> None:
        m = g.members[0]
        advance(m, now)
        g.members.append(j)
        j.group, j.start, j.last = g, now, now
        set_rate(m, 1.0 / slow[m.i, j.app], now)
        set_rate(j, 1.0 / slow[j.i, m.app], now)
        running.append(j)

    def try_start(j: _Job, now: float) -> bool:
        g = partner_group(j)
        if g is not None:
            join(j, g, now)
            return True
        if j.nodes <= free:
            start_alone(j, now)
            return True
        return False

    while True:
        cands = [j.t_end for j in running]
        if arrived < len(jobs):
            cands.append(jobs[arrived].submit)
        if not cands:
            break
        now = min(cands)
        while True:  # completions at `now`, in job order
            due = [j for j in running if j.t_end <= now]
            if not due:
                break
            j = min(due, key=lambda x: (x.t_end, x.i))
            advance(j, now)
            j.end = now
            running.remove(j)
            g = j.group
            assert g is not None
            for other in g.members:  # the partner's time up to now was paired time
                if other is not j:
                    advance(other, now)
            g.members.remove(j)
            if g.members:
                set_rate(g.members[0], 1.0, now)
            else:
                groups.remove(g)
                free += g.nodes
        while arrived < len(jobs) and jobs[arrived].submit <= now:
            queue.append(jobs[arrived])
            arrived += 1
        # scheduling pass
        started: set[int] = set()
        i = 0
        while i < len(queue) and try_start(queue[i], now):
            started.add(queue[i].i)
            i += 1
        if i < len(queue) and (free > 0 or open_groups() > 0):
            if algorithm == "firstfit":
                for j in queue[i + 1:]:
                    if free == 0 and open_groups() == 0:
                        break
                    if try_start(j, now):
                        started.add(j.i)
            else:
                head = queue[i]
                ends = sorted((max(predicted_end(m, now) for m in g.members), g.nodes) for g in groups)
                shadow, extra = math.inf, 0
                for e, _k in ends:
                    if free + sum(k2 for e2, k2 in ends if e2 <= e) >= head.nodes:
                        shadow = e  # every group predicted to end by then frees its nodes
                        extra = free + sum(k2 for e2, k2 in ends if e2 <= e) - head.nodes
                        break
                for j in queue[i + 1:]:
                    if free == 0 and open_groups() == 0:
                        break
                    g = partner_group(j)
                    if g is not None:
                        m = g.members[0]
                        old_end = predicted_end(m, now)
                        rem_m = max(m.est - m.done - (now - m.last) * m.rate, 0.0)
                        new_end = max(now + rem_m * slow[m.i, j.app], now + j.est * slow[j.i, m.app])
                        if old_end > shadow or new_end <= shadow:
                            join(j, g, now)
                            started.add(j.i)
                            continue
                    if j.nodes <= free:
                        if now + j.est <= shadow:
                            start_alone(j, now)
                            started.add(j.i)
                        elif j.nodes <= extra:
                            start_alone(j, now)
                            started.add(j.i)
                            extra -= j.nodes
        queue = [j for j in queue if j.i not in started]
    return (np.array([j.start for j in jobs]), np.array([j.end for j in jobs]), np.array([j.core_s for j in jobs]),
            np.array([j.shared_s for j in jobs]))
