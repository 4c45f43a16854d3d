"""Issue 15, seed-3 fixes (models/anomaly/verdicts.py, models/anomaly/running_jobs.py): per-day threshold fits,
nodes joining an inferred running job, the job-peer channel. Small hand-built arrays, no simulation."""

from __future__ import annotations

import numpy as np
import pytest

from nodewatch.models.anomaly.running_jobs import joiners
from nodewatch.models.anomaly.verdicts import (
    DayInputs,
    VerdictConfig,
    budget_thresholds,
    evidence,
    job_peer_z,
)
from nodewatch.models.anomaly.vicinity import Reference


def test_one_atypical_held_back_day_does_not_set_every_threshold() -> None:
    rng = np.random.default_rng(5)
    held = rng.gumbel(3.0, 0.3, (64, 7))  # 64 nodes x 7 normal held-back days
    clean = 3.0 + 0.3 * 4.600149  # Coles Eq. 3.4, budget 10 per 1,000
    held[:14, 4] = rng.uniform(0.6, 1.6, 14)  # one day: 14 nodes of an all-day job score far below the body
    pooled = budget_thresholds(held, 10.0, floor=0.0)
    per_day = budget_thresholds(held, 10.0, floor=0.0, per_day=True)
    # the pooled fit takes its scale from the low values (the seed-3 night-1 thresholds, 6.7 instead of ~4)
    assert np.median(pooled) > clean + 1.0
    assert np.median(per_day) == pytest.approx(clean, abs=0.4)
    # fewer than 3 days with min_rows scores: the pooled fit
    few = held[:10]
    assert np.allclose(budget_thresholds(few, 10.0, 0.0, per_day=True), budget_thresholds(few, 10.0, 0.0))


def test_joiners_by_hand() -> None:
    like = np.array([[0, 1, 1, 1, 1, 1, 1, 1],    # trailing run from 1
                     [0, 1, 1, 1, 1, 1, 1, 1],    # trailing run from 1: a two-node inferred job at 1
                     [0, 1, 1, 1, 1, 0, 0, 1],    # busy-like 1-4, idle 5-6, trailing run from 7: joins at 1
                     [0, 1, 1, 1, 1, 0, 0, 0],    # busy-like 1-4, no trailing run: joins at 1
                     [0, 1, 1, 1, 0, 0, 0, 0],    # only 3 windows from 1 (min_run 4): no
                     [1, 1, 1, 1, 1, 0, 0, 0],    # busy-like already before 1 (its run starts at 0): no
                     [0, 1, 1, 1, 1, 0, 0, 0]],   # a known job later on the node: no
                    dtype=bool)
    known = np.zeros_like(like)
    known[6, 6] = True
    start = np.array([1, 1, 7, -1, -1, -1, -1])
    assert joiners(like, known, start).tolist() == [-1, -1, 1, 1, -1, -1, -1]
    # a start window of a single node is no multi-node job to join
    assert joiners(like, known, np.array([1, -1, 7, -1, -1, -1, -1])).tolist() == [-1] * 7


def _peers(n_nodes: int, n_t: int) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    # the nodes' deviations from the job median: node i in window t has pattern[(i - t) % 6] (two of six move)
    pattern = np.array([0.1, -0.1, 0.0, 0.0, 0.0, 0.0])
    d = np.zeros((n_nodes, n_t, 2), dtype=np.float32)
    for t in range(n_t):
        d[:, t, :] = np.roll(pattern, t)[:n_nodes, None]
    return d, [(np.arange(n_nodes), np.ones((n_nodes, n_t), dtype=bool))]


def test_job_peer_z_only_where_enough_peers_agree() -> None:
    cfg = VerdictConfig()
    d, peer = _peers(6, 40)
    d[5, 10:12] = 2.0                   # node 5 leaves its job's peers in two windows
    d[:3, 20], d[3:, 20] = 1.0, -1.0    # window 20: the peers disagree (two camps)
    tr = np.zeros((6, 40), dtype=bool)
    tr[5, 11] = True                     # a job start/stop on node 5 in window 11: not judged
    q = job_peer_z(d, peer, tr, cfg)
    # scale per metric: q_0.9 of the pooled |d| (0.1: a third of the values) / Phi^-1(0.95) = 0.0608; in window 10
    # the peers agree (median |d| over the job 0: node 5's slot is one of the two moving ones)
    assert q[5, 10, 0] == pytest.approx(2.0 / (0.1 / 1.6448536), rel=1e-3)
    assert np.isnan(q[5, 11]).all() and np.isnan(q[:, 20]).all()
    assert np.nanmax(np.delete(q, [10, 11, 20], axis=1)) <= 1.645 + 1e-3  # the peers themselves: at most 1.645
    # fewer than job_peer_min (5) members in the window: not judged
    peer4 = [(np.arange(6), np.ones((6, 40), dtype=bool))]
    peer4[0][1][:2, 30] = False
    assert np.isnan(job_peer_z(d, peer4, np.zeros((6, 40), bool), cfg)[:, 30]).all()


def test_job_peer_channel_needs_two_metrics_in_the_fused_evidence() -> None:
    cfg = VerdictConfig()
    n, t = 6, 20
    ref = Reference(np.zeros((2, n, 3)), np.ones((2, n, 3)))  # own history: 0, scale 1 (a broad busy history)
    d, _ = _peers(n, t)
    x = np.concatenate([d, np.zeros((n, t, 1), np.float32)], axis=2)
    busy = np.ones((n, t), dtype=bool)
    job = np.zeros((n, t), dtype=np.int32)
    day = dict(busy=busy, transition=np.zeros_like(busy), job=job, racks=np.array(["r00"] * 3 + ["r01"] * 3),
               archs=np.array(["a"] * n))
    two = x.copy()
    two[5, 4:6, :2] = 1.0  # a CPU hog: 1 sigma of its own busy history, far from its 5 peers on two metrics
    ev = evidence(DayInputs(two, **day), ref, cfg)
    assert ev.score[5, 4:6].min() >= 2.5  # the peer z (~16) capped at job_peer_z_cap x |e| (3 x ~1)
    assert ev.score[:5].max() <= 0.35 and np.delete(ev.score[5], [4, 5]).max() <= 0.35
    one = x.copy()
    one[5, 4:6, 0] = 1.0  # one metric alone (an integer gauge's jump): no job-peer evidence
    ev1 = evidence(DayInputs(one, **day), ref, cfg)
    assert ev1.score[5].max() <= 1.2
    off = evidence(DayInputs(two, **day), ref, VerdictConfig(job_peer_min=0))
    assert off.score[5].max() <= 1.2  # the channel switched off: min(|z|, |e|) only
