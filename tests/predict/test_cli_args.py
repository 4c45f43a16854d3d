"""``nodewatch predict train`` argument corpus: out-of-range, garbage, sentinels are usage errors (exit 2), nothing trains."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    "args",
    [
        ["--sim-nodes", "3"],
        ["--sim-nodes", "-1"],
        ["--sim-nodes", "many"],
        ["--days", "0"],
        ["--days", "1e9"],
        ["--precursor-share", "1.5"],
        ["--precursor-share", "nan"],
        ["--precursor-median-s", "0"],
        ["--precursor-sigma", "-1"],
        ["--node-mtbf-days", "0"],
        ["--splits", "0"],
        ["--epochs", "-5"],
        ["--stride", "0"],
        ["--seed", "-1"],
    ],
)
def test_train_rejects_bad_arguments(tmp_path, args: list[str]) -> None:
    r = runner.invoke(app, ["--store", str(tmp_path / "s"), "predict", "train", *args])
    assert r.exit_code == 2, r.output
    assert not (tmp_path / "s" / "models" / "predict").exists()


@pytest.mark.parametrize("args", [["--poll", "0"], ["--poll", "-1"], ["--max-seconds", "-1"]])
def test_stream_rejects_bad_arguments(tmp_path, args: list[str]) -> None:
    r = runner.invoke(app, ["--store", str(tmp_path / "s"), "predict", "stream", "x.csv", *args])
    assert r.exit_code == 2, r.output


def test_train_cli_text_and_json(tmp_path) -> None:
    st = str(tmp_path / "s")
    small = ["--sim-nodes", "48", "--days", "12", "--node-days", "10", "--splits", "1", "--epochs", "20", "--stride", "12",
             "--node-mtbf-days", "10", "--seed", "3"]
    r = runner.invoke(app, ["--store", st, "predict", "train", *small])
    assert r.exit_code == 0, r.output
    assert "registered (models/predict/CURRENT)" in r.output and "| unanimous@6NN | nodewatch (simulator)" in r.output
    r = runner.invoke(app, ["--store", st, "predict", "train", *small, "--json"])
    assert r.exit_code == 0, r.output
    import json

    doc = json.loads(r.stdout)
    assert doc["run_id"] and (tmp_path / "s" / "runs" / f"{doc['run_id']}.json").exists()
