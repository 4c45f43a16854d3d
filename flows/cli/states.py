"""``nodewatch states build|show|report``: SaNSA node states (see docs/states.md)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated

import typer

from nodewatch.flows.cli._modes import PrefectOpt

states_app = typer.Typer(help="SaNSA node states: derive, show a node's timeline, analytics report.", no_args_is_help=True)

_COLORS = {
    "DOWN": "red",
    "CONNECTION_LOSS": "magenta",
    "BOOTING": "yellow",
    "IDLE": "white",
    "JOB_RUNNING": "green",
    "ADMIN_RESV": "blue",
    "RESERVED_IDLE": "cyan",
    "UNSCHEDULED_RESV": "bright_red",
}
_CHARS = {
    "DOWN": "D",
    "CONNECTION_LOSS": "C",
    "BOOTING": "B",
    "IDLE": ".",
    "JOB_RUNNING": "J",
    "ADMIN_RESV": "A",
    "RESERVED_IDLE": "r",
    "UNSCHEDULED_RESV": "U",
}


def _day(s: str) -> date:
    from nodewatch.flows.cli import UserError

    try:
        return date.fromisoformat(s)
    except ValueError:
        raise UserError(f"invalid date {s!r}: use YYYY-MM-DD") from None


def _instant(s: str, is_end: bool) -> int:
    """``YYYY-MM-DD`` (a whole UTC day: its start, or for ``is_end`` the next midnight) or an ISO datetime -> ns UTC.

    Datetimes without a zone are UTC; ``Z`` and offsets are accepted.
    """
    from nodewatch.flows.cli import UserError

    try:
        d = date.fromisoformat(s)
    except ValueError:
        try:
            t = datetime.fromisoformat(s.replace("Z", "+00:00").replace(" ", "T", 1))
        except ValueError:
            raise UserError(f"invalid date/time {s!r}: use YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z]") from None
        t = t if t.tzinfo else t.replace(tzinfo=UTC)
        return int(t.timestamp() * 1_000_000) * 1000
    d = d + timedelta(days=1) if is_end else d
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()) * 10**9


def fmt(ns: int) -> str:
    """``YYYY-MM-DD HH:MM:SS`` (UTC) of an int64 ns time."""
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_range(lo: int, hi: int) -> str:
    """``start .. end`` of a half-open ns range, for titles."""
    return f"{fmt(lo)} .. {fmt(hi)}"


def _wrap(fn):  # noqa: ANN001, ANN202
    from nodewatch.flows.cli import UserError
    from nodewatch.tasks.states.common import StatesError

    try:
        return fn()
    except StatesError as e:
        raise UserError(str(e)) from None


@states_app.command("build")
def build(
    start: Annotated[str, typer.Option(help="First UTC day (YYYY-MM-DD).")],
    end: Annotated[str, typer.Option(help="Last UTC day, inclusive (YYYY-MM-DD).")],
    rebuild_cube: Annotated[bool, typer.Option("--rebuild", help="Delete and recreate cubes/state.zarr.")] = False,
    prefect: PrefectOpt = None,
) -> None:
    """Derive node states from staged syslog/jobs/reservations/topology; write node_states, failure_events, state cube."""
    from nodewatch.flows.cli import console, settings
    from nodewatch.flows.cli._modes import print_note, use_prefect
    from nodewatch.flows.cli._safe import safe

    s, e = _day(start), _day(end)
    store = settings().store
    with_prefect, reason = use_prefect(prefect)
    if not with_prefect:
        from nodewatch.flows.states import run_states_build

        m = _wrap(lambda: run_states_build(s, e, store, rebuild_cube))
        print_note(reason, m["run_id"])
    else:
        from nodewatch.flows.states import states_build

        m = _wrap(lambda: states_build(s, e, store, rebuild_cube))
    console.print(
        f"run {safe(m['run_id'])} {safe(m['status'])}: {m['outputs']['nodes']} nodes, "
        f"{m['counts']['node_states']['staged']:,} node_states rows, "
        f"{m['counts']['failure_events']['staged']:,} failure events, cube {safe(m['outputs']['cube'])}"
    )
    for k, v in m["notes"].get("evidence_counts", {}).items():
        console.print(f"  {safe(k)}: {v:,}")


@states_app.command("show")
def show(
    node: Annotated[str, typer.Option(help="Node name.")],
    start: Annotated[str, typer.Option(help="First UTC day (YYYY-MM-DD) or an instant (YYYY-MM-DDTHH:MM[:SS][Z]).")],
    end: Annotated[
        str, typer.Option(help="Last UTC day, inclusive (YYYY-MM-DD), or an instant, exclusive (YYYY-MM-DDTHH:MM[:SS][Z]).")
    ],
    no_overlay: Annotated[
        bool, typer.Option("--no-overlay", help="Show the timeline without ADMIN/UNSCHEDULED overlays.")
    ] = False,
    width: Annotated[int, typer.Option(help="Characters per day in the timeline bar.")] = 96,
) -> None:
    """Print a node's state intervals and a one-line-per-day timeline bar."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from rich.table import Table
    from rich.text import Text

    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.flows.cli._safe import text as safe_text
    from nodewatch.schemas.names import check_node_name
    from nodewatch.tasks.states.common import day_range

    check_node_name(node)
    lo, hi = _instant(start, False), _instant(end, True)
    if hi <= lo:
        raise UserError(f"--end {end} must be after --start {start}")
    s = datetime.fromtimestamp(lo / 1e9, UTC).date()
    e = datetime.fromtimestamp((hi - 1) / 1e9, UTC).date()
    store = get_store()
    days = _wrap(lambda: day_range(s, e + timedelta(days=1)))
    t = store.read_staged("node_states", days)
    if t is None:
        raise UserError(f"no node_states staged for {days[0]}..{days[-1]}: run `nodewatch states build` first")
    t = t.filter(pc.and_(pc.equal(t["node"], node), pc.equal(t["overlay"], not no_overlay)))
    if t.num_rows == 0:
        raise UserError(f"node {node!r} has no states in {days[0]}..{days[-1]}")
    st_all = pc.cast(t["start"], pa.int64())
    en_all = pc.cast(t["end"], pa.int64())
    t = t.filter(pc.and_(pc.less(st_all, hi), pc.greater(en_all, lo)))  # intervals overlapping [start, end)
    if t.num_rows == 0:
        raise UserError(f"node {node!r} has no states in {start}..{end}")
    t = t.sort_by([("start", "ascending")])
    st = np.maximum(pc.cast(t["start"], pa.int64()).to_numpy(), lo)
    en = np.minimum(pc.cast(t["end"], pa.int64()).to_numpy(), hi)
    names = t["state"].to_pylist()
    ev = t["evidence"].to_pylist()
    # merge day splits of the same interval
    rows: list[list] = []
    for a, b, n, x in zip(st, en, names, ev, strict=True):
        if rows and rows[-1][1] == a and rows[-1][2] == n and rows[-1][3] == x:
            rows[-1][1] = b
        else:
            rows.append([a, b, n, x])
    tab = Table(title=f"{safe(node)} {fmt_range(lo, hi)} ({'w/o' if no_overlay else 'w/'} overlay)")
    for c in ("start (UTC)", "end (UTC)", "duration", "state", "evidence"):
        tab.add_column(c)

    for a, b, n, x in rows:
        tab.add_row(fmt(a), fmt(b), str(timedelta(seconds=int((b - a) // 10**9))), safe_text(n, _COLORS.get(n, "")),
                    safe_text(x))
    console.print(tab)
    day_ns = 86400 * 10**9
    for d in days:
        d0 = int(datetime.fromisoformat(d + "T00:00:00+00:00").timestamp()) * 10**9
        pts = d0 + (np.arange(width) * day_ns) // width
        k = np.searchsorted(st, pts, side="right") - 1
        line = Text(f"{d} ")
        for i, p in zip(k, pts, strict=True):
            n = names[i] if i >= 0 and en[i] > p else None
            line.append(_CHARS.get(n, "?") if n else " ", style=_COLORS.get(n, "") if n else "")
        console.print(line)
    console.print("legend: " + " ".join(f"{c}={n}" for n, c in _CHARS.items()))


@states_app.command("report")
def report(
    start: Annotated[str, typer.Option(help="First UTC day (YYYY-MM-DD).")],
    end: Annotated[str, typer.Option(help="Last UTC day, inclusive (YYYY-MM-DD).")],
    target_anomalies: Annotated[int, typer.Option(help="Choose epsilon so that about this many nodes are anomalous.")] = 5,
    prefect: PrefectOpt = None,
) -> None:
    """Analytics: Table II, transitions, Table III, Gaussian anomalies, rack under-use, correlated failures (tables + PNGs)."""
    from nodewatch.flows.cli import console, get_store, settings
    from nodewatch.flows.cli._modes import print_note, use_prefect
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.states.report import markdown_table

    s, e = _day(start), _day(end)
    store = settings().store
    with_prefect, reason = use_prefect(prefect)
    if not with_prefect:
        from nodewatch.flows.states import run_states_report

        m, _items = _wrap(lambda: run_states_report(s, e, store, target_anomalies))
        print_note(reason, m["run_id"])
    else:
        from nodewatch.flows.states import states_report

        m = _wrap(lambda: states_report(s, e, store, target_anomalies))
    import pandas as pd

    for name, paths in m["outputs"].items():
        if isinstance(paths, dict) and "csv" in paths and name != "node_percent":
            console.print(f"[bold]{safe(name)}[/bold]  {safe(paths.get('png', ''))}")
            with get_store().fs.open(paths["csv"], "rb") as f:
                console.print(safe(markdown_table(pd.read_csv(f).head(15), escape=False), multiline=True), highlight=False)
    console.print(f"report: {safe(m['outputs']['report'])}")


def register(app: typer.Typer) -> None:
    """Add the ``states`` group."""
    app.add_typer(states_app, name="states")
