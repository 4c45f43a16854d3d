"""Leave-one-machine-out rounds (issue 18, seventh pass): the round designs by hand, several machines' sequences
combined without a copy (unique group ids, a lazy stack equal to the concatenation), bad designs refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nodewatch.tasks.predict.dataset import Sequences, Stacked, combine, combine_machines, group_stride
from nodewatch.tasks.predict.evaluate import gather_rows, held_out_rounds, machine_rounds

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parents[2]


def _seqs(g: np.random.Generator, n: int, y: int, groups: np.ndarray, shift: float = 0.0, dtype=np.float32) -> Sequences:
    return Sequences(x=(g.normal(shift, 1, (n, 6, 70))).astype(dtype), y=np.full(n, y, np.int64), group=groups,
                     has_precursor=np.full(n, bool(y)), node=np.arange(n) % 7, time_s=60.0 * np.arange(n),
                     anomaly=np.zeros(n, np.int8), hard=np.zeros(n, bool))


def _machine(seed: int, n_fail: int = 20, n_ok: int = 400) -> tuple[Sequences, Sequences, None]:
    """A toy machine: failures shifted by +2 in every input, ok sequences of 8 node-days; ids as the simulator's."""
    g = np.random.default_rng(seed)
    pos = _seqs(g, n_fail, 1, np.arange(n_fail, dtype=np.int64) * 1_000_000, shift=2.0)
    neg = _seqs(g, n_ok, 0, -(np.arange(n_ok) // 50 * 100_000 + 3) - 1)
    return pos, neg, None


def test_others_design_leaves_one_machine_out() -> None:
    assert machine_rounds([1, 2, 3, 4, 5]) == [((2, 3, 4, 5), 1), ((1, 3, 4, 5), 2), ((1, 2, 4, 5), 3)]
    assert machine_rounds([1, 2, 3], "others") == [((2, 3), 1), ((1, 3), 2), ((1, 2), 3)]
    assert machine_rounds([4, 5], "others") == [((5,), 4), ((4,), 5)]


def test_next_design_is_the_old_rounds() -> None:
    """1 -> 2, 2 -> 3, 3 -> 1 (seeds 4 and 5 unused), as up to the sixth pass."""
    assert machine_rounds([1, 2, 3, 4, 5], "next") == [((1,), 2), ((2,), 3), ((3,), 1)]
    assert machine_rounds([1, 2, 3], "next") == [((1,), 2), ((2,), 3), ((3,), 1)]
    assert machine_rounds([7, 9], "next") == [((7,), 9), ((9,), 7)]


@pytest.mark.parametrize(("seeds", "design", "match"), [
    ([1, 2, 3], "all", "round design must be one of others, next"),
    ([1], "others", "at least 2 machines"),
    ([1], "next", "at least 2 machines"),
    ([1, 2, 2], "others", "distinct"),
])
def test_bad_design_or_too_few_seeds_is_one_line(seeds, design, match) -> None:
    with pytest.raises(ValueError, match=match) as e:
        machine_rounds(seeds, design)
    assert "\n" not in str(e.value)


def test_benchmark_refuses_too_few_seeds_with_one_line_and_exit_2() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "predict_train.py"), "--seeds", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["error: rounds need at least 2 machines to test on, got seeds [1] and "
                                             "n_test 3"]


def test_stacked_indexing_equals_the_concatenation() -> None:
    g = np.random.default_rng(0)
    parts = [g.normal(size=(n, 3, 4)) for n in (5, 0, 7, 4)]  # float64 parts, one empty
    cat = np.concatenate(parts).astype(np.float32)
    s = Stacked(parts)
    assert s.shape == (16, 3, 4) and len(s) == 16 and s.dtype == np.float32
    mask = g.random(16) < 0.5
    idx = np.array([15, 0, 5, 5, -1, 11])
    for key in (mask, idx, slice(3, 14, 2), slice(None), np.zeros(0, np.int64)):
        got = s[key]
        assert got.dtype == np.float32 and np.array_equal(got, cat[key])
    assert np.array_equal(s[6], cat[6]) and np.array_equal(s[-2], cat[-2])
    out = np.empty((int(mask.sum()), 3, 4), np.float32)
    assert s.gather(mask, out=out) is out and np.array_equal(out, cat[mask])
    with pytest.raises(IndexError):
        s[np.ones(15, bool)]
    with pytest.raises(IndexError):
        s[np.array([16])]
    with pytest.raises(ValueError, match="agree beyond axis 0"):
        Stacked([np.zeros((2, 3)), np.zeros((2, 4))])


def test_stacked_reads_memory_mapped_parts_in_place(tmp_path) -> None:
    """The view keeps the memory-mapped arrays themselves (no copy), and gathers across chunk boundaries."""
    g = np.random.default_rng(1)
    arrs = [g.normal(size=(n, 2, 3)).astype(np.float32) for n in (9, 11)]
    maps = []
    for i, a in enumerate(arrs):
        np.save(tmp_path / f"{i}.npy", a)
        maps.append(np.load(tmp_path / f"{i}.npy", mmap_mode="r"))
    s = Stacked(maps)
    s.CHUNK = 4  # several chunks per part
    assert all(p is m for p, m in zip(s.parts, maps, strict=True))
    assert all(isinstance(p, np.memmap) for p in s.parts)
    idx = np.arange(20)[::-1]
    assert np.array_equal(s[idx], np.concatenate(arrs)[idx])


def test_combined_groups_are_unique_across_machines() -> None:
    """Two machines with identical ids (same node-day and event numbering) give disjoint groups; signs kept."""
    m1, m2 = _machine(1), _machine(2)
    assert np.array_equal(m1[1].group, m2[1].group) and np.array_equal(m1[0].group, m2[0].group)
    pos, neg, hard = combine_machines([m1, m2])
    assert hard is None
    n1 = len(np.unique(m1[0].group)) + len(np.unique(m1[1].group))
    all_groups = np.concatenate([pos.group, neg.group])
    assert len(np.unique(all_groups)) == 2 * n1
    assert (pos.group >= 0).all() and (neg.group < 0).all()
    stride = group_stride([q for m in (m1, m2) for q in m])
    assert np.array_equal(neg.group[len(m1[1].y):], m2[1].group - stride)
    assert np.array_equal(pos.group[len(m1[0].y):], m2[0].group + stride)
    assert np.array_equal(neg.y, np.r_[m1[1].y, m2[1].y]) and isinstance(neg.x, Stacked)
    assert np.array_equal(neg.x[np.arange(len(neg.y))], np.concatenate([m1[1].x, m2[1].x]))


def test_combine_keeps_machine_index_for_missing_parts() -> None:
    """A machine without a set (``None``) still shifts the next machine's ids by its own stride."""
    a, b = _machine(3)[1], _machine(4)[1]
    c = combine([a, None, b], stride=10_000_000)
    assert np.array_equal(c.group[len(a.y):], b.group - 2 * 10_000_000)
    assert combine([None, None]) is None


def test_gather_rows_equals_concatenation_of_masked_rows() -> None:
    g = np.random.default_rng(5)
    a, b, c = (g.normal(size=(n, 2, 3)).astype(np.float32) for n in (6, 8, 3))
    ma, mb = g.random(6) < 0.5, g.random(8) < 0.5
    got = gather_rows([(a, ma), (Stacked([b[:5], b[5:]]), mb), (c, None)])
    assert got.dtype == np.float32 and np.array_equal(got, np.concatenate([a[ma], b[mb], c]))


def test_held_out_rounds_on_combined_machines() -> None:
    """Leave one machine out on toy machines: every scheme scored per round, fit time recorded, seeds named."""
    data = {s: _machine(s) for s in (1, 2, 3)}
    cv = held_out_rounds(data, machine_rounds([1, 2, 3]), epochs=20)
    assert list(cv.drop_duplicates("round")["train_seed"]) == ["2,3", "1,3", "1,2"]
    assert list(cv.drop_duplicates("round")["test_seed"]) == [1, 2, 3]
    assert (cv["fit_s"] > 0).all()
    one = cv[cv.scheme == "unanimous@1NN"]
    assert (one["tp"] + one["fn"] == 20).all() and (one["fp"] + one["tn"] == 400).all()
    assert (one["tpr"] > 0.9).all()  # failures sit 2 sd away in every input: learnt from two machines
    with pytest.raises(ValueError, match="among the training seeds"):
        held_out_rounds(data, [((1, 2), 2)], epochs=2)


def test_fit_in_place_standardises_x_and_learns_the_same_networks() -> None:
    """``overwrite_x`` (used for the GB-sized rows of four machines): same weights, x holds the standardised rows."""
    from nodewatch.models.predict.ensemble import LeadTimeEnsemble

    pos, neg, _ = _machine(6)
    x = np.concatenate([pos.x, neg.x])
    y = np.r_[pos.y, neg.y]
    ref = LeadTimeEnsemble(epochs=5).fit(x.copy(), y)
    x64 = x.astype(np.float64)
    LeadTimeEnsemble(epochs=5).fit(x64, y, overwrite_x=True)  # not float32: left alone
    assert np.array_equal(x64, x.astype(np.float64))
    work = x.copy()
    got = LeadTimeEnsemble(epochs=5).fit(work, y, overwrite_x=True)
    assert np.array_equal(work, ref.scaler_.transform(x)) and not np.array_equal(work, x)
    assert all(np.array_equal(ref.state()[k], got.state()[k]) for k in ref.state())
    assert np.array_equal(ref.predict_logodds(x), got.predict_logodds(x))
