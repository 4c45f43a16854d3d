"""The "with predictor" column of the checkpoint tables (Aupy et al. JPDC 2014 on Frank eq. 3.8).

``nodewatch checkpoint tables --predictor r=0.7,p=0.9[,cp=5m]`` takes a job-level recall and precision;
``--predictor latest`` takes the node-level rates of the registry's current failure predictor
(:func:`nodewatch.tasks.predict.registry.current_rates`) and turns them into job-level rates per shape:
recall ``tpr`` and precision ``(tpr / M) / (tpr / M + UC(n) / dt)`` with ``M`` the job MTBF of the
table's failure model, ``UC(n)`` Frank's eq. 4.4 at the shape's node count and ``dt`` the predictor's
prediction interval. For every checkpointable cell the table's Daly cost (eq. 3.8 at Daly's interval)
is compared with the prediction-aware cost at Aupy's refined period
(:func:`nodewatch.models.checkpoint.prediction.predictor_pays`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from nodewatch.models.checkpoint.prediction import Predictor, predictor_pays
from nodewatch.models.predict.uc import uc_from_rates

_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_H = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "d": 24.0, "": 1.0}


@dataclass(frozen=True)
class PredictorSpec:
    """A parsed ``--predictor``: job-level ``recall``/``precision``, or node-level ``tpr``/``fpr`` (``latest``)."""

    label: str
    recall: float | None = None
    precision: float | None = None
    tpr: float | None = None
    fpr: float | None = None
    interval_h: float | None = None
    proactive_cost_h: float | None = None
    """``None``: the proactive checkpoint costs as much as a regular one (the table's ``t_c``)."""


def _hours(text: str, what: str) -> float:
    m = _DUR.match(text)
    if not m:
        raise ValueError(f"--predictor: {what} must be a duration like 5m or 0.1h, got {text!r}")
    h = float(m.group(1)) * _UNIT_H[m.group(2)]
    if not (np.isfinite(h) and h > 0):
        raise ValueError(f"--predictor: {what} must be > 0, got {text!r}")
    return h


def parse_predictor(text: str, latest: dict[str, Any] | None = None) -> PredictorSpec:
    """Parse ``r=..,p=..[,cp=..]`` or ``latest`` (``latest`` needs the registry's rates dict)."""
    t = (text or "").strip()
    cp = None
    if t.lower().startswith("latest"):
        rest = t[len("latest"):].lstrip(",")
        for part in filter(None, (x.strip() for x in rest.split(","))):
            k, _, v = part.partition("=")
            if k.strip() != "cp":
                raise ValueError(f"--predictor latest takes only cp=<duration>, got {part!r}")
            cp = _hours(v, "cp")
        if latest is None:
            raise ValueError("--predictor latest: no trained failure predictor in the store (run `nodewatch predict train`)")
        return PredictorSpec(
            label=f"latest ({latest['scheme']} of {latest['run_id']})",
            tpr=float(latest["tpr"]),
            fpr=float(latest["fpr"]),
            interval_h=float(latest["interval_s"]) / 3600.0,
            proactive_cost_h=cp,
        )
    vals: dict[str, str] = {}
    for part in t.split(","):
        k, eq, v = part.partition("=")
        k = k.strip().lower()
        if not eq or k not in ("r", "p", "cp") or k in vals:
            raise ValueError(f"--predictor must be 'latest' or 'r=<recall>,p=<precision>[,cp=<duration>]', got {text!r}")
        vals[k] = v.strip()
    if "r" not in vals or "p" not in vals:
        raise ValueError(f"--predictor needs both r= and p=, got {text!r}")
    try:
        r, p = float(vals["r"]), float(vals["p"])
    except ValueError:
        raise ValueError(f"--predictor: r and p must be numbers, got {text!r}") from None
    if not (np.isfinite(r) and 0 <= r < 1):
        raise ValueError(f"--predictor: recall r must be in [0, 1), got {vals['r']!r}")
    if not (np.isfinite(p) and 0 < p <= 1):
        raise ValueError(f"--predictor: precision p must be in (0, 1], got {vals['p']!r}")
    if "cp" in vals:
        cp = _hours(vals["cp"], "cp")
    return PredictorSpec(label=f"r={r:g},p={p:g}", recall=r, precision=p, proactive_cost_h=cp)


def _job_rates(spec: PredictorSpec, nodes: float, mtbf_h: float) -> tuple[float, float]:
    if spec.recall is not None and spec.precision is not None:
        return spec.recall, spec.precision
    assert spec.tpr is not None and spec.fpr is not None and spec.interval_h
    false_rate = float(uc_from_rates(spec.fpr, int(nodes))) / spec.interval_h
    true_rate = spec.tpr / mtbf_h
    p = true_rate / (true_rate + false_rate) if true_rate + false_rate > 0 else 0.0
    return min(spec.tpr, 0.999999), max(p, 1e-12)


def predictor_frame(ds: xr.Dataset, spec: PredictorSpec, max_cells: int = 20_000) -> pd.DataFrame:
    """One row per checkpointable (shape, ckpt cost, failure model): Daly vs with-predictor cost and saving."""
    rows = []
    i_daly = list(ds.method.values).index("daly")
    cost = ds.expected_cost_h.values
    tau = ds.interval_h.values
    ok = ds.checkpointable.values
    tc = ds.ckpt_cost_h.values
    mtbf = ds.job_mtbf_h.values
    w = ds.weibull_shape.values
    nodes, runtime = ds.nodes.values, ds.runtime_h.values
    cells = np.argwhere(ok)
    if len(cells) > max_cells:
        raise ValueError(f"{len(cells):,} table cells: too many for the predictor column (limit {max_cells:,}); use --no-grid")
    for s, c, f in cells:
        m = float(mtbf[s, f])
        r, p = _job_rates(spec, nodes[s], m)
        cp = spec.proactive_cost_h or float(tc[s, c])
        v = predictor_pays(float(runtime[s]), float(tc[s, c]), m, float(tau[s, c, f, i_daly]), Predictor(r, p, cp), float(w[f]))
        rows.append(
            {
                "shape": int(s),
                "nodes": int(nodes[s]),
                "runtime_h": float(runtime[s]),
                "ckpt_cost": str(ds.ckpt_cost.values[c]),
                "failure_model": str(ds.failure_model.values[f]),
                "job_mtbf_h": m,
                "recall": r,
                "precision": p,
                "proactive_cost_h": cp,
                "daly_cost_h": float(cost[s, c, f, i_daly]),
                "predictor_tau_h": v.predictor_tau_h,
                "predictor_cost_h": v.predictor_cost_h,
                "saving_vs_daly_pct": 100.0 * v.saving,
                "pays": v.pays,
                "why": v.reason,
            }
        )
    return pd.DataFrame(rows)


def predictor_summary(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Per (failure model, ckpt cost): cells where the predictor pays, mean saving vs Daly, and the usual reason it does not."""
    out = []
    if df.empty:
        return out
    for (fm, ck), g in df.groupby(["failure_model", "ckpt_cost"], sort=False):
        no = g[~g["pays"]]
        out.append(
            {
                "failure_model": fm,
                "ckpt_cost": ck,
                "cells": len(g),
                "pays_in": int(g["pays"].sum()),
                "mean_saving_vs_daly_pct": round(float(g["saving_vs_daly_pct"].mean()), 3),
                "max_nodes_where_it_pays": int(g.loc[g["pays"], "nodes"].max()) if g["pays"].any() else 0,
                "does_not_pay_because": str(no["why"].mode().iloc[0]) if len(no) else "",
            }
        )
    return out
