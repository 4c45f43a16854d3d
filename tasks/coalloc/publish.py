"""Write a replay to the store: versioned tables through the commit protocol, a PNG, a Markdown summary, a manifest.

Layout (docs/coalloc.md):

* ``staged/coalloc_runs/date=D/part-<run_id>.parquet`` -- one row per (seed, algorithm, policy) run;
* ``staged/coalloc_summary/date=D/part-<run_id>.parquet`` -- mean and 95 % CI over seeds per setup;
* ``quarantine/coalloc_jobs/date=D/<run_id>.parquet`` -- jobs left out, with reasons;
* ``tables/coalloc/<run_id>/{summary.md,efficiency.png}`` and ``runs/<run_id>.json`` (manifest).

The three parquet parts appear together or not at all: one :class:`~nodewatch.tasks.core.commit.StagedCommit`
(label ``coalloc``) publishes them; D is the UTC day of the run. Runs are versions: every replay adds its
own parts, readers select by ``run_id``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pyarrow as pa

from nodewatch.tasks.coalloc.plots import replay_bars

RUNS_TABLE = "coalloc_runs"
SUMMARY_TABLE = "coalloc_summary"
QUARANTINE_TABLE = "coalloc_jobs"
AREA = "tables/coalloc"


def _table(df: pd.DataFrame, run_id: str, source: str) -> pa.Table:
    df = df.copy()
    df.insert(0, "run_id", run_id)
    df.insert(1, "source", source)
    return pa.Table.from_pandas(df, preserve_index=False)


def markdown_summary(summary: pd.DataFrame, counts: dict[str, int], title: str) -> str:
    """The summary as a Markdown table (values in %, CI in brackets) with the job accounting."""
    from nodewatch.tasks.core.escape import md as markdown_cell

    lines = [f"# {markdown_cell(title)}", "", "| algorithm | policy | seeds | E_util % | E_comp % | E_sched % | "
             "thesis E_comp % | thesis E_sched % | makespan h | mean wait h | jobs finished |", "|" + "---|" * 11]

    def pct(r: pd.Series, m: str) -> str:
        lo, hi = r.get(f"{m}_lo"), r.get(f"{m}_hi")
        ci = f" [{100 * lo:.1f}, {100 * hi:.1f}]" if pd.notna(lo) and pd.notna(hi) else ""
        return f"{100 * r[m]:.1f}{ci}"

    for _, r in summary.iterrows():
        th_c = r.get("thesis_e_comp")
        th_s = r.get("thesis_e_sched")
        lines.append(
            f"| {r['algorithm']} | {r['policy']} | {r['seeds']} | {pct(r, 'e_util')} | {pct(r, 'e_comp')} | "
            f"{pct(r, 'e_sched')} | {'' if pd.isna(th_c) else f'{100 * th_c:.0f}'} | "
            f"{'' if pd.isna(th_s) else f'{100 * th_s:.0f}'} | {r['makespan_s'] / 3600:.2f} | "
            f"{r['wait_mean_s'] / 3600:.2f} | {r['jobs_finished']:.1f} |")
    lines += ["", "Jobs: " + ", ".join(f"{markdown_cell(k)} {v:,}" for k, v in counts.items()), ""]
    return "\n".join(lines)


def publish_replay(store: Any, runs: pd.DataFrame, summary: pd.DataFrame, quarantine: pd.DataFrame,
                   counts: dict[str, int], parameters: dict[str, Any], source: str,
                   timings: dict[str, float] | None = None) -> dict[str, Any]:
    """Commit the tables, write PNG + Markdown, write the manifest; returns the manifest as a dict."""
    from nodewatch.schemas.manifest import RowCounts
    from nodewatch.tasks.core.commit import StagedCommit
    from nodewatch.tasks.core.escape import plot_label
    from nodewatch.tasks.core.runs import RunRecorder

    rec = RunRecorder(store, "coalloc_replay", parameters)
    rec.write()
    rid = rec.run_id
    day = datetime.now(UTC).date().isoformat()
    try:
        with rec.step("publish"):
            c = StagedCommit(store, rid, "coalloc", fault="coalloc")
            c.write_parquet(_table(runs, rid, source), store.staged_key(RUNS_TABLE, day, rid))
            c.write_parquet(_table(summary, rid, source), store.staged_key(SUMMARY_TABLE, day, rid))
            if len(quarantine):
                c.write_parquet(_table(quarantine, rid, source), store.quarantine_key(QUARANTINE_TABLE, day, rid))
            c.commit()
            title = f"co-allocation replay {rid}: {source}"
            png = store.write_bytes(replay_bars(summary, plot_label(title)), AREA, rid, "efficiency.png")
            md = store.write_bytes(markdown_summary(summary, counts, title).encode(), AREA, rid, "summary.md")
        rows_in = int(counts.get("rows_in", 0))
        rec.add_counts(QUARANTINE_TABLE, RowCounts(rows_in=rows_in, staged=rows_in - int(counts.get("quarantined", 0)),
                                                   quarantined=int(counts.get("quarantined", 0))))
        rec.add_output("runs_table", store.staged_key(RUNS_TABLE, day, rid))
        rec.add_output("summary_table", store.staged_key(SUMMARY_TABLE, day, rid))
        rec.add_output("png", png)
        rec.add_output("markdown", md)
        rec.add_output("job_counts", counts)
        rec.add_output("summary", summary.to_dict(orient="records"))
        for k, v in (timings or {}).items():
            rec.manifest.timings[k] = v
    except BaseException as e:
        rec.error(f"{type(e).__name__}: {e}")
        rec.finish("failed")
        raise
    return rec.finish().model_dump(mode="json")
