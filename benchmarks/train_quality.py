"""Detection quality of RUAD and its baselines (the paper's Table 7/8 comparison) on synthetic telemetry.

Builds a telemetry cube with :func:`nodewatch.models.anomaly.synthetic_telemetry.make_synthetic_telemetry` in a temporary store,
writes its anomaly intervals as a labels parquet and runs the real training path
(:func:`nodewatch.tasks.anomaly.train.run_training` with ``compare=True``): pooled AUC per method and W, F1 at the paper's
thresholds, score distributions. Prints the markdown table (also in ``models/ruad/<run_id>/table.md``).

Run: ``nice .venv/bin/python benchmarks/train_quality.py [--nodes 40 --days 30 --metrics 10 --epochs 5]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import xarray as xr  # noqa: E402

from nodewatch.models.anomaly.synthetic_telemetry import make_synthetic_telemetry  # noqa: E402
from nodewatch.tasks.anomaly.train import TrainConfig, run_training  # noqa: E402
from nodewatch.tasks.core.store import Store  # noqa: E402
from nodewatch.tasks.cubes import repo  # noqa: E402


def main() -> None:
    """Generate, train the comparison set, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=40)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--metrics", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    d = make_synthetic_telemetry(n_nodes=a.nodes, n_days=a.days, n_metrics=a.metrics, anomaly_rate=0.3, seed=a.seed)
    ds = xr.Dataset({v: (("node", "time", "metric"), getattr(d, v)) for v in ("mean", "min", "max", "std")}
                    | {"count": (("node", "time", "metric"), d.count.astype(np.int32))},
                    coords={"node": d.nodes, "time": d.times, "metric": d.metrics})
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(str(Path(tmp) / "store"))
        with repo.transaction(store, "telemetry.zarr", "synthetic cube", create=True) as session:
            ds.to_zarr(session.store, zarr_format=3, consolidated=False)
        iv = pd.DataFrame(d.intervals, columns=["node", "start", "end", "type"])
        pq.write_table(pa.table({"node": iv["node"], "start": pd.to_datetime(iv["start"], utc=True),
                                 "end": pd.to_datetime(iv["end"], utc=True), "type": iv["type"]}), Path(tmp) / "labels.parquet")
        start = date(2026, 1, 1)
        t0 = time.perf_counter()
        out = run_training(store, start, start + timedelta(days=a.days - 1),
                           TrainConfig(epochs=a.epochs, compare=True, node_batch=20, workers=2),
                           labels=str(Path(tmp) / "labels.parquet"))
        print(f"{a.nodes} nodes x {a.days} days x {a.metrics} metrics ({4 * a.metrics} features), anomalous share "
              f"{d.labels.mean():.4f}, {a.epochs} epochs, {len(out['metrics'])} methods, {time.perf_counter() - t0:.0f} s")
        print(out["table"])


if __name__ == "__main__":
    main()
