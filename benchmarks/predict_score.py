"""Goal: score one day of 15-s telemetry of a 1000-node cluster with the failure predictor in <= 60 s.

Measures in one run, on one rack of simulated nodes (``--render`` nodes, one day, 15-s step), tiled to
``--nodes`` node-days (the scoring cost does not depend on the values):

* ``ours``: :func:`nodewatch.tasks.predict.score.score_node` per node — sliding-window features computed
  once per node and shared by the six lead times and all anchors, the six networks batched, LSTM voter;
* ``baseline``: the straightforward per-anchor loop — for every anchor, the six 4-min windows are cut
  and their Table 4.3 features computed separately, each network applied on its own. It is timed on
  ``--baseline-nodes`` nodes and scaled per node (it takes minutes per node).

A predictor is trained quickly (few epochs) on the same simulated rack: its weights do not change the cost.
Prints ``ratio=<baseline s per node-day / ours s per node-day>``.

    .venv/bin/python benchmarks/predict_score.py [--nodes 1000 --render 50 --baseline-nodes 1]
"""

from __future__ import annotations

import argparse
import os
import time

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # one thread, before numpy/torch load
    os.environ[_v] = "1"

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--render", type=int, default=50)
    ap.add_argument("--baseline-nodes", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)  # the goal is stated for ONE torch thread (the docstring said so; it used to run 2)

    from nodewatch.models.predict.ensemble import LeadTimeEnsemble, fit_lstm_voter
    from nodewatch.models.predict.features import FEATURES, LEADS_MIN, window_features
    from nodewatch.tasks.predict.dataset import PREDICTOR_METRICS, _render
    from nodewatch.tasks.predict.registry import LoadedPredictor
    from nodewatch.tasks.predict.score import score_node
    from nodewatch.tasks.simulate.config import SimConfig
    from nodewatch.tasks.simulate.metrics import COUNTERS
    from nodewatch.tasks.simulate.schedule import build_schedule

    print(f"load: {os.getloadavg()} on {os.cpu_count()} cores; torch threads {torch.get_num_threads()}")
    cfg = SimConfig(n_nodes=max(a.render, 8), step_s=15, seed=2)
    sched = build_schedule(cfg, 3)
    vals, _ = _render(sched, np.arange(a.render), 2)  # (B, 10, 5760), NaN where down
    times = pd.date_range("2026-01-03", periods=vals.shape[-1], freq="15s", tz="UTC")
    g = np.random.default_rng(0)
    x = g.normal(size=(400, 6, 70)).astype(np.float32)
    y = np.r_[np.ones(40), np.zeros(360)].astype(np.int64)
    ens = LeadTimeEnsemble(epochs=5).fit(x, y)
    voter = fit_lstm_voter(ens.predict_logodds(x), y, epochs=5)
    params = {"step_s": 15, "metrics": list(PREDICTOR_METRICS)}
    pred = LoadedPredictor(run_id="bench", ensemble=ens, voter=voter, params=params)

    t, c = time.perf_counter(), time.process_time()
    pos = 0
    for k in range(a.nodes):
        dec = score_node(pred, times, vals[k % a.render])
        pos += int(dec["positive"].sum())
    ours, ours_cpu = time.perf_counter() - t, time.process_time() - c
    print(f"ours: {a.nodes} node-days scored in {ours:.1f} s wall, {ours_cpu:.1f} s CPU, torch threads "
          f"{torch.get_num_threads()} (interop {torch.get_num_interop_threads()}) "
          f"({ours / a.nodes * 1000:.1f} ms per node-day); load {os.getloadavg()[0]:.1f}; "
          f"goal <= 60 s: {'met' if ours <= 60 else 'NOT met'}")

    # baseline: per anchor, per lead time, cut the window and compute its features; one network at a time
    is_c = np.array([m in COUNTERS for m in PREDICTOR_METRICS])
    w = 16
    t = time.perf_counter()
    for k in range(a.baseline_nodes):
        v = vals[k % a.render].copy()
        d = np.diff(v[is_c], axis=-1, prepend=np.nan)
        d[d < 0] = np.nan
        v[is_c] = d
        n_t = v.shape[-1]
        for anchor in range(max(LEADS_MIN) * 4 + w, n_t):
            feats = []
            for lead in sorted(LEADS_MIN, reverse=True):
                end = anchor - lead * 4
                win = v[:, end - w + 1 : end + 1]
                feats.append(window_features(win, w)[:, 0, :].reshape(-1))
            xx = np.stack(feats)[None]
            ens.predict_proba(xx)
    base = (time.perf_counter() - t) / a.baseline_nodes
    print(f"baseline (per-anchor windows, {len(FEATURES)} features each): {base:.1f} s per node-day "
          f"(measured on {a.baseline_nodes} node-day(s)); {base * a.nodes:.0f} s for {a.nodes}")
    print(f"ratio={base / (ours / a.nodes):.1f}")


if __name__ == "__main__":
    main()
