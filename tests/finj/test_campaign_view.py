"""A campaign on a shared machine: pinned to some cores (a 1-core target node), other tenants' niced CPU time
is not part of the node's signal (``dataset.campaign_view``), the engine's cores come from its CPU affinity,
and the run's cgroup can outweigh other sessions (``cgroup.set_cpu_weight``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from nodewatch.tasks.finj.cgroup import set_cpu_weight
from nodewatch.tasks.finj.dataset import Raw, build, campaign_view, choose_layout, read_raw
from nodewatch.tasks.finj.sampler import is_counter
from nodewatch.tasks.finj.workload import GeneratorSpec, generate

FIELDS = ("user", "nice", "sys", "idle")
N = 240


def _campaign(d: Path, nice_on_core1: np.ndarray, cores: list[int] | None) -> Path:
    """2-core machine, 1-s samples: core 1 runs the job (user 0.6 s/s) and a fault at 100-200 s (sys 0.3 s/s);
    ``nice_on_core1`` (s/s) is other tenants' niced work taking core 1's idle time; core 0 is someone else's."""
    d.mkdir()
    t = np.arange(N)
    rate = {
        ("user", 1): np.full(N, 0.6),
        ("sys", 1): np.where((t >= 100) & (t < 200), 0.3, 0.05),
        ("nice", 1): nice_on_core1,
        ("user", 0): 0.5 + 0.4 * np.sin(t / 7.0) ** 2,
        ("nice", 0): np.full(N, 0.3),
        ("sys", 0): np.full(N, 0.1),
    }
    for k in (0, 1):
        busy = sum(rate.get((f, k), 0) for f in ("user", "nice", "sys"))
        rate[("idle", k)] = 1.0 - busy
    cols, vals = [], []
    for f in FIELDS:
        per = [np.cumsum(rate.get((f, k), np.zeros(N))) for k in (0, 1)]
        cols += [f"procstat.{f}", f"procstat.{f}#0", f"procstat.{f}#1"]
        vals += [per[0] + per[1], per[0], per[1]]
    cols.append("meminfo.MemFree")
    vals.append(1e9 - 1e5 * t)
    rows = [",".join(["#Time", "Time_usec", "ProducerName", "component_id", "job_id", *cols])]
    rows += [",".join([str(1000 + i), "0", "n", "0", "0", *(f"{v[i]:.6f}" for v in vals)]) for i in range(N)]
    (d / "raw.csv").write_text("\n".join(rows) + "\n")
    (d / "events.csv").write_text(
        "time,event,seq,is_fault,program,low,cores,pid,status,detail\n"
        "1000,start,1,False,dgemm,False,1,1,,\n1100,start,2,True,ddot,False,1,2,,\n"
        f"1200,end,2,True,ddot,False,1,2,ok,\n{1000 + N},end,1,False,dgemm,False,1,1,ok,\n"
    )
    if cores is not None:
        (d / "summary.json").write_text(json.dumps({"cores": cores}))
    return d


def test_campaign_view_by_hand(tmp_path: Path) -> None:
    camp = _campaign(tmp_path / "c", np.full(N, 0.2), [1])
    node = read_raw(camp, view="node")
    raw = read_raw(camp)
    col = {c: i for i, c in enumerate(raw.columns)}
    d = np.diff(raw.values, axis=0)[150]
    # niced time counts as idle; node CPU = core 1 only (the campaign's core); core 0's columns are gone
    assert d[col["procstat.nice"]] == 0 and d[col["procstat.nice#1"]] == 0
    assert d[col["procstat.idle#1"]] == pytest.approx(1 - 0.6 - 0.3)
    assert d[col["procstat.user"]] == pytest.approx(0.6) and d[col["procstat.idle"]] == pytest.approx(0.1)
    assert not any(c.endswith("#0") for c in raw.columns) and raw.core_ids == (1,)
    dn = np.diff(node.values, axis=0)[150]
    nc = {c: i for i, c in enumerate(node.columns)}
    assert dn[nc["procstat.nice"]] == pytest.approx(0.5) and node.core_ids == (0, 1)
    # no summary.json (a campaign still running): the cores its tasks name; a task on all cores: every core
    camp2 = _campaign(tmp_path / "c2", np.full(N, 0.2), None)
    assert read_raw(camp2).core_ids == (1,)
    ev = (camp2 / "events.csv").read_text()
    (camp2 / "events.csv").write_text(ev.replace("start,1,False,dgemm,False,1,", "start,1,False,dgemm,False,,"))
    assert read_raw(camp2).core_ids == (0, 1)
    with pytest.raises(ValueError):
        read_raw(camp, view="tenant")


