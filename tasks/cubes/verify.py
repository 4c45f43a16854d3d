"""Find damaged cube chunks, name them (variable, day, file) and say which days to rebuild.

A cube's chunks are objects of its Icechunk repository (``cubes/<name>.zarr/chunks/<id>``) referenced
by its manifests. A flipped byte or a truncated object makes zarr's decoder fail deep inside a Dask
graph (``Zstd decompression error``) without naming anything. :func:`find_damage` reads every chunk
of the committed snapshot one by one, decodes it, and records each that fails; it also decodes every
chunk object on disk to name the damaged file(s). :func:`damage_error` turns that into one line.

Repair is a rebuild of the damaged days (``nodewatch cubes verify --repair``): the rebuild commits new
chunk objects, so readers switch from the damaged snapshot to the repaired one at once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import numpy as np

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo


class CubeCorruptError(repo.CubeError):
    """Chunks of a cube cannot be decoded (one-line message naming variable, day and file)."""


@dataclass(frozen=True)
class Damage:
    """One chunk that cannot be read."""

    cube: str
    variable: str
    day: str | None
    chunk: tuple[int, ...]
    error: str


def _first_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:160]}" if msg else type(e).__name__


def _epochs(store: Store, key: str) -> dict[str, date]:
    """First day of every time axis (``time``, ``time_1min``) of a cube; its chunks are one day each."""
    ds = repo.open_dataset(store, key)
    out = {}
    for d in ds.dims:
        if str(d).startswith("time") and d in ds.coords and ds.sizes[d]:
            out[str(d)] = np.asarray(ds[d].values[:1]).astype("datetime64[D]")[0].item()
    return out


def find_damage(store: Store, key: str, days: list[date] | None = None, variables: list[str] | None = None) -> list[Damage]:
    """Every chunk of the committed snapshot of cube ``key`` (of ``days``, default all) that cannot be decoded.

    Time chunks of every cube are one UTC day, so a chunk's time index is its day since the axis start.
    """
    g = repo.open_group(store, key)
    epochs = _epochs(store, key)
    out: list[Damage] = []
    for name, arr in g.arrays():
        if variables is not None and name not in variables:
            continue
        dims = tuple(arr.metadata.dimension_names or ())
        ti = next((k for k, d in enumerate(dims) if d in epochs and d != name), -1)
        epoch = epochs.get(dims[ti]) if ti >= 0 else None
        ranges: list[Any] = [range(-(-s // c)) for s, c in zip(arr.shape, arr.chunks, strict=True)]
        if epoch is not None and days is not None:
            ranges[ti] = [i for i in sorted({(d - epoch).days for d in days}) if 0 <= i < len(ranges[ti])]
        for idx in itertools.product(*ranges):
            sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, arr.chunks, arr.shape, strict=True))
            try:
                arr[sl]
            except Exception as e:  # noqa: BLE001 - any decode/read failure is damage to report
                day = (epoch + timedelta(days=idx[ti])).isoformat() if epoch is not None else None
                out.append(Damage(key, name, day, tuple(int(i) for i in idx), _first_line(e)))
    return out


def damaged_objects(store: Store, key: str) -> list[str]:
    """Chunk objects on disk of cube ``key`` whose zstd frame does not decode (local stores; others ``[]``)."""
    from numcodecs import Zstd

    base = store.path("cubes", key, "chunks")
    if not store.is_local or not store.fs.exists(base):
        return []
    bad = []
    codec = Zstd()
    for p in store.fs.ls(base, detail=False):
        with store.fs.open(p, "rb") as f:
            blob = f.read()
        if not blob.startswith(b"\x28\xb5\x2f\xfd"):  # not a zstd frame: not ours to judge
            continue
        try:
            codec.decode(blob)
        except Exception:  # noqa: BLE001 - numcodecs raises RuntimeError/ValueError for a bad frame
            bad.append(p)
    return sorted(bad)


def damage_error(store: Store, key: str, damage: list[Damage]) -> CubeCorruptError:
    """One line naming the first damaged chunk(s), their day(s) and file(s), and the repair command."""
    files = damaged_objects(store, key)
    first = damage[0]
    days = sorted({d.day for d in damage if d.day})
    where = ", ".join(f"{d.variable} day {d.day or '-'} chunk {list(d.chunk)}" for d in damage[:3])
    more = f" and {len(damage) - 3} more" if len(damage) > 3 else ""
    fmsg = f"; damaged file(s): {', '.join(files[:3])}" if files else f"; cube {store.url_of('cubes', key)}"
    return CubeCorruptError(
        f"{key}: cannot decode {where}{more} ({first.error}){fmsg}; repair with "
        f"`nodewatch cubes verify --repair`" + (f" (rebuilds {', '.join(days[:5])})" if days else ""))


def checked(read: Any, store: Store, key: str, days: list[date] | None = None) -> Any:
    """``read()`` (a read of cube ``key``); a failure that is chunk damage becomes a :class:`CubeCorruptError`."""
    try:
        return read()
    except (KeyboardInterrupt, MemoryError):
        raise
    except Exception as e:
        damage = find_damage(store, key, days)
        if damage:
            raise damage_error(store, key, damage) from None
        raise e
