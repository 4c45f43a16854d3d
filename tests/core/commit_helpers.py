"""Helpers of the commit-protocol tests: syslog inputs, child processes that ingest or build states, staged snapshots."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from nodewatch.tasks.core.store import Store

INGEST = """
import sys
from pathlib import Path
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.ingest.pipeline import ingest_files
from nodewatch.tasks.ingest.registry import sources
st = Store(sys.argv[1])
rec = RunRecorder(st, "ingest", {"source": "syslog"})
rec.write()
ingest_files(st, sources()["syslog"], [Path(p) for p in sys.argv[2:]], rec, data_docs=False)
rec.finish()
print(rec.run_id)
"""

STATES = """
import sys
from datetime import date
from nodewatch.tasks.core.runs import RunRecorder
from nodewatch.tasks.core.store import Store
from nodewatch.tasks.states.build import build_states
st = Store(sys.argv[1])
rec = RunRecorder(st, "states", {})
rec.write()
build_states(st, date.fromisoformat(sys.argv[2]), date.fromisoformat(sys.argv[3]), rec.run_id)
rec.finish()
print(rec.run_id)
"""


def syslog_file(path: Path, days: int = 3, nodes: int = 4, per_day: int = 40, bad: int = 2) -> Path:
    """RFC 5424 lines over ``days`` days (one staged part per day), a node going down and back, ``bad`` unparsable lines."""
    lines = []
    for d in range(days):
        for i in range(per_day):
            n = i % nodes
            lines.append(f"<30>1 2026-01-0{d + 1}T{i % 24:02d}:{i % 60:02d}:00Z cn{n:02d} sshd {100 + i} - - session {i}")
        day = f"2026-01-0{d + 1}"
        lines.append(f"<27>1 {day}T05:00:00Z slurmctl01 slurmctld 7 - - error: Nodes cn01 not responding, setting DOWN")
        lines.append(f"<30>1 2026-01-0{d + 1}T07:00:00Z slurmctl01 slurmctld 7 - - Node cn01 now responding")
    lines += ["this is not syslog"] * bad
    path.write_text("\n".join(lines) + "\n")
    return path


def run_child(script: str, args: list[str], fault: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh Python process (optionally with ``NODEWATCH_FAULT_AT``)."""
    env = dict(os.environ)
    env.pop("NODEWATCH_FAULT_AT", None)
    if fault:
        env["NODEWATCH_FAULT_AT"] = fault
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=timeout)


def snapshot(store: Store, table: str, drop: tuple[str, ...] = ()) -> list[dict]:
    """The committed rows of ``table`` as sorted dicts (``None``: nothing staged -> ``[]``)."""
    t = store.read_staged(table)
    if t is None:
        return []
    t = t.drop_columns([c for c in drop if c in t.column_names])
    rows = t.to_pylist()
    return sorted(rows, key=lambda r: repr(sorted(r.items())))


def part_runs(store: Store, table: str) -> set[str]:
    """Run ids of the committed parts of ``table``."""
    return {p.rsplit("/part-", 1)[1][: -len(".parquet")] for p in store.staged_files(table)}


def empty_like(t: pa.Table | None) -> int:
    """Rows of ``t`` (0 for ``None``)."""
    return 0 if t is None else t.num_rows
