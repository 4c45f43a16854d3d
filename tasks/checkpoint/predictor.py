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

from nodewatch.models.checkpoint.prediction import Predictor, PredictorVerdict, predictor_pays
from nodewatch.models.predict.uc import uc_from_rates

LEAD_H = 2.0 / 60.0
"""Our predictor's final decision comes 2 minutes before the predicted failure (Frank sec. 4.2.3)."""
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
    lead_h: float = LEAD_H
    """Warning lead time: a proactive checkpoint longer than this cannot finish before the failure."""


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
    lead = LEAD_H
    if t.lower().startswith("latest"):
        rest = t[len("latest"):].lstrip(",")
        for part in filter(None, (x.strip() for x in rest.split(","))):
            k, _, v = part.partition("=")
            if k.strip() not in ("cp", "lead"):
                raise ValueError(f"--predictor latest takes only cp=<duration> and lead=<duration>, got {part!r}")
            if k.strip() == "cp":
                cp = _hours(v, "cp")
            else:
                lead = _hours(v, "lead")
        if latest is None:
            raise ValueError("--predictor latest: no trained failure predictor in the store (run `nodewatch predict train`)")
        return PredictorSpec(
            label=f"latest ({latest['scheme']} of {latest['run_id']})",
            tpr=float(latest["tpr"]),
            fpr=float(latest["fpr"]),
            interval_h=float(latest["interval_s"]) / 3600.0,
            proactive_cost_h=cp,
            lead_h=lead,
        )
    vals: dict[str, str] = {}
    for part in t.split(","):
        k, eq, v = part.partition("=")
        k = k.strip().lower()
        if not eq or k not in ("r", "p", "cp", "lead") or k in vals:
            raise ValueError(
                f"--predictor must be 'latest' or 'r=<recall>,p=<precision>[,cp=<duration>][,lead=<duration>]', got {text!r}"
            )
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
    if "lead" in vals:
        lead = _hours(vals["lead"], "lead")
    return PredictorSpec(label=f"r={r:g},p={p:g}", recall=r, precision=p, proactive_cost_h=cp, lead_h=lead)


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
        if cp > spec.lead_h * (1 + 1e-9):  # the warning comes too late to checkpoint: the job runs as without predictor
            d = float(cost[s, c, f, i_daly])
            why = (f"proactive checkpoint {cp * 60:g} min > {spec.lead_h * 60:g}-min warning: "
                   "it cannot finish before the failure")
            v = PredictorVerdict(d, d, float(tau[s, c, f, i_daly]), 0.0, False, why)
        else:
            v = predictor_pays(float(runtime[s]), float(tc[s, c]), m, float(tau[s, c, f, i_daly]), Predictor(r, p, cp),
                               float(w[f]))
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
                "lead_h": spec.lead_h,
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


def add_predictor_column(ds: xr.Dataset, spec: PredictorSpec) -> tuple[xr.Dataset, pd.DataFrame]:
    """``ds`` with the "with predictor" variables (shape x ckpt_cost x failure_model; NaN where not checkpointable)
    and the per-cell rows of :func:`predictor_frame` (stored as ``with_predictor.parquet`` beside table.zarr)."""
    df = predictor_frame(ds, spec)
    dims = ("shape", "ckpt_cost", "failure_model")
    shp = tuple(ds.sizes[d] for d in dims)
    cost, tau, sav, pays = (np.full(shp, np.nan) for _ in range(4))
    if len(df):
        ci = {str(v): i for i, v in enumerate(ds.ckpt_cost.values)}
        fi = {str(v): i for i, v in enumerate(ds.failure_model.values)}
        ix = (df["shape"].to_numpy(), df["ckpt_cost"].map(ci).to_numpy(), df["failure_model"].map(fi).to_numpy())
        cost[ix], tau[ix] = df["predictor_cost_h"].to_numpy(), df["predictor_tau_h"].to_numpy()
        sav[ix], pays[ix] = df["saving_vs_daly_pct"].to_numpy(), df["pays"].to_numpy(float)
    attrs = {"predictor": spec.label, "lead_h": spec.lead_h}
    out = ds.assign(
        with_predictor_cost_h=xr.Variable(dims, cost, attrs={"units": "h", "long_name": "expected cost with predictor "
                                                             "(Aupy et al. 2014 on eq. 3.8)", **attrs}),
        with_predictor_interval_h=xr.Variable(dims, tau, attrs={"units": "h", "long_name": "interval with predictor"}),
        with_predictor_saving_vs_daly_pct=xr.Variable(dims, sav, attrs={"units": "%", "long_name": "saving of the "
                                                                        "with-predictor cost over Daly"}),
        with_predictor_pays=xr.Variable(dims, pays, attrs={"units": "1", "long_name": "1: the predictor pays, 0: it "
                                                           "does not (see with_predictor.parquet 'why')"}),
    )
    return out, df
