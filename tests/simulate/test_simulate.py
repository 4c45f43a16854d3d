"""Simulator tests: formats parse with standard libraries, determinism, statistical properties."""

from __future__ import annotations

import csv
import hashlib
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nodewatch.schemas.names import is_valid_node_name
from nodewatch.tasks.simulate.cluster import load_state, simulate
from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.hostlist import compress, expand
from nodewatch.tasks.simulate.metrics import COUNTERS, METRIC_NAMES, METRICS
from nodewatch.tasks.simulate.schedule import build_schedule
from nodewatch.tasks.simulate.truth import STATES

RFC5424 = re.compile(r"^<(\d{1,3})>1 (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00) (\S+) (\S+) (\d+|-) - - (.*)$")
RFC3164 = re.compile(r"^<(\d{1,3})>([A-Z][a-z]{2}) ([ \d]\d) (\d\d:\d\d:\d\d) (\S+) ([^\[\s:]+)(?:\[(\d+)\])?: (.*)$")
NAGIOS = re.compile(
    r"^\[(\d+)\] (SERVICE ALERT: [^;]+;[^;]+;(OK|WARNING|CRITICAL|UNKNOWN);(SOFT|HARD);\d+;.*|"
    r"HOST ALERT: [^;]+;(UP|DOWN|UNREACHABLE);(SOFT|HARD);\d+;.*|LOG ROTATION: DAILY|LOG VERSION: 2\.0)$"
)

SMALL = dict(
    n_nodes=48,
    nodes_per_rack=24,
    step_s=300,
    load_scale=3.0,
    racks_per_row=1,
    misconfig_rack=1,
    misconfig_start_day=1,
    ldms_racks=(0,),
    syslog_rfc5424_rows=(0,),
    node_mtbf_days=5.0,
    rack_events_per_year=200.0,
    maint_period_days=2,
    syslog_lines_per_node_day=100.0,
    workers=1,
    scheduler="synchronous",
)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> tuple[SimConfig, Path]:
    """Two days of a 48-node cluster (5-min step) with frequent failures, rack events and maintenance."""
    cfg = SimConfig(**SMALL)
    out = tmp_path_factory.mktemp("sim")
    simulate(cfg, out, [0, 1])
    return cfg, out


def test_metric_catalogue_has_50_plus_metrics_with_kinds():
    assert len(METRICS) >= 50
    assert len(set(METRIC_NAMES)) == len(METRIC_NAMES)
    assert {m.kind for m in METRICS} == {"gauge", "counter"}
    must = {"cpu0_load", "mem_used", "power_node", "temp_inlet", "fan0_rpm", "net_rx_bytes", "ib_errors", "lustre_ops"}
    assert must <= set(METRIC_NAMES)


def test_hostlist_roundtrip():
    names = ["cn0001", "cn0002", "cn0003", "cn0004", "cn0017"]
    assert compress(names) == "cn[0001-0004,0017]"
    assert expand("cn[0001-0004,0017]") == names
    assert compress(["cn0123"]) == "cn0123"


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="step_s"):
        SimConfig(step_s=7)
    with pytest.raises(ValueError, match="anomaly_share"):
        SimConfig(anomaly_share=0.9)
    with pytest.raises(ValueError, match="n_nodes"):
        SimConfig(n_nodes=10000)


def test_misconfigured_rack_out_of_range_falls_back_to_the_middle_rack():
    from nodewatch.tasks.simulate.anomalies import misconfig_windows

    cfg = SimConfig(n_nodes=96)  # 2 racks, default misconfig_rack=13
    assert cfg.misconfigured_rack == 1 and misconfig_windows(cfg, 30 * 86400.0)
    assert SimConfig(n_nodes=1000).misconfigured_rack == 13
    assert SimConfig(n_nodes=96, misconfig_rack=-1).misconfigured_rack == -1


def test_config_json_roundtrip():
    cfg = SimConfig(**SMALL)
    assert SimConfig.from_json(cfg.to_json()) == cfg


