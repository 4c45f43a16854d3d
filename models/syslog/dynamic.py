"""Sliding SG windows and the dynamic vicinities of Ghiasvand & Ciorba (ISPDC 2019, §II-A2, §II-A4, §II-E).

* **Sliding window** (§II-E): "the SG parameter is dynamically calculated based on the number of Syslog entries
  received from a computing node during a fixed time window (e.g. 30 minutes) prior to the current (observation)
  moment". SG is counted in short bins (5 min) and the window is the sum of the last ``k`` bins, so an observation
  moment every bin sees the 30 minutes before it: :func:`sliding_sg` (Eq. S1: ``SG_t = sum_{j=t-k+1..t} b_j``).
* **Resource-allocation vicinity** (§II-A2): "all nodes that execute tasks of the same job are in the vicinity of
  each other"; dynamic, it changes as jobs start and end. :func:`allocation_labels` gives the job of every node
  at every observation moment, :func:`label_detect` runs the two-means relative-density threshold
  (:func:`nodewatch.models.syslog.vicinity.two_means_threshold`) inside every (moment, job) group.
* **Several window lengths** (§II-E, §V): the window is "fixed (e.g. 30 minutes)" and the paper plans "to dynamically
  adjust the interval of the sliding time window which calculates the SG parameter of each node" (§V, future work).
  :func:`multi_window_detect` runs the same vicinity threshold on the SG of several window lengths ``w_i`` (each
  with its own floor ``min_sg_i``) at the same observation moments and takes the union (Eq. S2:
  ``A_t(n) = OR_i [n abnormal in its vicinity for SG over the w_i before t]``): a short burst that the 30-min
  window dilutes below its floor stands out in a short one, a slow one still needs the long window.
* **Vicinity-wide events** (§II-A4, §III-D): "a failure in itself is observable on a particular node at a specific
  moment [...] even though, several nodes may fail due to the same reason"; the time-of-failure vicinity groups "all
  nodes that experience a failure within the same predefined time interval" (10 minutes), and on a shared cause "the
  results were accurate and reliable" when the group itself is the finding. Online, before any failure: when, in one
  vicinity, at least ``max(min_nodes, min_share * live nodes)`` nodes reach a window's floor (SG >= ``min_sg_i``)
  within the same interval, the vicinity departs *as a whole* (a power or cooling event of the rack, a row's
  maintenance): it is one vicinity-wide event, not that many node anomalies, and no node of it is abnormal at that
  moment (Eq. S3, :func:`vicinity_wide`; ``min_nodes`` = 3 and ``min_share`` = 0.25 are the product's rule for
  rack-wide outages, :func:`nodewatch.models.syslog.outages.external_events`). Without it a short window flags the
  top of a rack-wide burst: the two-means split falls inside the bursting majority (docs/syslog.md, fourth pass).
* **Vicinity-wide events of a job** (§II-A2 with Eq. S3): the same rule inside each (moment, job) group of the
  resource-allocation vicinity, :func:`label_wide`: a whole job's nodes bursting together (the job's own output,
  its I/O failing for all ranks) is one job-wide event, not one alarm per node.
* **Time-of-failure vicinity** (§II-A4): "all nodes that experience a failure within the same predefined time
  interval (10 minutes)" — known only after the failures, so the paper uses it offline (§III-D):
  :func:`failure_time_groups`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from nodewatch.models.syslog.vicinity import two_means_threshold


def line_counts(bins: np.ndarray) -> np.ndarray:
    """``bins`` as line counts (int64): a bin that is not a finite non-negative number (NaN, inf, negative: not a
    count of lines) is 0, a fractional one is rounded down; one bad bin never poisons the rest of its row."""
    b = np.asarray(bins)
    if b.dtype.kind in "iub":
        return np.maximum(b.astype(np.int64, copy=False), 0)
    f = np.asarray(b, np.float64)
    ok = np.isfinite(f) & (f > 0)
    return np.where(ok, np.floor(np.where(ok, f, 0.0)), 0.0).astype(np.int64)


def sliding_sg(bins: np.ndarray, k: int) -> np.ndarray:
    """Eq. S1: ``SG[:, t]`` = sum of bins ``t-k+1 .. t`` of each row (the first ``k-1`` moments see fewer bins;
    ``k`` longer than the row: every moment sees the whole row up to it). Bins pass :func:`line_counts` first."""
    b = line_counts(bins)
    k = max(int(k), 1)
    c = np.cumsum(b, axis=1, dtype=np.int64)
    out = c.copy()
    out[:, k:] = c[:, k:] - c[:, :-k]
    return out


def sliding_any(bins: np.ndarray, k: int) -> np.ndarray:
    """``True`` where any of the last ``k`` bins is ``True`` (a window that contains the event)."""
    return sliding_sg(np.asarray(bins, np.int64), k) > 0


def allocation_labels(node: np.ndarray, label: np.ndarray, start: np.ndarray, end: np.ndarray, n_nodes: int,
                      moments: np.ndarray) -> np.ndarray:
    """Label (job) of each node at each moment, ``-1`` when idle: shape ``(n_nodes, len(moments))``.

    ``node, label, start, end`` are one row per (allocated node, job) with ``start <= t < end``; ``moments`` sorted.
    Overlapping allocations of one node keep the later-starting job.
    """
    out = np.full((n_nodes, len(moments)), -1, np.int64)
    order = np.argsort(start, kind="stable")
    m = np.asarray(moments)
    for i in order.tolist():
        a = np.searchsorted(m, start[i], side="left")
        b = np.searchsorted(m, end[i], side="left")
        if b > a:
            out[node[i], a:b] = label[i]
    return out


def label_detect(sg: np.ndarray, labels: np.ndarray, factor: float, min_sg: float, min_size: int = 3,
                 chunk: int = 200_000) -> tuple[np.ndarray, np.ndarray]:
    """Two-means relative-density threshold inside every (moment, label) group of ``labels`` (nodes x moments).

    Label ``-1`` (idle) takes no part; groups with fewer than ``min_size`` nodes are not judged. Groups are padded
    into matrices by size class (powers of two) so that all groups are scored by a few vectorised calls.
    Returns ``(abnormal, score)`` shaped like ``sg``.
    """
    sg = np.asarray(sg)
    n, w = sg.shape
    flags = np.zeros((n, w), bool)
    score = np.zeros((n, w))
    node, mom = np.nonzero(labels >= 0)
    if len(node) == 0:
        return flags, score
    lab = labels[node, mom]
    order = np.lexsort((node, lab, mom))
    node, mom, lab = node[order], mom[order], lab[order]
    new = np.ones(len(node), bool)
    new[1:] = (mom[1:] != mom[:-1]) | (lab[1:] != lab[:-1])
    gid = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, len(node)))
    pos = np.arange(len(node)) - starts[gid]
    cls = np.ceil(np.log2(np.maximum(sizes, 1))).astype(np.int64)
    for c in np.unique(cls[sizes >= min_size]).tolist():
        groups = np.flatnonzero((cls == c) & (sizes >= min_size))
        width = int(sizes[groups].max())
        for g0 in range(0, len(groups), max(1, chunk // width)):
            gs = groups[g0:g0 + max(1, chunk // width)]
            row = np.full(len(sizes), -1, np.int64)
            row[gs] = np.arange(len(gs))
            sel = row[gid] >= 0
            r, p = row[gid[sel]], pos[sel]
            mat = np.zeros((len(gs), width))
            mat[r, p] = sg[node[sel], mom[sel]]
            ab, sc = two_means_threshold(mat, factor, min_sg)
            flags[node[sel], mom[sel]] = ab[r, p]
            score[node[sel], mom[sel]] = sc[r, p]
    return flags, score


def _departing(bins: np.ndarray, windows: list[tuple[int, float]], interval: int,
               known: np.ndarray | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per window ``(k, min_sg)`` of Eq. S3, two (nodes x moments) masks: the node's sliding SG (Eq. S1, ``k``
    bins) reached ``max(min_sg, 1)`` at one of the moments ``t - interval + 1 .. t``, and the node is live (SG > 0)
    at ``t``; both False where ``known`` (an explained burst counts neither as departing nor as live)."""
    b = np.asarray(bins)
    unknown = np.ones(b.shape, bool) if known is None else ~np.asarray(known, bool)
    for k, min_sg in windows:
        sg = sliding_sg(b, int(k))
        yield sliding_any((sg >= max(float(min_sg), 1.0)) & unknown, int(interval)) & unknown, (sg > 0) & unknown


