"""The nightly report: what each step did, the alert list, and (with ground truth) precision/recall.

:func:`evaluate_day` compares the day's flags with the simulator's ground-truth sidecar
(``truth/anomalies`` and ``truth/precursors`` of the day, see ``tasks/simulate/truth.py``):

* node level: a node is *flagged* if it is in the alert list, *positive* if a ground-truth anomaly
  or failure precursor interval of that node overlaps the day; precision = TP / flagged,
  recall = TP / positives, over the nodes that were scored;
* window level: a scored window is *positive* if it overlaps a ground-truth interval and *flagged*
  if ``is_anomalous == 1`` (RUAD Eq. 4), as in the paper's per-timestamp evaluation (Section 4.5).

:func:`failure_model_for_tables` turns the staged ``failure_events`` (SaNSA states) into the failure
model of the nightly checkpoint-table refresh. :func:`write_report` renders everything as markdown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nodewatch.models.checkpoint.failures import FailureModel
from nodewatch.tasks.core.store import Store

AREA = "reports/nightly"
"""Store area: ``reports/nightly/date=YYYY-MM-DD/{report.md, evaluation.json}``."""

DEFAULT_FAILURE_MODEL = FailureModel(
    "default-mtbf5y-w0.8", mtbf_node_h=5 * 8766.0, shape=0.8, source="default (too few observed failures to fit)"
)
"""Used when fewer than ``min_failures`` node failures were observed (node MTBF 5 years, Weibull shape 0.8)."""


# ----------------------------------------------------------------------------- ground truth
def ground_truth(truth_dir: str | Path, day: date) -> pd.DataFrame:
    """Ground-truth intervals ``(node, start, end, kind)`` overlapping ``day`` (anomalies and precursors).

    Empty frame if the simulator wrote no truth for the day.
    """
    import pyarrow.parquet as pq

    t0, t1 = pd.Timestamp(day, tz="UTC"), pd.Timestamp(day + timedelta(days=1), tz="UTC")
    frames = []
    for name, kind_col in (("anomalies", "type"), ("precursors", "kind")):
        p = Path(truth_dir) / "truth" / name / f"date={day.isoformat()}" / "part.parquet"
        if not p.is_file():
            continue
        df = pq.read_table(p).to_pandas()
        if len(df):
            frames.append(
                pd.DataFrame(
                    {
                        "node": df["node"].astype(str),
                        "start": pd.to_datetime(df["start"], utc=True),
                        "end": pd.to_datetime(df["end"], utc=True),
                        "kind": ("anomaly:" if name == "anomalies" else "precursor:") + df[kind_col].astype(str),
                    }
                )
            )
    if not frames:
        return pd.DataFrame(
            {
                "node": pd.Series(dtype=str),
                "start": pd.Series(dtype="datetime64[ns, UTC]"),
                "end": pd.Series(dtype="datetime64[ns, UTC]"),
                "kind": pd.Series(dtype=str),
            }
        )
    df = pd.concat(frames, ignore_index=True)
    return df[(df["start"] < t1) & (df["end"] > t0)].reset_index(drop=True)


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


@dataclass
class Evaluation:
    """Precision/recall of one day's flags against ground truth."""

    nodes_scored: int
    nodes_positive: int
    nodes_flagged: int
    nodes_true_positive: int
    windows_scored: int
    windows_positive: int
    windows_flagged: int
    windows_true_positive: int
    missed_nodes: list[str] = field(default_factory=list)
    false_alarm_nodes: list[str] = field(default_factory=list)
    recall_by_kind: dict[str, float | None] = field(default_factory=dict)

    @property
    def node_precision(self) -> float | None:
        """TP / flagged nodes."""
        return _ratio(self.nodes_true_positive, self.nodes_flagged)

    @property
    def node_recall(self) -> float | None:
        """TP / positive nodes."""
        return _ratio(self.nodes_true_positive, self.nodes_positive)

    @property
    def window_precision(self) -> float | None:
        """TP / flagged windows."""
        return _ratio(self.windows_true_positive, self.windows_flagged)

    @property
    def window_recall(self) -> float | None:
        """TP / positive windows."""
        return _ratio(self.windows_true_positive, self.windows_positive)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe dict including the derived ratios."""
        d = dict(self.__dict__)
        d.update(
            node_precision=self.node_precision,
            node_recall=self.node_recall,
            window_precision=self.window_precision,
            window_recall=self.window_recall,
        )
        return d


def evaluate_day(
    summary: pd.DataFrame, alerts: pd.DataFrame, flags: pd.DataFrame, truth: pd.DataFrame, step: pd.Timedelta
) -> Evaluation:
    """Compare the day's flags with ground truth.

    ``flags``: long frame ``(node, time, is_anomalous)`` of the day (from the scores cube; -1 = not scored).
    """
    scored_nodes = set(summary.loc[summary["status"] == "scored", "node"])
    pos_nodes = set(truth["node"]) & scored_nodes
    flagged = set(alerts["node"]) & scored_nodes
    tp = flagged & pos_nodes
    f = flags[flags["is_anomalous"] >= 0]
    pos_win = np.zeros(len(f), dtype=bool)
    by_node = {n: g for n, g in truth.groupby("node")}
    t = f["time"].to_numpy("datetime64[ns]")
    nodes = f["node"].to_numpy(object)
    kind_hits: dict[str, list[int]] = {}
    for n, g in by_node.items():
        sel = nodes == n
        if not sel.any():
            continue
        tt = t[sel]
        hit = np.zeros(sel.sum(), dtype=bool)
        for r in g.itertuples():
            s = np.datetime64(r.start.tz_convert(None), "ns")
            e = np.datetime64(r.end.tz_convert(None), "ns")
            ov = (tt < e) & (tt + np.timedelta64(step) > s)
            hit |= ov
            k = str(r.kind)
            kind_hits.setdefault(k, [0, 0])
            kind_hits[k][0] += 1
            kind_hits[k][1] += int(n in flagged)
        pos_win[np.flatnonzero(sel)] = hit
    fl = f["is_anomalous"].to_numpy() == 1
    return Evaluation(
        nodes_scored=len(scored_nodes),
        nodes_positive=len(pos_nodes),
        nodes_flagged=len(flagged),
        nodes_true_positive=len(tp),
        windows_scored=int(len(f)),
        windows_positive=int(pos_win.sum()),
        windows_flagged=int(fl.sum()),
        windows_true_positive=int((fl & pos_win).sum()),
        missed_nodes=sorted(pos_nodes - flagged),
        false_alarm_nodes=sorted(flagged - pos_nodes),
        recall_by_kind={k: v[1] / v[0] for k, v in sorted(kind_hits.items())},
    )


def day_flags(store: Store, day: date) -> tuple[pd.DataFrame, pd.Timedelta]:
    """``(node, time, is_anomalous)`` of ``day`` from ``cubes/scores.zarr`` and the cube's step."""
    from nodewatch.tasks.cubes import repo

    ds = repo.open_dataset(store, "scores.zarr")
    step = pd.Timedelta(seconds=int(ds.attrs["step_seconds"]))
    t0 = np.datetime64(day.isoformat(), "ns")
    sub = ds["is_anomalous"].sel(time=slice(t0, t0 + np.timedelta64(1, "D") - np.timedelta64(1, "ns")))
    df = sub.to_dataframe().reset_index()[["node", "time", "is_anomalous"]]
    df["node"] = df["node"].astype(str)
    return df, step


