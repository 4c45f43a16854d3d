"""Templates in the store: the per-row ``syslog_templated`` table, the per-run ``syslog_templates`` catalogue, the miner state.

Store layout (docs/syslog.md)::

    staged/syslog_templated/date=D/part-<run>.parquet  one row per staged syslog row of day D: node, time, app,
                                                       pid, source_offset, template_id, params (list<string>)
    staged/syslog_templates/date=D/part-<run>.parquet  the catalogue after run <run>: template_id, template,
                                                       size (lines ever), lines_day, first_run, new (in this run)
    syslog/miner/<run>.json, syslog/miner/CURRENT      the drain3 tree as JSON (ids stay stable across nights)

Both tables are published by one :class:`~nodewatch.tasks.core.commit.StagedCommit` (label ``syslog-templates``):
readers see a night's templated rows and its catalogue together or not at all. A re-run of a day replaces the
day's ``syslog_templated`` part; catalogue parts are kept (one version per run, the newest is current). The
miner state is written before the commit and ``CURRENT`` moves after the run finished (inside the nightly: when
its manifest says completed), so a killed run leaves the previous state current.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nodewatch.schemas.syslog_analytics import SYSLOG_TEMPLATED, SYSLOG_TEMPLATES
from nodewatch.tasks.core.commit import StagedCommit
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.syslog.settings import SyslogSettings
from nodewatch.tasks.syslog.templates import TemplateMiner

TEMPLATED = "syslog_templated"
CATALOGUE = "syslog_templates"
MINER_AREA = ("syslog", "miner")

TEMPLATED_SCHEMA = SYSLOG_TEMPLATED.arrow_schema()
CATALOGUE_SCHEMA = SYSLOG_TEMPLATES.arrow_schema()


class SyslogDataError(ValueError):
    """Missing or unreadable syslog inputs (one-line message)."""


def miner_settings(cfg: SyslogSettings) -> dict[str, float | int]:
    """Miner constructor arguments from the settings."""
    return {"sim_th": cfg.sim_th, "depth": cfg.depth, "max_new_templates": cfg.max_new_templates,
            "max_message_chars": cfg.max_message_chars}


def load_miner(store: Store, cfg: SyslogSettings) -> tuple[TemplateMiner, str | None]:
    """The current miner (rebuilt from ``syslog/miner/CURRENT``) or a new one; also the run it came from."""
    run = store.current("/".join(MINER_AREA))
    if run is None:
        return TemplateMiner(**miner_settings(cfg)), None
    try:
        state = store.read_json(*MINER_AREA, f"{run}.json")
    except (OSError, json.JSONDecodeError) as e:
        raise SyslogDataError(f"syslog miner state syslog/miner/{run}.json is unreadable ({type(e).__name__}); "
                              "point syslog/miner/CURRENT at an earlier state or delete it to start over") from None
    limits = {"max_new_templates": cfg.max_new_templates, "max_message_chars": cfg.max_message_chars}
    try:
        return TemplateMiner.from_state(state, **limits), run
    except ValueError as e:
        raise SyslogDataError(f"syslog/miner/{run}.json: {e}") from None


def previous_catalogue(store: Store) -> dict[int, str]:
    """``template_id -> first_run`` of the newest catalogue version (empty when none)."""
    files = store.staged_files(CATALOGUE)
    if not files:
        return {}
    newest = max(files, key=lambda p: p.rsplit("part-", 1)[1])
    with store.fs.open(newest, "rb") as f:
        import pyarrow.parquet as pq

        t = pq.read_table(f, columns=["template_id", "first_run"])
    return dict(zip(t["template_id"].to_pylist(), t["first_run"].to_pylist(), strict=True))


def read_day(store: Store, day: date) -> pa.Table | None:
    """Staged syslog rows of ``day`` sorted by (time, node), or ``None``."""
    t = store.read_staged("syslog", dates=[day.isoformat()],
                          columns=["time", "node", "app", "pid", "message", "source_offset"])
    if t is None or t.num_rows == 0:
        return None
    return t.sort_by([("time", "ascending"), ("node", "ascending")])


@dataclass
class TemplateResult:
    """What :func:`template_day` did."""

    day: str
    rows: int
    templates: int
    counts: dict[str, int]
    templated: pa.Table
    catalogue: pa.Table
    source: pa.Table | None = None
    """The staged syslog rows of the day, in the order of ``templated``."""

    def summary(self) -> dict[str, object]:
        """Manifest-friendly summary."""
        return {"day": self.day, "rows": self.rows, "templates": self.templates, **self.counts}


def assign_table(miner: TemplateMiner, rows: pa.Table) -> tuple[pa.Table, dict[str, int]]:
    """``syslog_templated`` rows for the staged syslog ``rows``."""
    a = miner.assign(rows["message"].combine_chunks())
    out = pa.table({
        "time": rows["time"], "node": rows["node"], "app": rows["app"], "pid": rows["pid"],
        "source_offset": rows["source_offset"], "template_id": pa.array(a.template_id, pa.int64()),
        "params": a.params,
    }, schema=TEMPLATED_SCHEMA)
    return out, a.counts.as_dict()


def catalogue_table(miner: TemplateMiner, templated: pa.Table, run_id: str, before: dict[int, str]) -> pa.Table:
    """The catalogue version of this run."""
    tpl = miner.templates()
    sizes = {int(c.cluster_id): int(c.size) for c in miner.drain.clusters}
    ids = np.array(sorted(tpl), np.int64)
    vc = pc.value_counts(templated["template_id"].combine_chunks()) if templated.num_rows else None
    day_counts = {} if vc is None else dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True))
    return pa.table({
        "template_id": ids,
        "template": [tpl[int(i)] for i in ids],
        "size": [sizes[int(i)] for i in ids],
        "lines_day": [int(day_counts.get(int(i), 0)) for i in ids],
        "first_run": [before.get(int(i), run_id) for i in ids],
        "new": [int(i) not in before for i in ids],
    }, schema=CATALOGUE_SCHEMA)


def template_day(store: Store, day: date, run_id: str, cfg: SyslogSettings,
                 after_finish: Callable[[Callable[[], None]], None] | None = None) -> TemplateResult:
    """Template every staged syslog row of ``day``; publish ``syslog_templated`` + catalogue; move the miner.

    The miner's ``CURRENT`` moves only after the run finished (docs/store.md): pass the run's
    :meth:`~nodewatch.tasks.core.runs.RunRecorder.after_finish` and the move is done there; without it
    (a run that ends with this call) it moves at once.
    """
    rows = read_day(store, day)
    if rows is None:
        raise SyslogDataError(f"no staged syslog rows for {day}: run `nodewatch ingest syslog` first")
    miner, _ = load_miner(store, cfg)
    before = previous_catalogue(store)
    templated, counts = assign_table(miner, rows)
    cat = catalogue_table(miner, templated, run_id, before)
    store.write_json(miner.state(), *MINER_AREA, f"{run_id}.json")
    commit = StagedCommit(store, run_id, "syslog-templates", fault="syslog")
    ds = day.isoformat()
    commit.replace_partition(TEMPLATED, ds, templated)
    commit.write_parquet(cat, store.staged_key(CATALOGUE, ds, run_id))
    commit.commit()
    commit.drop_removed()
    def move() -> None:
        store.set_current("/".join(MINER_AREA), run_id)

    if after_finish is None:
        move()
    else:
        after_finish(move)
    return TemplateResult(ds, rows.num_rows, len(cat), counts, templated, cat, rows)


def read_templated(store: Store, day: date) -> pa.Table | None:
    """Committed ``syslog_templated`` rows of ``day`` (``None`` if the day was not templated)."""
    return store.read_staged(TEMPLATED, dates=[day.isoformat()])


def read_catalogue(store: Store) -> pa.Table | None:
    """The newest catalogue version."""
    files = store.staged_files(CATALOGUE)
    if not files:
        return None
    newest = max(files, key=lambda p: p.rsplit("part-", 1)[1])
    import pyarrow.parquet as pq

    with store.fs.open(newest, "rb") as f:
        return pq.read_table(f)
