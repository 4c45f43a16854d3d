"""Benchmark: batched per-node RUAD training vs a straightforward per-node loop of ``nn.LSTM`` models.

Part 1 (goal ratio >= 5x, pooled AUC within 0.01): 20 nodes, 60 days x 15 min, 50 metrics
(200 features), W = 10, 5 epochs, same data, same minibatch size, same Adam/lr/L1 loss, both
with 1 torch thread (what one Dask worker gets on a 2-core machine). Times cover training plus
computing the maximum training error and the test scores (Eq. 3) for every node.

Part 2 (goal <= 60 min): 1000 nodes x 60 days x 50 metrics, W = 10, 5 epochs on 2 cores: a real
subset (``--nodes``, default 100) is trained as the fan-out runs it — node batches of
``--node-batch`` nodes on 2 worker processes with 1 torch thread each — and extrapolated
linearly; ``--full`` also measures all 1000 nodes.

Run: ``nice .venv/bin/python benchmarks/train.py [--nodes 100] [--full]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from nodewatch.models.anomaly.base import anomaly_probability, paper_layer_sizes  # noqa: E402
from nodewatch.models.anomaly.batched_lstm import RUADNet  # noqa: E402
from nodewatch.models.anomaly.metrics import pooled_auc  # noqa: E402
from nodewatch.models.anomaly.preprocess import MinMaxScaler, chronological_split, features_from_stats, valid_rows, window_ends  # noqa: E402
from nodewatch.models.anomaly.ruad import RUAD  # noqa: E402
from nodewatch.models.anomaly.synthetic_telemetry import make_synthetic_telemetry  # noqa: E402

DAYS, METRICS, W, EPOCHS, BATCH, LR = 60, 50, 10, 5, 128, 1e-3


def make_features(n_nodes: int, seed: int, chunk: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic features [node, time, 200] and labels, generated ``chunk`` nodes at a time (memory)."""
    xs, ys = [], []
    for i in range(0, n_nodes, chunk):
        d = make_synthetic_telemetry(n_nodes=min(chunk, n_nodes - i), n_days=DAYS, n_metrics=METRICS, seed=seed + i)
        xs.append(features_from_stats(d.mean, d.min, d.max, d.std, d.count))
        ys.append(d.labels)
    return np.concatenate(xs), np.concatenate(ys)


def batched(X: np.ndarray, sp: int) -> np.ndarray:
    """The product path: one RUAD estimator for the node batch (no early stopping, to match the loop)."""
    est = RUAD(window=W, epochs=EPOCHS, batch_size=BATCH, lr=LR, val_fraction=0.0, patience=EPOCHS + 1, seed=0)
    est.fit(X[:, :sp])
    return est.score_samples(X[:, sp:])


def per_node_loop(X: np.ndarray, sp: int) -> np.ndarray:
    """Baseline: one ``nn.LSTM`` RUAD network per node, trained one node after the other."""
    torch.manual_seed(0)
    rows = valid_rows(X[:, :sp])
    scaler = MinMaxScaler.fit(X[:, :sp], rows)
    out = np.full((X.shape[0], X.shape[1] - sp), np.nan)
    sizes = paper_layer_sizes(X.shape[2])
    offs = torch.arange(-W + 1, 1)
    for k in range(X.shape[0]):
        Xk = torch.from_numpy(np.nan_to_num(scaler.node(k).transform(X[k : k + 1])[0], nan=0.0))
        ends = torch.from_numpy(window_ends(rows[k : k + 1], W)[0])
        net = RUADNet(X.shape[2], sizes)
        opt = torch.optim.Adam(net.parameters(), lr=LR)
        for _ in range(EPOCHS):
            perm = ends[torch.randperm(len(ends))]
            for s in range(0, len(perm), BATCH):
                e = perm[s : s + BATCH]
                loss = (net(Xk[e[:, None] + offs]) - Xk[e]).abs().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            max_err = float((net(Xk[ends[:, None] + offs]) - Xk[ends]).abs().sum(1).max())
            test_ends = torch.from_numpy(window_ends(valid_rows(X[k : k + 1, sp:]), W)[0]) + sp
            err = (net(Xk[test_ends[:, None] + offs]) - Xk[test_ends]).abs().sum(1).numpy()
        out[k, test_ends.numpy() - sp] = anomaly_probability(err, max_err)
    return out


def kernel_load_time() -> float:
    """Seconds to import numba and compile or load (from ``__pycache__``) the LSTM kernels: one
    forward + backward of a tiny batched network (float32, the dtype used in training)."""
    from nodewatch.models.anomaly.batched_lstm import BatchedRUADNet

    t0 = time.perf_counter()
    net = BatchedRUADNet(1, 4, (4, 2, 4))
    net.forward_rows(torch.rand(1, 5, 2, 4), 3).sum().backward()
    return time.perf_counter() - t0