def test_features_do_not_see_other_tenants_niced_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    quiet = _campaign(tmp_path / "quiet", np.zeros(N), [1])
    busy = _campaign(tmp_path / "busy", rng.uniform(0, 0.1, N), [1])  # random foreign nice work on core 1
    a, b = build(quiet), build(busy)
    assert a.features.shape[1] == 1  # one core's feature sets: the 1-core target node
    assert a.names == b.names
    np.testing.assert_allclose(a.features, b.features, rtol=1e-6, atol=1e-6)
    # the machine's raw view sees the foreign work
    an, bn = build(quiet, view="node"), build(busy, view="node")
    assert an.features.shape[1] == 2
    assert not np.allclose(an.features[:, 1], bn.features[:, 1], atol=1e-3)
    # the fault (sys time on core 1 at 100-200 s) is in the labels and moves core 1's sys features
    j = a.names.index("procstat.sys_avg")
    clear = ~a.ambiguous
    assert a.features[clear & (a.mode == 0), 0, j] == pytest.approx(0.05, abs=1e-3)  # 1st sample: no rate
    assert a.features[clear & (a.mode > 0), 0, j] == pytest.approx(0.3)


def test_campaign_view_keeps_a_full_machine_unchanged() -> None:
    raw = Raw(0, ["procstat.user#0", "procstat.nice#0", "procstat.idle#0"], np.arange(12.0).reshape(4, 3), [], 1)
    out = campaign_view(raw, (0,))
    assert out.columns == raw.columns and out.core_ids == (0,)
    assert np.array_equal(out.values[:, 2], raw.values[:, 2] + raw.values[:, 1]) and not out.values[:, 1].any()


def test_generator_pins_every_task_to_the_given_cores() -> None:
    spec = GeneratorSpec(span=3000, core_ids=(1,), fault_gap_mean=120, fault_dur_mean=90, fault_dur_min=45)
    tasks = generate(spec, 19, 2)
    assert tasks and all(t.cores == (1,) for t in tasks)


def test_engine_cores_follow_its_cpu_affinity(tmp_path: Path) -> None:
    code = (
        "import os, sys; from pathlib import Path; os.sched_setaffinity(0, {0})\n"
        "from nodewatch.tasks.finj.engine import Engine, EngineConfig\n"
        "e = Engine([], EngineConfig(out=Path(sys.argv[1]), n_cores=2)); print(e.cores, e.n_cores)"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "o")], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["(0,)", "2"]