def vicinity_wide(bins: np.ndarray, groups: list[np.ndarray], windows: list[tuple[int, float]], interval: int,
                  min_nodes: int = 3, min_share: float = 0.25, known: np.ndarray | None = None) -> np.ndarray:
    """Eq. S3: vicinity-moments in which the vicinity departs as a whole (module doc), shape ``(len(groups), moments)``.

    ``wide[g, t]`` when, for some window ``(k, min_sg)`` of ``windows``, the nodes of ``groups[g]`` whose sliding SG
    (Eq. S1, ``k`` bins) reached ``max(min_sg, 1)`` at one of the moments ``t - interval + 1 .. t`` number at least
    ``max(min_nodes, min_share * L)``, ``L`` = the vicinity's live nodes (SG > 0) at ``t`` in that window.
    ``known`` (nodes x moments, like ``bins``): (node, moment) pairs whose burst is already explained (the node
    boots: a known outage, e.g. a row's maintenance reboots); they count neither as departing nor as live.
    ``interval`` <= 0: never.
    """
    wide = np.zeros((len(groups), np.shape(bins)[1]), bool)
    if interval <= 0:
        return wide
    for reached, live in _departing(bins, windows, interval, known):
        for j, g in enumerate(groups):
            n_hi = reached[g].sum(axis=0)
            n_live = live[g].sum(axis=0)
            wide[j] |= n_hi >= np.maximum(float(min_nodes), min_share * n_live)
    return wide


