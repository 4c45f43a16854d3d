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


def verdicts_heatmap(score: np.ndarray, threshold: np.ndarray, nodes: list[str], times: np.ndarray, racks: np.ndarray,
                     archs: np.ndarray, rows: list[dict], out: Path, title: str = "") -> Path:
    """Heat map of one day's verdict evidence with the alerts marked (docs/alerts.md).

    Cells: node x 15-min window, the fused score over the node's threshold (``score / threshold``, 1 = at
    the threshold, clipped at 4). Nodes are ordered by architecture and rack; thin lines separate racks,
    labelled on the right. Group alerts (rack / architecture) are red boxes spanning their members over
    their first..last window; node alerts black boxes over their flagged span; a node alert whose suspected
    group is a job carries the job's label. Labels from the data are escaped for the plot.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from nodewatch.tasks.core.escape import plot_label

    n, t = score.shape
    order = sorted(range(n), key=lambda i: (str(archs[i]), str(racks[i]), nodes[i]))
    pos = {nodes[i]: k for k, i in enumerate(order)}
    thr = np.asarray(threshold, dtype=np.float64).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.clip(np.asarray(score, dtype=np.float64)[order] / np.where(thr > 0, thr, np.nan)[order, None], 0, 4)
    tt = np.asarray(times, dtype="datetime64[ns]")

    def col(v: object) -> float:
        x = np.datetime64(np.datetime64(str(v)[:19]), "ns") if v is not None else tt[0]
        return float(np.clip(np.searchsorted(tt, x), 0, t - 1))

    fig, ax = plt.subplots(figsize=(12, max(3.0, min(0.06 * n + 1.5, 30.0))), dpi=100)
    im = ax.imshow(ratio, aspect="auto", cmap="magma", vmin=0, vmax=4, interpolation="nearest")
    fig.colorbar(im, ax=ax, fraction=0.025, pad=0.08, label="fused score / node threshold")
    lab = [str(racks[i]) for i in order]
    starts = [k for k in range(n) if k == 0 or lab[k] != lab[k - 1]]
    for k in starts[1:]:
        ax.axhline(k - 0.5, color="white", lw=0.4, alpha=0.6)
    sec = ax.secondary_yaxis("right")
    sec.set_yticks([(a + b - 1) / 2 for a, b in zip(starts, [*starts[1:], n], strict=True)])
    sec.set_yticklabels([plot_label(lab[k]) for k in starts], fontsize=7)
    for r in rows:
        mem = [pos[m] for m in r.get("members") or [] if m in pos]
        if not mem:
            continue
        x0, x1 = col(r.get("first_time")), col(r.get("last_time"))
        group = r.get("kind") != "node"
        y0, y1 = (min(mem), max(mem)) if group else (mem[0], mem[0])
        ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0 + 1, y1 - y0 + 1, fill=False, lw=1.6 if group else 0.9,
                               ec="red" if group else "cyan"))
        sg = str(r.get("suspected_group") or "")
        text = f"{r.get('kind')} {r.get('subject')}" if group else (sg if sg.startswith("job ") else "")
        if text and group:  # inside the box, top left (the right margin holds the rack labels)
            ax.text(x0, y0 - 0.3, plot_label(text), color="red", fontsize=7, va="top", fontweight="bold")
        elif text:
            ax.text(min(x1 + 1, t - 1), y0, plot_label(text), color="cyan", fontsize=7, va="center")
    hours = [k for k in range(t) if (tt[k].astype("datetime64[m]").astype(int) % (3 * 60)) == 0]
    ax.set_xticks(hours)
    ax.set_xticklabels([str(tt[k])[11:16] for k in hours], fontsize=7)
    ax.set_yticks([])
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel(f"{n} nodes (by architecture, rack)")
    ax.set_title(plot_label(title) or "verdicts")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)
    return out
