"""nodewatch: validated, versioned telemetry / syslog / job pipeline for HPC operations.

The installed package is one namespace::

    nodewatch            this small public API for downstream users (notebooks, scripts)
    nodewatch.flows      Prefect flows and the ``nodewatch`` CLI       (repository folder ``flows/``)
    nodewatch.tasks      the steps: ingest, cubes, anomaly, states, …  (``tasks/``)
    nodewatch.models     the math, pure and cited by equation          (``models/``)
    nodewatch.schemas    one definition per table and cube             (``schemas/``)

The public API (``docs/api.md``) reads what the pipeline published; it never writes::

    import nodewatch
    ds = nodewatch.open_cube("telemetry", store="./nodewatch-data")     # xarray.Dataset (node, time, metric, stat)
    jobs = nodewatch.read_table("jobs", store="./nodewatch-data")        # pandas.DataFrame of staged rows
    table = nodewatch.load_checkpoint_table(store="./nodewatch-data")   # xarray.Dataset of the CURRENT table
    model = nodewatch.load_node_model("cn0001", store="./nodewatch-data")

Imports are lazy: ``import nodewatch`` costs no Prefect, Dask, torch or xarray import.
"""

from __future__ import annotations

from nodewatch.api import CUBES, load_checkpoint_table, load_node_model, open_cube, read_table, store_of

__all__ = ["CUBES", "load_checkpoint_table", "load_node_model", "open_cube", "read_table", "store_of"]
__version__ = "0.1.0"