def label_wide(bins: np.ndarray, labels: np.ndarray, windows: list[tuple[int, float]], interval: int,
               min_nodes: int = 3, min_share: float = 0.25, known: np.ndarray | None = None) -> np.ndarray:
    """Eq. S3 for dynamic vicinities (a job's nodes, :func:`allocation_labels`): ``wide[l, t]`` for label ``l``
    (``labels.max() + 1`` rows) when, for some window ``(k, min_sg)``, the nodes carrying label ``l`` at ``t`` whose
    sliding SG reached ``max(min_sg, 1)`` at one of the moments ``t - interval + 1 .. t`` number at least
    ``max(min_nodes, min_share * L)``, ``L`` = those nodes live (SG > 0) at ``t`` (as :func:`vicinity_wide`, the
    membership taken at ``t``). Idle nodes (label ``-1``) belong to no vicinity; ``known`` as in
    :func:`vicinity_wide`; ``interval`` <= 0: never.
    """
    lab = np.asarray(labels)
    n_lab = int(lab.max()) + 1 if lab.size else 0
    w = np.shape(bins)[1]
    wide = np.zeros((n_lab, w), bool)
    if interval <= 0 or n_lab == 0:
        return wide
    node, mom = np.nonzero(lab >= 0)
    key = lab[node, mom] * w + mom
    for reached, live in _departing(bins, windows, interval, known):
        n_hi = np.bincount(key, weights=reached[node, mom], minlength=n_lab * w).reshape(n_lab, w)
        n_live = np.bincount(key, weights=live[node, mom], minlength=n_lab * w).reshape(n_lab, w)
        wide |= (n_hi >= np.maximum(float(min_nodes), min_share * n_live)) & (n_hi > 0)
    return wide


