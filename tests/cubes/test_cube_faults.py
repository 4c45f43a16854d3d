"""Fault injection on the cube writer: SIGKILL a real child process at each publish step of a day rebuild,
then check that readers see the day as it was or as it is after an uninterrupted build (never a mix),
that the next build takes over the dead writer's lock at once, and that a re-run equals an
uninterrupted build. Also: a damaged chunk is named (variable, day, file) and repaired.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import day_complete, open_telemetry_cube, repo
from nodewatch.tasks.cubes.build import build_days, dask_client
from nodewatch.tasks.cubes.synth import node_names, telemetry_table, write_telemetry_day, write_topology

REPO = Path(__file__).resolve().parents[2]
D1, D2 = date(2026, 3, 1), date(2026, 3, 2)
STATS = ("count", "mean", "min", "max", "std")
CHILD = """
import sys
from datetime import date
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes.build import build_days, dask_client
store = Store(sys.argv[1])
with dask_client(n_workers=1, processes=False) as c:
    build_days(store, "telemetry", [date.fromisoformat(d) for d in sys.argv[2].split(",")], c, node_batch=2)
print("done")
"""


def _day(store: Store, day: date) -> dict[str, np.ndarray]:
    ds = open_telemetry_cube(store).sel(time=slice(np.datetime64(day.isoformat()), np.datetime64(f"{day.isoformat()}T23:59")))
    return {k: ds[k].values for k in STATS}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(a[k], b[k], equal_nan=True) for k in STATS)


def _stage_base(store: Store) -> None:
    nodes = node_names(5)
    write_topology(store, nodes, per_rack=2)
    for d in (D1, D2):
        write_telemetry_day(store, d, nodes, ["power_node", "temp_inlet"], freq="5min", seed=5)


def _late_part(store: Store) -> None:
    """A late staged part for D1 touching every node batch: D1 must be rebuilt, with other values."""
    nodes = node_names(5)
    t = telemetry_table([f"{D1.isoformat()}T0{h}:01Z" for h in range(5)], nodes, ["power_node"] * 5, [1e4] * 5)
    store.write_parquet(t, store.staged_key("telemetry", D1.isoformat(), "late"))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``base``: D1, D2 built, then a late part of D1 staged (not built); ``ref``: the same, built uninterrupted."""
    root = tmp_path_factory.mktemp("faults")
    base, ref = Store(str(root / "base")), Store(str(root / "ref"))
    with dask_client(n_workers=1, processes=False) as c:
        for s in (base, ref):
            _stage_base(s)
            build_days(s, "telemetry", [D1, D2], c, node_batch=2)
        old = _day(base, D1)
        for s in (base, ref):
            _late_part(s)
        build_days(ref, "telemetry", [D1], c, node_batch=2)
    new = _day(ref, D1)
    assert not _same(old, new)
    return root, base, old, new, _day(ref, D2)


