"""Fault injection on the score writer and damaged model/cube files.

* Re-scoring a day after a retrain, SIGKILLed in a real child process at each publish step: readers
  see the day's scores, thresholds, flags and summary all from the old model or all from the new one
  (never ``is_anomalous != (score >= threshold)``), and a re-run equals an uninterrupted scoring.
* A truncated or bit-flipped weight file fails its node alone, named; the other nodes are scored.
* A damaged telemetry chunk: scoring names it and keeps the day's published scores; training trains no
  node and does not move CURRENT.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pytest
from test_score import D0, HIST, SCORE_DAY, build, stage_day

from nodewatch.tasks.core.store import Store
from nodewatch.tasks.cubes import repo
from nodewatch.tasks.cubes.synth import write_topology

REPO = Path(__file__).resolve().parents[2]
VARS = ("score", "threshold", "is_anomalous")
CHILD = """
import sys
from datetime import date
from nodewatch.tasks.anomaly.score import score_day
from nodewatch.tasks.core.store import Store
score_day(Store(sys.argv[1]), date.fromisoformat(sys.argv[2]), "exp", run_id="child")
print("done")
"""


def _train(st: Store, first: date, last: date) -> str:
    from nodewatch.tasks.anomaly.train import TrainConfig, run_training

    out = run_training(st, first, last, TrainConfig(model="exp", workers=1, threads=1, seed=0))
    assert out["current_moved"]
    return out["run_id"]


def _scores(st: Store, day: date) -> dict[str, np.ndarray]:
    ds = repo.open_dataset(st, "scores.zarr").sel(time=slice(np.datetime64(day.isoformat()),
                                                              np.datetime64(f"{day.isoformat()}T23:59")))
    return {k: ds[k].values for k in VARS}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return all(np.array_equal(a[k], b[k], equal_nan=True) for k in VARS)


def _copy(root: Path, base: Store, name: str) -> Store:
    shutil.copytree(base.root, root / name)
    return Store(str(root / name))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Day SCORE_DAY scored with run A; then run B trained (CURRENT = B), not yet scored; ``new``: B's scoring."""
    from nodewatch.tasks.anomaly.score import read_summary, score_day

    root = tmp_path_factory.mktemp("score-faults")
    base = Store(str(root / "base"))
    nodes = [f"cn{i:04d}" for i in range(6)]
    write_topology(base, nodes)
    for i in range(HIST + 1):
        stage_day(base, D0 + timedelta(days=i), nodes, ["load1", "power_node", "temp_inlet"], "5min", seed=7,
                  anomalous={"cn0002": (120, 150)} if i == HIST else None)
    build(base, [D0 + timedelta(days=i) for i in range(HIST + 1)], "15min")
    run_a = _train(base, D0, D0 + timedelta(days=HIST - 1))
    score_day(base, SCORE_DAY, "exp", run_id="score-a")
    old, old_summary = _scores(base, SCORE_DAY), read_summary(base, SCORE_DAY)
    run_b = _train(base, D0 + timedelta(days=HIST - 2), D0 + timedelta(days=HIST - 1))
    ref = _copy(root, base, "ref")
    score_day(ref, SCORE_DAY, "exp", run_id="score-b")
    new, new_summary = _scores(ref, SCORE_DAY), read_summary(ref, SCORE_DAY)
    assert not _same(old, new) and set(old_summary["model_run"].dropna()) == {run_a}
    assert set(new_summary["model_run"].dropna()) == {run_b}
    return root, base, old, new, run_a, run_b


def _consistent(st: Store, day: date) -> None:
    s = _scores(st, day)
    fin = np.isfinite(s["score"])
    assert (s["is_anomalous"][fin] == (s["score"][fin] >= s["threshold"][fin])).all()
    assert (s["is_anomalous"][~fin] == -1).all()


@pytest.mark.slow
@pytest.mark.parametrize("point,published", [
    ("cube:after-region:1", False),  # the region written into the day's session
    ("score:after-daily:1", False),  # summary/alerts of the new version written, not committed
    ("cube:before-commit:1", False),  # commit lock held
    ("cube:after-commit:1", True),
])
def test_kill_rescoring_at_each_publish_step(world, point, published):
    from nodewatch.tasks.anomaly.score import day_scored, read_summary, score_day

    root, base, old, new, run_a, run_b = world
    st = _copy(root, base, point.replace(":", "-"))
    p = subprocess.run([sys.executable, "-c", CHILD, st.url, SCORE_DAY.isoformat()], cwd=REPO,
                       env={**os.environ, "NODEWATCH_FAULT_AT": point}, capture_output=True, text=True, timeout=300)
    assert p.returncode == -9, (point, p.returncode, p.stderr[-2000:])
    assert _same(_scores(st, SCORE_DAY), new if published else old), point
    _consistent(st, SCORE_DAY)
    assert set(read_summary(st, SCORE_DAY)["model_run"].dropna()) == {run_b if published else run_a}
    assert day_scored(st, SCORE_DAY, "exp") is published
    score_day(st, SCORE_DAY, "exp", run_id="rerun")  # lock of the dead child taken over
    assert _same(_scores(st, SCORE_DAY), new) and day_scored(st, SCORE_DAY, "exp")
    assert set(read_summary(st, SCORE_DAY)["model_run"].dropna()) == {run_b}