# ----------------------------------------------------------------------------- checkpoint refresh input
def failure_model_for_tables(store: Store, n_nodes: int, min_failures: int = 10) -> tuple[FailureModel, dict[str, Any]]:
    """Failure model for the nightly checkpoint tables from the staged ``failure_events`` (SaNSA DOWN episodes).

    All nodes form one group; the inter-arrival times of the cluster's failures are fitted by censored
    MLE (:func:`nodewatch.tasks.checkpoint.fits.fit_groups`, Frank eq. 3.14 turns the system MTBF into a node MTBF with
    ``n_nodes``), the distribution with the best AIC is used. The observation window is the events'
    first .. last + one minute (:func:`nodewatch.tasks.checkpoint.fits.observation_window`, as the checkpoint tables
    use by default), so the gap after the last failure is one right-censored observation. With fewer
    than ``min_failures`` events the default model is used and the reason is returned.

    Events shadowed by an ADMIN_RESV overlay (planned maintenance reboots) are left out, unshadowed
    and UNSCHEDULED_RESV-shadowed ones (the outage kills running jobs) fitted
    (:func:`nodewatch.tasks.checkpoint.tables.failure_events_for_fits`; tables staged before ``shadowed_by``
    existed count as unshadowed). ``failure_events`` in the info is the number of events fitted.
    """
    from nodewatch.tasks.checkpoint.fits import failure_model_from_fit, failures_frame, fit_groups, observation_window
    from nodewatch.tasks.checkpoint.tables import failure_events_for_fits

    t = store.read_staged("failure_events")
    df, shadow = (pd.DataFrame({"node": [], "start": []}), {}) if t is None else failure_events_for_fits(t.to_pandas())
    n = len(df)
    if n < min_failures or n_nodes < 1:
        return DEFAULT_FAILURE_MODEL, {
            "failure_events": n,
            "fit": None,
            **shadow,
            "reason": f"{n} failure events < {min_failures}: default model",
        }
    df = df[["node", "start"]].assign(system="cluster")
    fr = failures_frame(df, group_by="system")
    fits, _, counts = fit_groups(fr, window=observation_window(fr), min_failures=min_failures)
    if fits.empty:
        return DEFAULT_FAILURE_MODEL, {"failure_events": n, "fit": None, **shadow, "reason": "fit failed: default model"}
    best = fits[fits["best_aic"]].iloc[0] if "best_aic" in fits.columns and fits["best_aic"].any() else fits.iloc[0]
    fm = failure_model_from_fit(best, n_nodes, name=f"observed-{best['dist']}")
    return fm, {
        "failure_events": n,
        "fit": {k: (v.item() if hasattr(v, "item") else v) for k, v in best.items()},
        **shadow,
        "reason": "fitted",
    }


