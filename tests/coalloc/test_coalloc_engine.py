"""The replay engine against hand-computed schedules (EASY backfill, First-fit, co-allocation) and the metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nodewatch.models.coalloc.engine import replay
from nodewatch.models.coalloc.interference import InterferenceModel, allowed_matrix
from nodewatch.models.coalloc.metrics import efficiencies, mean_ci
from nodewatch.models.coalloc.workload import synthetic_queue

EXCL = np.zeros((2, 2), dtype=bool)
NAIVE = np.ones((2, 2), dtype=bool)
NO_TWINS = ~np.eye(2, dtype=bool)


def _run(submit, work, nodes, app=None, slow=None, allowed=EXCL, alg="backfill", n_nodes=6, est=None, compiled=True):  # noqa: ANN001, ANN202
    n = len(submit)
    app = np.zeros(n, int) if app is None else np.asarray(app)
    slow = np.full((n, 2), 1.5) if slow is None else np.asarray(slow, float)
    work = np.asarray(work, float)
    est = work if est is None else np.asarray(est, float)
    return replay(np.asarray(submit, float), work, est, np.asarray(nodes), app, slow, allowed, alg, n_nodes, 2,
                  compiled=compiled)


# Fig. 2.1 of the thesis: j0 (3 nodes, 6) runs, j1 (6, 5) waits for it, j2 (2, 3) and j4 (1, 1) are backfilled,
# j3 (1, 5.5 here) is not because it would delay j1 (on 6 nodes).
FIG21 = dict(submit=[0, 1, 1, 1, 1], work=[6, 5, 3, 5.5, 1], nodes=[3, 6, 2, 1, 1])


@pytest.mark.parametrize("compiled", [True, False])
def test_easy_backfill_fig_2_1(compiled: bool) -> None:
    s = _run(**FIG21, compiled=compiled)
    assert s.start.tolist() == [0, 6, 1, 11, 1]
    assert s.end.tolist() == [6, 11, 4, 16.5, 2]


@pytest.mark.parametrize("compiled", [True, False])
def test_first_fit_fig_2_1(compiled: bool) -> None:
    """First-fit starts every job that fits, in priority order: j3 jumps ahead and delays j1 (§2.1.1)."""
    s = _run(**FIG21, alg="firstfit", compiled=compiled)
    assert s.start.tolist() == [0, 6.5, 1, 1, 4]


def test_backfill_uses_estimates_not_runtimes() -> None:
    """A job whose estimate would cross the reservation is not backfilled even if it would really finish in time."""
    s = _run(submit=[0, 1, 1], work=[6, 5, 2], est=[6, 5, 9], nodes=[3, 6, 1])
    assert s.start.tolist() == [0, 6, 11]


@pytest.mark.parametrize("compiled", [True, False])
def test_coallocated_pair_slowdowns_and_core_hours(compiled: bool) -> None:
    """Two jobs on one node: paired rates 1/1.5 and 1/1.2; job 0 finishes its last 2 s alone at full speed."""
    slow = [[1.5, 1.5], [1.2, 1.2]]
    s = _run(submit=[0, 0], work=[10, 10], nodes=[1, 1], app=[0, 1], slow=slow, allowed=NAIVE, n_nodes=1,
             compiled=compiled)
    assert s.start.tolist() == [0, 0]
    assert s.end.tolist() == pytest.approx([14, 12])
    # core seconds (C = 2 cores per node): paired 12 s at 1 core, then 2 s at 2 cores
    assert s.core_s.tolist() == pytest.approx([12 + 4, 12])
    assert s.shared_s.tolist() == pytest.approx([12, 12])
    ex = _run(submit=[0, 0], work=[10, 10], nodes=[1, 1], app=[0, 1], slow=slow, n_nodes=1)
    assert ex.end.tolist() == [10, 20] and ex.core_s.tolist() == [20, 20]
    m = efficiencies(np.zeros(2), s.start, s.end, s.core_s, np.array([10.0, 10.0]), np.array([1, 1]), 2, 1)
    assert m["t_comp_h"] == pytest.approx(28 / 3600) and m["t_comp_std_h"] == pytest.approx(40 / 3600)
    assert m["e_comp"] == pytest.approx(40 / 28) and m["e_util"] == pytest.approx(28 / 28)
    assert m["e_sched"] == pytest.approx(40 / 28) and m["makespan_s"] == 14


def test_no_twins_and_unequal_sizes_do_not_pair() -> None:
    twins = _run(submit=[0, 0], work=[10, 10], nodes=[1, 1], app=[0, 0], allowed=NO_TWINS, n_nodes=1)
    assert twins.start.tolist() == [0, 10]
    sizes = _run(submit=[0, 0], work=[10, 10], nodes=[1, 2], app=[0, 1], allowed=NAIVE, n_nodes=2)
    assert sizes.start.tolist() == [0, 10]


def test_a_partner_joins_later_and_the_survivor_regains_full_speed() -> None:
    """Job 2 (1 node) pairs with job 0 when job 1 leaves the queue head; job 0 slows, then speeds up again."""
    slow = [[2.0, 2.0]] * 3
    s = _run(submit=[0, 0, 4], work=[10, 4, 2], nodes=[1, 1, 1], app=[0, 1, 1], slow=slow, allowed=NO_TWINS, n_nodes=1)
    # t=0: job0 alone, job1 joins (pair, both at 1/2): job1 ends at 8 (4 work), job0 has done 4;
    # t=4: job2 arrives, group is full; t=8: job1 leaves, job2 joins job0: job2 (2 work) ends at 12, job0 has
    # done 6 by then and finishes its last 4 alone at full speed: 16
    assert s.start.tolist() == [0, 0, 8]
    assert s.end.tolist() == pytest.approx([16, 8, 12])


def test_backfill_join_may_not_delay_the_reservation() -> None:
    """Head job 1 needs both nodes at t=4 (when job 0 ends); job 2 may join job 0 only if the pair still ends by 4."""
    common = dict(submit=[0, 0, 0], nodes=[1, 2, 1], app=[0, 0, 1], allowed=NAIVE, n_nodes=2)
    # job 2 (10 s, both slow down 2x): joining would end job 0 at 8 -> not joined, not backfilled (10 s > 4 s)
    s = _run(work=[4, 1, 10], slow=[[2, 2]] * 3, **common)
    assert s.start.tolist() == [0, 4, 5]
    # First-fit has no reservation: job 2 joins job 0 at once and job 1 waits until both are done
    ff = _run(work=[4, 1, 10], slow=[[2, 2]] * 3, alg="firstfit", **common)
    assert ff.start.tolist() == [0, 14, 0]
    # job 0 not slowed by class 1 and job 2 short: the pair ends by 4, the join is allowed
    ok = _run(work=[4, 1, 1], slow=[[1, 1], [1, 1], [2, 2]], **common)
    assert ok.start.tolist() == [0, 4, 0]


def test_compiled_and_interpreted_kernels_give_identical_schedules() -> None:
    q = synthetic_queue(300, seed=3)
    m = InterferenceModel().fit()
    slow = m.slowdown_matrix(q.app, q.ranks)
    for pol in ("exclusive", "naive", "no_twins"):
        for alg in ("backfill", "firstfit"):
            args = (q.submit, q.work, q.est, q.nodes, q.app, slow, allowed_matrix(pol), alg, 160, 32)
            a, b = replay(*args), replay(*args, compiled=False)
            for x, y in ((a.start, b.start), (a.end, b.end), (a.core_s, b.core_s)):
                assert np.array_equal(x, y, equal_nan=True), (pol, alg)


def test_exclusive_replay_conserves_work_and_never_overbooks() -> None:
    q = synthetic_queue(200, seed=5)
    slow = np.ones((len(q), 5))
    s = replay(q.submit, q.work, q.est, q.nodes, q.app, slow, allowed_matrix("exclusive"), "backfill", 128, 32)
    assert np.allclose(s.end - s.start, q.work)
    ev = sorted([(t, n) for t, n in zip(s.start, q.nodes, strict=True)] + [(t, -n) for t, n in zip(s.end, q.nodes, strict=True)],
                key=lambda x: (x[0], x[1]))
    used = np.cumsum([n for _t, n in ev])
    assert used.max() <= 128
    m = efficiencies(q.submit, s.start, s.end, s.core_s, q.work, q.nodes, 32, 128)
    assert m["e_comp"] == pytest.approx(1.0) and 0 < m["e_util"] <= 1 and m["e_sched"] == pytest.approx(m["e_util"])


def test_horizon_counts_only_finished_jobs() -> None:
    m = efficiencies(np.zeros(2), np.array([0.0, 0.0]), np.array([10.0, 30.0]), np.array([20.0, 60.0]),
                     np.array([10.0, 30.0]), np.array([1, 1]), 2, 2, horizon=20)
    assert m["jobs_finished"] == 1 and m["t_comp_h"] == pytest.approx(20 / 3600)
    assert m["t_cores_h"] == pytest.approx(2 * 2 * 20 / 3600) and m["e_util"] == pytest.approx(0.25)


def test_bad_engine_inputs_raise() -> None:
    with pytest.raises(ValueError, match="1..6 nodes"):
        _run(submit=[0], work=[1], nodes=[7])
    with pytest.raises(ValueError, match="sorted"):
        _run(submit=[1, 0], work=[1, 1], nodes=[1, 1])
    with pytest.raises(ValueError, match=">= 0"):
        _run(submit=[0], work=[-1], nodes=[1])
    with pytest.raises(ValueError, match="unknown algorithm"):
        _run(submit=[0], work=[1], nodes=[1], alg="sjf")


def test_mean_ci() -> None:
    m, lo, hi = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3))
    assert math.isnan(mean_ci([1.0])[1])


def test_independent_reference_loop_gives_identical_schedules() -> None:
    """The plain object-per-job loop (models/coalloc/reference.py) and the kernel agree exactly, with arrivals and
    estimates above the run times, for every policy and algorithm."""
    from nodewatch.models.coalloc.reference import replay_reference

    rng = np.random.default_rng(11)
    n = 400
    app = rng.integers(0, 5, n)
    ranks = rng.choice([256, 512, 1024, 2048, 3000], n)
    nodes = -(-ranks // 64)
    work = rng.gamma(1.0, 300.0, n).round(1)
    est = work * rng.choice([1.0, 1.5, 4.0], n)
    submit = np.sort(rng.integers(0, 20_000, n)).astype(float)
    slow = InterferenceModel().fit().slowdown_matrix(app, ranks)
    for pol in ("exclusive", "naive", "no_twins", "measured"):
        for alg in ("backfill", "firstfit"):
            args = (submit, work, est, nodes, app, slow, allowed_matrix(pol), alg, 64, 64)
            a, ref = replay(*args), replay_reference(*args)
            for x, y in zip((a.start, a.end, a.core_s, a.shared_s), ref, strict=True):
                assert np.array_equal(x, y, equal_nan=True), (pol, alg)
            assert np.isfinite(a.end).all()
            # never more node time than the machine has: node-seconds used <= nodes x span
            span = a.end.max() - submit.min()
            assert a.core_s.sum() / 64 <= 64 * span * (1 + 1e-12)
