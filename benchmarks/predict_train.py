"""Goal: train the six lead-time networks for a 1000-node cluster in <= 10 min on 2 cores (batched), and
the FPS table of the simulator (1000 nodes, 60 days, 70 % of failures with precursors) against the goals.

Measures in one run:

* data: failure + ok sequences of the simulated cluster (15-s telemetry, 4-min windows, leads 2-7 min);
* ``batched``: :class:`nodewatch.models.predict.ensemble.LeadTimeEnsemble` (six networks stacked, one
  ``torch.bmm`` per layer, one optimiser) on the training split;
* ``baseline``: six independent ``nn.Sequential(70 -> 52 tanh -> 2)`` trained one after another with the
  same epochs, samples and optimiser (the per-network loop of the thesis's pybrain setup);
* Monte-Carlo cross-validation (``--splits`` rounds) and the FPS table beside Frank's Table 4.1 c/d.

Prints ``ratio=<baseline s / batched s>``. Usage::

    .venv/bin/python benchmarks/predict_train.py [--nodes 1000 --days 60 --node-days 200 --splits 3]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
from torch import nn


def baseline_fit(x: np.ndarray, y: np.ndarray, epochs: int, seed: int = 0) -> float:
    """Six separate networks trained sequentially; returns seconds."""
    from nodewatch.models.predict.ensemble import Scaler

    t = time.perf_counter()
    sc = Scaler().fit(x)
    z = torch.from_numpy(sc.transform(x))
    yt = torch.from_numpy(y.astype(np.int64))
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    k = min(len(neg), 10 * len(pos))
    for lead in range(x.shape[1]):
        rng = np.random.default_rng(seed)
        torch.manual_seed(seed + lead)
        net = nn.Sequential(nn.Linear(x.shape[2], 52), nn.Tanh(), nn.Linear(52, 2))
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        for _ in range(epochs):
            idx = np.concatenate([pos, rng.choice(neg, size=k, replace=False)])
            loss = nn.functional.cross_entropy(net(z[idx, lead]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return time.perf_counter() - t


def main() -> None:
    """Run the benchmark and print the figures and ``ratio=``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--node-days", type=int, default=200)
    ap.add_argument("--stride", type=int, default=2)
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--precursor-share", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    from nodewatch.models.predict.ensemble import LeadTimeEnsemble
    from nodewatch.models.predict.uc import event_probability
    from nodewatch.tasks.predict.dataset import simulated_sequences, summary
    from nodewatch.tasks.predict.evaluate import _split_groups, cross_validate, fps_table
    from nodewatch.tasks.predict.train import fps_markdown
    from nodewatch.tasks.simulate.config import SimConfig

    print(f"load: {os.getloadavg()} on {os.cpu_count()} cores; torch threads {torch.get_num_threads()}")
    cfg = SimConfig(n_nodes=a.nodes, step_s=15, seed=a.seed, precursor_share=a.precursor_share)
    t = time.perf_counter()
    pos, neg = simulated_sequences(cfg, a.days, a.node_days, seed=a.seed, stride=a.stride)
    print(f"data: {time.perf_counter() - t:.1f} s")
    print(summary(pos, neg).to_string(index=False))
    x = np.concatenate([pos.x, neg.x]).astype(np.float32)
    y = np.concatenate([pos.y, neg.y])
    g = np.concatenate([pos.group, neg.group])
    tr, _, _ = _split_groups(g, np.random.default_rng(0), (0.75, 0.25))
    t, c = time.perf_counter(), time.process_time()
    LeadTimeEnsemble(epochs=a.epochs).fit(x[tr], y[tr])
    batched, batched_cpu = time.perf_counter() - t, time.process_time() - c
    c = time.process_time()
    base = baseline_fit(x[tr], y[tr], a.epochs)
    base_cpu = time.process_time() - c
    print(f"train six networks ({int(tr.sum()):,} sequences, {a.epochs} epochs): batched {batched:.2f} s wall "
          f"({batched_cpu:.2f} s CPU), baseline (six sequential nn.Sequential) {base:.2f} s wall ({base_cpu:.2f} s CPU); "
          f"goal <= 600 s: {'met' if batched <= 600 else 'NOT met'}; load {os.getloadavg()[0]:.1f}")
    p_e, _ = event_probability(len(pos.y), a.nodes * a.days * 86400 // 15)
    t = time.perf_counter()
    cv = cross_validate(pos, neg, splits=a.splits, seed=a.seed, epochs=a.epochs)
    print(f"cross-validation ({a.splits} rounds): {time.perf_counter() - t:.1f} s; P(E) = {p_e:.3g}")
    fps = fps_table(cv, p_e)
    print(fps_markdown(fps))
    ours = {r["scheme"]: r for r in fps.to_dict(orient="records") if r["source"].startswith("nodewatch")}
    u, lstm = ours["unanimous@6NN"], ours["lstm@6NN"]
    print(f"goal unanimous 6NN fpr <= 1e-4 at tpr >= 0.6: fpr {u['fpr']:.2e}, tpr {u['tpr']:.3f} "
          f"(precursor failures {u['tpr_precursor']:.3f}): {'met' if u['fpr'] <= 1e-4 and u['tpr'] >= 0.6 else 'NOT met'}")
    print(f"goal LSTM fpr <= 5e-5 at tpr >= 0.7: fpr {lstm['fpr']:.2e}, tpr {lstm['tpr']:.3f} "
          f"(precursor failures {lstm['tpr_precursor']:.3f}): "
          f"{'met' if lstm['fpr'] <= 5e-5 and lstm['tpr'] >= 0.7 else 'NOT met'}")
    print(f"ratio={base / batched:.2f}")


if __name__ == "__main__":
    main()