def test_telemetry_parquet_schema_and_ranges(small_run):
    cfg, out = small_run
    files = sorted((out / "telemetry/long").rglob("*.parquet"))
    assert len(files) == 2  # rack 1 x 2 days (rack 0 goes to LDMS)
    steps = 86400 // cfg.step_s
    t = pq.read_table(files[0])
    assert t.schema.field("timestamp").type == pa.timestamp("ns", tz="UTC")
    assert t.schema.field("node").type == pa.string() and t.schema.field("metric").type == pa.string()
    assert t.schema.field("value").type == pa.float64()
    df = t.to_pandas()
    assert set(df["metric"].unique()) == set(METRIC_NAMES)
    assert all(is_valid_node_name(n) for n in df["node"].unique())
    for m in METRICS:
        v = df.loc[df["metric"] == m.name, "value"]
        assert v.between(m.lo, m.hi).all(), m.name
    assert not df.duplicated(["timestamp", "node", "metric"]).any()
    # gaps exist (collector outages / down nodes) but are a small share
    per_node = df.groupby("node")["timestamp"].nunique()
    assert per_node.max() <= steps and per_node.mean() > 0.6 * steps and per_node.min() < steps


def test_counters_monotonic_between_reboots_and_continuous_across_midnight(small_run):
    cfg, out = small_run
    df = pd.concat([pq.read_table(f).to_pandas() for f in sorted((out / "telemetry/long").rglob("*.parquet"))])
    boots = pd.concat([pq.read_table(f).to_pandas() for f in (out / "truth/failures").rglob("*.parquet")])
    sched = build_schedule(cfg, 2)
    reboots = set()
    for x in pd.concat([sched.failures, sched.reboots]).itertuples():
        reboots.add(int(x.node))
    del boots
    c = df[df["metric"].isin(COUNTERS)].sort_values(["node", "metric", "timestamp"])
    d = c.groupby(["node", "metric"])["value"].diff()
    bad = c[d < 0]
    # decreases only on rebooted nodes (counter reset)
    assert set(bad["node"].map(lambda n: int(n[2:]) - 1)) <= reboots
    never = c[~c["node"].map(lambda n: int(n[2:]) - 1).isin(reboots)]
    assert (never.groupby(["node", "metric"])["value"].diff().dropna() >= 0).all()


def test_ldms_csv_parses(small_run):
    cfg, out = small_run
    f = sorted((out / "telemetry/ldms").rglob("*.csv"))[0]
    with open(f, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][:5] == ["#Time", "Time_usec", "ProducerName", "component_id", "job_id"]
    assert rows[0][5:] == list(METRIC_NAMES)
    for r in rows[1:200]:
        assert len(r) == len(rows[0])
        sec, frac = r[0].split(".")
        assert len(frac) == 6 and int(frac) == int(r[1])
        assert is_valid_node_name(r[2])
        float(r[5])
    times = [float(r[0]) for r in rows[1:]]
    assert times == sorted(times)


def test_syslog_lines_match_rfc(small_run):
    cfg, out = small_run
    logs = sorted((out / "syslog").rglob("*.log"))
    assert {p.name for p in logs} == {"r00.log", "r01.log", "mgmt.log"}
    n = 0
    for p in logs:
        rx = RFC5424 if p.name in ("r00.log", "mgmt.log") else RFC3164
        for line in p.read_text(encoding="utf-8").splitlines():
            m = rx.match(line)
            assert m, f"{p}: {line!r}"
            assert 0 <= int(m.group(1)) <= 191
            n += 1
    assert n > 48 * 2 * 50
    text = "\n".join(p.read_text() for p in logs)
    assert "not responding, setting DOWN" in text and "now responding" in text
    assert "Startup finished in" in text and "Linux version" in text


def test_syslog_has_many_heavy_tailed_templates(small_run):
    from nodewatch.tasks.simulate.syslog_templates import BACKGROUND, EVENT

    assert len(BACKGROUND) + sum(len(v) for v in EVENT.values()) >= 200
    from nodewatch.tasks.simulate.syslog import BG_PROBS

    top = np.sort(BG_PROBS)[::-1]
    assert top[:10].sum() > 0.4 and top[-100:].sum() < 0.1


