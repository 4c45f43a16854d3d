"""Vicinity-based anomaly detection on syslog generation (Ghiasvand & Ciorba, "Anomaly detection in high performance
computers: a vicinity perspective", ISPDC 2019; §II-E).

* **SG** (§II-E): the number of syslog entries a node sent during a fixed window (30 min) before the observation
  moment: :func:`sg_matrix`.
* **Vicinity** (§II-A): the nodes compared with each other (same rack; same architecture; same job; the paper's
  best, Table IV/§III-E: the rack within one architecture). A vicinity is a row of Figure 5.
* **Threshold** (§II-E): the SG values of one vicinity at one moment are partitioned into 2 clusters by K-Means;
  "the deviation threshold is the relative density of resulting clusters, calculated as the sum of squared
  distances of samples to their closest cluster center" (the within-cluster sum, footnote 4). We read the density
  of the majority ("normal") cluster per node, ``rho = sqrt(W_major / n_major)`` (the RMS distance of a normal
  node to its centre, so the threshold has the unit of SG), and call a node *abnormal* when it lies in the
  smaller cluster above the larger cluster's centre by more than ``factor * rho`` (:func:`two_means_threshold`).
  Using the whole within-cluster sum instead let the spread of a heavy-tailed vicinity (job start/stop bursts)
  flag a few nodes in almost every window of the simulator (precision < 0.01, docs/syslog.md).
  Nodes with SG 0 are *silent* (non-responsive, the blue cells of Figure 5): they are left out of the
  clustering and never abnormal here (outages find them).

K-Means with k=2 in one dimension has an exact solution: the optimal partition is a split of the sorted values
(Bellman 1973; Wang & Song, "Ckmeans.1d.dp", R Journal 2011), found by one pass over prefix sums.
:func:`two_means_1d` computes it for many vicinity-moments at once; ``benchmarks/syslog_kmeans.py`` checks that it
gives the partition of scikit-learn's ``KMeans(n_clusters=2)`` and measures the speed-up.
"""

from __future__ import annotations

import numpy as np


def sg_matrix(time_ns: np.ndarray, node_idx: np.ndarray, n_nodes: int, t0_ns: int, window_ns: int,
              n_windows: int) -> np.ndarray:
    """SG (§II-E): lines per node in each window ``[t0 + k·w, t0 + (k+1)·w)``; shape (n_nodes, n_windows)."""
    k = (np.asarray(time_ns, np.int64) - t0_ns) // window_ns
    ok = (k >= 0) & (k < n_windows) & (node_idx >= 0) & (node_idx < n_nodes)
    flat = node_idx[ok].astype(np.int64) * n_windows + k[ok]
    return np.bincount(flat, minlength=n_nodes * n_windows).reshape(n_nodes, n_windows)


def two_means_1d(x: np.ndarray, valid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact 2-means of each row of ``x`` (shape (m, n)); entries where ``valid`` is False take no part.

    Returns ``(low_centre, high_centre, split, wcss)`` per row: the row's valid values ``<= split`` form the low
    cluster. Rows with fewer than 2 valid values, or all values equal, get ``wcss = 0`` and ``split = +inf``
    (one cluster).
    """
    x = np.asarray(x, np.float64)
    m, n = x.shape
    valid = np.ones_like(x, bool) if valid is None else np.asarray(valid, bool)
    big = np.finfo(np.float64).max
    xs = np.sort(np.where(valid, x, big), axis=1)
    cnt = valid.sum(axis=1)
    vals = np.where(np.arange(n)[None, :] < cnt[:, None], xs, 0.0)
    s1 = np.cumsum(vals, axis=1)
    s2 = np.cumsum(vals * vals, axis=1)
    tot1 = s1[np.arange(m), np.maximum(cnt - 1, 0)]
    tot2 = s2[np.arange(m), np.maximum(cnt - 1, 0)]
    k = np.arange(1, n + 1, dtype=np.float64)[None, :]  # size of the low cluster if split after column j
    r = cnt[:, None] - k
    with np.errstate(divide="ignore", invalid="ignore"):
        w_low = s2 - s1 * s1 / k
        w_high = (tot2[:, None] - s2) - (tot1[:, None] - s1) ** 2 / r
        w = np.where(r >= 1, w_low + w_high, np.inf)
        # a split between two equal values is no split
        nxt = np.concatenate([xs[:, 1:], np.full((m, 1), big)], axis=1)
        w = np.where(nxt > xs, w, np.inf)
    j = np.argmin(w, axis=1)
    best = w[np.arange(m), j]
    one = ~np.isfinite(best)
    kk = (j + 1).astype(np.float64)
    lo = s1[np.arange(m), j] / kk
    with np.errstate(divide="ignore", invalid="ignore"):
        hi = (tot1 - s1[np.arange(m), j]) / (cnt - kk)
    mean = np.where(cnt > 0, tot1 / np.maximum(cnt, 1), 0.0)
    lo = np.where(one, mean, lo)
    hi = np.where(one, mean, hi)
    split = np.where(one, np.inf, xs[np.arange(m), j])
    wcss = np.where(one, 0.0, np.maximum(best, 0.0))
    return lo, hi, split, wcss


def two_means_threshold(sg: np.ndarray, factor: float = 3.0, min_sg: float = 15.0) -> tuple[np.ndarray, np.ndarray]:
    """Abnormal nodes of each vicinity-moment (module doc): ``sg`` shape (m moments, n nodes of one vicinity).

    Returns ``(abnormal (m, n) bool, score (m, n))`` with ``score = (SG - majority centre) / max(rho, 1)`` where
    ``rho`` is the density (RMS distance to its centre) of the majority cluster, so ``score > factor`` is "the
    deviation exceeds the relative density". Abnormal: in the minority cluster, above the majority
    (the paper's failures all show a *higher* SG, Figure 5), ``score > factor`` and ``SG >= min_sg`` (a quiet
    vicinity where one node logs 3 lines instead of 1 is no event); vicinities with fewer than 3 live nodes
    are never judged.
    """
    sg = np.asarray(sg, np.float64)
    live = sg > 0
    lo, hi, split, _ = two_means_1d(sg, live)
    n_live = live.sum(axis=1)
    in_low = live & (sg <= split[:, None])
    n_low = in_low.sum(axis=1)
    majority_low = n_low >= n_live - n_low
    centre = np.where(majority_low, lo, hi)
    majority = np.where(majority_low[:, None], in_low, live & ~in_low)
    rho = np.sqrt(((sg - centre[:, None]) ** 2 * majority).sum(axis=1) / np.maximum(majority.sum(axis=1), 1))
    score = np.where(live, (sg - centre[:, None]) / np.maximum(rho, 1.0)[:, None], 0.0)
    minority = live & ~majority
    abnormal = minority & (score > factor) & (sg >= min_sg) & (n_live >= 3)[:, None]
    return abnormal, score
