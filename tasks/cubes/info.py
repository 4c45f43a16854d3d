"""What is in a cube: dims, chunks, size on disk and coverage per day (for ``nodewatch cubes info``)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from nodewatch.schemas.cubes import TELEMETRY, spec_for
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.build import marker_matches
from nodewatch.tasks.cubes.writer import read_geometry


def zarr_group(zstore: Any) -> Any:
    """Root group of a zarr store (read-only)."""
    import zarr

    return zarr.open_group(zstore, mode="r")


def cube_size_bytes(store: Store, key: str) -> int:
    """Bytes on disk of every file of a cube."""
    return sum(int(store.fs.size(p)) for p in store.iter_files("cubes", key))


def cube_info(store: Store, kind: str = TELEMETRY) -> dict[str, Any] | None:
    """Summary of cube ``kind``: dims, chunks, epoch, size and one coverage row per known day.

    Days listed are those with a staged partition or a coverage marker; ``status`` is ``complete``
    (built from the staged files present now: the committed marker matches them), ``stale`` (built, but
    staged files changed since), or ``missing`` (staged, never built). ``complete`` says nothing about
    the bytes on disk: ``nodewatch cubes verify`` reads every chunk. Returns ``None`` if the cube does not exist.
    """
    spec = spec_for(kind)
    if not repo.exists(store, spec.key):
        return None
    zs = repo.readonly_store(store, spec.key)
    g = zarr_group(zs)
    if "node" not in g:
        return None
    attrs = dict(g.attrs)
    if kind == TELEMETRY and "step_seconds" in attrs:  # the cube's own step, not the default 15 min
        spec = spec_for(kind, f"{int(attrs['step_seconds'])}s")
    geo = read_geometry(store, spec, zs)
    if geo is None:
        return None
    variables = {}
    for v in spec.variables:
        a = g[v.name]
        variables[v.name] = {"dims": list(v.dims), "shape": list(a.shape), "chunks": list(a.chunks), "dtype": str(a.dtype)}
    staged = {date.fromisoformat(d) for d in store.staged_dates(kind)}
    markers = {date.fromisoformat(k): v for k, v in repo.day_markers(store, spec.key).items()}
    days = []
    for d in sorted(staged | set(markers)):
        m = markers.get(d)
        status = "missing" if m is None else ("complete" if marker_matches(store, m, d, kind) else "stale")
        row: dict[str, Any] = {"day": d.isoformat(), "status": status}
        if m is not None:
            w = m.get("windows") or 0
            row.update(
                nodes_with_data=m.get("nodes_with_data"),
                rows_used=m.get("rows_used"),
                coverage=(m.get("windows_with_data", 0) / w) if w else 0.0,
                run_id=m.get("run_id"),
            )
        days.append(row)
    last = geo.epoch + timedelta(days=geo.n_days - 1)
    return {
        "cube": spec.key,
        "url": store.url_of("cubes", spec.key),
        "epoch": geo.epoch.isoformat(),
        "allocated_days": geo.n_days,
        "allocated_until": last.isoformat(),
        "nodes": len(geo.nodes),
        "metrics": len(geo.metrics),
        "node_chunk": geo.node_chunk,
        "step": attrs.get("step", str(spec.steps[next(iter(spec.steps))])),
        "variables": variables,
        "size_bytes": cube_size_bytes(store, spec.key),
        "days": days,
    }
