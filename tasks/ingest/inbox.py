"""The nightly inbox: where collectors drop each day's files, and the demo's simulated cluster.

The nightly flow finds a day's inputs under one inbox directory (``--inbox``, env ``NODEWATCH_INBOX``)
laid out by source and day, the layout the simulator writes (``tasks/simulate/cluster.py``)::

    topology/*.csv                                   (latest snapshot; re-ingesting the same bytes is a no-op)
    reservations/date=YYYY-MM-DD/*                   jobs/sacct/date=YYYY-MM-DD/*  (or jobs/swf/...)
    telemetry/long/date=YYYY-MM-DD/*.parquet         telemetry/ldms/date=YYYY-MM-DD/*.csv
    syslog/date=YYYY-MM-DD/*.log                     alerts/nagios/date=YYYY-MM-DD/*
    alerts/tickets/date=YYYY-MM-DD/*                 truth/...  (simulator ground truth, demo only)

A site points its collectors (rsync from the LDMS aggregators, rsyslog file output, a cron job
running ``sacct -P``) at these folders; see docs/operations.md. In demo mode the next day is
simulated into the inbox first and then ingested through the same parsers as real data.
"""

from __future__ import annotations

import glob
import logging
import os
from datetime import date, timedelta
from pathlib import Path

from nodewatch.tasks.ingest.discovery import refusal

log = logging.getLogger(__name__)

SOURCE_GLOBS: dict[str, tuple[str, ...]] = {
    "topology": ("topology/*.csv",),
    "reservations": ("reservations/date={d}/*",),
    "jobs": ("jobs/sacct/date={d}/*",),
    "telemetry": ("telemetry/long/date={d}/*", "telemetry/ldms/date={d}/*"),
    "syslog": ("syslog/date={d}/*",),
    "alerts": ("alerts/nagios/date={d}/*",),
    "tickets": ("alerts/tickets/date={d}/*",),
}
"""Source -> glob patterns (relative to the inbox) of one day's files; ``{d}`` is ``YYYY-MM-DD``."""

SOURCE_FORMATS: dict[str, str] = {"reservations": "reservations-csv", "tickets": "tickets_csv"}
"""Formats fixed by the inbox layout (a header-only file cannot be sniffed); other sources use ``auto``."""


def header_only(path: str | Path) -> bool:
    """True for an uncompressed CSV file with a header line and no data row (e.g. a day without reservations).

    Such files carry nothing to ingest; the nightly flow lists them as ``empty`` instead of handing
    them to a parser that would quarantine them as unreadable.
    """
    p = Path(path)
    if p.suffix.lower() != ".csv":
        return False
    with open(p, "rb") as f:
        head = f.read(1 << 16)
    lines = [ln for ln in head.splitlines() if ln.strip()]
    return len(lines) <= 1 and len(head) < (1 << 16)


def inbox_dir(inbox: str | None) -> Path:
    """The inbox directory: the argument, else ``$NODEWATCH_INBOX``, else ``./nodewatch-inbox``."""
    return Path(inbox or os.environ.get("NODEWATCH_INBOX") or "nodewatch-inbox")


def day_files(inbox: Path, day: date, sources: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """Files of ``day`` per source (sources without a file are left out); hidden/temporary files skipped.

    Only regular files are taken: symbolic links, FIFOs, sockets and devices are refused with a
    warning (:func:`nodewatch.tasks.ingest.discovery.refusal`), whatever their name.
    """
    out: dict[str, list[str]] = {}
    for src, patterns in SOURCE_GLOBS.items():
        if sources is not None and src not in sources:
            continue
        files: list[str] = []
        for pat in patterns:
            for p in glob.glob(str(inbox / pat.format(d=day.isoformat()))):
                if Path(p).name.startswith("."):
                    continue
                reason, _ = refusal(p)  # no link, FIFO, device or /proc file is ever an inbox input
                if reason is None:
                    files.append(p)
                elif not Path(p).is_dir():
                    log.warning("inbox: refused %r: %s", p, reason)
        if files:
            out[src] = sorted(files)
    return out


def simulated_days(inbox: Path) -> list[date]:
    """Days already simulated into ``inbox`` (empty if it holds no simulated cluster)."""
    from nodewatch.tasks.simulate.cluster import load_state

    st = load_state(inbox)
    if st is None:
        return []
    cfg, days = st
    return [cfg.start + timedelta(days=d) for d in sorted(days)]


def simulate_day(inbox: Path, day: date | None = None) -> date:
    """Simulate ``day`` (default: the day after the last simulated one) of the cluster in ``inbox``.

    The cluster's config comes from ``inbox/simulation.json``; the schedule is rebuilt from day 0
    with the same seed, so the new day continues the earlier ones exactly. Already simulated days
    are not rewritten.
    """
    from nodewatch.tasks.simulate.cluster import load_state, simulate

    st = load_state(inbox)
    if st is None:
        raise FileNotFoundError(
            f"demo mode needs a simulated cluster in {inbox} (simulation.json): run `python -m nodewatch.flows.demo` "
            "or `nodewatch simulate --out <inbox>` first")
    cfg, written = st
    idx = (day - cfg.start).days if day is not None else max(written, default=-1) + 1
    if idx < 0:
        raise ValueError(f"day {day} is before the simulated cluster's start {cfg.start}")
    if idx not in written:
        simulate(cfg, inbox, [idx])
    return cfg.start + timedelta(days=idx)