def test_damaged_weight_file_fails_its_node_alone(world):
    from nodewatch.tasks.anomaly.registry import run_prefix
    from nodewatch.tasks.anomaly.score import read_summary, score_day

    root, base, old, new, run_a, run_b = world
    st = _copy(root, base, "weights")
    nodes_dir = Path(st.path(run_prefix("exp", run_b), "nodes"))
    trunc = nodes_dir / "cn0001.safetensors"
    trunc.write_bytes(trunc.read_bytes()[:20])  # truncated
    flip = nodes_dir / "cn0003.safetensors"
    blob = bytearray(flip.read_bytes())
    for i in range(len(blob) - 8, len(blob)):  # 8 flipped bytes in the tensor data: still a valid file
        blob[i] ^= 0x5A
    flip.write_bytes(bytes(blob))
    out = score_day(st, SCORE_DAY, "exp", run_id="weights")
    assert out["failed_nodes"] == ["cn0001", "cn0003"] and out["failed_batches"] == []
    assert out["scored"] == 4
    summ = read_summary(st, SCORE_DAY).set_index("node")
    assert str(trunc) in summ.loc["cn0001", "reason"] and "\n" not in summ.loc["cn0001", "reason"]
    assert str(flip) in summ.loc["cn0003", "reason"] and "sha256" in summ.loc["cn0003", "reason"]
    s, n = _scores(st, SCORE_DAY), _scores(Store(str(root / "ref")), SCORE_DAY)
    for k in (0, 2, 4, 5):  # the good nodes score exactly as with intact files
        assert np.array_equal(s["score"][k], n["score"][k], equal_nan=True)


def test_model_file_corpus_each_node_alone(world):
    """Missing, garbage, wrong-shaped JSON and an unreadable weight file: each damaged node is named alone (one line,
    its path), the others load exactly as one node at a time; without ``skip_bad`` the first damage raises."""
    from nodewatch.tasks.anomaly.registry import ModelFileError, load_models, load_node_files, run_prefix

    root, base, old, new, run_a, run_b = world
    st = _copy(root, base, "model-corpus")
    d = Path(st.path(run_prefix("exp", run_b), "nodes"))
    (d / "cn0000.json").unlink()
    (d / "cn0001.json").write_bytes(b"\xff\xfe\x00{not json")
    (d / "cn0002.json").write_text("[1, 2]")
    (d / "cn0004.safetensors").unlink()
    (d / "cn0004.safetensors").mkdir()  # listed as a weight file, but cannot be read
    out = load_models(st, "exp", run_b, skip_bad=True)
    assert out.nodes == ["cn0003", "cn0005"] and sorted(out.bad) == ["cn0000", "cn0001", "cn0002", "cn0004"]
    for node, why in out.bad.items():
        assert node in why and "\n" not in why and str(d) in why
    assert "unreadable" in out.bad["cn0000"] and "unreadable" in out.bad["cn0001"]
    assert "not a JSON object" in out.bad["cn0002"] and "cannot be read" in out.bad["cn0004"]
    for node in out.nodes:
        state, meta = load_node_files(st, "exp", run_b, node)
        assert meta == out.meta[node]
    with pytest.raises(ModelFileError, match="cn0000"):
        load_models(st, "exp", run_b)
    with pytest.raises(ModelFileError, match="cn0004"):
        load_node_files(st, "exp", run_b, "cn0004")
    assert load_models(st, "exp", run_b, nodes=["cn0005"]).nodes == ["cn0005"]


def _damage_telemetry_chunk(st: Store) -> Path:
    """Rebuild SCORE_DAY (new chunk objects) and flip bytes of its largest new chunk (a data chunk)."""
    base = Path(st.path("cubes", "telemetry.zarr", "chunks"))
    before = set(base.iterdir())
    build(st, [SCORE_DAY], "15min")
    victim = max(set(base.iterdir()) - before, key=lambda p: p.stat().st_size)
    blob = bytearray(victim.read_bytes())
    for i in range(8, 40, 4):
        blob[i] ^= 0xFF
    victim.write_bytes(bytes(blob))
    return victim


@pytest.mark.slow
def test_damaged_cube_chunk_keeps_published_scores_and_current(world):
    from nodewatch.tasks.anomaly.registry import area
    from nodewatch.tasks.anomaly.score import ScoringError, read_summary, score_day
    from nodewatch.tasks.anomaly.train import TrainConfig, run_training
    from nodewatch.tasks.cubes.verify import find_damage

    root, base, old, new, run_a, run_b = world
    st = _copy(root, base, "damaged-cube")
    victim = _damage_telemetry_chunk(st)
    damage = find_damage(st, "telemetry.zarr")
    assert len(damage) == 1 and damage[0].day == SCORE_DAY.isoformat()
    summary_before, scores_before = read_summary(st, SCORE_DAY), _scores(st, SCORE_DAY)
    with pytest.raises(ScoringError) as err:
        score_day(st, SCORE_DAY, "exp", run_id="bad")
    msg = str(err.value)
    assert victim.name in msg and damage[0].variable in msg and SCORE_DAY.isoformat() in msg and "\n" not in msg
    assert read_summary(st, SCORE_DAY).equals(summary_before)  # the published summary was not overwritten
    assert _same(_scores(st, SCORE_DAY), scores_before)
    out = run_training(st, D0, SCORE_DAY, TrainConfig(model="exp", workers=1, threads=1, seed=0))
    assert out["trained"] == 0 and not out["current_moved"] and st.current(area("exp")) == run_b
    assert all(victim.name in f["reason"] for f in out["failed"].values())
