"""Synthetic per-node 15-minute telemetry with labelled anomalies, for tests and benchmarks of the
RUAD models when no simulator output is available (shape and statistics as RUAD Section 4.2:
min/max/mean/std per 15-min window of each metric, rare anomalies, gaps).

Model: each node runs a piecewise-constant workload ``L(t)`` (a new job every few hours) and a
daily cycle; metric m is ``a_m L + b_m sin(day) + c_m`` plus noise with node-specific
coefficients, so metrics are correlated through the workload. An anomaly interval (rate
``anomaly_rate`` per node-day, 1-6 h) breaks that relation for a random third of the metrics
(they drift to an off-load level and get noisier) — visible only jointly and over time, like the
paper's anomalies that "are not simply unexpected spikes" (Section 4.4). Gaps remove whole steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SyntheticTelemetry:
    """Arrays ``[node, time, metric]`` of window stats, labels ``[node, time]`` and anomaly intervals."""

    nodes: list[str]
    times: np.ndarray
    metrics: list[str]
    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray
    std: np.ndarray
    count: np.ndarray
    labels: np.ndarray
    intervals: list[tuple[str, np.datetime64, np.datetime64, str]]


def make_synthetic_telemetry(
    n_nodes: int = 4,
    n_days: float = 7.0,
    n_metrics: int = 6,
    anomaly_rate: float = 0.3,
    gap_rate: float = 0.2,
    samples_per_window: int = 15,
    seed: int = 0,
    start: str = "2026-01-01T00:00:00",
) -> SyntheticTelemetry:
    """Generate a synthetic cluster; every random draw comes from ``seed``."""
    rng = np.random.default_rng(seed)
    T = int(round(n_days * 96))
    step = np.timedelta64(15, "m")
    times = np.datetime64(start, "ns") + np.arange(T) * step
    tday = np.arange(T) / 96.0
    shape = (n_nodes, T, n_metrics)
    a = rng.uniform(0.5, 2.0, (n_nodes, 1, n_metrics)) * rng.choice([-1, 1], (n_nodes, 1, n_metrics))
    b = rng.uniform(0.0, 0.5, (n_nodes, 1, n_metrics))
    c = rng.uniform(-1, 1, (n_nodes, 1, n_metrics))
    noise = rng.uniform(0.03, 0.1, (n_nodes, 1, n_metrics))
    load = np.empty((n_nodes, T))
    for k in range(n_nodes):
        t = 0
        while t < T:
            d = int(rng.integers(4, 24))
            load[k, t : t + d] = rng.uniform(0, 1) if rng.random() > 0.15 else 0.0
            t += d
    labels = np.zeros((n_nodes, T), dtype=bool)
    shift = np.zeros(shape)
    extra_noise = np.ones(shape)
    intervals: list[tuple[str, np.datetime64, np.datetime64, str]] = []
    nodes = [f"node{k:04d}" for k in range(n_nodes)]
    for k in range(n_nodes):
        for _ in range(rng.poisson(anomaly_rate * n_days)):
            s = int(rng.integers(0, T))
            d = int(rng.integers(4, 25))
            e = min(T, s + d)
            hit = rng.random(n_metrics) < 1 / 3
            hit[rng.integers(n_metrics)] = True
            ramp = np.minimum(1.0, (np.arange(e - s) + 1) / 3.0)[:, None]
            target = -a[k, 0] * load[k, s:e, None] + rng.normal(0, 1.0, n_metrics)
            shift[k, s:e] += np.where(hit, ramp * target, 0.0)
            extra_noise[k, s:e] *= np.where(hit, 4.0, 1.0)
            labels[k, s:e] = True
            intervals.append((nodes[k], times[s], times[s] + (e - s) * step, "drift"))
    base = a * load[:, :, None] + b * np.sin(2 * np.pi * tday)[None, :, None] + c + shift
    sd = noise * extra_noise
    mean = base + rng.normal(0, 1, shape) * sd / np.sqrt(samples_per_window)
    spread = sd * np.sqrt(2 * np.log(samples_per_window))
    std = sd * rng.uniform(0.8, 1.2, shape)
    mn = mean - spread * rng.uniform(0.8, 1.2, shape)
    mx = mean + spread * rng.uniform(0.8, 1.2, shape)
    count = np.full(shape, samples_per_window, dtype=np.int64)
    for k in range(n_nodes):
        for _ in range(rng.poisson(gap_rate * n_days)):
            s = int(rng.integers(0, T))
            count[k, s : s + int(rng.integers(1, 12))] = 0
    miss = count == 0
    arrays = [x.astype(np.float32) for x in (mean, mn, mx, std)]
    for x in arrays:
        x[miss] = np.nan
    return SyntheticTelemetry(nodes, times, [f"metric{m:02d}" for m in range(n_metrics)], *arrays, count, labels, intervals)
