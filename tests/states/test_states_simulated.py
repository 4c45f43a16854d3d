"""States against the simulator's ground truth (tasks/simulate), through the real ingest parsers.

A small cluster is simulated for one day more than evaluated (sacct lists a job on the day it ends,
so jobs running at the end of the window appear in the next day's file), ingested with the project's
parsers into a store, and derived with :func:`nodewatch.tasks.states.build.build_states`. Checks: >= 99% of
node-minutes equal the ground-truth state, every injected failure overlaps a DOWN interval
(timeline without overlays, so failures inside maintenance/emergency windows count too), and built
day by day (as the nightly flow does) the failure events are the same as from one build and match
the simulator's failure table one to one, shadowed or not (``shadowed_by`` names the overlay a failure
begins inside; rack-event failures mostly begin inside the emergency UNSCHEDULED_RESV).

Syslog is ingested with the known-node check and the setting ``service_hosts=["slurmctl01"]`` (as
the demo does): the controller logs slurmctld's "not responding" lines. Every file, reservations
included (``scontrol`` field names, the site flag ``UNSCHEDULED``), is ingested as the simulator wrote it.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from nodewatch.models.states.timeline import State, to_grid
from nodewatch.schemas.states import STATE_CODES

SIM = dict(
    n_nodes=96,
    nodes_per_rack=48,
    racks_per_row=1,
    misconfig_rack=1,
    misconfig_start_day=0,
    ldms_racks=(0,),
    syslog_rfc5424_rows=(0,),
    node_mtbf_days=5.0,
    rack_events_per_year=200.0,
    maint_period_days=2,
    syslog_lines_per_node_day=100.0,
    workers=1,
    scheduler="synchronous",
)
EVAL_DAYS = 2
SERVICE_HOSTS = ["slurmctl01"]  # the Slurm controller of the simulated cluster (flows/demo.py: DEMO_SERVICE_HOSTS)


def _ingest(store, source, paths):
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.ingest.run import new_ingestor

    rec = RunRecorder(store, "ingest", {"source": source})
    ing = new_ingestor(store, source, rec, service_hosts=SERVICE_HOSTS)
    for p in paths:
        ing.add_file(p)
    ing.finish(data_docs=False)
    rec.finish()
    return rec.manifest.counts.get(ing.schema.name)


@pytest.mark.slow
def test_states_match_simulator_ground_truth(store, tmp_path):
    pytest.importorskip("nodewatch.tasks.simulate.cluster")
    from nodewatch.tasks.simulate.cluster import simulate
    from nodewatch.tasks.simulate.config import SimConfig
    from nodewatch.tasks.states.build import build_states
    from nodewatch.tasks.states.classify import reservation_state

    cfg = SimConfig(**SIM)
    out = tmp_path / "sim"
    simulate(cfg, out, list(range(EVAL_DAYS + 1)))
    for source, pattern in (
        ("topology", "topology/*.csv"),
        ("reservations", "reservations/*/*.csv"),
        ("jobs", "jobs/sacct/*/*.txt"),
        ("syslog", "syslog/*/*.log"),
    ):
        counts = _ingest(store, source, sorted(out.glob(pattern)))
        assert counts is not None and counts.staged > 0 and counts.quarantined == 0, (source, counts)
    res = build_states(store, cfg.start, cfg.start + timedelta(days=EVAL_DAYS), run_id="sim-check")
    b = res["build"]
    grid = to_grid(b.timeline, len(b.nodes), b.t_start, b.t_end)
    truth = pd.concat([pd.read_parquet(f) for f in sorted(out.glob("truth/states/*/*.parquet"))])
    tg = np.zeros_like(grid)
    idx = {n: i for i, n in enumerate(b.nodes)}
    m_ns = 60 * 10**9
    for r in truth.itertuples():
        a = -(-(pd.Timestamp(r.start).value - b.t_start) // m_ns)
        z = -(-(pd.Timestamp(r.end).value - b.t_start) // m_ns)
        if z > 0 and a < grid.shape[1]:
            tg[idx[r.node], max(a, 0) : z] = STATE_CODES[r.state]
    assert (tg > 0).all(), "ground truth does not cover the window"
    agree = float((grid == tg).mean())
    confusion = Counter(zip(tg[grid != tg].tolist(), grid[grid != tg].tolist(), strict=True)).most_common(5)
    print(f"node-minutes agreeing with ground truth: {agree:.5f}; top confusions (truth, derived): {confusion}")
    assert agree >= 0.99, confusion
    # every state of the paper that the simulator injected shows up
    assert {State.DOWN, State.BOOTING, State.JOB_RUNNING, State.IDLE} <= set(np.unique(grid).tolist())
    # every injected failure is found as a DOWN interval
    fail = pd.concat([pd.read_parquet(f) for f in sorted(out.glob("truth/failures/*/*.parquet"))]).drop_duplicates("event_id")
    tl = b.timeline_no_overlay
    fs = fail["start"].astype("int64").to_numpy()
    fe = fail["end"].astype("int64").to_numpy()
    inside = (fe > b.t_start) & (fs < b.t_end)
    assert inside.sum() >= 10
    missed = []
    for node, s, e in zip(fail["node"][inside], fs[inside], fe[inside], strict=True):
        m = (tl.node == idx[node]) & (tl.state == State.DOWN) & (tl.start < e) & (tl.end > s)
        if not m.any():
            missed.append((node, s, e))
    assert not missed, missed
    # built day by day (the nightly flow): the same failure events as one build, one per injected failure
    fe_whole = store.read_staged("failure_events").to_pandas().sort_values(["start", "node"]).reset_index(drop=True)
    for i in range(EVAL_DAYS):
        d = cfg.start + timedelta(days=i)
        build_states(store, d, d + timedelta(days=1), run_id=f"sim-day{i}")
    fe_daily = store.read_staged("failure_events").to_pandas().sort_values(["start", "node"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(fe_daily, fe_whole)
    # truth: every failure detected in the window is one failure event, shadowed or not. Its shadowed_by is the
    # overlay of the node in effect at detection (UNSCHEDULED_RESV, the emergency reservation opened at the first
    # crash of a rack event, outranks ADMIN_RESV); none of these (non-maintenance) failures is ADMIN-shadowed.
    resv = store.read_staged("reservations").to_pandas()
    overlays = [
        (n, r.start, r.end, st.name)
        for r in resv.itertuples()
        if (st := reservation_state(r.name, list(r.flags))) in (State.ADMIN_RESV, State.UNSCHEDULED_RESV)
        for n in r.node_list
    ]

    def overlay_at(node: str, t: pd.Timestamp) -> str | None:
        hit = {st for x, a, z, st in overlays if x == node and a <= t < z}
        return "UNSCHEDULED_RESV" if "UNSCHEDULED_RESV" in hit else ("ADMIN_RESV" if hit else None)

    t0, t1 = pd.Timestamp(b.t_start, tz="UTC"), pd.Timestamp(b.t_end, tz="UTC")
    truth_f = fail[(fail.detected >= t0) & (fail.detected < t1)].copy()
    truth_f["expected"] = [overlay_at(n, t) for n, t in zip(truth_f.node, truth_f.detected, strict=True)]
    got = fe_daily[(fe_daily.start >= t0) & (fe_daily.start < t1)].reset_index(drop=True)
    got["event_row"] = np.arange(len(got))
    assert len(truth_f) >= 10
    # one to one: each injected failure matches exactly one event starting within 10 min of its detection
    pairs = truth_f.merge(got, on="node", suffixes=("_truth", "_event"))
    pairs = pairs[(pairs.start_event - pairs.detected).abs() < pd.Timedelta(minutes=10)]
    assert pairs.event_id.nunique() == len(truth_f) and len(pairs) == len(truth_f), (len(pairs), len(truth_f))
    assert pairs.event_row.nunique() == len(pairs)
    sb = pairs.shadowed_by.where(pairs.shadowed_by.notna(), None)
    assert list(sb) == list(pairs.expected)
    assert not (sb == "ADMIN_RESV").any(), pairs[sb == "ADMIN_RESV"]
    # events matching no injected failure can only be maintenance reboots (ADMIN-shadowed)
    extra = got[~got.event_row.isin(pairs.event_row)]
    assert (extra.shadowed_by == "ADMIN_RESV").all(), extra
    by = Counter(sb.fillna("none"))
    print(
        f"failure events {len(got)}; simulator failures detected in the window {len(truth_f)} "
        f"({int(truth_f.rack_correlated.sum())} rack-correlated), every one published once; shadowed_by: {dict(by)}; "
        f"rack-correlated by shadowed_by: {dict(Counter(sb[pairs.rack_correlated.to_numpy(bool)].fillna('none')))}; "
        f"events without an injected failure (ADMIN-shadowed maintenance reboots): {len(extra)}"
    )
