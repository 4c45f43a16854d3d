"""Create, extend and write the Zarr cubes (region by region) and their per-day coverage markers.

Publication (readers never see a torn day)
------------------------------------------
Every cube is an Icechunk repository (:mod:`nodewatch.tasks.cubes.repo`): axis changes are one commit,
each day (all its node batches and variables, plus its coverage marker) is one commit. Region
writers write into a session (or a fork of it on a Dask worker) that no reader sees until the
commit; a killed or failed write publishes nothing.

Time axis design (safe for concurrent writers of different days)
-----------------------------------------------------------------
The time axis of a cube starts at midnight UTC of ``attrs["epoch"]`` and covers whole days, allocated
in blocks of :data:`ALLOC_DAYS` days. Writing a day inside the allocated range only writes that day's
chunks (time chunk = 1 day), never metadata, so any number of processes can write different days at
the same time. Only *axis changes* (creating the cube, growing the time axis to a later day, appending
new nodes or metrics) rewrite metadata; they run under an exclusive lock file
(``cubes/.<kind>.zarr.lock``, :mod:`nodewatch.tasks.core.locks`: the owner is recorded, a dead owner's
lock is taken over), re-read the current shape inside the lock and only ever grow an axis, so two
extenders cannot shrink each other's work. Zarr's ``resize`` only rewrites ``zarr.json``; chunks outside
the old shape appear with the fill value until written.
We do not use xarray's ``append_dim`` (open bugs pydata/xarray #11101, #10766).

Node / metric axes
------------------
Created from the topology plus every node seen in the staged data of the requested days (sorted);
later nodes or metrics are *appended* (resize + write the new coordinate labels), so existing
positions never move. Days built before a node was added read as missing (NaN, count 0) for it.

Days before the epoch cannot be added (that would shift every chunk): rebuild the cube with an
earlier ``epoch`` (``nodewatch cubes build --epoch``) instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import numpy as np
import pandas as pd

from nodewatch.schemas.cubes import (
    DAY,
    SEVERITY_NAMES,
    TELEMETRY,
    CubeSpec,
    compressors,
    metric_attrs,
    node_chunk,
    string_encoding,
    time_encoding,
)
from nodewatch.tasks.core.faults import fault_point
from nodewatch.tasks.core.locks import store_lock
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.layout import Region, check_aligned

ALLOC_DAYS = 32
"""The time axis grows in blocks of this many days (fewer metadata rewrites)."""
_CONSOLIDATED_MSG = "Consolidated metadata is currently not part in the Zarr format 3 specification"


@contextmanager
def quiet_consolidated() -> Iterator[None]:
    """Silence zarr's notice that consolidated metadata is not in the v3 spec (we use it on purpose)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_CONSOLIDATED_MSG)
        yield


def cube_url(store: Store, spec: CubeSpec) -> str:
    """fsspec URL of a cube (the Icechunk repository; open it with :func:`nodewatch.tasks.cubes.repo.open_dataset`)."""
    return store.url_of("cubes", spec.key)


@dataclass(frozen=True)
class Geometry:
    """The current axes of a cube as read from its metadata."""

    epoch: date
    n_days: int
    nodes: tuple[str, ...]
    metrics: tuple[str, ...]
    node_chunk: int
    step_seconds: int = 0

    @property
    def node_index(self) -> dict[str, int]:
        """Node name → position."""
        return {n: i for i, n in enumerate(self.nodes)}

    @property
    def metric_index(self) -> dict[str, int]:
        """Metric name → position."""
        return {m: i for i, m in enumerate(self.metrics)}

    def covers(self, day: date) -> bool:
        """Whether ``day`` is inside the allocated time axis."""
        return 0 <= (day - self.epoch).days < self.n_days


