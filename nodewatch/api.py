"""The public read API of nodewatch (``import nodewatch``): cubes, staged tables, checkpoint tables, node models.

Every function takes ``store``: a store URL or path (local directory or any fsspec URL, the same value as
``--store`` / ``NODEWATCH_STORE``), a :class:`nodewatch.tasks.core.store.Store`, or ``None`` for the
configured default (``NODEWATCH_STORE``, else ``./nodewatch-data``). Heavy libraries are imported on
first use, so ``import nodewatch`` stays cheap.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

    from nodewatch.tasks.anomaly.registry import LoadedModels
    from nodewatch.tasks.core.store import Store

#: Cube names accepted by :func:`open_cube` and the Zarr group each one opens under ``cubes/``.
CUBES: dict[str, str] = {
    "telemetry": "telemetry.zarr",
    "syslog": "syslog.zarr",
    "scores": "scores.zarr",
    "state": "state.zarr",
}


def store_of(store: str | os.PathLike[str] | Store | None = None) -> Store:
    """A :class:`~nodewatch.tasks.core.store.Store` for ``store`` (URL, path, Store or ``None`` = configured default)."""
    from nodewatch.tasks.core.store import Store

    if isinstance(store, Store):
        return store
    if store is None:
        store = os.environ.get("NODEWATCH_STORE", "./nodewatch-data")
    return Store(os.fspath(store))


def open_cube(name: str, store: str | os.PathLike[str] | Store | None = None) -> xr.Dataset:
    """Open one published cube lazily as an ``xarray.Dataset`` (its latest committed snapshot).

    Cubes are Icechunk repositories: a day being written is invisible until its commit, so the dataset
    holds every day either as previously published or as newly published, never partly rewritten.

    ``name`` is one of :data:`CUBES` (``telemetry``: dims node × time × metric × stat; ``syslog``;
    ``scores``: per-node anomaly scores; ``state``: SaNSA node × minute states). Select by label, e.g.
    ``ds["value"].sel(node="cn0001", metric="power", stat="mean")``.

    Raises ``ValueError`` for an unknown name and ``FileNotFoundError`` (naming the build command)
    when the cube has not been built in that store.
    """
    if name not in CUBES:
        raise ValueError(f"unknown cube {name!r}: choose one of {', '.join(CUBES)}")
    st = store_of(store)
    key = CUBES[name]
    if name in ("telemetry", "syslog"):
        from nodewatch.tasks.cubes import open_syslog_cube, open_telemetry_cube

        return open_telemetry_cube(st) if name == "telemetry" else open_syslog_cube(st)
    from nodewatch.tasks.cubes import repo

    try:
        return repo.open_dataset(st, key)
    except FileNotFoundError:
        how = "nodewatch nightly" if name == "scores" else "nodewatch states build"
        raise FileNotFoundError(f"no cube {st.url_of('cubes', key)}: run `{how}` first") from None


def read_table(
    table: str,
    store: str | os.PathLike[str] | Store | None = None,
    start: str | None = None,
    end: str | None = None,
    columns: list[str] | None = None,
) -> pd.DataFrame:
    """Staged rows of ``table`` (``jobs``, ``telemetry``, ``syslog``, ``node_states``, …) as a ``pandas.DataFrame``.

    ``start``/``end`` (``YYYY-MM-DD``, inclusive) restrict the date partitions read; ``columns`` the
    columns. A table with nothing staged gives an empty frame with no columns. Raises ``ValueError``
    for a table name that is not a plain name.
    """
    import pandas as pd

    from nodewatch.schemas.names import check_path_token

    check_path_token(table, "table")
    st = store_of(store)
    dates = st.staged_dates(table)
    if start is not None:
        dates = [d for d in dates if d >= start]
    if end is not None:
        dates = [d for d in dates if d <= end]
    if not dates:
        return pd.DataFrame()
    t = st.read_staged(table, dates=dates, columns=columns)
    return pd.DataFrame() if t is None else t.to_pandas()


def load_checkpoint_table(store: str | os.PathLike[str] | Store | None = None, run_id: str | None = None) -> xr.Dataset:
    """The checkpoint-interval table of ``run_id`` (default: the CURRENT one) as an ``xarray.Dataset``.

    Dims ``shape``, ``ckpt_cost``, ``failure_model``, ``method``; see ``docs/checkpoint.md``.
    """
    from nodewatch.tasks.checkpoint.tables import load_table

    return load_table(store_of(store), run_id)


def load_node_model(
    node: str, store: str | os.PathLike[str] | Store | None = None, kind: str = "ruad", run_id: str | None = None
) -> LoadedModels:
    """The per-node anomaly model of ``node`` (default: the CURRENT ``kind`` run), ready to score.

    Returns a :class:`~nodewatch.tasks.anomaly.registry.LoadedModels` with one node: ``.estimator``
    (scikit-learn style ``score_samples``), ``.params``, ``.meta[node]`` (threshold, training metrics)
    and ``.run_id``. Raises ``FileNotFoundError`` when there is no such model.
    """
    from nodewatch.schemas.names import check_node_name
    from nodewatch.tasks.anomaly.registry import load_models

    node = check_node_name(node)
    models = load_models(store_of(store), kind, run_id, nodes=[node])
    if node not in models.nodes:
        raise FileNotFoundError(f"no {kind} model for node {node}")
    return models
