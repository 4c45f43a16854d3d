"""Scoring building block of the nightly flow: per-node anomaly scores and per-metric contributions.

``score_nodes(models, cube_slice)`` turns a slice of ``cubes/telemetry.zarr`` into the anomaly
probability of every (node, time) (RUAD Eq. 3) and the share of each metric in it (the four
stats of a metric summed, Section 3.2's error is a sum over features). The math lives in
``models/`` (:meth:`score_samples`, :meth:`feature_contributions`, :func:`errors_per_metric`);
this module only aligns nodes/metrics/time and wraps the result as ``xarray.DataArray``.

A windowed model (RUAD, W steps) needs W-1 steps of history before the first time to score:
pass a slice that starts ``(W-1) * step`` earlier (:func:`history_start`) — earlier steps get NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nodewatch.models.anomaly.preprocess import feature_to_metric, features_from_stats
from nodewatch.models.anomaly.ruad import errors_per_metric
from nodewatch.tasks.anomaly.registry import LoadedModels


def history_start(
    models: LoadedModels, first_time: np.datetime64, step: np.timedelta64 = np.timedelta64(15, "m")
) -> np.datetime64:
    """Start of the cube slice needed to score from ``first_time`` on (W-1 steps earlier)."""
    return np.datetime64(first_time, "ns") - (models.window - 1) * step


def score_nodes(models: LoadedModels, cube_slice: Any) -> tuple[Any, Any]:
    """``(score[node, time], contribution[node, time, metric])`` for the nodes that have a model.

    ``cube_slice``: Dataset with dims (node, time, metric) and variables mean, min, max, std, count.
    Nodes of the slice without a model are left out; metrics the models were trained on must be present.
    """
    import xarray as xr

    metrics = list(models.params["metrics"])
    have = {str(n) for n in cube_slice["node"].values}
    nodes = [n for n in models.nodes if n in have]
    if not nodes:
        raise ValueError("none of the cube slice's nodes has a trained model")
    missing = sorted(set(metrics) - {str(m) for m in cube_slice["metric"].values})
    if missing:
        raise ValueError(f"cube slice lacks metric(s) the models were trained on: {', '.join(missing[:10])}")
    sub = cube_slice.sel(node=nodes, metric=metrics).transpose("node", "time", "metric")
    X = features_from_stats(*(np.asarray(sub[v].values) for v in ("mean", "min", "max", "std", "count")))
    est = models.estimator
    if len(nodes) != len(models.nodes):
        idx = [models.nodes.index(n) for n in nodes]
        est = _subset(models, idx)
    score = est.score_samples(X)
    contrib = errors_per_metric(est.feature_contributions(X), feature_to_metric(len(metrics)), len(metrics))
    coords = {"node": nodes, "time": sub["time"].values}
    attrs = {"model_kind": models.kind, "model_run": models.run_id, "long_name": "anomaly probability (RUAD Eq. 3)"}
    s = xr.DataArray(score.astype(np.float32), dims=("node", "time"), coords=coords, name="score", attrs=attrs)
    c = xr.DataArray(contrib.astype(np.float32), dims=("node", "time", "metric"), coords={**coords, "metric": metrics},
                     name="contribution", attrs={**attrs, "long_name": "per-metric share of the normalised error"})
    return s, c


def _subset(models: LoadedModels, idx: list[int]) -> Any:
    """Estimator restricted to the nodes ``idx`` (rebuilt from per-node states)."""
    est = models.estimator
    states = [est.node_state(k) for k in idx]  # type: ignore[attr-defined]
    return type(est).from_node_states(states, **models.params["hyper"])  # type: ignore[attr-defined]