# ----------------------------------------------------------------------------- lock
def axis_lock(store: Store, spec: CubeSpec, timeout_s: float | None = None) -> AbstractContextManager[None]:
    """Exclusive lock ``cubes/.<kind>.zarr.lock`` for metadata changes of a cube (local filesystems).

    :func:`nodewatch.tasks.core.locks.store_lock`: the lock records its owner; a lock left by a killed
    build is taken over at once, waiting on a live one ends in a one-line
    :class:`~nodewatch.tasks.core.locks.LockBusyError` after ``timeout_s`` (setting ``lock_timeout_s``).
    Object stores have no atomic create-if-absent here: axis changes must be serialised by the caller
    (the nightly flow runs them before fanning out); day writes need no lock.
    """
    return store_lock(store, "cubes", f".{spec.key}.lock", name=f"cube {spec.key}", timeout_s=timeout_s)


# ----------------------------------------------------------------------------- geometry
def read_geometry(store: Store, spec: CubeSpec, zstore: Any = None) -> Geometry | None:
    """Axes of an existing cube, read fresh from the latest commit (or from ``zstore``, a session's store);
    ``None`` if absent."""
    import zarr

    if zstore is None:
        if not repo.exists(store, spec.key):
            return None
        zstore = repo.readonly_store(store, spec.key)
    try:
        g = zarr.open_group(zstore, mode="r")
    except (FileNotFoundError, zarr.errors.GroupNotFoundError):
        return None
    if "node" not in g:
        return None
    attrs = dict(g.attrs)
    nodes = tuple(str(x) for x in g["node"][:])
    metrics = tuple(str(x) for x in g["metric"][:]) if "metric" in g else ()
    first = next(iter(spec.steps))
    # the cube's own step (attrs), not the spec's: a 5-min cube read with the default 15-min spec
    # would otherwise report 3x the allocated days
    step_s = int(attrs.get("step_seconds", spec.steps[first].total_seconds()))
    n_days = g[first].shape[0] * step_s // int(DAY.total_seconds())
    return Geometry(date.fromisoformat(attrs["epoch"]), n_days, nodes, metrics, int(attrs["node_chunk"]), step_s)


def _step_seconds(spec: CubeSpec) -> int:
    return int(spec.steps[next(iter(spec.steps))].total_seconds())


