"""The Prefect ``train`` flow and the ``nodewatch train`` CLI on a small synthetic cube."""

from __future__ import annotations

from datetime import date

import pytest
from test_train_tasks import synthetic_cube, write_cube, write_labels
from typer.testing import CliRunner


@pytest.mark.slow
def test_train_flow_compare_publishes_artifacts(prefect_harness, store, tmp_path):
    from prefect import get_client

    from nodewatch.flows.train import train

    ds, iv = synthetic_cube(n_nodes=3, seed=6)  # seed 6: anomalies in the test split
    write_cube(store, ds)
    labels = write_labels(tmp_path / "l.parquet", iv)
    out = train(start=date(2026, 1, 1), end=date(2026, 1, 10), window=5, epochs=1, node_batch=2, compare=True,
                labels=labels, store=store.url)
    assert out["trained"] == 3 and out["current_moved"] and out["roc_png"]
    names = set(out["metrics"])
    assert {"EXP", "CLU", "DENSE_semi", "DENSE_un", "RUAD W=5", "RUAD_semi W=10", "RUAD W=40"} <= names
    assert "| RUAD / input sequence length | 5 | 10 | 20 | 40 |" in out["table"]

    async def keys() -> set[str]:
        async with get_client() as c:
            return {a.key for a in await c.read_artifacts()}

    import asyncio

    assert {"train-ruad", "train-ruad-summary", "train-ruad-roc"} <= asyncio.run(keys())


def test_cli_train_no_prefect(store):
    from nodewatch.flows.cli import UserError, app

    ds, _ = synthetic_cube(n_nodes=2)
    write_cube(store, ds)
    r = CliRunner().invoke(app, ["--store", store.url, "train", "--start", "2026-01-01", "--end", "2026-01-10",
                                 "--model", "exp", "--no-prefect", "--nodes", "node0000,node0001"])
    assert r.exit_code == 0, r.output
    assert "2 nodes trained, 0 failed" in r.output and "EXP" in r.output
    r = CliRunner().invoke(app, ["--store", store.url, "train", "--start", "2026-13-01", "--end", "2026-01-10", "--no-prefect"])
    assert isinstance(r.exception, UserError) and "invalid date" in str(r.exception)
    r = CliRunner().invoke(app, ["--store", store.url, "train", "--start", "2026-01-01", "--end", "2026-01-10", "--no-prefect",
                                 "--model", "lstm"])
    assert isinstance(r.exception, UserError)
    r = CliRunner().invoke(app, ["--store", store.url, "train", "--start", "2026-01-01", "--end", "2026-01-10", "--no-prefect",
                                 "--nodes", "ghost"])
    assert isinstance(r.exception, UserError) and "ghost" in str(r.exception)