# ----------------------------------------------------------------------------- rendering
def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def report_markdown(
    day: date,
    steps: dict[str, Any],
    score: dict[str, Any],
    alerts: pd.DataFrame,
    evaluation: Evaluation | None,
    checkpoint_rows: list[dict[str, Any]] | None = None,
    limit: int = 25,
) -> str:
    """The nightly report as markdown (steps, scoring counts, alerts, evaluation, checkpoint excerpt).

    Every value interpolated into the page goes through :func:`nodewatch.tasks.core.escape.md` (or
    :func:`~nodewatch.tasks.core.escape.md_code`): step details carry ingest errors that quote file
    names and input lines, so no HTML, link or table syntax from the data survives.
    """
    from nodewatch.tasks.core.escape import md as m
    from nodewatch.tasks.core.escape import md_code

    lines = [f"# nodewatch nightly report — {day.isoformat()}", ""]
    lines += ["## Steps", "", "| step | status | details |", "|---|---|---|"]
    for name, s in steps.items():
        lines.append(f"| {m(name)} | {m(s.get('status', ''))} | {m(s.get('details', ''))} |")
    lines += [
        "",
        "## Scoring",
        "",
        f"- model: {md_code(score.get('model_kind'))} run {md_code(score.get('model_run'))}",
        f"- nodes: {m(score.get('nodes'))}, scored: {m(score.get('scored'))}, flagged: {m(score.get('flagged'))}",
        f"- nodes without a model ({len(score.get('no_model', []))}): "
        f"{m(', '.join(map(str, score.get('no_model', [])[:30])) or 'none')}",
        f"- nodes without telemetry ({len(score.get('no_data', []))}): "
        f"{m(', '.join(map(str, score.get('no_data', [])[:30])) or 'none')}",
        f"- failed batches: {m(score.get('failed_batches') or 'none')}"
        + (f" (nodes {m(', '.join(map(str, score['failed_nodes'][:50])))})" if score.get("failed_nodes") else ""),
        f"- heat map: {md_code(score.get('heatmap'))}",
        "",
    ]
    lines += ["## Alerts", ""]
    if len(alerts):
        lines += ["| node | first (UTC) | peak score | anomalous windows | top metrics |", "|---|---|---|---|---|"]
        for r in alerts.head(limit).itertuples():
            lines.append(
                f"| {m(r.node)} | {pd.Timestamp(r.first_time):%H:%M} | {r.peak_score:.3f} | {r.anomalous_windows} | "
                f"{m(', '.join(map(str, r.top_metrics)))} |"
            )
        if len(alerts) > limit:
            lines.append(f"\n{len(alerts) - limit} more in {md_code(score.get('alerts'))}")
    else:
        lines.append("No node flagged.")
    if evaluation is not None:
        e = evaluation
        lines += [
            "",
            "## Against ground truth (simulator)",
            "",
            "| level | scored | positive | flagged | true positive | precision | recall |",
            "|---|---|---|---|---|---|---|",
            f"| node | {e.nodes_scored} | {e.nodes_positive} | {e.nodes_flagged} | {e.nodes_true_positive} | "
            f"{_fmt(e.node_precision)} | {_fmt(e.node_recall)} |",
            f"| window | {e.windows_scored} | {e.windows_positive} | {e.windows_flagged} | {e.windows_true_positive} | "
            f"{_fmt(e.window_precision)} | {_fmt(e.window_recall)} |",
            "",
        ]
        if e.recall_by_kind:
            lines.append("Node recall by ground-truth kind: " + ", ".join(f"{m(k)} {v:.2f}" for k, v in e.recall_by_kind.items()))
        if e.missed_nodes:
            lines.append(f"\nMissed nodes: {m(', '.join(map(str, e.missed_nodes[:30])))}")
    if checkpoint_rows:
        lines += [
            "",
            "## Checkpoint tables (refreshed)",
            "",
            "| failure model | ckpt cost | shapes | mean saving vs Daly % | mean saving vs Young % |",
            "|---|---|---|---|---|",
        ]
        for r in checkpoint_rows[:12]:
            lines.append(
                f"| {m(r['failure_model'])} | {m(r['ckpt_cost'])} | {m(r['checkpointable_shapes'])} | "
                f"{m(r['mean_saving_vs_daly_pct'])} | {m(r['mean_saving_vs_young_pct'])} |"
            )
    return "\n".join(lines) + "\n"


def with_sections(store: Store, day: date, markdown: str) -> str:
    """``markdown`` with the sections other nightly steps wrote for ``day`` appended (the syslog step's ``syslog.md``)."""
    from nodewatch.tasks.syslog.report import read_section

    section = read_section(store, day)
    if section and section not in markdown:
        markdown = markdown.rstrip("\n") + "\n\n" + section
    return markdown


def write_report(store: Store, day: date, markdown: str, evaluation: Evaluation | None) -> dict[str, str]:
    """Write ``reports/nightly/date=D/report.md`` (+ ``evaluation.json``); returns their paths.

    The syslog step's section (``syslog.md`` of the same night, :mod:`nodewatch.tasks.syslog.report`) is appended.
    """
    base = (AREA, f"date={day.isoformat()}")
    markdown = with_sections(store, day, markdown)
    out = {"report": store.write_bytes(markdown.encode(), *base, "report.md")}
    if evaluation is not None:
        out["evaluation"] = store.write_bytes(
            json.dumps(evaluation.as_dict(), indent=2, sort_keys=True).encode(), *base, "evaluation.json"
        )
    return out
