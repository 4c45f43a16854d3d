"""The verdicts heat map (tasks/cubes/plot.py verdicts_heatmap): node x window, group and node alerts boxed,
hostile labels rendered literally."""

from __future__ import annotations

import numpy as np
import pandas as pd
from PIL import Image

from nodewatch.tasks.cubes.plot import verdicts_heatmap


def test_heatmap_marks_groups_and_survives_hostile_labels(tmp_path) -> None:
    nodes = [f"cn{i:04d}" for i in range(12)]
    racks = np.array(["r00"] * 4 + ["r$x$"] * 4 + ["r\x1b[31m"] * 4)
    archs = np.array(["a"] * 8 + ["b"] * 4)
    times = pd.date_range("2026-01-23", periods=96, freq="15min").to_numpy()
    score = np.random.default_rng(0).gamma(2.0, 1.0, (12, 96))
    score[4:8, 40:60] = 20.0
    t0, t1 = times[40], times[59]
    rows = [{"kind": "rack", "subject": "r$x$", "members": nodes[4:8], "first_time": t0, "last_time": t1,
             "suspected_group": "rack r$x$"},
            {"kind": "node", "subject": "cn0001", "members": ["cn0001"], "first_time": times[10], "last_time": times[12],
             "suspected_group": "job 42$\\frac"},
            {"kind": "node", "subject": "ghost", "members": ["not-a-node"], "first_time": None, "last_time": None}]
    out = verdicts_heatmap(score, np.full(12, 5.0), nodes, times, racks, archs, rows, tmp_path / "h.png", "day $")
    img = np.asarray(Image.open(out).convert("RGB")).astype(int)
    assert img.shape[0] > 100 and img.shape[1] > 500
    red = (img[:, :, 0] > 200) & (img[:, :, 1] < 60) & (img[:, :, 2] < 60)
    assert red.sum() > 50  # the rack alert box is drawn
    # no alerts, a zero threshold: still a picture, no exception
    verdicts_heatmap(score, np.zeros(12), nodes, times, racks, archs, [], tmp_path / "e.png")
    assert (tmp_path / "e.png").stat().st_size > 1000