def _kernels_compiled() -> bool:
    """Whether this process compiled the kernels (numba cache miss) rather than loading them."""
    from nodewatch.models.anomaly._lstm_kernel import lstm_backward, lstm_forward

    return bool(lstm_forward.stats.cache_misses or lstm_backward.stats.cache_misses)


def _train_batch(args: tuple[int, int]) -> tuple[int, float]:
    """Worker: generate one node batch (not timed) and train + score it as the fan-out does."""
    torch.set_num_threads(1)
    n, seed = args
    X, _ = make_features(n, seed)
    sp = chronological_split(X.shape[1])
    t0 = time.perf_counter()
    batched(X, sp)
    return n, time.perf_counter() - t0


def fanout(n_nodes: int, node_batch: int, workers: int = 2) -> tuple[float, float]:
    """Wall time of training ``n_nodes`` in node batches on ``workers`` processes; also the summed
    in-worker training time (wall minus it is data generation and process overhead)."""
    jobs = [(min(node_batch, n_nodes - i), 1000 + i) for i in range(0, n_nodes, node_batch)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers) as ex:
        res = list(ex.map(_train_batch, jobs))
    return time.perf_counter() - t0, sum(t for _, t in res)


def main() -> None:
    """Run both parts and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100, help="real subset measured for the 1000-node estimate")
    ap.add_argument("--node-batch", type=int, default=50)
    ap.add_argument("--full", action="store_true", help="also measure all 1000 nodes")
    ap.add_argument("--skip-part1", action="store_true")
    ap.add_argument("--skip-part2", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"load average before: {os.getloadavg()}")
    if not a.skip_part1:
        X, y = make_features(20, seed=7)
        sp = chronological_split(X.shape[1])
        print(f"part 1: X {X.shape} (node, 15-min step, feature), anomalous fraction {y.mean():.4f}, W={W}, "
              f"epochs={EPOCHS}, minibatch={BATCH}, 1 torch thread")
        # warm-up of both paths (allocator, oneDNN; numba kernels of the batched recurrence: loaded from
        # their on-disk cache, or compiled on the first run after an install or a kernel change)
        t0 = time.perf_counter()
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # the first optimiser imports torch._dynamo
        t_optim = time.perf_counter() - t0
        t_jit = kernel_load_time()
        t0 = time.perf_counter()
        batched(X[:2, : sp // 4], sp // 8)
        t_warm_batch = time.perf_counter() - t0
        t0 = time.perf_counter()
        per_node_loop(X[:1, : sp // 4], sp // 8)
        t_warm_loop = time.perf_counter() - t0
        print(f"one-time per process, excluded from the timings below: torch.optim import {t_optim:.2f} s, "
              f"numba kernels {t_jit:.2f} s ({'compiled' if _kernels_compiled() else 'loaded from cache'}), "
              f"then warm-up batched {t_warm_batch:.2f} s, loop {t_warm_loop:.2f} s")
        t0, c0 = time.perf_counter(), time.process_time()
        s_loop = per_node_loop(X, sp)
        t_loop, c_loop = time.perf_counter() - t0, time.process_time() - c0
        t0, c0 = time.perf_counter(), time.process_time()
        s_batch = batched(X, sp)
        t_batch, c_batch = time.perf_counter() - t0, time.process_time() - c0
        auc_loop, auc_batch = pooled_auc(s_loop, y[:, sp:]), pooled_auc(s_batch, y[:, sp:])
        print(f"per-node nn.LSTM loop: wall {t_loop:.1f} s (CPU {c_loop:.1f} s)   "
              f"batched: wall {t_batch:.1f} s (CPU {c_batch:.1f} s)")
        print(f"cpu_ratio={c_loop / c_batch:.2f} (CPU-time ratio, less sensitive to other users of the machine)")
        print(f"pooled AUC loop={auc_loop:.4f} batched={auc_batch:.4f} |diff|={abs(auc_loop - auc_batch):.4f} (goal <= 0.01)")
        print(f"ratio={t_loop / t_batch:.2f} (goal >= 5)")
    if a.skip_part2:
        return
    wall, inside = fanout(a.nodes, a.node_batch)
    print(f"part 2: {a.nodes} nodes x {DAYS} d x {METRICS} metrics, W={W}, {EPOCHS} epochs, 2 workers x 1 thread: "
          f"wall {wall:.1f} s incl. synthetic data generation; training+scoring summed over workers {inside:.1f} s")
    print(f"extrapolated 1000 nodes: wall {wall * 1000 / a.nodes / 60:.1f} min, training+scoring on 2 cores "
          f"{inside / 2 * 1000 / a.nodes / 60:.1f} min (goal <= 60 min)")
    if a.full:
        wall, inside = fanout(1000, a.node_batch)
        print(f"measured 1000 nodes: wall {wall / 60:.1f} min (training+scoring inside workers {inside / 60:.1f} min)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
