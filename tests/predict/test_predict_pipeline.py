"""End to end on a small simulated cluster: data, cross-validation, registry, CLI report/stream, nightly step."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import UserError, app
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.predict import registry
from nodewatch.tasks.predict.dataset import PREDICTOR_METRICS, _render
from nodewatch.tasks.predict.score import score_node, warnings_from_decisions
from nodewatch.tasks.predict.stream import LdmsFollower, StreamError
from nodewatch.tasks.predict.train import fps_markdown, train_predictor
from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.schedule import build_schedule

runner = CliRunner()
CFG = SimConfig(n_nodes=48, step_s=15, seed=3, node_mtbf_days=10)
DAYS = 12


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    st = str(tmp_path_factory.mktemp("predict") / "store")
    params = train_predictor(Store(st), "p-small", CFG, DAYS, node_days=10, splits=1, epochs=30, stride=12, seed=0)
    return st, params


def test_training_registers_a_cross_validated_predictor(trained) -> None:
    st, params = trained
    store = Store(st)
    assert store.current(registry.AREA) == "p-small"
    counts = {r["events"]: r["sequences"] for r in params["data"]["counts"]}
    assert counts["failure (with precursor)"] > 20 and counts["ok"] > 1000
    assert params["data"]["hard_negative_node_days"] >= 4  # one node-day per anomaly kind the cluster has
    ours = [r for r in params["fps"] if r["source"].startswith("nodewatch")]
    assert [r["scheme"] for r in ours] == [f"unanimous@{k}NN" for k in range(1, 7)] + ["lstm@6NN"]
    # unanimous voting over more networks never raises fpr or tpr (same test split)
    u = [r for r in ours if r["scheme"].startswith("unanimous")]
    assert all(a["fpr"] >= b["fpr"] and a["tpr"] >= b["tpr"] for a, b in zip(u, u[1:], strict=False))
    assert ours[0]["tpr"] > 0.3  # the simulator's precursors are learnable
    md = fps_markdown(params["fps"])
    assert "Frank Table 4.1 (MOGON I)" in md and "| unanimous@6NN | nodewatch (simulator)" in md
    loaded = registry.load(store)
    assert loaded.voter is not None and loaded.params["step_s"] == 15
    assert loaded.voter.input == "logodds" and loaded.params["voter_input"] == "logodds"


def test_registry_refuses_altered_weights(trained, tmp_path) -> None:
    st, _ = trained
    import shutil

    copy = tmp_path / "s"
    shutil.copytree(st, copy)
    w = copy / "models" / "predict" / "p-small" / "weights.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 0xFF
    w.write_bytes(bytes(data))
    with pytest.raises(registry.PredictorFileError, match="does not match"):
        registry.load(Store(str(copy)))
    w.write_bytes(bytes(data[:100]))
    with pytest.raises(registry.PredictorFileError):
        registry.load(Store(str(copy)))
    (copy / "models" / "predict" / "CURRENT").write_text("../../etc\n")
    with pytest.raises(ValueError):
        registry.load(Store(str(copy)))


def test_report_cli_usability(trained) -> None:
    st, _ = trained
    r = runner.invoke(app, ["--store", st, "predict", "report", "--nodes", "1024", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    use = {(u["scheme"], u["source"][:9]): u for u in doc["usability"]}
    rwth = use[("lstm@6NN", "Frank Tab")]
    assert rwth["largest_pow2"] == 1024 or rwth["largest_n"] == 1282  # thesis: LSTM < 5 % up to 1,024 nodes
    assert use[("unanimous@6NN", "Frank Tab")]["largest_pow2"] == 256
    r = runner.invoke(app, ["--store", st, "predict", "report"])
    assert r.exit_code == 0 and "usability at 1,000 nodes" in " ".join(r.output.split())


@pytest.mark.parametrize(
    ("args", "msg"),
    [(["--run", "../x"], "invalid run id"), (["--run", "nope"], "no predictor run"), (["--nodes", "0"], "")],
)
def test_report_bad_args(trained, args: list[str], msg: str) -> None:
    st, _ = trained
    r = runner.invoke(app, ["--store", st, "predict", "report", *args])
    if msg:
        assert isinstance(r.exception, UserError) and msg in str(r.exception)
    else:
        assert r.exit_code == 2  # typer range check


def test_report_without_predictor(tmp_path) -> None:
    r = runner.invoke(app, ["--store", str(tmp_path / "s"), "predict", "report"])
    assert isinstance(r.exception, UserError) and "predict train" in str(r.exception)


def _ldms_lines(sched, node: int, day: int) -> list[str]:
    vals, present = _render(sched, np.array([node]), day)
    from nodewatch.tasks.simulate.metrics import COUNTERS

    # _render returns predictor metrics only; counters as cumulative sums of increments are fine for the stream
    name = f"cn{node + 1:04d}"
    lines = ["#Time,Time_usec,ProducerName,component_id,job_id," + ",".join(PREDICTOR_METRICS)]
    epoch = CFG.epoch_s
    for k in range(vals.shape[-1]):
        if not present[0, k]:
            continue
        v = vals[0, :, k]
        cells = [f"{int(x)}" if m in COUNTERS else f"{x:.6f}" for m, x in zip(PREDICTOR_METRICS, v, strict=True)]
        lines.append(f"{epoch + day * 86400 + k * 15}.000000,0,{name},{node + 1},0," + ",".join(cells))
    return lines


def test_stream_follows_a_growing_file_and_matches_batch_scoring(trained, tmp_path) -> None:
    st, _ = trained
    pred = registry.load(Store(st))
    sched = build_schedule(CFG, DAYS)
    f = sched.failures
    row = f[(f["t_fail"] > 2 * 86400) & f["precursor_start"].notna()].iloc[0]
    node, day = int(row["node"]), int(row["t_fail"] // 86400)
    lines = _ldms_lines(sched, node, day)
    path = tmp_path / "ldms.csv"
    half = len(lines) // 2
    path.write_text("\n".join(lines[:half]) + "\n" + lines[half][:10])  # a partial last line waits
    follower = LdmsFollower(str(path), pred)
    first = follower.poll()
    with open(path, "a") as fh:
        fh.write(lines[half][10:] + "\n" + "\n".join(lines[half + 1 :]) + "\n")
    second = follower.poll()
    got = first + second
    assert follower.skipped == {k: 0 for k in follower.skipped}
    # batch reference: the whole day scored at once
    body = [ln.split(",") for ln in lines[1:]]
    times = pd.to_datetime([float(b[0]) for b in body], unit="s", utc=True)
    vals = np.array([[float(x) for x in b[5:]] for b in body]).T
    ref = warnings_from_decisions(f"cn{node + 1:04d}", score_node(pred, times, vals), 15)
    # every warning of the batch scoring also comes out of the two polls (a run cut by the poll may add one)
    assert {w["at"] for w in ref} <= {w["at"] for w in got} and len(got) <= len(ref) + 1
    assert all(set(w) == {"node", "at", "lead_min", "confidence"} and w["lead_min"] == 2.0 for w in got)


def test_stream_cli_and_bad_inputs(trained, tmp_path) -> None:
    st, _ = trained
    pred = registry.load(Store(st))
    good_header = "#Time,Time_usec,ProducerName,component_id,job_id," + ",".join(PREDICTOR_METRICS)
    p = tmp_path / "f.csv"
    p.write_bytes(
        (good_header + "\n").encode()
        + b"garbage\n"
        + b"1767225600.0,0,../../etc,1,0," + b",".join([b"1"] * 10) + b"\n"
        + b"nan,0,cn0001,1,0," + b",".join([b"1"] * 10) + b"\n"
        + b"1767225600.0,0,cn0001,1,0," + b",".join([b"\xff\xfe"] * 10) + b"\n"
        + b"1767225600.0,0,cn0001,1,0," + b",".join([b"x"] * 10) + b"\n"
    )
    f = LdmsFollower(str(p), pred)
    assert f.poll() == []
    assert f.skipped["field_count"] == 1 and f.skipped["node_name"] == 1 and f.skipped["time"] == 1
    assert f.skipped["encoding"] == 1
    r = runner.invoke(app, ["--store", st, "predict", "stream", str(p), "--no-follow", "--json"])
    assert r.exit_code == 0 and r.stdout == ""
    bad = tmp_path / "bad.csv"
    bad.write_text("#Time,Time_usec,ProducerName,component_id,job_id,temp_cpu0\n")
    for target, msg in [(bad, "lacks the predictor's metrics"), (tmp_path / "missing.csv", "cannot open"),
                        (tmp_path, "directory")]:
        with pytest.raises(StreamError, match=msg):
            LdmsFollower(str(target), pred).poll()
    link = tmp_path / "link.csv"
    os.symlink(p, link)
    with pytest.raises(StreamError, match="symbolic link"):
        LdmsFollower(str(link), pred).poll()
    r = runner.invoke(app, ["--store", st, "predict", "stream", str(link), "--no-follow"])
    assert isinstance(r.exception, UserError) and "\n" not in str(r.exception)
    notcsv = tmp_path / "n.csv"
    notcsv.write_text("hello,world\n")
    with pytest.raises(StreamError, match="not an LDMS store_csv header"):
        LdmsFollower(str(notcsv), pred).poll()
    shrink = tmp_path / "s.csv"
    shrink.write_text(good_header + "\n")
    fs = LdmsFollower(str(shrink), pred)
    fs.poll()
    shrink.write_text("")
    with pytest.raises(StreamError, match="shrank"):
        fs.poll()


def test_nightly_step_contract(trained, tmp_path) -> None:
    from nodewatch.tasks.core.nightly_steps import StepContext, discover
    from nodewatch.tasks.core.settings import Settings
    from nodewatch.tasks.predict.nightly_step import STEP

    assert STEP.name == "predict" and STEP.order == 20
    assert any(s.name == "predict" for s in discover())
    st, _ = trained
    ctx = StepContext(store=Store(st), day=date(2026, 1, 5), settings=Settings(), rec=None, run_id="r")  # type: ignore[arg-type]
    out = STEP.run(ctx)
    assert out["status"] == "skipped" and "no staged telemetry" in out["details"]
    assert ctx.shared["predict"] == {"warnings": {}}
    empty = StepContext(store=Store(str(tmp_path / "e")), day=date(2026, 1, 5), settings=Settings(), rec=None, run_id="r")  # type: ignore[arg-type]
    assert STEP.run(empty)["status"] == "skipped" and empty.shared["predict"] == {"warnings": {}}
    bad = Settings(predict={"site_nodes": -3})
    with pytest.raises(ValueError, match="predict.site_nodes"):
        STEP.run(StepContext(store=Store(st), day=date(2026, 1, 5), settings=bad, rec=None, run_id="r"))  # type: ignore[arg-type]
    assert STEP.enabled(Settings(predict={"enabled": False})) is False


def test_docs_name_the_commands() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "predict.md"
    text = doc.read_text()
    for cmd in ("nodewatch predict train", "nodewatch predict report", "nodewatch predict stream"):
        assert cmd in text
