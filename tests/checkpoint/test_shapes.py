"""Job shapes against a hand-built jobs table (expected buckets computed by hand below)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from rich.console import Console

from nodewatch.tasks.checkpoint.shapes import DEFAULT_RUNTIME_EDGES_H, SHAPE_COLUMNS, format_shapes_table, job_shapes, plot_shapes

T0 = datetime(2024, 1, 1, tzinfo=UTC)

# (step, started, nodes, elapsed_s)
JOBS = [
    (None, True, 1, 600),  # 1 node, 1/6 h -> [0, 0.25)
    (None, True, 1, 1800),  # 1 node, 0.5 h -> [0.5, 1) (lower edge inclusive)
    (None, True, 3, 7200),  # 3-4 nodes, 2 h -> [2, 4)
    (None, True, 4, 10800),  # 3-4 nodes, 3 h -> [2, 4)
    (None, True, 5, 360000),  # 5-8 nodes, 100 h -> [64, inf)
    ("batch", True, 2, 3600),  # a step: not counted
    (None, False, 2, 0),  # never started: not counted
    (None, False, 2, 3600),  # SWF with unknown wait (no start) but ran 1 h: counted, 2 nodes, [1, 2)
    (None, True, 0, 3600),  # invalid node count: not counted
    (None, True, 1, None),  # unknown runtime: not counted
]


def _table() -> pa.Table:
    return pa.table(
        {
            "job_id": [str(i) for i in range(len(JOBS))],
            "step": [j[0] for j in JOBS],
            "start_time": pa.array([T0 if j[1] else None for j in JOBS], pa.timestamp("ns", tz="UTC")),
            "nodes": pa.array([j[2] for j in JOBS], pa.int32()),
            "elapsed_s": pa.array([j[3] for j in JOBS], pa.int64()),
        }
    )


EXPECTED = pd.DataFrame(
    [
        # nodes_lo, nodes_hi, rt_lo, rt_hi, nodes_rep, rt_rep, jobs, node_hours
        (1, 1, 0.0, 0.25, 1, 600 / 3600, 1, 1 / 6),
        (1, 1, 0.5, 1.0, 1, math.sqrt(0.5), 1, 0.5),
        (2, 2, 1.0, 2.0, 2, math.sqrt(2.0), 1, 2.0),
        (3, 4, 2.0, 4.0, 4, math.sqrt(8.0), 2, 6.0 + 12.0),
        (5, 8, 64.0, math.inf, 8, 100.0, 1, 500.0),
    ],
    columns=list(SHAPE_COLUMNS[:-1]),
)


@pytest.mark.parametrize("as_pandas", [False, True])
def test_job_shapes_by_hand(as_pandas):
    jobs = _table().to_pandas() if as_pandas else _table()
    out = job_shapes(jobs)
    assert list(out.columns) == list(SHAPE_COLUMNS)
    total = 1 / 6 + 0.5 + 2.0 + 18.0 + 500.0
    expected = EXPECTED.assign(share_node_hours=EXPECTED["node_hours"] / total)
    pd.testing.assert_frame_equal(out, expected, check_dtype=False, rtol=1e-12)
    assert out["share_node_hours"].sum() == pytest.approx(1.0)
    assert out["jobs"].sum() == 6


def test_default_runtime_edges_are_log_spaced():
    e = np.asarray(DEFAULT_RUNTIME_EDGES_H)
    assert e[0] == 0 and math.isinf(e[-1])
    assert list(e[1:-1]) == [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]
    assert np.allclose(e[2:-1] / e[1:-2], 2.0)  # every finite bucket spans a factor of two


@pytest.mark.parametrize(("hours", "lo"), [(23.99, 16.0), (24.01, 16.0), (47.9, 32.0), (48.1, 32.0), (72.01, 64.0)])
def test_jobs_at_queue_limits_are_not_split(hours, lo):
    """A job ending just before or just after a 24/48/72 h limit lands in the same bucket."""
    t = _table().slice(0, 1).set_column(4, "elapsed_s", pa.array([round(hours * 3600)], pa.int64()))
    assert job_shapes(t)["runtime_lo_h"].tolist() == [lo]


def test_custom_edges_and_out_of_range():
    # node buckets 1-2, 3-4 only: the 5-node job is outside; runtime buckets [0,1), [1,10)
    out = job_shapes(_table(), node_edges=[2, 4], runtime_edges_h=[0, 1, 10])
    assert out[["nodes_lo", "nodes_hi", "runtime_lo_h", "runtime_hi_h", "jobs"]].values.tolist() == [
        [1, 2, 0.0, 1.0, 2],
        [1, 2, 1.0, 10.0, 1],
        [3, 4, 1.0, 10.0, 2],
    ]
    # [0, 1) has lo = 0: representative runtime = median of its jobs (1/6 h and 0.5 h)
    assert out.loc[0, "runtime_rep_h"] == pytest.approx(np.median([1 / 6, 0.5]))
    assert out.loc[1, "runtime_rep_h"] == pytest.approx(math.sqrt(10))
    assert list(out["nodes_rep"]) == [2, 2, 4]


def test_empty_and_bad_arguments():
    empty = _table().slice(0, 0)
    out = job_shapes(empty)
    assert list(out.columns) == list(SHAPE_COLUMNS) and len(out) == 0
    with pytest.raises(ValueError, match="strictly increasing"):
        job_shapes(_table(), runtime_edges_h=[0, 2, 1])
    with pytest.raises(ValueError, match="upper bounds"):
        job_shapes(_table(), node_edges=[0, 2])
    with pytest.raises(ValueError, match="lacks column"):
        job_shapes(_table().drop_columns(["elapsed_s"]))


def test_plot_and_table(tmp_path):
    out = job_shapes(_table())
    png = plot_shapes(out, tmp_path / "shapes.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    console = Console(record=True, width=120)
    console.print(format_shapes_table(out))
    text = console.export_text()
    assert "3-4" in text and "64-inf h" in text and "6 jobs" in text
    assert "96.0%" in text  # 500 of 520.67 node-hours
