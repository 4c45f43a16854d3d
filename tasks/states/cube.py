"""The state cube writer: ``cubes/state.zarr``, node × minute int8 state codes.

Agarwal et al., "SaNSA", Sec. II-C: the state of every node at each minute of the window.

Days are written as day-aligned regions (one time chunk per UTC day), so builds of different days
never touch the same chunk. The cube is an Icechunk repository (:mod:`nodewatch.tasks.cubes.repo`): a
write (create, ``--rebuild``, time-axis growth and the window's region) is one commit, so a kill at any
point leaves the previous cube readable and unchanged.
"""

from __future__ import annotations

import numpy as np

from nodewatch.schemas.cubes import compressors, string_encoding, time_encoding
from nodewatch.schemas.states import (
    CUBE_PATH,
    CUBE_TIME_CHUNK,
    CUBE_VARIABLE,
    FILL_CODE,
    cube_attrs,
)
from nodewatch.tasks.states.common import DAY_NS, MIN_NS, StatesError


def write_cube(store, grid: np.ndarray, nodes: list[str], t_start: int, rebuild: bool = False) -> str:  # noqa: ANN001
    """Write the node × minute state grid into ``cubes/state.zarr`` by day-aligned regions.

    A new cube is created for the window; a later window extends the time axis by appending
    fill-valued days first, then writes its region (days never share a chunk, so two builds of
    different days never touch the same chunk).
    """
    from nodewatch.tasks.cubes import repo

    key = CUBE_PATH.split("/")[-1]
    url = store.url_of(*CUBE_PATH.split("/"))
    if rebuild and repo.is_legacy(store, key):  # a plain Zarr cube from before: replaced by a repository
        store.fs.rm(store.path(*CUBE_PATH.split("/")), recursive=True)
    with repo.transaction(store, key, f"states {np.datetime64(t_start, 'ns')}", create=True) as session:
        _write(session.store, grid, nodes, t_start, rebuild or not _has_cube(session.store))
    return url


def _has_cube(zstore) -> bool:  # noqa: ANN001
    import zarr

    try:
        return CUBE_VARIABLE in zarr.open_group(zstore, mode="r")
    except (FileNotFoundError, zarr.errors.GroupNotFoundError):
        return False


def _write(zstore, grid: np.ndarray, nodes: list[str], t_start: int, create: bool) -> None:  # noqa: ANN001
    import xarray as xr

    n_t = grid.shape[1]
    if t_start % DAY_NS or n_t % CUBE_TIME_CHUNK:
        raise StatesError("state cube windows must be whole UTC days")
    times = (np.datetime64(t_start, "ns") + np.arange(n_t) * np.timedelta64(1, "m")).astype("datetime64[ns]")
    node_chunk = max(1, min(len(nodes), (16 << 20) // CUBE_TIME_CHUNK))
    node_coord = np.array(nodes, dtype=object)  # Zarr v3 variable-length string (has a v3 spec)
    da = xr.DataArray(
        grid.astype(np.int8),
        dims=("node", "time"),
        coords={"node": node_coord, "time": times},
        name=CUBE_VARIABLE,
        attrs=cube_attrs(),
    )
    ds = da.to_dataset()
    # int8 codes without CF masking (readers get int8, 0 = NOT_BUILT is the Zarr fill value), zstd, day chunks
    enc = {
        CUBE_VARIABLE: {
            "chunks": (node_chunk, CUBE_TIME_CHUNK),
            "_FillValue": None,
            "dtype": "int8",
            "compressors": compressors(),
        },
        "time": {**time_encoding(CUBE_TIME_CHUNK), "units": "minutes since 1970-01-01"},
        "node": string_encoding(len(nodes)),
    }
    if create:  # new cube, or --rebuild: replaced in the same commit
        ds.to_zarr(zstore, mode="w", encoding=enc, zarr_format=3, consolidated=False)
        return
    existing = xr.open_zarr(zstore, consolidated=False, zarr_format=3)
    if list(existing["node"].values) != list(nodes):
        raise StatesError(f"{CUBE_PATH} has a different node set ({existing.sizes['node']} nodes); rebuild with --rebuild")
    t0 = int(existing["time"].values[0].astype("datetime64[ns]").astype(np.int64))
    t_last = int(existing["time"].values[-1].astype("datetime64[ns]").astype(np.int64)) + MIN_NS
    if t_start < t0:
        raise StatesError(f"{CUBE_PATH} starts {np.datetime64(t0, 'ns')}; earlier days need --rebuild")
    t_stop = t_start + n_t * MIN_NS
    if t_stop > t_last:
        n_new = (t_stop - t_last) // MIN_NS
        pad_times = (np.datetime64(t_last, "ns") + np.arange(n_new) * np.timedelta64(1, "m")).astype("datetime64[ns]")
        pad = xr.DataArray(
            np.full((len(nodes), n_new), FILL_CODE, np.int8),
            dims=("node", "time"),
            coords={"node": node_coord, "time": pad_times},
            name=CUBE_VARIABLE,
            attrs=cube_attrs(),
        ).to_dataset()
        pad.to_zarr(zstore, append_dim="time", zarr_format=3, consolidated=False)
    i0 = int((t_start - t0) // MIN_NS)
    ds.drop_vars("node").to_zarr(
        zstore, region={"time": slice(i0, i0 + n_t), "node": slice(None)}, zarr_format=3, consolidated=False
    )