def test_cpu_weight_files(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    v1.mkdir(), v2.mkdir()
    (v1 / "cpu.shares").write_text("1024")
    (v2 / "cpu.weight").write_text("100")
    assert set_cpu_weight((str(v1),), 1, 10**9) and (v1 / "cpu.shares").read_text() == "262144"
    assert set_cpu_weight((str(v2),), 2, 65536) and (v2 / "cpu.weight").read_text() == "6400"
    assert not set_cpu_weight((str(tmp_path),), 1, 2048)


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/sys/fs/cgroup/cpu/cpu.shares").exists(), reason="needs root + cgroup v1 cpu")
def test_cpu_weight_on_the_real_kernel() -> None:
    d = Path("/sys/fs/cgroup/cpu") / f"nwfinj-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    try:
        assert set_cpu_weight((str(d),), 1, 65536)
        assert (d / "cpu.shares").read_text().strip() == "65536"
    finally:
        d.rmdir()


def _memory_campaign(d: Path) -> Path:
    """A 1-core target node (core 1 of 2) on a machine whose other tenants eat memory: node MemFree falls 50 MB/s;
    the run's groups: apps 100 MB steady (pgfault 10/s), a leak in ``faults`` from 60 s (16 MiB/s, pgfault 100/s),
    ``sys`` 300 MB (the sampler)."""
    d.mkdir()
    n = 120
    t = np.arange(n, dtype=float)
    leak = np.where(t >= 60, 16 * 2**20 * (t - 59), 0.0)
    cols = {
        "procstat.user#0": 0.5 * t,
        "procstat.user#1": 0.9 * t,
        "meminfo.MemTotal": np.full(n, 8e9),
        "meminfo.MemFree": 4e9 - 5e7 * t,
        "vmstat.nr_free_pages": (4e9 - 5e7 * t) / 4096,
        "vmstat.nr_dirtied": 7.0 * t,
        "cgroup.apps.mem_usage": np.full(n, 1e8),
        "cgroup.apps.pgfault": 10.0 * t,
        "cgroup.faults.mem_usage": leak,
        "cgroup.faults.pgfault": np.where(t >= 60, 100.0 * (t - 59), 0.0),
        "cgroup.sys.mem_usage": np.full(n, 3e8),
    }
    rows = [",".join(["#Time", "Time_usec", "ProducerName", "component_id", "job_id", *cols])]
    rows += [",".join([str(1000 + i), "0", "n", "0", "0", *(f"{v[i]:.1f}" for v in cols.values())]) for i in range(n)]
    (d / "raw.csv").write_text("\n".join(rows) + "\n")
    (d / "events.csv").write_text(
        "time,event,seq,is_fault,program,low,cores,pid,status,detail\n"
        "1060,start,1,True,leak,False,1,2,,\n1120,end,1,True,leak,False,1,2,ok,\n"
    )
    (d / "summary.json").write_text(json.dumps({"cores": [1]}))
    return d


def test_target_memory_by_hand(tmp_path: Path) -> None:
    """Campaign view: the node's memory and paging are the run's cgroups summed (apps + faults + sys), per second
    before any derivative; other tenants' node-wide memory is gone; ``--view node`` keeps it."""
    camp = _memory_campaign(tmp_path / "m")
    raw = read_raw(camp)
    col = {c: i for i, c in enumerate(raw.columns)}
    v = raw.values
    assert not any(c.startswith("meminfo.") for c in raw.columns) and "vmstat.nr_free_pages" not in col
    assert "vmstat.nr_dirtied" in col  # node-wide disk traffic stays
    used = v[:, col["target.mem_usage"]]
    assert used[10] == 4e8 and used[70] == pytest.approx(4e8 + 16 * 2**20 * 11)
    # free = the target's share of MemTotal (1 of 2 cores) - used: falls 16 MiB/s in the leak, not 50 MB/s
    free = v[:, col["target.mem_free"]]
    assert free[10] == 4e9 - 4e8
    assert np.diff(free)[30] == 0 and np.diff(free)[80] == pytest.approx(-16 * 2**20)
    assert np.diff(v[:, col["target.pgfault"]])[30] == 10 and np.diff(v[:, col["target.pgfault"]])[80] == 110
    assert is_counter("target.pgfault") and not is_counter("target.mem_usage")
    layout = choose_layout(raw)
    assert "target.mem_usage" in layout.node and "target.pgfault" in layout.counters
    assert not any(c.startswith(("cgroup.faults.", "cgroup.sys.")) for c in layout.node)
    ds = build(camp, layout)
    names = ds.layout.feature_names()
    i_pf, i_free = names.index("target.pgfault_avg"), names.index("target.mem_free_der_avg")
    last = ds.features[-1, 0]  # window 60-119 s: all leak
    assert last[i_pf] == pytest.approx(110) and last[i_free] == pytest.approx(-16 * 2**20)
    node = read_raw(camp, view="node")
    assert "meminfo.MemFree" in node.columns and not any(c.startswith("target.") for c in node.columns)
