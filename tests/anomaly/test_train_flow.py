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


def test_train_batches_run_on_the_dask_cluster_of_nodewatch_dask(prefect_harness, tmp_path, monkeypatch):
    """NODEWATCH_DASK=<scheduler>: every node batch is a task on that cluster's worker process, and the
    models are the same bytes as with the flow's own thread pool."""
    import hashlib

    from distributed import Client, LocalCluster, get_task_stream
    from safetensors.numpy import load_file

    from nodewatch.flows.train import train
    from nodewatch.tasks.core.store import Store

    ds, _ = synthetic_cube(n_nodes=3, seed=6)
    digests = {}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:  # the flow's own dask work stays local
        for where in ("local", cluster.scheduler_address):
            st = Store(str(tmp_path / where.replace("/", "_").replace(":", "_")))
            write_cube(st, ds)
            monkeypatch.setenv("NODEWATCH_DASK", where)
            with get_task_stream(client) as stream:
                out = train(start=date(2026, 1, 1), end=date(2026, 1, 10), model="exp", node_batch=2, predictor=False,
                            store=st.url)
            ran = [t["key"] for t in stream.data if str(t["key"]).startswith("train_batch-")]
            assert out["trained"] == 3
            assert len(ran) == (0 if where == "local" else 2), (where, ran)  # 3 nodes in batches of 2: two tasks
            models = sorted(p for p in (tmp_path / st.url.rsplit("/", 1)[-1]).rglob("*")
                            if p.is_file() and "models" in p.parts and p.suffix == ".safetensors")
            # the tensors, not the file: its metadata names the run id
            digests[where] = {p.name: {k: hashlib.sha256(v.tobytes()).hexdigest() for k, v in load_file(p).items()}
                              for p in models}
    local, remote = digests.values()
    assert local and local == remote
