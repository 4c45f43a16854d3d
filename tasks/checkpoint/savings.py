"""Frank's Table 3.1 method on a job trace: the total expected checkpoint cost of all checkpointable
jobs per interval method, and the saving of the aware interval vs each (``nodewatch checkpoint savings``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from nodewatch.models.checkpoint.intervals import (
    MAX_RUNTIME_H,
    aware_interval,
    daly_first_order_interval,
    daly_interval,
    expected_cost,
    young_interval,
)
from nodewatch.schemas.jobs import never_started
from nodewatch.tasks.checkpoint.compute import METHODS

SKIP_REASONS: dict[str, str] = {
    "never_started": "never started (cancelled or failed in the queue: no start and no run time)",
    "no_runtime": "no usable runtime (neither requested nor elapsed time > 0)",
    "bad_nodes": "node count missing or < 1",
    "runtime_over_one_year": "runtime over one year (e.g. a sentinel requested time such as 738,738,720 s)",
}
"""Why :func:`trace_jobs` leaves a job out (keys of its ``skipped`` counts)."""


def trace_jobs(jobs: pd.DataFrame, runtime: str = "requested") -> tuple[pd.DataFrame, dict[str, int]]:
    """(nodes, runtime_h) per job of a trace, and the count of jobs left out per reason of :data:`SKIP_REASONS`.

    ``runtime="requested"`` uses the user's requested time (``timelimit_s``) where known, as in Frank
    sec. 3.4.3 ("expected runtime as given by the users"), else the elapsed time; ``"elapsed"`` always the
    elapsed time. Step rows (``step`` not null) are not jobs and are neither used nor counted. A job whose
    runtime exceeds one year (:data:`~nodewatch.models.checkpoint.intervals.MAX_RUNTIME_H`; the archive's
    traces hold sentinels such as 738,738,720 s in the requested-time field) is skipped and counted, so
    one bad job never stops a table. A job that never started (:func:`nodewatch.schemas.jobs.never_started`:
    no start and no run time, e.g. cancelled in the queue) is skipped and counted as ``never_started``
    even when it requested a time: it cost no node-hours and had nothing to checkpoint.
    """
    if runtime not in ("requested", "elapsed"):
        raise ValueError(f"runtime must be 'requested' or 'elapsed', got {runtime!r}")
    j = jobs
    if "step" in j.columns:
        j = j[j["step"].isna()]
    ela = pd.to_numeric(j["elapsed_s"], errors="coerce")
    if runtime == "requested" and "timelimit_s" in j.columns:
        req = pd.to_numeric(j["timelimit_s"], errors="coerce")
        rt = req.where(req > 0, ela)
    else:
        rt = ela
    nodes = pd.to_numeric(j["nodes"], errors="coerce")
    hours = (rt / 3600.0).to_numpy(float)
    n = nodes.to_numpy(float)
    never = never_started(j)
    bad_nodes = ~never & ~(n >= 1)
    no_rt = ~never & ~bad_nodes & ~(hours > 0)
    too_long = ~never & ~bad_nodes & ~no_rt & (hours > MAX_RUNTIME_H)
    keep = ~(never | bad_nodes | no_rt | too_long)
    masks = {"never_started": never, "no_runtime": no_rt, "bad_nodes": bad_nodes, "runtime_over_one_year": too_long}
    skipped = {k: int(v.sum()) for k, v in masks.items()}
    out = pd.DataFrame({"nodes": n[keep].astype("int64"), "runtime_h": hours[keep]})
    return out, {k: v for k, v in skipped.items() if v}


def trace_runtimes(jobs: pd.DataFrame, runtime: str = "requested") -> pd.DataFrame:
    """The jobs of :func:`trace_jobs` without the skip counts."""
    return trace_jobs(jobs, runtime)[0]


def trace_savings(
    jobs: pd.DataFrame,
    machine_nodes: int,
    mtbf_machine_h: Sequence[float] = (36.0, 24.0),
    ckpt_costs_h: Sequence[float] = (0.5, 0.25, 0.1),
    shape: float = 0.8,
    mc_shapes: int = 0,
    mc_failures: int = 10_000,
    seed: int = 0,
    mtbf_error: float = 0.0,
    checkpointable: str = "daly",
    weight: str = "jobs",
) -> pd.DataFrame:
    """Frank's Table 3.1 method on a job trace: total expected checkpoint cost of all checkpointable jobs
    per method and the saving of the aware interval vs each, for every (system MTBF, t_c).

    Job MTBF by eq. 3.14 from the system MTBF; a job is checkpointable when ``t_c + tau_Daly < t``
    (sec. 3.4.3). Costs are eq. 3.8 expectations (what the thesis's 10,000-failure Monte-Carlo of eq. 3.1
    estimates), summed over jobs. With ``mc_shapes > 0`` the Daly/aware totals are also estimated by
    Monte-Carlo (``mc_failures`` failures per shape) on that many randomly drawn distinct job shapes.
    ``mtbf_error`` (e.g. -0.2) plans every interval with a wrong MTBF ``M (1 + error)`` while costs are
    evaluated with the true one (Table 3.1 rows c/d).

    Readings of the thesis's text that it leaves open (docs/checkpoint.md, "Fidelity to Table 3.1"):
    ``checkpointable="daly"`` keeps the jobs with ``t_c + tau_Daly < t`` (default); ``"aware"`` keeps
    only those of them the aware interval also checkpoints (``t_c + tau_aware < t``, so jobs it
    recommends not to checkpoint are left out). ``weight="jobs"`` sums the per-job expected costs
    (default, "the average checkpoint cost per job is summed"); ``"node-hours"`` weights each job's
    cost by its node count (cost in node-hours).
    """
    if checkpointable not in ("daly", "aware"):
        raise ValueError(f"checkpointable must be 'daly' or 'aware', got {checkpointable!r}")
    if weight not in ("jobs", "node-hours"):
        raise ValueError(f"weight must be 'jobs' or 'node-hours', got {weight!r}")
    from nodewatch.models.checkpoint.mc import simulate_cost

    if machine_nodes < 1:
        raise ValueError(f"machine node count must be >= 1, got {machine_nodes}")
    too_big = int((jobs["nodes"] > machine_nodes).sum())
    if too_big:
        raise ValueError(f"{too_big} jobs use more than --machine-nodes={machine_nodes} nodes")
    uniq = jobs.groupby(["nodes", "runtime_h"]).size().rename("jobs").reset_index()
    n = uniq["nodes"].to_numpy(float)
    t = uniq["runtime_h"].to_numpy(float)
    cnt = uniq["jobs"].to_numpy(float)
    rows = []
    rng = np.random.default_rng(seed)
    for m_sys in mtbf_machine_h:
        m_job = m_sys * machine_nodes / n  # eq. 3.14
        for tc in ckpt_costs_h:
            m_plan = m_job * (1.0 + mtbf_error)
            tau_d = daly_interval(m_plan, tc)
            ok = tc + tau_d < t
            if not ok.any():
                continue
            tt, mm, mp = t[ok], m_job[ok], m_plan[ok]
            classic = np.stack([young_interval(mp, tc), daly_first_order_interval(mp, tc), tau_d[ok]], axis=1)
            cc = expected_cost(tt[:, None], classic, tc, mm[:, None], shape)
            aw = aware_interval(tt, tc, mp, shape, extra_tau_h=classic)
            aw_cost = aw.cost_h if mtbf_error == 0.0 else expected_cost(tt, aw.tau_h, tc, mm, shape)
            sel = np.ones(tt.size, bool) if checkpointable == "daly" else (~aw.never & (tc + aw.tau_h < tt))
            if not sel.any():
                continue
            wgt = cnt[ok] * (n[ok] if weight == "node-hours" else 1.0) * sel
            totals = {meth: float(np.sum(c * wgt)) for meth, c in zip(METHODS, [*cc.T, aw_cost], strict=True)}
            row = {
                "mtbf_machine_h": m_sys,
                "ckpt_cost_h": tc,
                "weibull_shape": shape,
                "mtbf_error": mtbf_error,
                "checkpointable": checkpointable,
                "weight": weight,
                "jobs": int(cnt[ok][sel].sum()),
                "shapes": int(sel.sum()),
                "never_checkpoint_jobs": int(cnt[ok][aw.never].sum()),
            }
            for meth in METHODS[:-1]:
                row[f"saving_vs_{meth}_pct"] = 100.0 * (totals[meth] - totals["aware"]) / totals[meth]
            row.update({f"total_cost_{k}_h": v for k, v in totals.items()})
            if mc_shapes > 0:
                pick = rng.choice(np.flatnonzero(ok), size=min(mc_shapes, int(ok.sum())), replace=False)
                idx = np.searchsorted(np.flatnonzero(ok), pick)
                sim_d = sim_a = ana_d = ana_a = 0.0
                for i, k in zip(pick, idx, strict=True):
                    taus = np.array([tau_d[i], aw.tau_h[k]])
                    mc = simulate_cost(t[i], taus, tc, m_job[i], shape, failures=mc_failures, seed=int(rng.integers(2**31)))
                    sim_d += mc.mean_h[0] * cnt[i]
                    sim_a += mc.mean_h[1] * cnt[i]
                    ana_d += cc[k, 2] * cnt[i]
                    ana_a += aw_cost[k] * cnt[i]
                row["mc_shapes"] = int(pick.size)
                row["mc_saving_vs_daly_pct"] = 100.0 * (sim_d - sim_a) / sim_d
                row["analytic_saving_vs_daly_pct_same_shapes"] = 100.0 * (ana_d - ana_a) / ana_d
            rows.append(row)
    return pd.DataFrame(rows)


def read_trace(path: Path) -> pd.DataFrame:
    """Parse a job trace file (any format of the ``jobs`` source, e.g. SWF or sacct) without staging it.

    Rows the parser rejects are not used (they are reported by ``nodewatch ingest jobs``); use the staged
    table (``--jobs staged``) for validated data.
    """
    import pyarrow as pa

    from nodewatch.tasks.ingest.base import ParseContext
    from nodewatch.tasks.ingest.inputs import open_binary
    from nodewatch.tasks.ingest.landing import detect_format
    from nodewatch.tasks.ingest.registry import sources

    spec = sources().get("jobs")
    if spec is None:
        raise ValueError("no 'jobs' source is installed to parse the trace")
    fmt = detect_format(spec, Path(path))
    with open_binary(path) as fh:
        parts = [r.rows for r in fmt.parse(fh, ParseContext(name=Path(path).name))]
    if not parts:
        raise ValueError(f"{path}: no job rows")
    return pa.concat_tables(parts, promote_options="permissive").to_pandas()
