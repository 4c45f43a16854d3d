"""Model registry in the store: ``models/<kind>/<run_id>/`` and ``models/<kind>/CURRENT``.

Layout of one run::

    models/<kind>/<run_id>/params.json            kind, model, mode, hyper-parameters, features, metrics, period
    models/<kind>/<run_id>/nodes/<node>.safetensors  per-node weights + scaler + max training error (tensors)
    models/<kind>/<run_id>/nodes/<node>.json      per-node scaler, threshold, max error, training curve, origin run
    models/<kind>/<run_id>/failed.json            nodes that failed to train: reason, and the run they were carried over from
    models/<kind>/<run_id>/metrics.json, table.md, roc.png, scores.parquet   evaluation (see nodewatch.tasks.anomaly.train)

Weights are written with ``safetensors`` and read back with ``safetensors.numpy.load`` — loading
never unpickles anything. Each node's JSON records the ``sha256`` and size of its weight file; loading
checks them, so a truncated or bit-flipped weight file is a :class:`ModelFileError` naming the file,
never silently different scores. :func:`load_models` with ``skip_bad=True`` loads the good nodes and
lists the bad ones (the scorer marks them ``failed``, the others are scored). ``CURRENT`` is moved only after a run has finished
(:meth:`nodewatch.tasks.core.store.Store.set_current`); a node that failed keeps its previous model, copied from
the run ``CURRENT`` pointed to before (its JSON records ``trained_in``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from nodewatch.models.anomaly.base import NodeEstimator
from nodewatch.models.anomaly.clustering import KMeansClustering
from nodewatch.models.anomaly.dense_ae import DenseAutoencoder
from nodewatch.models.anomaly.exp_smoothing import ExpSmoothing
from nodewatch.models.anomaly.ruad import RUAD
from nodewatch.schemas.names import check_node_name, check_path_token
from nodewatch.tasks.core.store import Store

ESTIMATORS: dict[str, type[NodeEstimator]] = {
    "ruad": RUAD,
    "dense": DenseAutoencoder,
    "exp": ExpSmoothing,
    "clu": KMeansClustering,
}
"""Model name (CLI ``--model``) -> estimator class."""


class ModelFileError(ValueError):
    """A node's model files are missing, truncated or do not match their recorded checksum (one line, names the file)."""


def kind_of(model: str, mode: str = "unsupervised") -> str:
    """Registry kind: ``ruad``, ``ruad_semi``, ``dense``, ``dense_semi``, ``exp``, ``clu``."""
    if model not in ESTIMATORS:
        raise ValueError(f"unknown model {model!r}: choose one of {', '.join(ESTIMATORS)}")
    return f"{model}_semi" if mode == "semi" and model in ("ruad", "dense") else model


def area(kind: str) -> str:
    """Store area of a kind (holds the runs and ``CURRENT``)."""
    return f"models/{check_path_token(kind, 'model kind')}"


def run_prefix(kind: str, run_id: str) -> str:
    """Key prefix of one registry run."""
    return f"{area(kind)}/{check_path_token(run_id, 'run id')}"


def estimator_params(est: NodeEstimator) -> dict[str, Any]:
    """JSON-safe hyper-parameters of an estimator."""
    return json.loads(json.dumps(est.get_params(), default=list))


def write_node(store: Store, kind: str, run_id: str, node: str, est: NodeEstimator, k: int, extra: dict[str, Any]) -> None:
    """Write node ``k`` of a fitted estimator as ``nodes/<node>.safetensors`` + ``nodes/<node>.json``."""
    check_node_name(node)
    state = est.node_state(k)  # type: ignore[attr-defined]
    tensors = {name: np.ascontiguousarray(v) for name, v in state.items()}
    prefix = run_prefix(kind, run_id)
    blob = st_save(tensors, metadata={"kind": kind, "node": node, "run_id": run_id})
    store.write_bytes(blob, prefix, "nodes", f"{node}.safetensors")
    meta = {
        "weights_sha256": hashlib.sha256(blob).hexdigest(),
        "weights_bytes": len(blob),
        "node": node,
        "kind": kind,
        "trained_in": run_id,
        "threshold": float(est.threshold),
        "max_error": float(state["max_error"][0]),
        "scaler": {"min": state["scaler.min"].tolist(), "max": state["scaler.max"].tolist()},
        **extra,
    }
    store.write_json(_finite(meta), prefix, "nodes", f"{node}.json")


def _finite(obj: Any) -> Any:
    """Replace NaN/inf by None so the JSON is standard."""
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def node_keys(store: Store, kind: str, run_id: str) -> list[str]:
    """Nodes that have weights in a run."""
    base = store.path(run_prefix(kind, run_id), "nodes")
    if not store.fs.exists(base):
        return []
    names = [p.rsplit("/", 1)[1] for p in store.fs.ls(base, detail=False)]
    return sorted(n[: -len(".safetensors")] for n in names if n.endswith(".safetensors") and not n.startswith(".tmp"))


def carry_over(store: Store, kind: str, run_id: str, node: str, previous: str | None) -> str | None:
    """Copy node's files from the previous run into ``run_id`` (its model is kept); returns the run the
    model was originally trained in, or ``None`` if there is no previous model for the node."""
    if previous is None or previous == run_id:
        return None
    src = run_prefix(kind, previous)
    if not store.exists(src, "nodes", f"{check_node_name(node)}.safetensors"):
        return None
    dst = run_prefix(kind, run_id)
    with store.fs.open(store.path(src, "nodes", f"{node}.safetensors"), "rb") as f:
        store.write_bytes(f.read(), dst, "nodes", f"{node}.safetensors")
    meta = store.read_json(src, "nodes", f"{node}.json")
    meta["carried_over_from"] = previous
    store.write_json(meta, dst, "nodes", f"{node}.json")
    return str(meta.get("trained_in", previous))


