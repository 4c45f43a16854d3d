"""Simulator statistics: the failure, anomaly and precursor processes recovered from written truth; physics of one rack."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats

from nodewatch.tasks.simulate.cluster import simulate
from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.hostlist import expand
from nodewatch.tasks.simulate.metrics import METRICS
from nodewatch.tasks.simulate.schedule import build_schedule

LONG = dict(
    n_nodes=96,
    nodes_per_rack=24,
    racks_per_row=2,
    step_s=3600,
    node_mtbf_days=4.0,
    frail_nodes=3,
    rack_events_per_year=60.0,
    misconfig_rack=1,
    misconfig_start_day=2,
    misconfig_period_days=20,
    syslog_lines_per_node_day=2.0,
    ldms_racks=(),
    workers=2,
    scheduler="threads",
)
LONG_DAYS = 60


@pytest.fixture(scope="module")
def long_run(tmp_path_factory) -> tuple[SimConfig, Path]:
    """60 days of 96 nodes at a 1-h step (cheap telemetry): enough failures and anomalies for statistics."""
    cfg = SimConfig(**LONG)
    out = tmp_path_factory.mktemp("long")
    simulate(cfg, out, list(range(LONG_DAYS)))
    return cfg, out


def _truth(out: Path, name: str) -> pd.DataFrame:
    df = pd.concat([pq.read_table(p).to_pandas() for p in sorted((out / f"truth/{name}").rglob("*.parquet"))])
    return df.drop_duplicates("event_id").reset_index(drop=True)  # events spanning midnight are in both days


@pytest.mark.slow
def test_weibull_shape_refitted_from_written_failures(long_run):
    """Up-times between independent failures (rack-correlated and frail-node failures excluded) recover shape 0.75."""
    cfg, out = long_run
    f = _truth(out, "failures").sort_values(["node", "start"])
    gaps = []
    for _, g in f.groupby("node"):
        if g["frail_node"].any():
            continue
        corr = g["rack_correlated"].to_numpy()
        st, en = g["start"].to_numpy(), g["end"].to_numpy()
        for i in range(len(g) - 1):
            if not corr[i] and not corr[i + 1]:  # a rack event in between would cut the renewal interval
                gaps.append((st[i + 1] - en[i]) / np.timedelta64(1, "s"))
    g = np.asarray(gaps)
    assert len(g) > 300, len(g)
    k, _, _ = stats.weibull_min.fit(g, floc=0)
    # a 60-day window under-samples long up-times (they do not fit in it), which biases k up a little
    assert abs(k - cfg.failure_weibull_shape) < 0.12, k


def test_weibull_shape_recovered_from_the_failure_process():
    """Long horizon, process level (no window truncation): tight tolerance."""
    cfg = SimConfig(n_nodes=60, nodes_per_rack=20, node_mtbf_days=10.0, failure_weibull_shape=0.75, frail_nodes=2)
    from nodewatch.tasks.simulate.failures import frail_nodes, merge_down_intervals, node_renewal_failures

    frail = set(frail_nodes(cfg).tolist())
    gaps = []
    for n in range(cfg.n_nodes):
        if n in frail:
            continue
        f = merge_down_intervals(node_renewal_failures(cfg, n, False, 3000 * 86400.0))
        gaps.append(f["t_fail"].to_numpy()[1:] - f["t_up"].to_numpy()[:-1])
    g = np.concatenate(gaps)
    assert len(g) > 5000
    k, _, _ = stats.weibull_min.fit(g, floc=0)
    assert abs(k - 0.75) < 0.04
    assert abs(g.mean() / 86400 - 10.0) < 1.0


@pytest.mark.slow
def test_anomaly_share_at_the_default_setting_from_written_truth(long_run):
    cfg, out = long_run
    a = _truth(out, "anomalies")
    a = a[a["type"] != "misconfiguration"]
    t0 = pd.Timestamp(cfg.start, tz="UTC")
    t1 = t0 + pd.Timedelta(days=LONG_DAYS)
    covered = (a["end"].clip(t0, t1) - a["start"].clip(t0, t1)).dt.total_seconds().sum()
    share = covered / (cfg.n_nodes * LONG_DAYS * 86400.0)
    assert cfg.anomaly_share == SimConfig().anomaly_share == 0.01
    assert abs(share - 0.01) < 0.004, share
    assert set(a["type"]) == {"memory_leak", "cpu_hog", "thermal_fan_failure", "network_degradation", "disk_slowdown"}


@pytest.mark.slow
def test_precursor_share_frail_nodes_and_rack_clustering_from_written_truth(long_run):
    cfg, out = long_run
    f = _truth(out, "failures")
    assert len(f) > 500
    assert abs(f["has_precursor"].mean() - cfg.precursor_share) < 0.07, f["has_precursor"].mean()
    p = _truth(out, "precursors")
    t_first = pd.Timestamp(cfg.start, tz="UTC") + pd.Timedelta(cfg.precursor_max_s, "s")
    assert set(f.loc[f["has_precursor"] & (f["start"] > t_first), "event_id"]) <= set(p["event_id"])
    assert not set(p["event_id"]) & set(f.loc[~f["has_precursor"], "event_id"])
    # frail nodes fail several times more often than the others (frail_factor 15 on their MTBF)
    per_node = (
        f[~f["rack_correlated"]].groupby("node").size().reindex([cfg.node_name(i) for i in range(cfg.n_nodes)], fill_value=0)
    )
    frail = set(f.loc[f["frail_node"], "node"])
    assert len(frail) == cfg.frail_nodes
    assert per_node[list(frail)].mean() > 3 * per_node.drop(list(frail)).mean()
    # rack-correlated failures come in bursts: another failure of the same rack within rack_event_spread_s
    topo = pd.read_csv(out / "topology/topology.csv").set_index("node")["rack"]
    f["rack"] = f["node"].map(topo)
    t = f["start"].astype("int64") / 1e9

    def near_share(sel: pd.Series) -> float:
        hits = []
        for i in np.flatnonzero(sel.to_numpy()):
            same = (f["rack"] == f["rack"].iat[i]) & sel & (f.index != f.index[i])
            hits.append(bool((np.abs(t[same] - t.iat[i]) <= cfg.rack_event_spread_s).any()))
        return float(np.mean(hits))

    assert f["rack_correlated"].sum() >= 10
    assert near_share(f["rack_correlated"]) > 0.9
    assert near_share(~f["rack_correlated"]) < 0.2


@pytest.mark.slow
def test_no_job_on_the_misconfigured_rack_during_its_window(long_run):
    cfg, out = long_run
    a = _truth(out, "anomalies")
    mis = a[a["type"] == "misconfiguration"]
    rack_nodes = set(pd.read_csv(out / "topology/topology.csv").query("rack == 'r01'")["node"])
    assert set(mis["node"]) == rack_nodes and mis["start"].nunique() == LONG_DAYS // cfg.misconfig_period_days
    windows = mis[["start", "end"]].drop_duplicates()
    n_jobs = 0
    for p in sorted((out / "jobs/sacct").rglob("*.txt")):
        lines = p.read_text().splitlines()
        head = lines[0].split("|")
        for line in lines[1:]:
            r = dict(zip(head, line.split("|"), strict=True))
            if "." in r["JobID"] or r["NodeList"] == "None assigned" or r["Start"] == r["End"]:
                continue
            s_, e_ = pd.Timestamp(r["Start"], tz="UTC"), pd.Timestamp(r["End"], tz="UTC")
            on = set(expand(r["NodeList"])) & rack_nodes
            n_jobs += bool(on)
            for w in windows.itertuples():
                assert not (on and s_ < w.end and e_ > w.start), (r["JobID"], w)
    assert n_jobs > 50  # the rack does run jobs outside its window


@pytest.fixture(scope="module")
def one_minute_rack(tmp_path_factory) -> pd.DataFrame:
    """One 48-node rack-day at the default 1-min step, wide (node, timestamp) x metric."""
    cfg = SimConfig(n_nodes=48, ldms_racks=(), load_scale=2.0, workers=1, scheduler="synchronous")
    out = tmp_path_factory.mktemp("minute")
    from nodewatch.tasks.simulate.cluster import render_batch

    render_batch(build_schedule(cfg, 1), out, 0, 0)
    df = pq.read_table(next((out / "telemetry/long").rglob("*.parquet"))).to_pandas()
    return df.pivot_table(index=["node", "timestamp"], columns="metric", values="value")


def test_physical_correlations(one_minute_rack):
    """power <- load, temperature <- power, fans <- temperature (PWM curve from 28 C) at the 1-min step."""
    corr = {k: [] for k in ("power", "temp", "fan")}
    for _, g in one_minute_rack.groupby(level="node"):
        if g["cpu0_user"].std() < 5:  # only nodes that ran jobs (idle nodes: noise only)
            continue
        corr["power"].append(np.corrcoef(g["cpu0_user"], g["power_cpu"])[0, 1])
        corr["temp"].append(np.corrcoef(g["power_cpu"], g["temp_cpu0"])[0, 1])
        corr["fan"].append(np.corrcoef(np.maximum(g["temp_cpu0"], g["temp_cpu1"]), g["fan0_rpm"])[0, 1])
    assert len(corr["power"]) >= 10
    assert np.median(corr["power"]) > 0.9
    assert np.median(corr["temp"]) > 0.8
    assert np.median(corr["fan"]) > 0.7, np.median(corr["fan"])


def test_cpu_temperatures_realistic_and_inside_both_catalogues(one_minute_rack):
    from nodewatch.schemas.metrics import CATALOGUE

    w = one_minute_rack
    util = (w["cpu0_user"] + w["cpu0_sys"]) / 100
    busy, idle = w.loc[util > 0.8, "temp_cpu0"], w.loc[util < 0.05, "temp_cpu0"]
    assert len(busy) > 100 and 60 <= busy.median() <= 80, busy.describe()
    assert 25 <= idle.median() <= 45, idle.describe()
    assert w["fan0_rpm"].loc[util > 0.8].median() > 1.5 * w["fan0_rpm"].loc[util < 0.05].median()
    for m in METRICS:
        v = w[m.name].dropna()
        assert v.between(m.lo, m.hi).all(), m.name
        c = CATALOGUE[m.name]
        if m.kind == "gauge":  # the staged catalogue (schemas/metrics.py) accepts every simulated gauge
            assert v.between(c.min if c.min is not None else -np.inf, c.max if c.max is not None else np.inf).all(), m.name
