"""Window-std channels of the verdicts (Eq. D1, VerdictConfig.dispersion_metrics): one-sided, not judged in job
start/stop windows, and a fluctuation that leaves the window mean unchanged is a node alert."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nodewatch.models.anomaly.verdicts import DayInputs, VerdictConfig, evidence
from nodewatch.models.anomaly.vicinity import Reference
from nodewatch.tasks.anomaly.verdicts import dispersion_index, judge_day

STEP = pd.Timedelta("15min")
DAY0 = pd.Timestamp("2026-03-01")
METRICS = ["cpu_user", "power_node", "temp_cpu0"]


def test_one_sided_channel_by_hand() -> None:
    # loc 0, scale 1 for both states: z = x. Metric 0 is a mean (two-sided), metric 1 a window std (one-sided).
    ref = Reference(np.zeros((2, 1, 2)), np.ones((2, 1, 2)))
    x = np.array([[[-3.0, 2.0], [-3.0, -3.0], [0.0, 1.5]]], dtype=np.float32)
    tr = np.array([[False, False, True]])
    day = DayInputs(x, np.zeros((1, 3), bool), tr, np.full((1, 3), -1), np.array([""]), np.array([""]),
                    None, np.array([False, True]))
    ev = evidence(day, ref, VerdictConfig())
    assert ev.z[0, :2, 0].tolist() == [-3.0, -3.0]  # a drop of a mean counts
    assert ev.z[0, :2, 1].tolist() == [2.0, 0.0]  # a rise of the std counts, a drop is 0
    assert np.isnan(ev.z[0, 2, 1])  # a job start/stop window: the std channel is not judged
    assert ev.fused[0, :, 1].tolist() == [2.0, 0.0, 0.0]
    both = DayInputs(x, np.zeros((1, 3), bool), tr, np.full((1, 3), -1), np.array([""]), np.array([""]))
    assert evidence(both, ref, VerdictConfig()).z[0, 1, 1] == -3.0  # without one_sided: two-sided as before


def _cluster(seed: int = 0, n: int = 16, days: int = 9) -> dict:
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
    c["std"][3, -96 + 40:-96 + 48, 0] = 60.0  # 2 h of ripple 12x the usual, the window mean unchanged
    return c


ON = VerdictConfig(dispersion_metrics=("power_node",))


def _judge(c: dict, with_std: bool, cfg: VerdictConfig = ON) -> dict:
    h = c["mean"].shape[1] - 96
    jobs = pd.DataFrame({"job_id": [], "start_time": [], "end_time": [], "node_list": []})
    kw = {"hist_std": c["std"][:, :h], "night_std": c["std"][:, h:]} if with_std else {}
    return judge_day(c["mean"][:, :h], c["times"][:h], c["mean"][:, h:], c["times"][h:], c["nodes"], METRICS,
                     c["racks"], c["archs"], jobs, STEP, cfg, held_back_days=5, **kw)


def test_ripple_with_unchanged_mean_is_a_node_alert(cluster: dict) -> None:
    assert dispersion_index(METRICS, ON) == [1] and dispersion_index(METRICS) == []  # off by default
    res = _judge(cluster, with_std=True)
    rows = [r for r in res["rows"] if r["kind"] == "node"]
    assert [r["subject"] for r in rows] == ["cn0003"]
    assert rows[0]["top_metrics"][0] == "power_node (std)"
    assert res["metrics"][-1] == "power_node (std)"
    # the same night without the std arrays, or with the channel switched off: the means show nothing
    assert not [r for r in _judge(cluster, with_std=False)["rows"] if r["kind"] == "node"]
    off = _judge(cluster, with_std=True, cfg=VerdictConfig())
    assert not [r for r in off["rows"] if r["kind"] == "node"] and off["metrics"] == METRICS


def test_std_arrays_must_match_the_means(cluster: dict) -> None:
    h = cluster["mean"].shape[1] - 96
    with pytest.raises(ValueError, match="window std arrays"):
        judge_day(cluster["mean"][:, :h], cluster["times"][:h], cluster["mean"][:, h:], cluster["times"][h:],
                  cluster["nodes"], METRICS, cluster["racks"], cluster["archs"],
                  pd.DataFrame({"job_id": [], "start_time": [], "end_time": [], "node_list": []}), STEP,
                  ON, held_back_days=5, hist_std=cluster["std"][:, :h, [0, 0]], night_std=cluster["std"][:, h:])