def _alloc_days(epoch: date, last: date) -> int:
    need = (last - epoch).days + 1
    return -(-need // ALLOC_DAYS) * ALLOC_DAYS


def _times(spec: CubeSpec, dim: str, epoch: date, start_day: int, n_days: int) -> pd.DatetimeIndex:
    spd = spec.steps_per_day(dim)
    t0 = pd.Timestamp(epoch) + pd.Timedelta(days=start_day)
    return pd.date_range(t0, periods=n_days * spd, freq=spec.steps[dim])


def _chunks(spec: CubeSpec, dims: tuple[str, ...], nchunk: int, n_metrics: int) -> tuple[int, ...]:
    out = []
    for d in dims:
        if d == "node":
            out.append(nchunk)
        elif d in spec.steps:
            out.append(spec.steps_per_day(d))
        elif d == "metric":
            out.append(max(n_metrics, 1))
        else:
            out.append(spec.inner_dims[d])
    return tuple(out)


def _str(values: list[str]) -> np.ndarray:
    return np.array(values, dtype=object)


def _node_coords(nodes: list[str], node_info: dict[str, dict[str, str]]) -> dict[str, np.ndarray]:
    return {
        "rack": _str([node_info.get(n, {}).get("rack", "") for n in nodes]),
        "row": _str([node_info.get(n, {}).get("row", "") for n in nodes]),
    }


def _metric_coords(metrics: list[str]) -> dict[str, np.ndarray]:
    attrs = [metric_attrs(m) for m in metrics]
    return {
        "metric_units": _str([a["units"] for a in attrs]),
        "metric_long_name": _str([a["long_name"] for a in attrs]),
        "metric_kind": _str([a["kind"] for a in attrs]),
    }


def create_cube(
    store: Store,
    spec: CubeSpec,
    epoch: date,
    last_day: date,
    nodes: list[str],
    node_info: dict[str, dict[str, str]],
    metrics: list[str],
    node_batch: int,
    zstore: Any = None,
) -> Geometry:
    """Write the metadata and coordinates of a new cube into ``zstore`` (a writable session's store; no data
    chunk is written: all fill)."""
    import dask.array as da
    import xarray as xr
    import zarr

    if not nodes:
        raise ValueError(f"cannot create {spec.key}: no node in topology or staged data")
    if spec.kind == TELEMETRY and not metrics:
        raise ValueError(f"cannot create {spec.key}: no metric in the staged data")
    n_days = _alloc_days(epoch, last_day)
    nchunk = node_chunk(spec.per_node_day_bytes(len(metrics)), node_batch)
    sizes = {"node": len(nodes), "metric": len(metrics), **spec.inner_dims}
    for d in spec.steps:
        sizes[d] = n_days * spec.steps_per_day(d)
    coords: dict[str, Any] = {"node": ("node", _str(nodes))}
    coords.update({k: ("node", v) for k, v in _node_coords(nodes, node_info).items()})
    encoding: dict[str, dict[str, Any]] = {k: string_encoding(nchunk) for k in ("node", "rack", "row")}
    for d in spec.steps:
        coords[d] = (
            d,
            _times(spec, d, epoch, 0, n_days),
            {"long_name": f"window start ({spec.steps[d]})", "standard_name": "time"},
        )
        encoding[d] = time_encoding(spec.steps_per_day(d))
    if spec.kind == TELEMETRY:
        coords["metric"] = ("metric", _str(metrics))
        coords.update({k: ("metric", v) for k, v in _metric_coords(metrics).items()})
        for k in ("metric", "metric_units", "metric_long_name", "metric_kind"):
            encoding[k] = string_encoding(max(len(metrics), 1))
    else:
        coords["severity"] = (
            "severity",
            np.arange(len(SEVERITY_NAMES), dtype=np.int8),
            {
                "long_name": "syslog severity (RFC 5424 code; 8 = not given)",
                "flag_values": list(range(len(SEVERITY_NAMES))),
                "flag_meanings": " ".join(SEVERITY_NAMES),
            },
        )
        coords["severity_name"] = ("severity", _str(list(SEVERITY_NAMES)))
        encoding["severity"] = {"chunks": (len(SEVERITY_NAMES),), "compressors": None}
        encoding["severity_name"] = string_encoding(len(SEVERITY_NAMES))
    data_vars = {}
    for v in spec.variables:
        shape = tuple(sizes[d] for d in v.dims)
        chunks = _chunks(spec, v.dims, nchunk, len(metrics))
        dask_chunks = tuple(min(c, s) for c, s in zip(chunks, shape, strict=True))
        data_vars[v.name] = (v.dims, da.full(shape, v.fill_value, dtype=v.dtype, chunks=dask_chunks), v.attrs)
        encoding[v.name] = {"chunks": chunks, "compressors": compressors(), "fill_value": v.fill_value}
        if v.cf_fill:
            encoding[v.name]["_FillValue"] = v.fill_value
    attrs = {
        **spec.attrs,
        "epoch": epoch.isoformat(),
        "node_chunk": nchunk,
        "alloc_days": ALLOC_DAYS,
        "created": datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    ds.to_zarr(zstore, mode="w", compute=False, encoding=encoding, zarr_format=3, consolidated=False)
    zarr.open_group(zstore, mode="a").require_group(repo.DAYS_GROUP)
    return Geometry(epoch, n_days, tuple(nodes), tuple(metrics), nchunk, _step_seconds(spec))


def upgrade_attrs(store: Store, spec: CubeSpec, zstore: Any) -> bool:
    """Bring the attrs of an existing cube's variables (and ``missing_data``) up to ``spec`` (call under
    :func:`axis_lock`); returns whether anything changed.

    Cubes created before a variable got new CF attrs (e.g. the ``_FillValue`` that makes xarray read
    unbuilt syslog windows as NaN instead of -1, or the ``long_name`` of the telemetry statistics)
    are upgraded by the next build; no chunk is rewritten. Only attributes are touched, so it is safe
    while other processes write day regions.
    """
    import zarr

    g = zarr.open_group(zstore, mode="r+")
    changed = False
    for v in spec.variables:
        want = {**v.attrs, **({"_FillValue": v.fill_value} if v.cf_fill else {})}
        have = dict(g[v.name].attrs)
        if any(k not in have or have[k] != val for k, val in want.items()):
            g[v.name].attrs.update(want)
            changed = True
    if g.attrs.get("missing_data") != spec.attrs.get("missing_data") and "missing_data" in spec.attrs:
        g.attrs["missing_data"] = spec.attrs["missing_data"]
        changed = True
    return changed


def _grow(g: Any, dim: str, new_len: int) -> None:
    """Resize every array of group ``g`` that has dimension ``dim`` to ``new_len`` along it."""
    for _name, arr in g.arrays():
        dims = arr.metadata.dimension_names or ()
        if dim in dims:
            shape = list(arr.shape)
            shape[dims.index(dim)] = new_len
            arr.resize(tuple(shape))


def extend_cube(
    store: Store,
    spec: CubeSpec,
    geo: Geometry,
    last_day: date,
    new_nodes: list[str],
    node_info: dict[str, dict[str, str]],
    new_metrics: list[str],
    zstore: Any = None,
) -> Geometry:
    """Grow the time axis to ``last_day`` and append nodes / metrics in ``zstore`` (a writable session's
    store; call under :func:`axis_lock`)."""
    import zarr

    g = zarr.open_group(zstore, mode="r+")
    n_days = geo.n_days
    if (last_day - geo.epoch).days >= geo.n_days:
        n_days = _alloc_days(geo.epoch, last_day)
        for d in spec.steps:
            spd = spec.steps_per_day(d)
            _grow(g, d, n_days * spd)
            t = _times(spec, d, geo.epoch, geo.n_days, n_days - geo.n_days)
            g[d][geo.n_days * spd :] = t.as_unit("s").asi8.astype(np.int64)
    nodes = list(geo.nodes)
    if new_nodes:
        n0 = len(nodes)
        nodes += new_nodes
        _grow(g, "node", len(nodes))
        g["node"][n0:] = _str(new_nodes)
        for k, v in _node_coords(new_nodes, node_info).items():
            g[k][n0:] = v
    metrics = list(geo.metrics)
    if new_metrics:
        if spec.kind != TELEMETRY:
            raise ValueError(f"{spec.key} has no metric axis")
        m0 = len(metrics)
        metrics += new_metrics
        _grow(g, "metric", len(metrics))
        g["metric"][m0:] = _str(new_metrics)
        for k, v in _metric_coords(new_metrics).items():
            g[k][m0:] = v
    return Geometry(geo.epoch, n_days, tuple(nodes), tuple(metrics), geo.node_chunk, geo.step_seconds)


def ensure_cube(
    store: Store,
    spec: CubeSpec,
    days: list[date],
    nodes: set[str],
    node_info: dict[str, dict[str, str]],
    metrics: set[str],
    node_batch: int,
    epoch: date | None = None,
) -> Geometry:
    """Create the cube or extend its axes so that ``days``, ``nodes`` and ``metrics`` fit (locked; one commit)."""
    if not days:
        raise ValueError("no day to build")
    with axis_lock(store, spec), repo.transaction(store, spec.key, f"axes of {spec.key}", create=True) as session:
        return _ensure(store, spec, days, nodes, node_info, metrics, node_batch, epoch, session.store)


def _ensure(store: Store, spec: CubeSpec, days: list[date], nodes: set[str], node_info: dict[str, dict[str, str]],
            metrics: set[str], node_batch: int, epoch: date | None, zstore: Any) -> Geometry:
    geo = read_geometry(store, spec, zstore)
    if geo is None:
        first = min(days) if epoch is None else epoch
        if min(days) < first:
            raise ValueError(f"day {min(days)} is before the requested epoch {first}")
        return create_cube(store, spec, first, max(days), sorted(nodes), node_info, sorted(metrics), node_batch, zstore)
    if geo.step_seconds != _step_seconds(spec):
        raise ValueError(
            f"{spec.key} was built with a {geo.step_seconds} s step, not {_step_seconds(spec)} s: "
            "use the same step or build a new cube in another store"
        )
    upgrade_attrs(store, spec, zstore)
    if epoch is not None and epoch != geo.epoch:
        raise ValueError(f"{spec.key} already exists with epoch {geo.epoch}; remove it to rebuild with epoch {epoch}")
    if min(days) < geo.epoch:
        raise ValueError(
            f"day {min(days)} is before the epoch {geo.epoch} of {spec.key}: rebuild the cube with --epoch {min(days)}"
        )
    new_nodes = sorted(nodes - set(geo.nodes))
    new_metrics = sorted(metrics - set(geo.metrics)) if spec.kind == TELEMETRY else []
    if new_nodes or new_metrics or not geo.covers(max(days)):
        return extend_cube(store, spec, geo, max(days), new_nodes, node_info, new_metrics, zstore)
    return geo


# ----------------------------------------------------------------------------- region writes
def write_region(store: Store, spec: CubeSpec, geo: Geometry, region: Region, arrays: dict[str, np.ndarray],
                 zstore: Any) -> dict[str, slice]:
    """Write one (day, node batch) of every variable with ``to_zarr(region=...)`` into ``zstore`` (a writable
    session's or fork's store: nothing is visible before its commit), aligned to chunks."""
    import xarray as xr

    n_nodes = len(geo.nodes)
    node_sl = region.node_slice(geo.node_chunk, n_nodes)
    slices: dict[str, slice] = {"node": node_sl}
    shape: dict[str, int] = {"node": n_nodes}
    chunks: dict[str, int] = {"node": geo.node_chunk}
    data_vars = {}
    for v in spec.variables:
        arr = arrays[v.name]
        for d in v.dims:
            if d in spec.steps:
                spd = spec.steps_per_day(d)
                slices[d] = region.time_slice(geo.epoch, spd)
                shape[d], chunks[d] = geo.n_days * spd, spd
            elif d != "node":
                slices[d] = slice(0, arr.shape[v.dims.index(d)])
                shape[d] = chunks[d] = arr.shape[v.dims.index(d)]
        expect = tuple(slices[d].stop - slices[d].start for d in v.dims)
        if arr.shape != expect or arr.dtype != np.dtype(v.dtype):
            raise ValueError(f"region {region.key}: {v.name} has shape {arr.shape} {arr.dtype}, expected {expect} {v.dtype}")
        data_vars[v.name] = (v.dims, arr)
    check_aligned(region.key, slices, chunks, shape)
    ds = xr.Dataset(data_vars)
    ds.to_zarr(zstore, region=slices, mode="r+", zarr_format=3, consolidated=False)
    fault_point("cube:after-region")
    return slices


# ----------------------------------------------------------------------------- coverage markers
def input_fingerprint(store: Store, files: list[str]) -> list[dict[str, Any]]:
    """Name and size of each staged input file of a day (what a marker certifies)."""
    return [{"file": p.rsplit("/", 1)[1], "bytes": int(store.fs.size(p))} for p in sorted(files)]


def write_marker(zstore: Any, day: date, payload: dict[str, Any]) -> None:
    """Set the coverage marker of a day in a writable session (committed together with its regions)."""
    repo.set_day_marker(zstore, day.isoformat(), payload)


def read_marker(store: Store, spec: CubeSpec, day: date) -> dict[str, Any] | None:
    """The committed coverage marker of ``day`` or ``None``."""
    return repo.day_marker(store, spec.key, day.isoformat())
