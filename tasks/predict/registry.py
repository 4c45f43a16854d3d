"""Failure-predictor registry: ``models/predict/<run_id>/`` and ``models/predict/CURRENT``.

Layout of one run (the pattern of :mod:`nodewatch.tasks.anomaly.registry`)::

    models/predict/<run_id>/weights.safetensors   the six lead-time networks, scaler, LSTM voter (tensors only)
    models/predict/<run_id>/params.json           metrics, step, leads, voter threshold, FPS table, data counts,
                                                  sha256 + size of the weights file

Weights are written with ``safetensors`` and read with ``safetensors.numpy.load``: loading never
unpickles anything. The JSON records the weights' sha256; a truncated or altered file is a
:class:`PredictorFileError` naming the file. ``CURRENT`` moves only after the run's files are written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from nodewatch.models.predict.ensemble import LeadTimeEnsemble, LSTMVoter, VoterFit
from nodewatch.schemas.names import check_path_token
from nodewatch.tasks.core.store import Store

AREA = "models/predict"
SCHEME_FOR_ALERTS = "lstm@6NN"
"""The scheme whose rates ``--predictor latest`` and the warnings use (Frank's proposed FPS, Table 4.1 d)."""


class PredictorFileError(ValueError):
    """The predictor's files are missing, truncated or do not match their recorded checksum (one line)."""


@dataclass
class LoadedPredictor:
    """A registered predictor: the ensemble, the voter and its parameters."""

    run_id: str
    ensemble: LeadTimeEnsemble
    voter: VoterFit | None
    params: dict[str, Any]


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.generic):
        return _finite(obj.item())
    return obj


def save(store: Store, run_id: str, ens: LeadTimeEnsemble, voter: VoterFit | None, params: dict[str, Any]) -> None:
    """Write one run (weights first, then params.json, then CURRENT)."""
    rid = check_path_token(run_id, "run id")
    tensors = {f"ens.{k}": np.ascontiguousarray(v) for k, v in ens.state().items()}
    if voter is not None:
        for k, v in voter.model.state_dict().items():
            tensors[f"voter.{k}"] = np.ascontiguousarray(v.detach().numpy())
    blob = st_save(tensors, metadata={"kind": "predict", "run_id": rid})
    store.write_bytes(blob, AREA, rid, "weights.safetensors")
    meta = {
        **params,
        "run_id": rid,
        "voter_threshold": None if voter is None else float(voter.threshold),
        "voter_input": None if voter is None else voter.input,
        "weights_sha256": hashlib.sha256(blob).hexdigest(),
        "weights_bytes": len(blob),
    }
    store.write_json(_finite(meta), AREA, rid, "params.json")
    store.set_current(AREA, rid)


def load(store: Store, run_id: str | None = None) -> LoadedPredictor:
    """Load a run (default: CURRENT), checking the weights' checksum; raises :class:`PredictorFileError`."""
    rid = run_id or store.current(AREA)
    if rid is None:
        raise PredictorFileError("no trained failure predictor in the store (run `nodewatch predict train`)")
    rid = check_path_token(rid, "run id")
    try:
        params = store.read_json(AREA, rid, "params.json")
    except FileNotFoundError:
        raise PredictorFileError(f"{AREA}/{rid}/params.json is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise PredictorFileError(f"{AREA}/{rid}/params.json is not valid JSON") from None
    path = store.path(AREA, rid, "weights.safetensors")
    if not store.fs.exists(path):
        raise PredictorFileError(f"{AREA}/{rid}/weights.safetensors is missing")
    blob = store.fs.cat_file(path)
    if hashlib.sha256(blob).hexdigest() != params.get("weights_sha256") or len(blob) != params.get("weights_bytes"):
        raise PredictorFileError(f"{AREA}/{rid}/weights.safetensors does not match its recorded sha256/size (altered?)")
    try:
        t = st_load(blob)
    except Exception:  # noqa: BLE001 - any decoder error of a corrupt file is one line
        raise PredictorFileError(f"{AREA}/{rid}/weights.safetensors cannot be decoded") from None
    ens = LeadTimeEnsemble.from_state({k[4:]: v for k, v in t.items() if k.startswith("ens.")})
    voter = None
    vs = {k[6:]: torch.from_numpy(np.array(v)) for k, v in t.items() if k.startswith("voter.")}
    if vs and params.get("voter_threshold") is not None:
        m = LSTMVoter(hidden=int(vs["out.weight"].shape[1]))
        m.load_state_dict(vs)
        # runs registered before the log-odds fix have no "voter_input": their voter reads probabilities
        voter = VoterFit(model=m, threshold=float(params["voter_threshold"]), input=params.get("voter_input") or "proba")
    return LoadedPredictor(run_id=rid, ensemble=ens, voter=voter, params=params)


def current_rates(store: Store, scheme: str = SCHEME_FOR_ALERTS) -> dict[str, Any] | None:
    """Node-level tpr/fpr of ``scheme`` of the CURRENT predictor (from its FPS table), or ``None`` without one."""
    rid = store.current(AREA)
    if rid is None:
        return None
    try:
        params = store.read_json(AREA, check_path_token(rid, "run id"), "params.json")
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"{AREA}/{rid}/params.json is missing or not JSON") from None
    for row in params.get("fps", []):
        if row.get("scheme") == scheme and row.get("source", "").startswith("nodewatch"):
            if row.get("tpr") is None or row.get("fpr") is None:
                break
            return {"run_id": rid, "scheme": scheme, "tpr": float(row["tpr"]), "fpr": float(row["fpr"]),
                    "interval_s": float(params["step_s"])}
    raise ValueError(f"predictor {rid} has no {scheme} rates in its FPS table")
