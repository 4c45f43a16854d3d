"""Plot one simulated node's week: jobs, key metrics, anomalies, precursors and failures (docs figure)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from nodewatch.tasks.simulate.hostlist import expand

_COLORS = {"memory_leak": "tab:purple", "cpu_hog": "tab:orange", "thermal_fan_failure": "tab:red",
           "network_degradation": "tab:blue", "disk_slowdown": "tab:brown", "misconfiguration": "tab:gray"}


def _read_truth(out: Path, name: str) -> pd.DataFrame:
    files = sorted((out / "truth" / name).rglob("*.parquet"))
    if not files:
        return pd.DataFrame()
    df = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    return df.drop_duplicates("event_id") if "event_id" in df else df


def pick_node(out: Path) -> str:
    """A node with at least one failure and the most anomalies (ties: lowest name)."""
    f = _read_truth(out, "failures")
    a = _read_truth(out, "anomalies")
    cand = sorted(set(f["node"])) if len(f) else []
    if not cand:
        return str(a["node"].value_counts().index[0]) if len(a) else "cn0001"
    counts = a["node"].value_counts() if len(a) else pd.Series(dtype=int)
    return max(cand, key=lambda n: (int(counts.get(n, 0)), -int(n[2:]) if n[2:].isdigit() else 0))


def plot_node_week(out: Path, png: Path, node: str | None = None, days: int = 7) -> str:
    """Write ``png`` for ``node`` (chosen by :func:`pick_node` if None) over the first ``days`` days written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    node = node or pick_node(out)
    long_dir = out / "telemetry" / "long"
    ldms_dir = out / "telemetry" / "ldms"
    metrics = ["cpu0_user", "power_node", "temp_cpu0", "fan0_rpm", "mem_used", "ib_rx_bytes"]
    tel = pd.DataFrame()
    if long_dir.exists():
        ds = pads.dataset(long_dir, format="parquet", partitioning="hive")
        tbl = ds.to_table(filter=(pads.field("node") == node) & pads.field("metric").isin(metrics),
                          columns=["timestamp", "node", "metric", "value"])
        tel = tbl.to_pandas()
    if tel.empty and ldms_dir.exists():
        parts = [pd.read_csv(p, usecols=["#Time", "ProducerName", *metrics]) for p in sorted(ldms_dir.rglob("*.csv"))]
        w = pd.concat(parts)
        w = w[w["ProducerName"] == node]
        w["timestamp"] = pd.to_datetime(w["#Time"], unit="s", utc=True)
        tel = w.melt(id_vars=["timestamp"], value_vars=metrics, var_name="metric")
    wide = tel.pivot_table(index="timestamp", columns="metric", values="value").sort_index()
    t0 = wide.index.min().floor("D")
    t1 = t0 + pd.Timedelta(days=days)
    wide = wide[(wide.index >= t0) & (wide.index < t1)]
    step = wide.index.to_series().diff().median()
    wide = wide.reindex(pd.date_range(t0, t1, freq=step, inclusive="left"))  # gaps (node down) stay gaps
    jobs = []
    for p in sorted((out / "jobs" / "sacct").rglob("sacct.txt")):
        lines = p.read_text().splitlines()
        head = lines[0].split("|")
        for line in lines[1:]:
            f = dict(zip(head, line.split("|"), strict=False))
            if "." in f["JobID"] or f["NodeList"] == "None assigned":
                continue
            if node in expand(f["NodeList"]):
                jobs.append((pd.Timestamp(f["Start"], tz="UTC"), pd.Timestamp(f["End"], tz="UTC"), f["State"].split()[0]))
    an = _read_truth(out, "anomalies")
    fl = _read_truth(out, "failures")
    pr = _read_truth(out, "precursors")
    an = an[an["node"] == node] if len(an) else an
    fl = fl[fl["node"] == node] if len(fl) else fl
    pr = pr[pr["node"] == node] if len(pr) else pr
    fig, axes = plt.subplots(5, 1, figsize=(14, 11), sharex=True)
    ax = axes[0]
    for s, e, st in jobs:
        ax.barh(0, (e - s).total_seconds() / 86400, left=s, height=0.6,
                color="tab:green" if st == "COMPLETED" else ("tab:red" if st == "NODE_FAIL" else "tab:olive"))
    ax.set_yticks([])
    ax.set_title(f"{node}: jobs (green completed, red NODE_FAIL, olive other), metrics, anomalies (shaded), "
                 "precursors (hatched), failures (red band)")
    wide["ib_rate"] = wide["ib_rx_bytes"].diff().clip(lower=0) / 60 / 1e6 if "ib_rx_bytes" in wide else 0
    panels = [("cpu0_user", "cpu0_user %", "power_node", "power_node W"), ("temp_cpu0", "temp_cpu0 degC", "fan0_rpm", "fan0 rpm"),
              ("mem_used", "mem_used B", None, None), ("ib_rate", "IB rx MB/s", None, None)]
    for ax, (m1, l1, m2, l2) in zip(axes[1:], panels, strict=True):
        if m1 in wide:
            ax.plot(wide.index, wide[m1], lw=0.6, color="tab:blue")
        ax.set_ylabel(l1)
        if m2 and m2 in wide:
            ax2 = ax.twinx()
            ax2.plot(wide.index, wide[m2], lw=0.6, color="tab:orange")
            ax2.set_ylabel(l2)
    for ax in axes:
        for x in an.itertuples():
            ax.axvspan(x.start, x.end, color=_COLORS.get(x.type, "gray"), alpha=0.25, lw=0)
        for x in pr.itertuples():
            ax.axvspan(x.start, x.end, facecolor="none", hatch="//", edgecolor="tab:red", lw=0)
        for x in fl.itertuples():
            ax.axvspan(x.start, x.end, color="red", alpha=0.35, lw=0)
    axes[-1].set_xlim(t0, t1)
    handles = [matplotlib.patches.Patch(color=c, alpha=0.4, label=k) for k, c in _COLORS.items()]
    handles.append(matplotlib.patches.Patch(color="red", alpha=0.5, label="failure (down)"))
    handles.append(matplotlib.patches.Patch(facecolor="none", hatch="//", edgecolor="tab:red", label="precursor"))
    fig.legend(handles=handles, loc="lower center", ncol=8, fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=80)
    plt.close(fig)
    return node
