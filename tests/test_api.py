"""The public API (``import nodewatch``) and the runnable examples of docs/api.md."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from datetime import date
from pathlib import Path

import pytest

import nodewatch

REPO = Path(__file__).resolve().parents[1]
DAYS = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)]


@pytest.fixture(scope="module")
def built_store(tmp_path_factory):
    """A store built by the pipeline's own steps: staged telemetry, the cube, an EXP model run, a checkpoint table."""
    from nodewatch.models.checkpoint.failures import FailureModel
    from nodewatch.tasks.anomaly.train import TrainConfig, run_training
    from nodewatch.tasks.checkpoint.compute import CkptCost
    from nodewatch.tasks.checkpoint.tables import run_checkpoint_tables
    from nodewatch.tasks.core.store import Store
    from nodewatch.tasks.cubes.build import build_days, dask_client
    from nodewatch.tasks.cubes.synth import node_names, write_telemetry_day, write_topology

    store = Store(str(tmp_path_factory.mktemp("api") / "store"))
    nodes = node_names(4)
    write_topology(store, nodes)
    for i, d in enumerate(DAYS):
        write_telemetry_day(store, d, nodes, ["power", "cpu_util", "mem_used"], freq="5min", seed=i)
    with dask_client() as client:
        build_days(store, "telemetry", DAYS, client)
    out = run_training(store, DAYS[0], DAYS[-1], TrainConfig(model="exp", node_batch=4, workers=1))
    assert out["trained"] == 4
    run_checkpoint_tables(store, failure_models=[FailureModel("w08", mtbf_node_h=5 * 8766.0, shape=0.8)],
                          ckpt_costs=[CkptCost.fixed(0.25)])
    return store


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (REPO / "docs" / "api.md").read_text(), flags=re.S)


@pytest.mark.slow
def test_docs_api_examples_run(built_store, capsys) -> None:
    blocks = _examples()
    assert len(blocks) == 4
    ns: dict = {}
    for block in blocks:
        exec(compile(block.replace("./nodewatch-data", built_store.url), "docs/api.md", "exec"), ns)  # noqa: S102
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("{'node': 4")
    assert printed[-1].startswith(ns["model"].run_id) and " exp " in printed[-1]


@pytest.mark.slow
def test_api_results_match_the_pipeline(built_store) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # issue 16: opening a published cube warns about nothing (no consolidated-metadata noise)
        ds = nodewatch.open_cube("telemetry", store=built_store.url)
    assert set(ds.dims) >= {"node", "time", "metric"} and ds.sizes["node"] == 4
    tel = nodewatch.read_table("telemetry", store=built_store, start="2026-01-02", end="2026-01-02")
    assert len(tel) == 4 * 3 * 288 and tel["time"].dt.date.nunique() == 1
    assert nodewatch.read_table("telemetry", store=built_store, start="2027-01-01").empty
    assert nodewatch.read_table("no_such_table", store=built_store).empty
    table = nodewatch.load_checkpoint_table(store=built_store)
    assert table["interval_h"].dims == ("shape", "ckpt_cost", "failure_model", "method")
    m = nodewatch.load_node_model("cn0002", store=built_store, kind="exp")
    assert m.nodes == ["cn0002"] and m.params["model"] == "exp"


def test_api_errors_are_plain(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown cube"):
        nodewatch.open_cube("nope", store=tmp_path)
    with pytest.raises(FileNotFoundError, match="nodewatch cubes build"):
        nodewatch.open_cube("telemetry", store=tmp_path)
    with pytest.raises(FileNotFoundError, match="states build"):
        nodewatch.open_cube("state", store=tmp_path)
    with pytest.raises(FileNotFoundError, match="checkpoint tables"):
        nodewatch.load_checkpoint_table(store=tmp_path)
    with pytest.raises(ValueError):
        nodewatch.load_node_model("../etc/passwd", store=tmp_path)
    with pytest.raises(FileNotFoundError):
        nodewatch.load_node_model("cn0001", store=tmp_path)
    with pytest.raises(ValueError):
        nodewatch.read_table("../raw", store=tmp_path)


def test_import_nodewatch_is_cheap() -> None:
    """``import nodewatch`` loads none of the heavy libraries."""
    heavy = "('prefect', 'dask', 'torch', 'xarray', 'great_expectations')"
    code = f"import sys, nodewatch; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