def label_multi_window(sgs: list[np.ndarray], labels: np.ndarray, floors: list[float], factor: float,
                       wide: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. S2 inside every (moment, label) group of ``labels`` (a job's nodes, :func:`allocation_labels`): the
    two-means threshold of :func:`label_detect` on each window's sliding SG ``sgs[i]`` with its floor ``floors[i]``,
    abnormal in any window; a node whose label is wide at that moment (``wide`` from :func:`label_wide`, Eq. S3:
    the job departed as a whole) is no alarm. Returns ``(abnormal, score, which)``: ``which`` the first window
    with the highest score among those that flag the (node, moment)."""
    lab = np.asarray(labels)
    in_wide = np.zeros(lab.shape, bool)
    ji, jt = np.nonzero(lab >= 0)
    in_wide[ji, jt] = np.asarray(wide, bool)[lab[ji, jt], jt]
    flags = np.zeros(lab.shape, bool)
    score = np.zeros(lab.shape)
    which = np.zeros(lab.shape, np.int64)
    for i, (sg, floor) in enumerate(zip(sgs, floors, strict=True)):
        f, sc = label_detect(sg, lab, factor, floor)
        f &= ~in_wide
        take = f & (~flags | (sc > score))
        which = np.where(take, i, which)
        flags |= f
        score = np.where(take, sc, score)
    return flags, score, which


def multi_window_detect(bins: np.ndarray, groups: list[np.ndarray], windows: list[tuple[int, float]],
                        factor: float, wide: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. S2: union over ``windows`` = ``[(k bins, min_sg), ...]`` of the two-means relative-density threshold
    (:func:`~nodewatch.models.syslog.vicinity.two_means_threshold`) on the sliding SG of ``k`` bins (Eq. S1),
    per vicinity ``groups`` (index arrays into the rows of ``bins``, nodes x bins).

    ``wide`` (``(len(groups), moments)`` bool, from :func:`vicinity_wide`): vicinity-moments that are one
    vicinity-wide event; no node of them is abnormal (Eq. S3). Returns ``(flags, score, which)`` shaped like
    ``bins``: abnormal in any window; the score of the flagging window with the highest score (else the highest
    score of any window); the index in ``windows`` of that window.
    """
    b = np.asarray(bins)
    flags = np.zeros(b.shape, bool)
    score = np.full(b.shape, -np.inf)
    which = np.zeros(b.shape, np.int64)
    for i, (k, min_sg) in enumerate(windows):
        sg = sliding_sg(b, int(k))
        for j, g in enumerate(groups):
            ab, sc = two_means_threshold(sg[g].T, factor, min_sg)
            ab, sc = ab.T, sc.T
            if wide is not None:
                ab = ab & ~wide[j][None, :]
            # a flagging window beats a non-flagging one; among equals the higher score wins
            better = (ab & ~flags[g]) | ((ab == flags[g]) & (sc > score[g]))
            score[g] = np.where(better, sc, score[g])
            which[g] = np.where(better, i, which[g])
            flags[g] |= ab
    score[~np.isfinite(score)] = 0.0
    return flags, score, which


def failure_time_groups(fail_node: np.ndarray, fail_ns: np.ndarray, interval_ns: int) -> list[np.ndarray]:
    """Time-of-failure vicinities (§II-A4): indices of failures chained within ``interval_ns`` of the previous one
    (single-linkage on the time axis; the paper's 10 minutes). Groups of one failure are included."""
    t = np.asarray(fail_ns, np.int64)
    if len(t) == 0:
        return []
    order = np.argsort(t, kind="stable")
    cut = np.flatnonzero(np.diff(t[order]) > interval_ns) + 1
    return [g for g in np.split(order, cut)]
