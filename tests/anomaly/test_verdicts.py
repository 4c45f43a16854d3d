"""Verdicts on a small simulated cluster: a rack shift is one rack alert, a single-node fault is a node alert,
a burst shared by all nodes of a job flags none of them (tasks/anomaly/verdicts.py judge_day, run on arrays).

The cluster: 4 racks x 8 nodes, 6 metrics, 12 history days + 1 night of 15-min windows; each node has its own
levels and noise; nodes run jobs (which raise cpu, power and lustre) on a fixed pattern of busy hours.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nodewatch.tasks.anomaly.verdicts import job_grid, judge_day

METRICS = ["cpu_user", "power_node", "temp_inlet", "temp_cpu0", "lustre_read_bytes", "ib_rx_bytes"]
STEP = pd.Timedelta("15min")
DAY0 = pd.Timestamp("2026-03-01")
HIST_DAYS = 12
N_RACKS, PER_RACK = 4, 8
IDLE = np.array([1.5, 250.0, 21.0, 30.0, 1e3, 1e3])
BUSY = np.array([70.0, 600.0, 21.0, 65.0, 5e6, 2e7])


def _nodes() -> tuple[list[str], np.ndarray, np.ndarray]:
    nodes = [f"cn{i:04d}" for i in range(N_RACKS * PER_RACK)]
    racks = np.array([f"r{i // PER_RACK:02d}" for i in range(len(nodes))])
    archs = np.array(["icelake" if i < 3 * PER_RACK else "milan" for i in range(len(nodes))])
    return nodes, racks, archs


def _jobs(nodes: list[str]) -> pd.DataFrame:
    """Every day: nodes in pairs run a 3-hour job starting at a node-dependent hour (history and night)."""
    rows = []
    for d in range(HIST_DAYS + 1):
        for p in range(0, len(nodes), 2):
            start = DAY0 + pd.Timedelta(days=d, hours=1 + (p // 2) % 10)
            rows.append({"job_id": f"{d}-{p}", "start_time": start.tz_localize("UTC"),
                         "end_time": (start + pd.Timedelta(hours=3)).tz_localize("UTC"), "node_list": nodes[p:p + 2]})
    return pd.DataFrame(rows)


def _cluster(seed: int = 0) -> dict:
    nodes, racks, archs = _nodes()
    n, t = len(nodes), (HIST_DAYS + 1) * 96
    times = np.array([np.datetime64(DAY0) + np.timedelta64(15 * i, "m") for i in range(t)], dtype="datetime64[ns]")
    jobs = _jobs(nodes)
    busy, _, _, _ = job_grid(jobs, nodes, times, STEP)
    rng = np.random.default_rng(seed)
    level = np.exp(rng.normal(0, 0.1, (n, 1, len(METRICS))))
    base = np.where(busy[:, :, None], BUSY, IDLE) * level
    x = base * np.exp(rng.normal(0, 0.03, (n, t, len(METRICS))))
    return {"nodes": nodes, "racks": racks, "archs": archs, "times": times, "x": x, "jobs": jobs, "level": level}


def _judge(c: dict, x: np.ndarray | None = None, jobs: pd.DataFrame | None = None) -> dict:
    x = c["x"] if x is None else x
    h = HIST_DAYS * 96
    return judge_day(x[:, :h], c["times"][:h], x[:, h:], c["times"][h:], c["nodes"], METRICS, c["racks"], c["archs"],
                     c["jobs"] if jobs is None else jobs, STEP, held_back_days=5)


@pytest.fixture(scope="module")
def cluster() -> dict:
    return _cluster()


def _kinds(res: dict) -> list[tuple[str, str]]:
    return [(r["kind"], r["subject"]) for r in res["rows"]]


def test_quiet_night_has_no_alert(cluster: dict) -> None:
    res = _judge(cluster)
    assert _kinds(res) == []
    assert not res["window_flags"].any()


def test_rack_shift_is_one_rack_alert(cluster: dict) -> None:
    h = HIST_DAYS * 96
    nodes = cluster["nodes"]
    rack = np.flatnonzero(cluster["racks"] == "r02")
    # SaNSA's misconfigured rack: from 07:30 it gets no job and its inlet (so CPU) temperature is +6 degC
    names = {nodes[i] for i in rack}
    old = cluster["jobs"]
    jobs = old[~(old["node_list"].map(lambda nl: bool(set(nl) & names)) & old["job_id"].str.startswith(f"{HIST_DAYS}-"))]
    busy, _, _, _ = job_grid(jobs, nodes, cluster["times"], STEP)
    x = cluster["x"].copy()
    rng = np.random.default_rng(2)
    x[rack, h:] = (np.where(busy[rack, h:, None], BUSY, IDLE) * cluster["level"][rack]
                   * np.exp(rng.normal(0, 0.03, x[rack, h:].shape)))
    for m in ("temp_inlet", "temp_cpu0"):
        x[np.ix_(rack, np.arange(h + 30, h + 96), [METRICS.index(m)])] += 6.0
    res = _judge(cluster, x, jobs)
    assert _kinds(res) == [("rack", "r02")], _kinds(res)
    row = res["rows"][0]
    assert sorted(row["members"]) == [nodes[i] for i in rack]
    assert set(row["top_metrics"][:2]) == {"temp_inlet", "temp_cpu0"}
    assert pd.Timestamp(row["first_time"]) == pd.Timestamp(cluster["times"][h + 30])
    # the members' windows from 07:30 are flagged (as the group), none before
    assert res["window_flags"][rack, 30:].mean() > 0.9 and not res["window_flags"][:, :30].any()
    # without the shift the same night has no alert (the test can fail)
    x0 = x.copy()
    for m in ("temp_inlet", "temp_cpu0"):
        x0[np.ix_(rack, np.arange(h + 30, h + 96), [METRICS.index(m)])] -= 6.0
    assert _kinds(_judge(cluster, x0, jobs)) == []


def test_single_node_fault_is_a_node_alert(cluster: dict) -> None:
    x = cluster["x"].copy()
    h = HIST_DAYS * 96
    i = 13  # rack r01; a fan failure: CPU +18 degC for 5 hours
    x[i, h + 40:h + 60, METRICS.index("temp_cpu0")] += 18.0
    res = _judge(cluster, x)
    assert _kinds(res) == [("node", "cn0013")], _kinds(res)
    row = res["rows"][0]
    assert row["top_metrics"][0] == "temp_cpu0"
    assert row["vicinity_outlier"] is True  # Ghiasvand & Ciorba: alone in its rack's minority cluster
    assert row["severity"] in ("low", "medium", "high") and row["score"] > row["threshold"]
    assert res["window_flags"][i].sum() >= 15 and res["window_flags"].sum() == res["window_flags"][i].sum()


def _burst_night(cluster: dict, job_nodes: list[int], one_job: bool,
                 burst_nodes: list[int] | None = None) -> tuple[np.ndarray, pd.DataFrame]:
    """Night where ``job_nodes`` run from 02:00 to 08:00 (one job, or one single-node job each) and
    ``burst_nodes`` (default: all of them) read Lustre at 40x the usual job rate from 04:15 to 05:00."""
    h = HIST_DAYS * 96
    nodes = cluster["nodes"]
    names = {nodes[i] for i in job_nodes}
    old = cluster["jobs"]
    jobs = old[~(old["node_list"].map(lambda nl: bool(set(nl) & names)) & old["job_id"].str.startswith(f"{HIST_DAYS}-"))]
    start = (DAY0 + pd.Timedelta(days=HIST_DAYS, hours=2)).tz_localize("UTC")
    groups = [[nodes[i] for i in job_nodes]] if one_job else [[nodes[i]] for i in job_nodes]
    new = pd.DataFrame([{"job_id": f"burst{k}", "start_time": start, "end_time": start + pd.Timedelta(hours=6),
                         "node_list": g} for k, g in enumerate(groups)])
    jobs = pd.concat([jobs, new], ignore_index=True)
    x = cluster["x"].copy()
    busy, _, _, _ = job_grid(jobs, nodes, cluster["times"], STEP)
    rng = np.random.default_rng(1)
    x[:, h:] = np.where(busy[:, h:, None], BUSY, IDLE) * cluster["level"] * np.exp(rng.normal(0, 0.03, x[:, h:].shape))
    bn = job_nodes if burst_nodes is None else burst_nodes
    x[np.ix_(bn, np.arange(h + 17, h + 20), [METRICS.index("lustre_read_bytes")])] *= 40
    return x, jobs


def test_shared_job_burst_does_not_flag_the_jobs_nodes(cluster: dict) -> None:
    nodes = cluster["nodes"]
    job_nodes = [1, 2, 9, 10, 17, 18]  # two nodes in each of three racks: no rack median absorbs the burst
    x, jobs = _burst_night(cluster, job_nodes, one_job=True)
    res = _judge(cluster, x, jobs)
    assert _kinds(res) == [], _kinds(res)
    assert res["evidence"].job_explained > 0
    # the same burst on nodes that each run their own job is each node's anomaly: the job vicinity is what
    # explains it above
    x1, jobs1 = _burst_night(cluster, job_nodes, one_job=False)
    assert {s for k, s in _kinds(_judge(cluster, x1, jobs1)) if k == "node"} == {nodes[i] for i in job_nodes}
    # and within the shared job, a burst on one node only is that node's anomaly
    x2, jobs2 = _burst_night(cluster, job_nodes, one_job=True, burst_nodes=job_nodes[3:4])
    assert _kinds(_judge(cluster, x2, jobs2)) == [("node", nodes[job_nodes[3]])]


def test_job_grid_marks_busy_transitions_and_running_jobs() -> None:
    nodes = ["a", "b", "c"]
    times = np.array([np.datetime64("2026-01-01T00:00") + np.timedelta64(15 * i, "m") for i in range(8)],
                     dtype="datetime64[ns]")
    jobs = pd.DataFrame([
        {"job_id": "1", "start_time": pd.Timestamp("2026-01-01T00:20Z"), "end_time": pd.Timestamp("2026-01-01T01:05Z"),
         "node_list": ["a", "b"]},
        {"job_id": "2", "start_time": pd.Timestamp("2026-01-01T01:30Z"), "end_time": pd.NaT, "node_list": ["c", "zz"]},
    ])
    busy, trans, job, names = job_grid(jobs, nodes, times, STEP, transition_windows=1)
    assert busy[0].tolist() == [False, True, True, True, True, False, False, False]
    assert trans[0].tolist() == [False, True, True, False, True, True, False, False]
    assert busy[2].tolist() == [False] * 6 + [True, True]  # still running: busy to the end of the day
    assert trans[2].tolist() == [False] * 6 + [True, True]
    assert names == ["1"] and job[0, 1] == 0 and job[2].max() == -1  # job 2 has one known node
