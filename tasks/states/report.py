"""SaNSA analytics report: tables (CSV + markdown) and PNGs from staged ``node_states``/``failure_events``.

Each analysis of :mod:`nodewatch.models.states.analytics` becomes one table and one PNG under
``reports/states/<run_id>/`` in the store; :func:`build_report` returns them so a flow can publish
Prefect artifacts. Paper: Agarwal et al., SaNSA, Sec. III.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import date

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.models.states import analytics as sa
from nodewatch.schemas.states import STATE_NAMES
from nodewatch.tasks.core.escape import md as esc
from nodewatch.tasks.core.escape import md_code, plot_label
from nodewatch.tasks.states.common import StatesError, day_range

DAY_NS = 86400 * 10**9


@dataclass
class ReportItem:
    """One analysis: a table, its PNG (bytes) and where both were written."""

    name: str
    title: str
    table: pd.DataFrame
    png: bytes
    paths: dict[str, str] = field(default_factory=dict)


def _png(fig) -> bytes:  # noqa: ANN001
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _fig(w: float = 8, h: float = 4.5):  # noqa: ANN202
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(w, h))


def load_states(store, start: date, end: date) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:  # noqa: ANN001
    """Staged node_states and failure_events for ``[start, end)`` plus node -> rack from topology."""
    days = day_range(start, end)
    ns = store.read_staged("node_states", days)
    if ns is None or ns.num_rows == 0:
        raise StatesError(f"no node_states staged for {days[0]}..{days[-1]}: run `nodewatch states build` first")
    fe = store.read_staged("failure_events", days)
    topo = store.read_staged("topology")
    racks: dict[str, str] = {}
    if topo is not None and "rack" in topo.column_names:
        racks = {n: str(r) for n, r in zip(topo["node"].to_pylist(), topo["rack"].to_pylist(), strict=True) if r is not None}
    ns_df = _int_times(ns.select(["node", "start", "end", "state_code", "overlay"])).to_pandas()
    if fe is not None:
        fe_df = _int_times(fe).to_pandas()
        if "shadowed_by" not in fe_df.columns:  # staged before the column existed: nothing was listed shadowed
            fe_df["shadowed_by"] = None
    else:
        fe_df = pd.DataFrame(
            {
                "node": pd.Series([], dtype=str),
                "start": pd.Series([], dtype=np.int64),
                "end": pd.Series([], dtype=np.int64),
                "cause": pd.Series([], dtype=str),
                "shadowed_by": pd.Series([], dtype=object),
            }
        )
    return ns_df, fe_df, racks


def _int_times(t: pa.Table) -> pa.Table:
    """``start``/``end`` as int64 ns (no tz-aware pandas conversions)."""
    for c in ("start", "end"):
        t = t.set_column(t.column_names.index(c), c, pc.cast(t[c], pa.int64()))
    return t


def _arrays(df: pd.DataFrame, nodes: list[str]) -> tuple[np.ndarray, ...]:
    idx = pd.Index(nodes).get_indexer(df["node"])
    return (
        idx.astype(np.int64),
        df["start"].to_numpy(np.int64),
        df["end"].to_numpy(np.int64),
        df["state_code"].to_numpy().astype(np.int64),
    )


def correlated_failure_events(fe: pd.DataFrame) -> pd.DataFrame:
    """Failure events the correlated-rack-failure analysis uses: all but those shadowed by ADMIN_RESV.

    Episodes beginning inside an UNSCHEDULED_RESV (the emergency reservation opened at a rack outage)
    are the rack outage itself and stay; a missing ``shadowed_by`` column (staged before it existed) is null.
    The same rule as the failure fits (:func:`nodewatch.tasks.checkpoint.tables.failure_events_for_fits`).
    """
    from nodewatch.tasks.checkpoint.tables import failure_events_for_fits

    return failure_events_for_fits(fe)[0]


def markdown_table(df: pd.DataFrame, escape: bool = True) -> str:
    """A GitHub markdown table of a DataFrame (no optional dependency).

    Every header and cell goes through :func:`nodewatch.tasks.core.escape.md` (values such as node or
    reservation names come from input data: no HTML, link, emphasis or ``|`` survives); ``escape=False``
    gives the plain text, for a terminal that escapes it its own way.
    """
    from nodewatch.tasks.core.escape import strip_control

    if df.empty:
        return "(none)"
    e = esc if escape else strip_control
    cols = [e(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join("" if v is None or (isinstance(v, float) and np.isnan(v)) else e(v) for v in row) + " |")
    return "\n".join(lines)


def _node_boxplots(pn_off: np.ndarray, pn_on: np.ndarray, nodes: list[str]) -> bytes:
    """One boxplot per state of the per-node percentages, without and with the overlay (paper Figs. 4-6).

    The node furthest above the upper whisker (Q3 + 1.5 IQR) of each box is labelled, as the paper
    names node 426 (CONNECTION_LOSS), nodes 1200/1311/1319 (BOOTING) and node 7 (ADMIN_RESV).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axs = plt.subplots(2, 4, figsize=(14, 7))
    for j, (ax, name) in enumerate(zip(axs.ravel(), STATE_NAMES, strict=True)):
        data = [pn_off[:, j], pn_on[:, j]]
        ax.boxplot([np.nan_to_num(d) for d in data], tick_labels=["w/o", "w/"])
        for k, d in enumerate(data, start=1):
            d = np.nan_to_num(d)
            if d.size == 0:
                continue
            q1, q3 = np.percentile(d, [25, 75])
            i = int(np.argmax(d))
            if d[i] > q3 + 1.5 * (q3 - q1) and d[i] > 0:
                ax.annotate(plot_label(nodes[i]), (k, d[i]), xytext=(4, 0), textcoords="offset points", fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    axs[0, 0].set_ylabel("% of time per node")
    axs[1, 0].set_ylabel("% of time per node")
    fig.suptitle("Per-node percent of time per state, without / with overlay (SaNSA Figs. 4-6)")
    return _png(fig)


def build_report(
    ns: pd.DataFrame,
    fe: pd.DataFrame,
    racks: dict[str, str],
    target_anomalies: int = 5,
    underuse_threshold: float = 0.6,
    underuse_min_days: int = 3,
    corr_window_s: int = 300,
    corr_min_nodes: int = 3,
) -> list[ReportItem]:
    """All SaNSA analytics over one window (Sec. III): one :class:`ReportItem` per analysis."""
    nodes = sorted(ns["node"].unique())
    n = len(nodes)
    rack_names = sorted({racks.get(x, "unknown") for x in nodes})
    rack_idx = np.array([rack_names.index(racks.get(x, "unknown")) for x in nodes])
    on = _arrays(ns[ns["overlay"]], nodes)
    off = _arrays(ns[~ns["overlay"]], nodes)
    t_on, t_off = sa.state_time(*on, n_nodes=n), sa.state_time(*off, n_nodes=n)
    items: list[ReportItem] = []

    # Table II: system percentages with and without the ADMIN_RESV overlay
    sys_on = sa.percent_time(t_on, np.zeros(n, int), 1)[0]
    sys_off = sa.percent_time(t_off, np.zeros(n, int), 1)[0]
    t2 = pd.DataFrame(
        {"state": STATE_NAMES, "pct_time_without_overlay": sys_off.round(3), "pct_time_with_overlay": sys_on.round(3)}
    )
    fig, ax = _fig()
    x = np.arange(len(STATE_NAMES))
    ax.bar(x - 0.2, sys_off, 0.4, label="w/o overlay")
    ax.bar(x + 0.2, sys_on, 0.4, label="w/ overlay")
    ax.set_xticks(x, STATE_NAMES, rotation=30, ha="right")
    ax.set_ylabel("% of node-time")
    ax.set_title("Percent of time per state (SaNSA Table II)")
    ax.legend()
    items.append(ReportItem("table2_system", "Percent of time per state, system (Table II)", t2, _png(fig)))

    # per rack and per node, without and with the overlay (Table II at rack / node level)
    import matplotlib.pyplot as plt

    rack_nodes = np.bincount(rack_idx, minlength=len(rack_names))
    views = (("without", t_off), ("with", t_on))
    fig, axs = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
    rack_tabs = []
    for ax, (label, t) in zip(axs, views, strict=True):
        pr = sa.percent_time(t, rack_idx, len(rack_names))
        rack_tabs.append(pd.DataFrame(pr.round(3), columns=STATE_NAMES).assign(rack=rack_names, nodes=rack_nodes, overlay=label))
        bottom = np.zeros(len(rack_names))
        for j, s in enumerate(STATE_NAMES):
            ax.bar([plot_label(r) for r in rack_names], pr[:, j], bottom=bottom, label=s)
            bottom += np.nan_to_num(pr[:, j])
        ax.set_title(f"State mix per rack ({label} overlay)")
        ax.tick_params(axis="x", rotation=60, labelsize=7)
    axs[0].set_ylabel("% of node-time")
    axs[1].legend(fontsize=7, ncol=4)
    t_rack = pd.concat(rack_tabs, ignore_index=True)[["rack", "nodes", "overlay", *STATE_NAMES]]
    items.append(ReportItem("table2_rack", "Percent of time per state per rack, without and with the overlay", t_rack, _png(fig)))
    pn_off = sa.percent_time(t_off)
    pn = sa.percent_time(t_on)
    node_racks = [racks.get(x) for x in nodes]
    t_node = pd.concat(
        [
            pd.DataFrame(v.round(4), columns=STATE_NAMES).assign(node=nodes, rack=node_racks, overlay=label)
            for label, v in (("without", pn_off), ("with", pn))
        ],
        ignore_index=True,
    )[["node", "rack", "overlay", *STATE_NAMES]]
    node_png = _node_boxplots(pn_off, pn, nodes)

    # transitions w/o and w/ overlay (Figs. 9-10)
    rows = []
    mats = []
    for label, arr in (("without_overlay", off), ("with_overlay", on)):
        p, c = sa.transition_probabilities(*arr)
        mats.append((label, p))
        for i in range(8):
            for j in range(8):
                if c[i, j] > 0:
                    rows.append(
                        {
                            "overlay": label,
                            "from": STATE_NAMES[i],
                            "to": STATE_NAMES[j],
                            "count": int(c[i, j]),
                            "probability": round(float(p[i, j]), 4),
                        }
                    )
    t_tr = pd.DataFrame(rows, columns=["overlay", "from", "to", "count", "probability"])
    fig, axs = plt.subplots(1, 2, figsize=(12, 5))
    for ax, (label, p) in zip(axs, mats, strict=True):
        im = ax.imshow(np.nan_to_num(p), vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(8), STATE_NAMES, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(8), STATE_NAMES, fontsize=7)
        ax.set_title(f"P(next | current), {label.replace('_', ' ')}")
        ax.set_xlabel("to")
    fig.colorbar(im, ax=axs, shrink=0.8)
    items.append(ReportItem("transitions", "State transition probabilities (Figs. 9-10)", t_tr, _png(fig)))

    # Table III: time between DOWN and CONNECTION_LOSS starts (overlaid timeline; a state uncovered at the end of
    # an ADMIN/UNSCHEDULED overlay is not a new start, as for failure_events)
    ov = (STATE_NAMES.index("ADMIN_RESV") + 1, STATE_NAMES.index("UNSCHEDULED_RESV") + 1)
    down = sa.time_between(sa.state_starts(*on, code=STATE_NAMES.index("DOWN") + 1, shadowed_after=ov))
    loss = sa.time_between(sa.state_starts(*on, code=STATE_NAMES.index("CONNECTION_LOSS") + 1, shadowed_after=ov))
    t3 = pd.DataFrame(
        [
            {"state": name, "events": b.n_events, "mean_h": round(b.mean_h, 3), "median_h": round(b.median_h, 3)}
            for name, b in (("DOWN", down), ("CONNECTION_LOSS", loss))
        ]
    )
    fig, ax = _fig(6, 4.5)
    data = [down.gaps_h if down.gaps_h.size else np.array([np.nan]), loss.gaps_h if loss.gaps_h.size else np.array([np.nan])]
    ax.boxplot(data, tick_labels=["DOWN", "CONNECTION_LOSS"], showmeans=True)
    ax.set_ylabel("hours between event starts")
    ax.set_title("Time between events (SaNSA Table III, Figs. 11-12)")
    items.append(ReportItem("table3_time_between", "Time between DOWN and CONNECTION_LOSS (Table III)", t3, _png(fig)))

    # Gaussian anomaly detector (Sec. III-A)
    an = sa.gaussian_anomalies(pn, target=target_anomalies)
    mu, sd = pn.mean(axis=0), pn.std(axis=0)
    arows = []
    for i in an.anomalous:
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.where(sd > 0, (pn[i] - mu) / sd, 0.0)
        j = int(np.nanargmax(np.abs(z)))
        arows.append(
            {
                "node": nodes[i],
                "rack": racks.get(nodes[i]),
                "log10_p": round(float(an.log10_p[i]), 2),
                "log10_epsilon": an.log10_eps,
                "most_unusual_state": STATE_NAMES[j],
                "pct_in_state": round(float(pn[i, j]), 3),
                "z": round(float(z[j]), 2),
            }
        )
    t_an = pd.DataFrame(arows, columns=["node", "rack", "log10_p", "log10_epsilon", "most_unusual_state", "pct_in_state", "z"])
    fig, ax = _fig(10, 4.5)
    ax.boxplot([pn[:, j] for j in range(8)], tick_labels=STATE_NAMES)
    for i in an.anomalous:
        ax.scatter(np.arange(1, 9), pn[i], marker="x", s=25, label=plot_label(nodes[i]))
    ax.set_ylabel("% of time (per node)")
    ax.set_title(f"Per-node state percentages; anomalous nodes (p < 1e{an.log10_eps:.0f}) marked (Sec. III-A)")
    ax.tick_params(axis="x", rotation=30, labelsize=7)
    if an.anomalous.size:
        ax.legend(fontsize=7)
    items.append(ReportItem("anomalies", "Multivariate Gaussian anomalous nodes (Sec. III-A)", t_an, _png(fig)))

    # rack under-utilisation (Sec. III-B): daily JOB_RUNNING fraction per rack vs the others
    t0 = int(on[1].min()) // DAY_NS * DAY_NS
    n_days = max(1, int(-(-(int(on[2].max()) - t0) // DAY_NS)))
    day = (on[1] - t0) // DAY_NS
    job = on[3] == STATE_NAMES.index("JOB_RUNNING") + 1
    frac = (
        np.bincount(on[0][job] * n_days + day[job], weights=(on[2] - on[1])[job].astype(float), minlength=n * n_days).reshape(
            n, n_days
        )
        / DAY_NS
    )
    rd = sa.group_daily_fraction(frac, rack_idx, len(rack_names))
    uu = sa.underutilised_groups(rd, underuse_threshold, underuse_min_days)
    days = pd.to_datetime(t0 + np.arange(n_days) * DAY_NS, utc=True)
    t_uu = pd.DataFrame(
        [
            {
                "rack": rack_names[g],
                "first_day": days[a].date().isoformat(),
                "last_day": days[b].date().isoformat(),
                "days": b - a + 1,
                "mean_ratio_to_other_racks": round(r, 3),
            }
            for g, a, b, r in uu.flagged
        ],
        columns=["rack", "first_day", "last_day", "days", "mean_ratio_to_other_racks"],
    )
    fig, ax = _fig()
    flagged = sorted({g for g, *_ in uu.flagged})
    for g in flagged:
        ax.plot(days, 100 * rd[g], label=f"rack {plot_label(rack_names[g])}")
    others = [g for g in range(len(rack_names)) if g not in flagged]
    if others:
        ax.plot(days, 100 * np.nanmean(rd[others], axis=0), "k--", label="mean of other racks")
    ax.set_ylabel("% of node-time JOB_RUNNING")
    ax.set_title("Rack utilisation (SaNSA Fig. 8)")
    ax.legend(fontsize=8)
    items.append(ReportItem("rack_underuse", "Under-utilised racks (Sec. III-B)", t_uu, _png(fig)))

    # correlated failures (Sec. III-E): an unscheduled rack outage is exactly what this looks for, so episodes
    # shadowed by UNSCHEDULED_RESV count; those beginning inside ADMIN_RESV (maintenance reboots) do not
    fe = correlated_failure_events(fe)
    if len(fe):
        fidx = pd.Index(nodes).get_indexer(fe["node"])
        ok = fidx >= 0
        fs = fe["start"].to_numpy(np.int64)[ok]
        fend = fe["end"].to_numpy(np.int64)[ok]
        ev = sa.correlated_failures(fidx[ok], fs, fend, rack_idx[fidx[ok]], corr_window_s * 10**9, corr_min_nodes)
    else:
        ev = []
    rack_size = np.bincount(rack_idx, minlength=len(rack_names))
    t_cf = pd.DataFrame(
        [
            {
                "start": pd.Timestamp(e.start, tz="UTC").isoformat(),
                "end": pd.Timestamp(e.end, tz="UTC").isoformat(),
                "nodes": int(e.nodes.size),
                "pct_of_system": round(100 * e.nodes.size / n, 2),
                "racks": "; ".join(f"{rack_names[g]} {c}/{rack_size[g]}" for g, c in sorted(e.groups.items())),
            }
            for e in ev
        ],
        columns=["start", "end", "nodes", "pct_of_system", "racks"],
    )
    fig, ax = _fig()
    if len(fe):
        fr = pd.Index(rack_names).get_indexer([racks.get(x, "unknown") for x in fe["node"]])
        ax.scatter(pd.to_datetime(fe["start"].to_numpy(np.int64), utc=True), fr, s=8)
        for e in ev:
            ax.axvline(pd.Timestamp(e.start, tz="UTC"), color="r", alpha=0.4)
    ax.set_yticks(range(len(rack_names)), [plot_label(r) for r in rack_names], fontsize=6)
    ax.set_title("Failure starts by rack; red = correlated failure (Sec. III-E)")
    items.append(ReportItem("correlated_failures", "Correlated failures (Sec. III-E)", t_cf, _png(fig)))
    items.append(ReportItem("node_percent", "Percent of time per state per node, without and with the overlay", t_node, node_png))
    return items


def write_report(store, items: list[ReportItem], run_id: str) -> str:  # noqa: ANN001
    """Write every table (CSV + markdown) and PNG plus an index ``report.md`` under ``reports/states/<run_id>/``."""
    base = f"reports/states/{run_id}"
    md = [f"# SaNSA node-state report {md_code(run_id)}", ""]
    for it in items:
        it.paths["csv"] = store.write_bytes(it.table.to_csv(index=False).encode(), base, f"{it.name}.csv")
        it.paths["md"] = store.write_bytes(markdown_table(it.table).encode(), base, f"{it.name}.md")
        md += [f"## {esc(it.title)}", ""]
        if it.png:
            it.paths["png"] = store.write_bytes(it.png, base, f"{it.name}.png")
            md += [f"![{it.name}]({it.name}.png)", ""]
        md += [markdown_table(it.table.head(40)), ""]
    store.write_bytes("\n".join(md).encode(), base, "report.md")
    store.set_current("reports/states", run_id)
    return store.path(base)
