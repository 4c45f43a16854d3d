"""The simulator's precursor shape/strength knob (tasks/simulate/precursors.py): profiles, rendering, validation, CLI."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from nodewatch.flows.cli import UserError, app
from nodewatch.tasks.predict.dataset import PREDICTOR_METRICS, _render
from nodewatch.tasks.simulate.config import SimConfig
from nodewatch.tasks.simulate.precursors import PrecursorShape
from nodewatch.tasks.simulate.schedule import build_schedule


def test_profiles_by_hand() -> None:
    t = np.array([-10.0, 0.0, 150.0, 300.0, 450.0, 599.0, 600.0, 700.0])
    ramp = PrecursorShape().gauge(t, 0.0, 600.0)
    np.testing.assert_allclose(ramp, [0, 0, 0.25, 0.5, 0.75, 599 / 600, 0, 0])
    np.testing.assert_allclose(PrecursorShape("step", 2.0).gauge(t, 0.0, 600.0), [0, 2, 2, 2, 2, 2, 0, 0])
    # oscillation, period 200 s: on in [0, 100), [200, 300), [400, 500); amplitude ramps (450 s: on, 0.75)
    osc = PrecursorShape("oscillation", 1.0, 200.0).gauge(t, 0.0, 600.0)
    np.testing.assert_allclose(osc, [0, 0, 0, 0, 0.75, 0, 0, 0])
    assert PrecursorShape("oscillation", 1.0, 200.0).rate_breakpoints(0.0, 450.0).tolist() == [0, 100, 200, 300, 400, 450]
    np.testing.assert_allclose(PrecursorShape("oscillation", 3.0, 200.0).rate(np.array([50.0, 150.0, 250.0]), 0.0), [3, 0, 3])
    np.testing.assert_allclose(PrecursorShape("ramp", 0.5).rate(np.array([50.0, 150.0]), 0.0), [0.5, 0.5])


@pytest.mark.parametrize(
    "knobs",
    [{"precursor_shape": "zigzag"}, {"precursor_strength": -1.0}, {"precursor_strength": float("nan")},
     {"precursor_period_s": 1.0}],
)
def test_bad_knobs_are_refused(knobs: dict) -> None:
    with pytest.raises(ValueError, match="precursor_"):
        SimConfig(n_nodes=8, **knobs)


def _window_and_values(strength: float, shape: str = "ramp") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """cpu0_sys of a node with a soft-lockup precursor on its failure day, and the precursor mask."""
    cfg = SimConfig(n_nodes=48, step_s=60, seed=5, node_mtbf_days=5, precursor_share=1.0,
                    precursor_strength=strength, precursor_shape=shape, precursor_median_s=3 * 3600, precursor_sigma=0.0)
    s = build_schedule(cfg, 6)
    f = s.failures
    r = f[(f["precursor_kind"] == "soft_lockup") & (f["t_fail"] > 86400 + 4 * 3600)].iloc[0]
    day = int(r["t_fail"] // 86400)
    v, _ = _render(s, np.array([int(r["node"])]), day)
    t = day * 86400.0 + 60.0 * (np.arange(v.shape[-1]) + 1)
    inside = (t >= r["precursor_start"] + 120) & (t < r["t_fail"] - 60)
    before = t < r["precursor_start"] - 120
    return v[0, PREDICTOR_METRICS.index("cpu0_sys")], inside, before


def test_strength_scales_the_telemetry_trace_and_zero_removes_it() -> None:
    v0, inside, before = _window_and_values(0.0)
    v1, _, _ = _window_and_values(1.0)
    v3, _, _ = _window_and_values(3.0, "step")
    np.testing.assert_array_equal(v0[before], v1[before])  # outside the window nothing changes
    # soft lockup adds 30 * ramp (percent points) to system time: the mean lift is ~15 % (ramp) and 90 % (step x3)
    lift1 = np.nanmean(v1[inside] - v0[inside])
    lift3 = np.nanmean(v3[inside] - v0[inside])
    assert 10 < lift1 < 20, lift1
    assert lift3 > 60, lift3


def test_simulate_cli_refuses_a_bad_shape_in_one_line(tmp_path) -> None:
    r = CliRunner().invoke(app, ["simulate", "--out", str(tmp_path / "o"), "--nodes", "8", "--precursor-shape", "zigzag"])
    # the launcher prints a UserError as one line and exits 2 (tests/simulate/test_simulate_cli.py)
    assert isinstance(r.exception, UserError) and "precursor_shape must be one of" in str(r.exception)
    assert "\n" not in str(r.exception)
    assert not (tmp_path / "o" / "telemetry").exists()


def test_ok_sequences_never_come_from_a_precursor_window() -> None:
    from nodewatch.tasks.predict.dataset import ok_sequences

    cfg = SimConfig(n_nodes=8, step_s=60, seed=5, node_mtbf_days=2, precursor_share=1.0, precursor_median_s=6 * 3600,
                    precursor_sigma=0.0)
    s = build_schedule(cfg, 6)
    neg = ok_sequences(s, node_days=40, w=4, seed=0, stride=10)
    f = s.failures
    assert len(neg.y) > 500 and (f["t_fail"] > 86400).sum() >= 3
    for r in f.itertuples():
        inside = (neg.node == r.node) & (neg.time_s >= r.precursor_start) & (neg.time_s < r.t_up + 3600)
        assert not inside.any(), (r.node, r.precursor_start, r.t_fail)


def test_anomaly_node_days_are_labelled_ok_and_annotated() -> None:
    """Hard negatives: node-days drawn because they hold a non-failing anomaly are ok sequences, and every sequence
    whose windows overlap an anomaly says which kind (by hand against the schedule's anomaly table)."""
    from nodewatch.tasks.predict.dataset import ANOMALY_KINDS, anomaly_node_days, ok_sequences

    cfg = SimConfig(n_nodes=8, step_s=60, seed=5, node_mtbf_days=2, anomaly_share=0.1)
    s = build_schedule(cfg, 6)
    days = anomaly_node_days(s, per_kind=2, seed=0)
    assert 4 <= len(days) <= 2 * len(ANOMALY_KINDS)
    hard = ok_sequences(s, 0, w=4, stride=10, pairs=days, hard=True)
    assert hard.hard.all() and (hard.y == 0).all() and (hard.anomaly > 0).sum() > 50
    an = s.anomalies
    for i in np.flatnonzero(hard.anomaly > 0)[::25]:
        t, n = hard.time_s[i], hard.node[i]
        kind = ANOMALY_KINDS[hard.anomaly[i] - 1]
        hit = an[(an["node"] == n) & (an["type"] == kind) & (an["start"] <= t) & (an["end"] > t - 11 * 60)]
        assert len(hit), (n, t, kind)
    quiet = np.flatnonzero(hard.anomaly == 0)[::50]
    for i in quiet:
        t, n = hard.time_s[i], hard.node[i]
        assert not ((an["node"] == n) & (an["start"] <= t) & (an["end"] > t - 11 * 60)).any()
