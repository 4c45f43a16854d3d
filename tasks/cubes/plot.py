"""PNG of one node × one metric of the telemetry cube (``nodewatch cubes plot``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nodewatch.tasks.core.store import Store


def plot_node_metric(store: Store, node: str, metric: str, out: Path, start: str | None = None, end: str | None = None) -> Path:
    """Plot mean (line), min-max (light band) and mean ± std (dark band) of ``metric`` on ``node``.

    The time range defaults to the span of windows that have samples. Raises ``ValueError`` (one
    line) for an unknown node or metric, or when there is no sample in the range.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nodewatch.tasks.cubes import open_telemetry_cube

    ds = open_telemetry_cube(store)
    nodes = [str(n) for n in ds["node"].values]
    metrics = [str(m) for m in ds["metric"].values]
    if node not in nodes:
        raise ValueError(f"node {node!r} is not in the telemetry cube ({len(nodes)} nodes, e.g. {', '.join(nodes[:5])})")
    if metric not in metrics:
        raise ValueError(f"metric {metric!r} is not in the telemetry cube (metrics: {', '.join(metrics[:10])})")
    sel = ds.isel(node=nodes.index(node), metric=metrics.index(metric))
    if start or end:
        sel = sel.sel(time=slice(start, end))
    cnt = sel["count"].values
    if not (cnt > 0).any():
        raise ValueError(f"no sample of {metric} on {node} in the selected range")
    hit = np.flatnonzero(cnt > 0)
    sel = sel.isel(time=slice(hit[0], hit[-1] + 1)).load()
    t = sel["time"].values
    mean, std = sel["mean"].values, sel["std"].values
    units = str(ds["metric_units"].values[metrics.index(metric)])
    fig, ax = plt.subplots(figsize=(11, 4), dpi=100)
    ax.fill_between(t, sel["min"].values, sel["max"].values, color="tab:blue", alpha=0.15, label="min-max", step="post")
    ax.fill_between(t, mean - std, mean + std, color="tab:blue", alpha=0.35, label="mean ± std", step="post")
    ax.step(t, mean, where="post", color="tab:blue", lw=1.0, label="mean")
    ax.set_title(f"{node} · {metric} ({ds.attrs.get('step', '')} windows)")
    ax.set_ylabel(f"{metric} [{units}]")
    ax.set_xlabel("time (UTC)")
    ax.legend(loc="upper right", fontsize=8)
    fig.autofmt_xdate()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out
