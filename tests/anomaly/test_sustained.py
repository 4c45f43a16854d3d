"""Sustained-shift channels (models/anomaly/sustained.py, Eq. A1/A2; VerdictConfig.sustained_metrics / sustained_k):
hand-computed accumulation and scale, bad inputs, and a ripple too weak per window but sustained for 3 h is a node
alert only with the accumulation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from nodewatch.models.anomaly.sustained import signed_fused, trailing_evidence, upper_scale
from nodewatch.models.anomaly.verdicts import VerdictConfig
from nodewatch.tasks.anomaly.verdicts import judge_day, sustained_index

STEP = pd.Timedelta("15min")
DAY0 = pd.Timestamp("2026-03-01")
METRICS = ["cpu_user", "power_node", "temp_cpu0"]


def test_trailing_evidence_by_hand() -> None:
    z = np.array([[1.0, 2.0, np.nan, 4.0, -5.0]])
    a = trailing_evidence(z, 2, clip=3.0)
    # [1]/1, [1, 2]/sqrt 2, [2, NaN]/1, [NaN, 4]/1, [4, max(-5, -3)]/sqrt 2
    assert a[0] == pytest.approx([1.0, 3 / np.sqrt(2), 2.0, 4.0, 1 / np.sqrt(2)])
    assert trailing_evidence(z, 1, clip=3.0)[0, [0, 1, 3, 4]] == pytest.approx([1.0, 2.0, 4.0, -3.0])
    # a constant shift of c per window grows like c sqrt(n) up to n = k
    assert trailing_evidence(np.full((1, 6), 2.0), 4)[0] == pytest.approx(2.0 * np.sqrt([1, 2, 3, 4, 4, 4]))
    # bad inputs: an all-NaN node stays NaN, one window, k longer than the day, k < 1, clip <= 0
    both = trailing_evidence(np.array([[np.nan] * 3, [0.5, np.nan, np.nan]]), 4)
    assert np.isnan(both[0]).all() and both[1] == pytest.approx([0.5, 0.5, 0.5])
    assert trailing_evidence(np.array([[2.5]]), 4)[0, 0] == pytest.approx(2.5)
    assert trailing_evidence(np.zeros((2, 0)), 4).shape == (2, 0)
    with pytest.raises(ValueError, match="k >= 1"):
        trailing_evidence(z, 0)
    with pytest.raises(ValueError, match="clip"):
        trailing_evidence(z, 2, clip=0.0)


def test_trailing_evidence_null_is_standard_normal_and_a_shift_grows_like_sqrt_k() -> None:
    rng = np.random.default_rng(3)
    a = trailing_evidence(rng.normal(0, 1, (20, 5_000)), 4, clip=10.0)[:, 3:]
    assert a.std() == pytest.approx(1.0, abs=0.02) and abs(a.mean()) < 0.02
    shifted = trailing_evidence(rng.normal(2.5, 1, (20, 5_000)), 4, clip=10.0)[:, 3:]
    assert shifted.mean() == pytest.approx(5.0, abs=0.05)


def test_upper_scale_by_hand_and_a_heavy_lower_tail() -> None:
    # median 0, dev+ = [0, 0, 0, 0, 4]: q0.8 (linear) = 0.8, / Phi^-1(0.8) = 0.841621 -> 0.950546; MAD 0
    x = np.array([[[0.0], [0.0], [0.0], [0.0], [4.0]]]).transpose(0, 1, 2)
    sc = upper_scale(x, None, floor=0.02, p=0.2)
    assert sc.shape == (2, 1, 1) and sc[0, 0, 0] == pytest.approx(0.8 / 0.8416212, rel=1e-5)
    # a constant series: MAD 0, no tail: the floor
    assert upper_scale(np.zeros((1, 50, 1)), None, floor=0.02)[0, 0, 0] == pytest.approx(0.02)
    # 5% of the windows far below (a calm window's log std): the one-sided scale stays ~sigma
    rng = np.random.default_rng(0)
    h = rng.normal(0, 1, (8, 4_000, 1))
    h[:, ::20] = -20.0
    assert upper_scale(h, None)[0, :, 0] == pytest.approx(np.ones(8), abs=0.2)
    # a state with too few windows takes the node's pooled scale; an all-NaN node the median node's tail (finite)
    busy = np.zeros((8, 4_000), bool)
    busy[:, :10] = True
    s2 = upper_scale(np.concatenate([h, np.full((1, 4_000, 1), np.nan)]), np.concatenate([busy, busy[:1]]))
    assert s2[1, :8, 0] == pytest.approx(s2[0, :8, 0], rel=0.05) and s2[0, 8, 0] == pytest.approx(1.0, abs=0.2)


def test_signed_fused_by_hand() -> None:
    out = signed_fused(np.array([3.0, 3.0, -2.0, np.nan]), np.array([1.0, -1.0, -4.0, 1.0]))
    assert out[:3].tolist() == [1.0, 0.0, -2.0] and np.isnan(out[3])


def _cluster(seed: int = 0, n: int = 16, days: int = 8) -> dict:
    rng = np.random.default_rng(seed)
    t = (days + 1) * 96
    times = np.array([np.datetime64(DAY0) + np.timedelta64(15 * i, "m") for i in range(t)], dtype="datetime64[ns]")
    level = np.array([5.0, 250.0, 35.0]) * np.exp(rng.normal(0, 0.1, (n, 1, 3)))
    mean = level * np.exp(rng.normal(0, 0.03, (n, t, 3)))
    std = (5.0 * np.exp(rng.normal(0, 0.3, (n, t, 1)))).astype(np.float32)  # power_node's window std, W
    nodes = [f"cn{i:04d}" for i in range(n)]
    racks = np.array([f"r{i // 8:02d}" for i in range(n)])
    return {"nodes": nodes, "racks": racks, "archs": np.array(["x86"] * n), "times": times, "mean": mean, "std": std}


@pytest.fixture(scope="module")
def cluster() -> dict:
    c = _cluster()
    # 3 h of ripple 2.5x the node's usual window std (log 0.92 = ~3 one-sided sigma per window), mean unchanged
    c["std"][3, -96 + 40:-96 + 52, 0] = 2.5 * float(np.median(c["std"][3, :-96, 0]))
    return c


def _judge(c: dict, cfg: VerdictConfig | None = None) -> dict:
    h = c["mean"].shape[1] - 96
    jobs = pd.DataFrame({"job_id": [], "start_time": [], "end_time": [], "node_list": []})
    return judge_day(c["mean"][:, :h], c["times"][:h], c["mean"][:, h:], c["times"][h:], c["nodes"], METRICS,
                     c["racks"], c["archs"], jobs, STEP, cfg, held_back_days=5, hist_std=c["std"][:, :h],
                     night_std=c["std"][:, h:])


def test_a_sustained_ripple_is_a_node_alert_only_when_accumulated(cluster: dict) -> None:
    assert sustained_index(METRICS) == [1] and sustained_index(METRICS, VerdictConfig(sustained_k=0)) == []
    res = _judge(cluster)
    rows = [r for r in res["rows"] if r["kind"] == "node"]
    assert [r["subject"] for r in rows] == ["cn0003"]
    assert rows[0]["top_metrics"][0] == "power_node (std, 4)" and res["metrics"][-1] == "power_node (std, 4)"
    # per window (k = 1) the same ripple stays below the threshold; off: the means only, which show nothing
    per_window = _judge(cluster, replace(VerdictConfig(), sustained_k=1))
    assert not [r for r in per_window["rows"] if r["kind"] == "node"]
    assert float(per_window["evidence"].fused[3, :, -1].max()) < float(per_window["calibration"].node[3])
    off = _judge(cluster, VerdictConfig(sustained_k=0))
    assert not [r for r in off["rows"] if r["kind"] == "node"] and off["metrics"] == METRICS


def test_std_arrays_must_match_the_means(cluster: dict) -> None:
    h = cluster["mean"].shape[1] - 96
    with pytest.raises(ValueError, match="window std arrays"):
        judge_day(cluster["mean"][:, :h], cluster["times"][:h], cluster["mean"][:, h:], cluster["times"][h:],
                  cluster["nodes"], METRICS, cluster["racks"], cluster["archs"],
                  pd.DataFrame({"job_id": [], "start_time": [], "end_time": [], "node_list": []}), STEP,
                  held_back_days=5, hist_std=cluster["std"][:, :h, [0, 0]], night_std=cluster["std"][:, h:])