def test_sacct_and_swf_parse(small_run):
    cfg, out = small_run
    sacct = (out / "jobs/sacct/date=2026-01-02/sacct.txt").read_text().splitlines()
    head = sacct[0].split("|")
    assert head[:3] == ["JobID", "JobIDRaw", "JobName"] and "NodeList" in head and "State" in head
    states = set()
    for line in sacct[1:]:
        f = dict(zip(head, line.split("|"), strict=True))
        states.add(f["State"].split(" ")[0])
        assert re.fullmatch(r"\d+(\.(batch|extern))?", f["JobID"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", f["End"])
        assert re.fullmatch(r"(\d+-)?\d\d:\d\d:\d\d", f["Elapsed"])
        if f["NodeList"] != "None assigned":
            assert all(is_valid_node_name(n) for n in expand(f["NodeList"]))
    assert "COMPLETED" in states
    swf = (out / "jobs/swf/date=2026-01-02/jobs.swf").read_text().splitlines()
    body = [x for x in swf if not x.startswith(";")]
    assert body and all(len(x.split()) == 18 for x in body)


def test_node_fail_jobs_exist_over_horizon():
    cfg = SimConfig(**SMALL)
    s = build_schedule(cfg, 4)
    st = s.jobs.table["state"].value_counts()
    assert st.get("NODE_FAIL", 0) > 0 and st.get("TIMEOUT", 0) > 0 and st.get("CANCELLED", 0) > 0


def test_nagios_and_tickets(small_run):
    cfg, out = small_run
    for p in (out / "alerts/nagios").rglob("*.log"):
        for line in p.read_text().splitlines():
            assert NAGIOS.match(line), line
    tickets = pd.concat([pd.read_csv(p) for p in (out / "alerts/tickets").rglob("*.csv")])
    assert list(tickets.columns) == [
        "ticket_id",
        "node",
        "service",
        "alert_time",
        "false_positive",
        "opened",
        "closed",
        "resolution",
        "summary",
    ]
    assert set(tickets["resolution"]) <= {"Fixed", "False Positive"}
    # every ticket points at a HARD CRITICAL line of the Nagios log (same node, service, second)
    hard = set()
    for p in (out / "alerts/nagios").rglob("*.log"):
        for m in re.finditer(r"^\[(\d+)\] SERVICE ALERT: ([^;]+);([^;]+);CRITICAL;HARD;", p.read_text(), re.M):
            hard.add((m.group(2), m.group(3), int(m.group(1))))
    for t in tickets.itertuples():
        assert (t.node, t.service, int(pd.Timestamp(t.alert_time).timestamp())) in hard
    assert (tickets["false_positive"] == (tickets["resolution"] == "False Positive")).all()


def test_reservations_and_topology(small_run):
    cfg, out = small_run
    res = pd.concat([pd.read_csv(p) for p in (out / "reservations").rglob("*.csv")])
    assert res["Flags"].str.contains("MAINT").any() and len(res) > 0
    user = res[~res["Flags"].str.contains("MAINT")]
    assert len(user) and user["ReservationName"].str.startswith("resv_u").all()
    sacct = (out / "jobs/sacct/date=2026-01-02/sacct.txt").read_text()
    assert "|resv_u" in sacct  # the project's jobs ran inside its reservation
    topo = pd.read_csv(out / "topology/topology.csv")
    assert list(topo.columns) == ["node", "rack", "row", "chassis", "position", "architecture"]
    assert len(topo) == 48 and topo["node"].map(is_valid_node_name).all()


def test_state_timeline_tiles_each_day(small_run):
    cfg, out = small_run
    st = pq.read_table(out / "truth/states/date=2026-01-01/part.parquet").to_pandas()
    assert set(st["state"]) <= set(STATES)
    dur = (st["end"] - st["start"]).dt.total_seconds().groupby(st["node"]).sum()
    assert len(dur) == 48 and np.allclose(dur, 86400)
    assert {"IDLE", "JOB_RUNNING"} <= set(st["state"])
    st2 = pq.read_table(out / "truth/states/date=2026-01-02/part.parquet").to_pandas()
    seen = set(st["state"]) | set(st2["state"])
    assert {"RESERVED_IDLE", "UNSCHEDULED_RESV", "DOWN", "BOOTING"} <= seen, seen


def test_all_eight_states_occur_and_shadow_by_priority():
    from nodewatch.tasks.simulate.truth import states_table

    cfg = SimConfig(**SMALL)
    s = build_schedule(cfg, 5)
    st = pd.concat([states_table(s, d).to_pandas() for d in range(5)])
    assert set(st["state"]) == set(STATES)
    # inside an admin window every node of the row is ADMIN_RESV unless an emergency window shadows it
    w = s.maint.iloc[0]
    t = pd.Timestamp(cfg.epoch_s + (w.start + w.end) / 2, unit="s", tz="UTC")
    row_nodes = {s.topo.names[i] for i in np.flatnonzero(s.topo.row == w.row)}
    at = st[(st["start"] <= t) & (st["end"] > t) & st["node"].isin(row_nodes)]
    assert len(at) == len(row_nodes) and set(at["state"]) <= {"ADMIN_RESV", "UNSCHEDULED_RESV"}


def test_failed_node_is_silent_while_down(small_run):
    cfg, out = small_run
    f = pq.read_table(out / "truth/failures/date=2026-01-01/part.parquet").to_pandas()
    tel = pd.concat([pq.read_table(p).to_pandas() for p in (out / "telemetry/long/date=2026-01-01").glob("*.parquet")])
    tel = tel[tel["metric"] == "power_node"]
    m = f.merge(tel, on="node")
    assert len(m) > 0
    inside = (m["timestamp"] >= m["start"]) & (m["timestamp"] < m["end"])
    assert not inside.any(), m[inside].head()
    # and the node does report outside its down interval
    assert (~inside).sum() > 0


def test_determinism_same_day_same_bytes_regardless_of_range(tmp_path):
    cfg = SimConfig(**SMALL)
    a, b = tmp_path / "a", tmp_path / "b"
    simulate(cfg, a, [0, 1, 2])
    simulate(cfg, b, [1])
    fa = {p.relative_to(a): p for p in a.rglob("*") if p.is_file() and "date=2026-01-02" in str(p)}
    fb = {p.relative_to(b): p for p in b.rglob("*") if p.is_file() and "date=2026-01-02" in str(p)}
    assert fa.keys() == fb.keys() and len(fa) > 10
    for k in fa:
        assert hashlib.sha256(fa[k].read_bytes()).digest() == hashlib.sha256(fb[k].read_bytes()).digest(), k
    cfg2, days = load_state(b)
    assert cfg2 == cfg and days == [1]


def _parse_files(source: str, fmt: str, files: list[Path]) -> pa.Table:
    from datetime import UTC, datetime

    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.inputs import open_binary
    from nodewatch.tasks.ingest.registry import sources

    f = next(x for x in sources()[source].formats if x.name == fmt)
    parts = []
    for p in files:
        with open_binary(p) as s:
            ctx = ParseContext(name=p.name, reference_time=datetime(2026, 3, 1, tzinfo=UTC))
            parts += [r.rows for r in f.parse(s, ctx) if r.rows is not None and r.rows.num_rows]
    return pa.concat_tables(parts)


def test_nagios_warning_critical_ok_parse_and_tickets_join(small_run):
    """WARNING (SOFT and HARD) precedes a share of CRITICALs, WARNING-only episodes recover (OK SOFT/HARD); the
    project's alerts parser reads it all and every ticket joins a HARD CRITICAL alert on alert_id."""
    cfg, out = small_run
    alerts = _parse_files("alerts", "nagios", sorted((out / "alerts/nagios").rglob("*.log"))).to_pandas()
    tickets = _parse_files("tickets", "tickets_csv", sorted((out / "alerts/tickets").rglob("*.csv"))).to_pandas()
    svc = alerts[alerts["service"] != "HOST"]
    pairs = set(zip(svc["state"], svc["state_type"], strict=True))
    assert {
        ("WARNING", "SOFT"),
        ("WARNING", "HARD"),
        ("CRITICAL", "SOFT"),
        ("CRITICAL", "HARD"),
        ("OK", "HARD"),
        ("OK", "SOFT"),
    } <= pairs, pairs
    hard_crit = svc[(svc["state"] == "CRITICAL") & (svc["state_type"] == "HARD")]
    assert len(tickets) and set(tickets["alert_id"]) <= set(hard_crit["alert_id"])
    # some CRITICALs came after a HARD WARNING of the same (node, service): no SOFT CRITICAL before them
    soft_crit = svc[(svc["state"] == "CRITICAL") & (svc["state_type"] == "SOFT")]
    assert len(hard_crit) > len(soft_crit) / 2


PARSER_PLAN = [
    ("alerts", "nagios", "alerts/nagios/*/*.log"),
    ("tickets", "tickets_csv", "alerts/tickets/*/*.csv"),
    ("jobs", "sacct", "jobs/sacct/*/*.txt"),
    ("jobs", "swf", "jobs/swf/*/*.swf"),
    ("syslog", "rfc5424", "syslog/*/mgmt.log"),
    ("reservations", "reservations-csv", "reservations/*/*.csv"),
    ("topology", "topology-csv", "topology/topology.csv"),
    ("telemetry", "long-parquet", "telemetry/long/*/*.parquet"),
    ("telemetry", "ldms-csv", "telemetry/ldms/*/*.csv"),
]
"""(source, format, glob) for the files the simulator writes (rack syslogs by row, truth/ with pyarrow)."""


def parse_every_output(out: Path, cfg: SimConfig, need_rows: set[str]) -> dict[str, int]:
    """Run every output file through the project's own parser; returns rows per format, asserts no rejects."""
    from datetime import UTC, datetime

    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.inputs import open_binary
    from nodewatch.tasks.ingest.registry import sources

    src = sources()
    counts: dict[str, int] = {}
    allowed = {"parse: not an alert line (Nagios 'LOG ROTATION')", "parse: not an alert line (Nagios 'LOG VERSION')"}
    plan = list(PARSER_PLAN)
    for r in range(cfg.n_racks):
        fmt = "rfc5424" if r // cfg.racks_per_row in cfg.syslog_rfc5424_rows else "rfc3164"
        plan.append(("syslog", fmt, f"syslog/*/r{r:02d}.log"))
    for name, fmt, pattern in plan:
        f = next(x for x in src[name].formats if x.name == fmt)
        rows, reasons, files = 0, [], sorted(out.glob(pattern))
        assert files, pattern
        for p in files:
            ctx = ParseContext(name=p.name, reference_time=datetime(2026, 3, 1, tzinfo=UTC))
            with open_binary(p) as s:
                for r in f.parse(s, ctx):
                    rows += r.rows.num_rows if r.rows is not None else 0
                    if r.rejects is not None and len(r.rejects):
                        reasons += r.rejects.column("reason").to_pylist()
        if fmt in ("long-parquet", "ldms-csv"):  # a counter's first sample after a gap has no rate (ingest derives rates)
            reasons = [r for r in reasons if "first sample of the counter series in this file" not in r]
        counts[fmt] = counts.get(fmt, 0) + rows
        assert set(reasons) <= allowed, (name, fmt, sorted(set(reasons))[:5])
    for p in out.glob("truth/*/*/part.parquet"):
        pq.read_table(p)
    for fmt in need_rows:
        assert counts.get(fmt, 0) > 0, (fmt, counts)
    return counts


def test_project_parsers_accept_every_output(small_run):
    """Every file goes through the project's own ingest parsers with no rejects (Nagios header lines aside)."""
    cfg, out = small_run
    assert parse_every_output(out, cfg, {fmt for _, fmt, _ in PARSER_PLAN})["rfc3164"] > 0


@pytest.mark.slow
def test_project_parsers_accept_a_default_config_day_with_and_without_reservations(tmp_path):
    """Default knobs (1-min step, 96 nodes): day 0 has no reservation (header-only CSV), day 3 an admin window."""
    cfg = SimConfig(n_nodes=96, workers=1, scheduler="synchronous")
    simulate(cfg, tmp_path, [0, 3])
    res0 = (tmp_path / "reservations/date=2026-01-01/reservations.csv").read_text().splitlines()
    res3 = (tmp_path / "reservations/date=2026-01-04/reservations.csv").read_text().splitlines()
    assert len(res0) == 1 and len(res3) > 1  # header only / a MAINT window
    counts = parse_every_output(
        tmp_path, cfg, {"sacct", "swf", "rfc5424", "reservations-csv", "topology-csv", "long-parquet", "ldms-csv", "nagios"}
    )
    assert counts["reservations-csv"] == len(res3) - 1


def test_render_memory_is_bounded_per_rack_day():
    """One rack-day (48 nodes x 57 metrics x 1440 steps) renders within a fixed memory budget, whatever the horizon."""
    import tempfile
    import tracemalloc

    from nodewatch.tasks.simulate.cluster import render_batch

    cfg = SimConfig(n_nodes=96, ldms_racks=())
    peaks = []
    with tempfile.TemporaryDirectory() as d:
        for horizon in (1, 6):
            sched = build_schedule(cfg, horizon)
            sched.node_events(np.arange(1))  # build the per-node index outside the measurement
            tracemalloc.start()
            render_batch(sched, Path(d), horizon - 1, 1)
            peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()
    values_mb = 48 * len(METRICS) * 1440 * 8 / 2**20  # 30 MiB of float64 values
    assert max(peaks) < 8 * values_mb, peaks  # < ~240 MiB per rack-day in flight (measured ~125 MiB)
    assert peaks[1] < 1.5 * peaks[0], peaks  # does not grow with the horizon


@pytest.mark.slow
def test_embedded_workload_parameters_come_from_the_thunder_fit(shared_data):
    from nodewatch.tasks.simulate.config import THUNDER_FIT
    from nodewatch.tasks.simulate.fit_swf import fit

    f = fit(str(shared_data / "swf" / "LLNL-Thunder-2007-1.1-cln.swf.gz"))
    assert f["max_nodes"] == THUNDER_FIT["max_nodes"]
    assert f["interarrival_weibull_shape"] == pytest.approx(THUNDER_FIT["interarrival_weibull_shape"], abs=1e-3)
    assert f["interarrival_weibull_scale_s"] == pytest.approx(THUNDER_FIT["interarrival_weibull_scale_s"], rel=1e-3)
    assert tuple(f["node_sizes"]) == THUNDER_FIT["node_sizes"]
    assert np.allclose(f["size_log_runtime_means"], THUNDER_FIT["size_log_runtime_means"], atol=1e-3)
    assert np.allclose(f["hour_profile"], THUNDER_FIT["hour_profile"], atol=1e-3)


def test_appending_day_by_day_is_byte_identical_to_a_full_run(tmp_path):
    """Each appended day starts from the saved midnight state (scheduler + counter bases) and writes the same bytes."""
    cfg = SimConfig(**SMALL)
    a, b = tmp_path / "a", tmp_path / "b"
    simulate(cfg, a, [0, 1, 2, 3])
    for d in range(4):
        r = simulate(cfg, b, [d])
        assert r["days_scheduled"] == 1  # resumed from state/date=<day>/, never replayed from day 0
    fa = {p.relative_to(a): p for p in a.rglob("*") if p.is_file() and p.name != "simulation.json"}
    fb = {p.relative_to(b): p for p in b.rglob("*") if p.is_file() and p.name != "simulation.json"}
    assert fa.keys() == fb.keys() and any("state" in str(k) for k in fa)
    assert [k for k in fa if fa[k].read_bytes() != fb[k].read_bytes()] == []


def test_next_day_cost_does_not_grow_with_the_horizon(tmp_path):
    cfg = SimConfig(**{**SMALL, "step_s": 3600, "syslog_lines_per_node_day": 10.0})
    simulate(cfg, tmp_path / "s", [1])
    early = simulate(cfg, tmp_path / "s", [2])
    simulate(cfg, tmp_path / "l", [39])  # schedules 40 days once, saves every midnight
    late = simulate(cfg, tmp_path / "l", [40])
    assert early["days_scheduled"] == late["days_scheduled"] == 1
    assert late["schedule_seconds"] < 3 * early["schedule_seconds"] + 0.5, (early, late)


def test_syslog_placeholders_are_bounded_and_severities_right(small_run):
    cfg, out = small_run
    text = "\n".join(p.read_text() for p in sorted((out / "syslog").rglob("r*.log")))
    for ip in re.findall(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])", text):
        assert all(int(o) <= 255 for o in ip.split(".")), ip
    chans = [int(x) for x in re.findall(r"Chan#(\d+)_DIMM", text) + re.findall(r"channel:(\d+) ", text)]
    assert all(0 <= c <= 7 for c in chans)
    for line in text.splitlines():
        if "error: Unable to register" in line:
            assert int(line[1 : line.index(">")]) % 8 == 3, line  # LOG_ERR
    # rasdaemon's "event enabled" is a boot-time line: only right after a "Startup finished"
    enabled = [line for line in text.splitlines() if "ras:mc_event event enabled" in line]
    assert len(enabled) <= text.count("Startup finished in")
