"""Aggregation of staged tables into the Zarr cubes (see ``schemas/cubes.py`` and ``docs/cubes.md``).

Entry points for other modules and flows:

* :func:`nodewatch.tasks.cubes.build.build_days` – build days of a cube on a Dask client;
* :func:`open_telemetry_cube` / :func:`open_syslog_cube` – the cubes as ``xarray.Dataset`` (lazy);
* :func:`day_complete` – whether a day was built from the staged files present now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodewatch.tasks.cubes.build import day_complete

if TYPE_CHECKING:
    import xarray as xr

    from nodewatch.tasks.core.store import Store

__all__ = ["day_complete", "open_syslog_cube", "open_telemetry_cube"]


def _open(store: Store, key: str) -> xr.Dataset:
    from nodewatch.tasks.cubes import repo

    try:
        ds = repo.open_dataset(store, key)
    except FileNotFoundError:
        url = store.url_of("cubes", key)
        raise FileNotFoundError(f"no cube {url}: run `nodewatch cubes build --start ... --end ...` first") from None
    if key == "syslog.zarr":
        from nodewatch.schemas.cubes import SYSLOG_FILL

        for name in ("lines", "lines_1min"):
            if name in ds and "_FillValue" not in ds[name].encoding:  # cube built before the fill was declared
                ds[name] = ds[name].where(ds[name] != SYSLOG_FILL)
    return ds


def open_telemetry_cube(store: Store) -> xr.Dataset:
    """``cubes/telemetry.zarr`` as a lazy (dask-backed) ``xarray.Dataset`` with dims (node, time, metric).

    The latest committed snapshot of the cube's Icechunk repository: a day being (re)built is seen as it
    was before, or whole once committed.
    """
    return _open(store, "telemetry.zarr")


def open_syslog_cube(store: Store) -> xr.Dataset:
    """``cubes/syslog.zarr`` as a lazy ``xarray.Dataset`` with dims (node, time[, time_1min], severity).

    ``lines`` and ``lines_1min`` read as float64 with NaN for windows of days not aggregated (yet);
    also for cubes created before that fill was declared (they are upgraded by their next build).
    """
    return _open(store, "syslog.zarr")
