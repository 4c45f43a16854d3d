"""Train the failure predictor on the simulated cluster: data, Monte-Carlo CV, final fit, registry, FPS table.

:func:`train_predictor` builds the failure/ok sequences (:mod:`nodewatch.tasks.predict.dataset`), runs the
Monte-Carlo cross-validation (:mod:`nodewatch.tasks.predict.evaluate`) for the FPS table, then fits the
six networks on 75 % of the groups and the LSTM voter on the rest, and registers the result
(:mod:`nodewatch.tasks.predict.registry`) with the table, the data counts and ``P(E)`` of the data
(failures per prediction interval and node, eq. 4.1).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from nodewatch.models.predict.ensemble import LeadTimeEnsemble
from nodewatch.models.predict.uc import event_probability
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.predict import registry
from nodewatch.tasks.predict.dataset import PREDICTOR_METRICS, Sequences, simulated_data, summary
from nodewatch.tasks.predict.evaluate import cross_validate, fit_ensemble_and_voter, fps_table
from nodewatch.tasks.simulate.config import SimConfig


class PredictSettings(BaseModel):
    """The ``[predict]`` settings section (env ``NODEWATCH_PREDICT='{json}'``)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Run the nightly ``predict`` step (it skips itself without a trained predictor)."""
    site_nodes: int = Field(default=1000, ge=1, le=10**7)
    """Node count of the site for the usability report (UC at this size)."""
    uc_limit: float = Field(default=0.05, gt=0, lt=1)
    """Frank's 5 % criterion for the largest usable machine."""
    warn_min_confidence: float = Field(default=0.5, ge=0, le=1)


def fit_final(
    pos: Sequences, neg: Sequences, epochs: int = 300, seed: int = 0, train_positives: str = "precursor",
    hard: Sequences | None = None,
) -> tuple[LeadTimeEnsemble, Any]:
    """Networks on 75 % of the groups (+ ``hard`` negatives), the LSTM voter on the other 25 % (its own 60/40 split
    by group sets the threshold).

    Positives are the failures with a precursor unless ``train_positives="all"`` (see :mod:`~nodewatch.tasks.predict.evaluate`).
    """
    return fit_ensemble_and_voter(pos, neg, hard=hard, epochs=epochs, seed=seed, train_positives=train_positives)


def train_predictor(
    store: Store,
    run_id: str,
    cfg: SimConfig,
    n_days: int,
    node_days: int,
    splits: int = 3,
    epochs: int = 300,
    stride: int = 2,
    seed: int = 0,
) -> dict[str, Any]:
    """Build data from the simulator, cross-validate, fit, register; returns the params written to the registry.

    The run's manifest (``runs/<run_id>.json``, :class:`~nodewatch.tasks.core.runs.RunRecorder`) records the
    parameters, step timings and the registry output; a failure leaves it ``failed`` with the reason.
    """
    from nodewatch.tasks.core.runs import RunRecorder

    rec = RunRecorder(store, "predict_train", {"n_nodes": cfg.n_nodes, "n_days": n_days, "node_days": node_days,
                                               "splits": splits, "epochs": epochs, "stride": stride, "seed": seed,
                                               "precursor_share": cfg.precursor_share}, run_id=run_id)
    rec.write()
    try:
        params = _train(store, run_id, cfg, n_days, node_days, splits, epochs, stride, seed)
    except Exception as e:
        rec.error(str(e).splitlines()[0] if str(e) else type(e).__name__)
        rec.finish("failed")
        raise
    for k, v in params["timings_s"].items():
        rec.manifest.timings[k] = float(v)
    rec.add_output("registry", store.url_of(registry.AREA, run_id))
    rec.add_output("fps", [r for r in params["fps"] if r["source"].startswith("nodewatch")])
    rec.finish()
    return params