@dataclass
class LoadedModels:
    """Fitted per-node models of one registry run, ready for scoring (nodes in ``nodes`` order)."""

    kind: str
    run_id: str
    nodes: list[str]
    estimator: NodeEstimator
    params: dict[str, Any]
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    bad: dict[str, str] = field(default_factory=dict)
    """Nodes whose files could not be loaded (``skip_bad=True``): node -> one-line error naming the file."""

    @property
    def window(self) -> int:
        """Steps of history a score needs (W for RUAD, 1 otherwise)."""
        return int(self.params["hyper"].get("window", 1)) if self.params["model"] == "ruad" else 1


def load_node_files(store: Store, kind: str, run_id: str, node: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Weights and JSON of one node, checked against the recorded sha256 (:class:`ModelFileError` names the file)."""
    return _node_files(store, kind, run_id, [node], skip_bad=False)[0][node]


def _node_files(store: Store, kind: str, run_id: str, nodes: list[str], skip_bad: bool,
                ) -> tuple[dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]], dict[str, str]]:
    """Weights and JSON of ``nodes``: every file fetched in one ``fs.cat`` call, then checked node by node.

    On an object store ``cat`` of many keys runs the GETs concurrently (s3fs gathers them), where one
    ``open``/``read`` per file waited for each request in turn: two round trips per node, ~2 × 2,000 a night at
    2,000 nodes. Returns ``({node: (state, meta)}, {node: error})``; a damaged node raises
    :class:`ModelFileError` unless ``skip_bad``.
    """
    prefix = run_prefix(kind, run_id)
    jpaths = [store.path(prefix, "nodes", f"{n}.json") for n in nodes]
    wpaths = [store.path(prefix, "nodes", f"{n}.safetensors") for n in nodes]
    norm = store.fs._strip_protocol  # the keys ``cat`` returns are the filesystem's normal form of the paths
    got = {norm(k): v for k, v in (store.fs.cat(jpaths + wpaths, on_error="return") if nodes else {}).items()}

    def one(node: str, jpath: str, path: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        raw = got.get(norm(jpath), FileNotFoundError(jpath))
        try:
            if isinstance(raw, BaseException):
                raise raw
            meta = json.loads(raw)
        except (OSError, ValueError) as e:
            raise ModelFileError(f"model of node {node}: {jpath} is unreadable ({type(e).__name__}); retrain the "
                                 f"node (`nodewatch train --node {node}`)") from None
        blob = got.get(norm(path), FileNotFoundError(path))
        if isinstance(blob, BaseException):
            why = getattr(blob, "strerror", None) or type(blob).__name__
            raise ModelFileError(f"model of node {node}: {path} cannot be read ({why})")
        want = meta.get("weights_sha256") if isinstance(meta, dict) else None
        if not isinstance(meta, dict):
            raise ModelFileError(f"model of node {node}: {jpath} is not a JSON object; retrain the node "
                                 f"(`nodewatch train --node {node}`)")
        if want is not None and hashlib.sha256(blob).hexdigest() != want:
            raise ModelFileError(
                f"model of node {node}: {path} does not match its recorded sha256 ({len(blob)} bytes, recorded "
                f"{meta.get('weights_bytes')}): the file is damaged; retrain the node (`nodewatch train --node {node}`)")
        try:
            return st_load(blob), meta
        except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ModelFileError(f"model of node {node}: {path} is not a valid safetensors file ({first})") from None

    out, bad = {}, {}
    for node, jpath, path in zip(nodes, jpaths, wpaths, strict=True):
        try:
            out[node] = one(node, jpath, path)
        except ModelFileError as e:
            if not skip_bad:
                raise
            bad[node] = str(e)
    return out, bad


def load_models(store: Store, kind: str, run_id: str | None = None, nodes: list[str] | None = None,
                skip_bad: bool = False, available: list[str] | None = None) -> LoadedModels:
    """Load the per-node models of ``run_id`` (default: ``CURRENT``) for ``nodes`` (default: all).

    A node whose files are damaged raises :class:`ModelFileError`, or with ``skip_bad`` is left out and
    listed in :attr:`LoadedModels.bad` (``FileNotFoundError`` if no node at all could be loaded then).
    ``available``: :func:`node_keys` of the run if the caller already listed it (a listing per call otherwise).
    """
    run_id = run_id or store.current(area(kind))
    if run_id is None:
        raise FileNotFoundError(f"no trained {kind} models in {store.url}: run `nodewatch train` first")
    prefix = run_prefix(kind, run_id)
    params = store.read_json(prefix, "params.json")
    available = node_keys(store, kind, run_id) if available is None else available
    wanted = available if nodes is None else [check_node_name(n) for n in nodes if n in set(available)]
    if not wanted:
        raise FileNotFoundError(f"run {run_id} of {kind} has no model for the requested nodes")
    files, bad = _node_files(store, kind, run_id, wanted, skip_bad)
    good = [n for n in wanted if n in files]
    states = [files[n][0] for n in good]
    meta = {n: files[n][1] for n in good}
    if not good:
        raise ModelFileError("; ".join(bad.values()))
    cls = ESTIMATORS[params["model"]]
    est = cls.from_node_states(states, **params["hyper"])  # type: ignore[attr-defined]
    return LoadedModels(kind, run_id, good, est, params, meta, bad)