def _kill_at(root: Path, base: Store, name: str, point: str) -> Store:
    target = root / name
    shutil.copytree(base.root, target)
    env = {**os.environ, "NODEWATCH_FAULT_AT": point}
    p = subprocess.run([sys.executable, "-c", CHILD, str(target), D1.isoformat()], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == -9, (point, p.returncode, p.stderr[-2000:])  # killed at the point, not finished
    return Store(str(target))


@pytest.mark.slow
@pytest.mark.parametrize("point,published", [
    ("cube:after-region:1", False),  # every variable of the day's region written into the session, no commit
    ("cube:before-commit:1", False),  # commit lock held, nothing published
    ("cube:after-commit:1", True),  # published, the process dies before returning
])
def test_kill_at_each_publish_step_of_a_day_rebuild(stores, point, published):
    root, base, old, new, d2 = stores
    st = _kill_at(root, base, point.replace(":", "-"), point)
    seen = _day(st, D1)
    assert _same(seen, new if published else old), point  # the old day or the new one, never a mix
    c, m = seen["count"], seen["mean"]
    assert not ((c > 0) & np.isnan(m)).any() and not ((c == 0) & np.isfinite(m)).any()
    assert _same(_day(st, D2), d2)  # the other day is untouched
    assert day_complete(st, D1) is published  # the marker is committed with the chunks
    t0 = time.perf_counter()
    with dask_client(n_workers=1, processes=False) as cl:
        res = build_days(st, "telemetry", [D1], cl, node_batch=2)  # a lock left by the dead child is taken over
    assert time.perf_counter() - t0 < 60 and res[0].status == "built"
    assert _same(_day(st, D1), new) and day_complete(st, D1)  # the re-run equals an uninterrupted build


def _chunk_files(store: Store) -> list[Path]:
    return sorted(Path(store.path("cubes", "telemetry.zarr", "chunks")).iterdir())


@pytest.mark.slow
def test_damaged_chunk_is_named_and_repaired(stores):
    from nodewatch.tasks.cubes.verify import CubeCorruptError, checked, find_damage

    root, base, old, new, d2 = stores
    target = root / "damaged"
    shutil.copytree(base.root, target)
    st = Store(str(target))
    before = {f.name for f in _chunk_files(st)}
    with dask_client(n_workers=1, processes=False) as c:  # a commit that writes D2's chunks anew
        build_days(st, "telemetry", [D2], c, node_batch=2)
    fresh = [f for f in _chunk_files(st) if f.name not in before]
    assert fresh
    victim = fresh[len(fresh) // 2]
    blob = bytearray(victim.read_bytes())
    for i in range(8, min(len(blob), 40), 4):  # flip bytes inside the zstd frame
        blob[i] ^= 0xFF
    victim.write_bytes(bytes(blob))
    with pytest.raises(CubeCorruptError) as err:
        checked(lambda: open_telemetry_cube(st).load(), st, "telemetry.zarr")
    msg = str(err.value)
    assert "\n" not in msg and D2.isoformat() in msg and victim.name in msg and "--repair" in msg
    assert any(v in msg for v in STATS)
    damage = find_damage(st, "telemetry.zarr")
    assert {d.day for d in damage} == {D2.isoformat()}
    from typer.testing import CliRunner

    from nodewatch.flows.cli import UserError, app

    r = CliRunner().invoke(app, ["--store", st.url, "cubes", "verify", "--kind", "telemetry"])
    assert isinstance(r.exception, UserError) and "--repair" in str(r.exception)  # the CLI exits 2 with this line
    line = next(x for x in r.output.splitlines() if "cannot decode" in x)  # one line per damaged cube
    assert victim.name in line and D2.isoformat() in line and "Traceback" not in r.output, r.output
    r = CliRunner().invoke(app, ["--store", st.url, "cubes", "verify", "--kind", "telemetry", "--repair"])
    assert r.exit_code == 0 and f"rebuilt {D2.isoformat()}" in r.output, r.output
    assert find_damage(st, "telemetry.zarr") == []
    assert _same(_day(st, D2), d2) and _same(_day(st, D1), old)


def test_too_many_nodes_is_one_line_before_any_allocation(tmp_path):
    from nodewatch.tasks.cubes.build import TooManyNodesError

    st = Store(str(tmp_path / "s"))
    names = [f"x{i:05d}" for i in range(40)]
    st.write_parquet(telemetry_table([f"{D1.isoformat()}T00:00Z"] * 40, names, ["power_node"] * 40, [1.0] * 40),
                     st.staged_key("telemetry", D1.isoformat(), "r"))
    with dask_client(n_workers=1, processes=False) as c, pytest.raises(TooManyNodesError) as err:
        build_days(st, "telemetry", [D1], c, max_nodes=30)
    assert "40 distinct nodes" in str(err.value) and "max_cube_nodes" in str(err.value) and "\n" not in str(err.value)
    assert not repo.exists(st, "telemetry.zarr")  # refused before the cube was created


def test_local_cluster_listens_on_loopback_only():
    import subprocess as sp

    with dask_client(n_workers=1, processes=False):
        out = sp.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
    mine = [line.split()[3] for line in out.splitlines() if f"pid={os.getpid()}," in line]
    assert mine and all(a.startswith("127.0.0.1:") for a in mine), mine


STATE_CHILD = """
import sys
import numpy as np
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.states.cube import write_cube
t0 = int(np.datetime64("2026-01-01", "ns").astype(np.int64))
write_cube(Store(sys.argv[1]), np.full((2, 1440), 5, np.int8), ["cn1", "cn2"], t0, rebuild=True)
print("done")
"""


@pytest.mark.slow
def test_state_cube_rebuild_killed_leaves_the_previous_cube(tmp_path):
    from nodewatch import open_cube
    from nodewatch.tasks.states.cube import write_cube

    st = Store(str(tmp_path / "s"))
    t0 = int(np.datetime64("2026-01-01", "ns").astype(np.int64))
    write_cube(st, np.full((2, 1440), 3, np.int8), ["cn1", "cn2"], t0)
    for point in ("cube:before-commit:1", "cube:after-commit:1"):
        p = subprocess.run([sys.executable, "-c", STATE_CHILD, st.url], cwd=REPO, capture_output=True, text=True,
                           env={**os.environ, "NODEWATCH_FAULT_AT": point}, timeout=300)
        assert p.returncode == -9, p.stderr[-2000:]
        want = 3 if point == "cube:before-commit:1" else 5
        assert (open_cube("state", st)["state"].values == want).all(), point  # readable, old or new, whole
    write_cube(st, np.full((2, 1440), 7, np.int8), ["cn1", "cn2"], t0)  # a plain build afterwards works
    assert (open_cube("state", st)["state"].values == 7).all()


@pytest.fixture
def tiny_fs(tmpfs):
    """A 16 MiB tmpfs (conftest ``tmpfs``)."""
    return tmpfs("16m")


@pytest.mark.slow
def test_full_disk_during_a_day_rebuild_publishes_nothing(stores, tiny_fs, fill_disk):
    root, base, old, new, d2 = stores
    shutil.copytree(base.root, tiny_fs / "store")
    st = Store(str(tiny_fs / "store"))
    filler = fill_disk(tiny_fs)  # fill the disk, then give back a few KiB: less than a day's chunks
    with open(filler, "r+b") as f:
        f.truncate(filler.stat().st_size - 6 * 1024)
    with dask_client(n_workers=1, processes=False) as c, pytest.raises(Exception) as err:  # noqa: PT011
        build_days(st, "telemetry", [D1], c, node_batch=2)
    assert "No space left" in str(err.value) or "os error 28" in str(err.value), str(err.value)[:500]
    assert "\n" not in str(err.value) and "nothing of" in str(err.value)  # one line (the CLI prints it, exit 2)
    seen = _day(st, D1)
    assert _same(seen, old) and not day_complete(st, D1)  # the previous day, whole (before: mean/std new, count 0)
    filler.unlink()
    with dask_client(n_workers=1, processes=False) as c:
        build_days(st, "telemetry", [D1], c, node_batch=2)
    assert _same(_day(st, D1), new) and day_complete(st, D1)


def test_max_cube_nodes_setting_reaches_the_build(tmp_path, monkeypatch):
    from nodewatch.flows.cubes import run_build
    from nodewatch.tasks.core.settings import load_settings

    monkeypatch.setenv("NODEWATCH_MAX_CUBE_NODES", "30")
    assert load_settings().max_cube_nodes == 30
    st = Store(str(tmp_path / "s"))
    names = [f"x{i:05d}" for i in range(40)]
    st.write_parquet(telemetry_table([f"{D1.isoformat()}T00:00Z"] * 40, names, ["power_node"] * 40, [1.0] * 40),
                     st.staged_key("telemetry", D1.isoformat(), "r"))
    with pytest.raises(ValueError, match="more than max_cube_nodes=30"):
        run_build(D1, D1, st.url, kinds=("telemetry",))
