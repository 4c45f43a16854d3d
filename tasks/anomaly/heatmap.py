"""PNG heat map node x time of one day's anomaly scores (the nightly's ``scores/daily/.../heatmap.png``)."""

from __future__ import annotations

import io
from datetime import date, timedelta
from typing import Any

import numpy as np

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.layout import Region
from nodewatch.tasks.cubes.writer import Geometry


def _day_scores(store: Store, day: date, zstore: Any, geo: Geometry | None) -> tuple[np.ndarray, list[str]]:
    """The day's ``score`` (node x time, float32) and the node names.

    With ``geo`` (the cube's axes, which :func:`finish_day` has already read) the day's columns are read by position
    straight from Zarr: no xarray time index is built (that costs one read per time-coordinate chunk, i.e. one per
    allocated day of the cube, every night). Without it, by label through xarray (the same values).
    """
    if geo is not None and zstore is not None:
        import zarr

        sl = Region(day, 0).time_slice(geo.epoch, 86_400 // geo.step_seconds)
        return np.asarray(zarr.open_group(zstore, mode="r")["score"][:, sl], dtype=np.float32), list(geo.nodes)
    import xarray as xr

    ds = repo.open_dataset(store, "scores.zarr") if zstore is None else xr.open_zarr(zstore, consolidated=False)
    day_ds = ds["score"].sel(time=slice(np.datetime64(day.isoformat()), np.datetime64((day + timedelta(days=1)).isoformat())
                                       - np.timedelta64(1, "ns")))
    return np.asarray(day_ds.values, dtype=np.float32), [str(n) for n in ds["node"].values]


def heatmap_png(store: Store, day: date, path: tuple[str, ...], zstore: Any = None, geo: Geometry | None = None) -> str:
    """PNG heat map node x time of the day's scores (grey = not scored); returns the store path.

    ``zstore``: a session's store to read instead of the latest commit; ``geo``: the cube's axes (then the day is
    read by position, see :func:`_day_scores`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, nodes = _day_scores(store, day, zstore, geo)
    fig_h = min(2 + 0.12 * len(nodes), 24)
    fig, ax = plt.subplots(figsize=(10, fig_h))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#cccccc")
    im = ax.imshow(np.ma.masked_invalid(a), aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    ax.set_xticks(np.linspace(0, a.shape[1], 9)[:-1] if a.shape[1] else [])
    ax.set_xticklabels([f"{int(h):02d}:00" for h in np.linspace(0, 24, 9)[:-1]])
    if len(nodes) <= 80:
        ax.set_yticks(range(len(nodes)))
        ax.set_yticklabels(nodes, fontsize=6)
    ax.set_xlabel("time of day (UTC)")
    ax.set_ylabel(f"node ({len(nodes)})")
    ax.set_title(f"anomaly score P (RUAD Eq. 3), {day.isoformat()}; grey = not scored")
    fig.colorbar(im, ax=ax, fraction=0.03, label="P")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return store.write_bytes(buf.getvalue(), *path)