def _train(
    store: Store, run_id: str, cfg: SimConfig, n_days: int, node_days: int, splits: int, epochs: int, stride: int, seed: int
) -> dict[str, Any]:
    t0 = time.perf_counter()
    # hard negatives in proportion to the random node-days: 15 per anomaly kind per 400 (~22 % more node-days)
    hard_per_kind = max(1, round(node_days * 15 / 400))
    pos, neg, hard = simulated_data(cfg, n_days, node_days, stride=stride, hard_per_kind=hard_per_kind, seed=seed)
    if len(pos.y) < 10 or len(neg.y) < 100:
        raise ValueError(f"too little data to train: {len(pos.y)} failures and {len(neg.y)} ok sequences")
    t_data = time.perf_counter() - t0
    # P(E) (eq. 4.1): failures per node and prediction interval of the simulated horizon
    intervals = cfg.n_nodes * n_days * 86400 // cfg.step_s
    p_e, _ = event_probability(len(pos.y), intervals)
    cv = cross_validate(pos, neg, splits=splits, seed=seed, epochs=epochs, hard=hard)
    t_cv = time.perf_counter() - t0 - t_data
    fps = fps_table(cv, p_e)
    t1 = time.perf_counter()
    ens, voter = fit_final(pos, neg, epochs=epochs, seed=seed, hard=hard)
    t_fit = time.perf_counter() - t1
    params = {
        "kind": "predict",
        "run_id": run_id,
        "step_s": cfg.step_s,
        "window_s": 240,
        "leads_min": [7, 6, 5, 4, 3, 2],
        "metrics": list(PREDICTOR_METRICS),
        "hidden": ens.hidden,
        "epochs": epochs,
        "train_positives": "precursor",
        "epoch_negatives": {"stratified": "anomaly kind x node load", "strata_share": ens.strata_share},
        "voter_training": ("random node-days held out from the networks + cross-fitted outputs on the hard node-days "
                           "(stratified loss); threshold on random validation node-days" if hard is not None and
                           len(hard.y) else "random node-days held out from the networks"),
        "p_e": p_e,
        "data": {"source": "simulator", "n_nodes": cfg.n_nodes, "n_days": n_days, "seed": cfg.seed,
                 "precursor_share": cfg.precursor_share, "precursor_median_s": cfg.precursor_median_s,
                 "precursor_sigma": cfg.precursor_sigma, "node_days": node_days, "stride": stride,
                 "hard_negative_node_days": 0 if hard is None else len(np.unique(hard.group)),
                 "counts": summary(pos, neg).to_dict(orient="records")},
        "cv": {"splits": splits, "rounds": cv.to_dict(orient="records")},
        "fps": fps.to_dict(orient="records"),
        "timings_s": {"data": t_data, "cross_validation": t_cv, "final_fit": t_fit},
    }
    registry.save(store, run_id, ens, voter, params)
    return params


FPS_NOTE = (
    "\nGoals are read against *tpr (failures with a precursor)*, the thesis's denominator (its failure events are "
    "hardware anomalies followed by a job failure, sec. 4.2.1): the favourable column, since 30 % of the simulator's "
    "failures have no precursor and cap tpr over all failures at ~0.7; the recall a site sees is *tpr (all failures)*.\n"
)
"""Printed under the FPS table: which recall the goals are read against and why."""


def fps_markdown(fps: pd.DataFrame | list[dict[str, Any]], nodes: int = 1024) -> str:
    """The FPS table (Table 4.1 c/d layout) as Markdown, with recall over all failures and over precursor failures.

    The thesis's rows print their tpr in the precursor column only: its failure events all had a hardware anomaly
    before them (sec. 4.2.1), so its recall over all failures is not known (NA).
    """
    df = pd.DataFrame(fps)
    col = f"uc_{nodes}"
    lines = [f"| scheme | source | tpr (all failures) | tpr (failures with a precursor) | ppv | fpr | UC({nodes:,}) | "
             "largest n with UC < 5 % |",
             "|---|---|---|---|---|---|---|---|"]

    def f(v: Any, fmt: str) -> str:
        return "NA" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, fmt)

    for r in df.to_dict(orient="records"):
        known = r.get("tpr_all_failures_known")
        tpr_all = None if isinstance(known, (bool, np.bool_)) and not known else r.get("tpr")
        lines.append(
            f"| {r['scheme']} | {r['source']} | {f(tpr_all, '.4f')} | {f(r.get('tpr_precursor'), '.4f')} | "
            f"{f(r.get('ppv'), '.4f')} | {f(r.get('fpr'), '.2e')} | {f(r.get(col), '.4f')} | "
            f"{f(r.get('largest_n_uc_below_5pct'), ',')} |"
        )
    return "\n".join(lines) + "\n" + FPS_NOTE
