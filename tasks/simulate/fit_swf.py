"""Fit the workload model's parameters to a real SWF trace (run once; results are embedded in config.py).

Usage: ``python -m nodewatch.tasks.simulate.fit_swf ../shared/data/swf/LLNL-Thunder-2007-1.1-cln.swf.gz``

The printed dictionary is pasted into :data:`nodewatch.tasks.simulate.config.THUNDER_FIT` so the simulator does
not need the trace at run time. Thunder (LLNL, 1,002 nodes, 4 CPUs/node, Slurm) is the closest public
trace to a 1000-node machine; fields follow the Standard Workload Format (Parallel Workloads Archive).
"""

from __future__ import annotations

import gzip
import sys
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
from scipy import stats


def read_swf(path: str) -> tuple[dict[str, str], np.ndarray]:
    """Header key/values and the 18-column job matrix of an SWF file (gzip or plain)."""
    opener = gzip.open if path.endswith(".gz") else open
    header: dict[str, str] = {}
    rows: list[list[float]] = []
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith(";"):
                if ":" in line:
                    k, v = line[1:].split(":", 1)
                    header[k.strip()] = v.strip()
                continue
            parts = line.split()
            if len(parts) == 18:
                rows.append([float(x) for x in parts])
    return header, np.asarray(rows)


def fit(path: str, procs_per_node: int = 4) -> dict[str, object]:
    """Fit inter-arrivals (Weibull), hour-of-day profile, node counts, log-runtime mixture, limit factor."""
    header, a = read_swf(path)
    submit, run, procs, req_time, status = a[:, 1], a[:, 3], a[:, 4], a[:, 8], a[:, 10]
    ok = (run >= 0) & (procs > 0)
    submit, run, procs, req_time, status = submit[ok], run[ok], procs[ok], req_time[ok], status[ok]
    gaps = np.diff(np.sort(submit))
    zero_share = float((gaps == 0).mean())
    shape, _, scale = stats.weibull_min.fit(gaps[gaps > 0], floc=0)
    tz = ZoneInfo(header.get("TimeZoneString", "UTC"))
    t0 = int(header["UnixStartTime"])
    hours = np.array([datetime.fromtimestamp(t0 + s, tz).hour for s in submit[:: max(1, len(submit) // 20000)]])
    prof = np.bincount(hours, minlength=24).astype(float)
    prof /= prof.mean()
    nodes = np.ceil(procs / procs_per_node).astype(int)
    vals, counts = np.unique(nodes, return_counts=True)
    order = np.argsort(-counts)[:16]
    sizes = vals[order]
    probs = counts[order] / counts[order].sum()
    from sklearn.mixture import GaussianMixture

    lr = np.log(np.maximum(run, 1.0)).reshape(-1, 1)
    gm = GaussianMixture(2, random_state=0).fit(lr)
    both = (req_time > 0) & (run > 0)
    ratio = np.log(req_time[both] / run[both])
    ratio = ratio[ratio >= 0]
    lr1 = np.log(np.maximum(run, 1.0))
    size_mu = [round(float(lr1[nodes == z].mean()), 4) for z in sizes]
    size_sd = [round(float(lr1[nodes == z].std()), 4) for z in sizes]
    util = float((run * nodes).sum() / (submit.max() - submit.min()) / int(header.get("MaxNodes", "1")))
    return {
        "source": path.rsplit("/", 1)[-1],
        "jobs": int(len(submit)),
        "max_nodes": int(header.get("MaxNodes", "0")),
        "interarrival_weibull_shape": round(float(shape), 4),
        "interarrival_weibull_scale_s": round(float(scale), 3),
        "interarrival_zero_share": round(zero_share, 4),
        "hour_profile": [round(float(x), 3) for x in prof],
        "node_sizes": [int(x) for x in sizes],
        "node_size_probs": [round(float(x), 5) for x in probs],
        "log_runtime_weights": [round(float(x), 4) for x in gm.weights_],
        "log_runtime_means": [round(float(x), 4) for x in gm.means_.ravel()],
        "log_runtime_sigmas": [round(float(x), 4) for x in np.sqrt(gm.covariances_.ravel())],
        "size_log_runtime_means": size_mu,
        "size_log_runtime_sigmas": size_sd,
        "utilisation": round(util, 4),
        "log_limit_over_runtime_mean": round(float(ratio.mean()), 4),
        "log_limit_over_runtime_sigma": round(float(ratio.std()), 4),
        "status_share_completed_failed_cancelled": [
            round(float((status == 1).mean()), 4),
            round(float((status == 0).mean()), 4),
            round(float((status == 5).mean()), 4),
        ],
    }


if __name__ == "__main__":  # pragma: no cover - manual tool
    import pprint

    pprint.pprint(fit(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/swf/LLNL-Thunder-2007-1.1-cln.swf.gz"))
