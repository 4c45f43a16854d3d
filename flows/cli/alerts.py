"""``nodewatch alerts push|metrics|drain-plan``: verdicts to Alertmanager, Prometheus and Slurm (docs/alerting.md)."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nodewatch.flows.cli._json import JsonOpt
from nodewatch.flows.cli._json import print_json as _print_json

if TYPE_CHECKING:
    from nodewatch.tasks.alerts.config import AlertSettings
    from nodewatch.tasks.core.store import Store

alerts_app = typer.Typer(
    help="Publish node verdicts where operators look: Alertmanager alerts, Prometheus textfile metrics, "
         "Slurm drain plans.",
    no_args_is_help=True,
)

DayOpt = Annotated[str | None, typer.Option("--day", help="Day of the verdicts (YYYY-MM-DD); default: the latest day "
                                                         "with reports/<day>/verdicts.parquet.")]


def _console() -> Any:
    """The shared console on a terminal; unwrapped when piped (one result, one line)."""
    import sys

    from rich.console import Console

    from nodewatch.flows.cli import console

    return console if sys.stdout.isatty() else Console(soft_wrap=True, width=100_000, highlight=False)


def _cfg(**override: Any) -> AlertSettings:
    """The ``[alerts]`` section with command-line overrides (validated the same way)."""
    from nodewatch.flows.cli import UserError, _load_settings
    from nodewatch.tasks.alerts.config import AlertSettings, alert_settings

    base = alert_settings(_load_settings())
    data = base.model_dump()
    data.update({k: v for k, v in override.items() if v is not None})
    try:
        return AlertSettings.model_validate(data)
    except ValueError as e:
        first = str(e).splitlines()
        raise UserError(f"invalid option: {' '.join(first[1:3]) if len(first) > 2 else first[0]}") from None


def _day(store: Store, text: str | None) -> date:
    from nodewatch.flows.cli import UserError

    if text is not None:
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise UserError(f"invalid --day {text[:40]!r}: use YYYY-MM-DD") from None
    base = store.path("reports")
    days = []
    if store.fs.exists(base):
        for p in store.fs.ls(base, detail=False):
            name = p.rstrip("/").rsplit("/", 1)[-1]
            try:
                d = date.fromisoformat(name)
            except ValueError:
                continue
            if store.fs.exists(f"{p.rstrip('/')}/verdicts.parquet"):
                days.append(d)
    if not days:
        raise UserError(f"no verdicts in {store.url} (reports/<day>/verdicts.parquet): run the nightly flow first")
    return max(days)


def _rows(store: Store, day: date) -> tuple[list[dict[str, Any]], str]:
    from nodewatch.flows.cli import UserError
    from nodewatch.tasks.alerts.source import VerdictSourceError, read_rows

    try:
        return read_rows(store, day)
    except VerdictSourceError as e:
        raise UserError(str(e)) from None


def _run_id(store: Store, day: date, given: str | None) -> str:
    from nodewatch.flows.cli import UserError
    from nodewatch.schemas.names import check_path_token
    from nodewatch.tasks.alerts.source import producing_run

    if given is not None:
        try:
            return check_path_token(given, "run id")
        except ValueError as e:
            raise UserError(str(e)) from None
    return producing_run(store, day) or f"verdicts-{day.isoformat()}"


@alerts_app.command("push")
def push_cmd(
    day: DayOpt = None,
    url: Annotated[str | None, typer.Option(help="Alertmanager base URL (overrides [alerts] alertmanager_url).")] = None,
    run_id: Annotated[str | None, typer.Option(help="run_id label (default: the nightly run whose manifest names the "
                                                    "day's verdicts).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the payload, send nothing, change nothing.")] = False,
    allow_older: Annotated[bool, typer.Option("--allow-older", help="Push a day older than the last pushed one "
                                                                  "(resolves the newer alerts).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Post the day's verdicts to Alertmanager (v2 API): new and re-confirmed alerts fire, vanished ones resolve."""
    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.alerts.alertmanager import AlertmanagerError, OlderDayError, push
    from nodewatch.tasks.core.runs import RunRecorder

    console = _console()
    cfg = _cfg(alertmanager_url=url)
    if not cfg.alertmanager_url and not dry_run:
        raise UserError("no Alertmanager URL: pass --url http://127.0.0.1:9093 or set [alerts] alertmanager_url")
    store = get_store()
    d = _day(store, day)
    rows, src = _rows(store, d)
    rid = _run_id(store, d, run_id)
    rec = None if dry_run else RunRecorder(store, "alerts_push", {"day": d.isoformat(), "url": cfg.alertmanager_url})
    try:
        out = push(store, d, rows, rid, cfg, dry_run=dry_run, allow_older=allow_older)
    except (AlertmanagerError, OlderDayError) as e:
        if rec is not None and not isinstance(e, OlderDayError):
            rec.error(str(e))
            rec.finish("failed")
        raise UserError(str(e)) from None
    if rec is not None:
        rec.add_output("alerts", {k: out[k] for k in ("day", "run_id", "firing", "resolved", "rejected")} | {"source": src})
        out["push_run"] = rec.finish().run_id
    if as_json:
        _print_json({**out, "source": src})
        return
    if dry_run:
        _print_json(out["payload"])
        return
    console.print(f"{safe(d.isoformat())}: {out['firing']} alert(s) firing, {out['resolved']} resolved at "
                  f"{safe(cfg.alertmanager_url)} (run_id {safe(rid)}; verdicts {safe(src)}); "
                  f"manifest runs/{out['push_run']}.json", highlight=False)
    for r in out["rejected"]:
        console.print(f"  skipped row: {safe(r)}", highlight=False)


@alerts_app.command("metrics")
def metrics_cmd(
    day: DayOpt = None,
    directory: Annotated[str | None, typer.Option("--dir", help="Textfile-collector directory (overrides "
                                                               "[alerts] textfile_dir).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write nodewatch.prom (scores, verdicts, last runs, quarantined rows) for node_exporter's textfile collector."""
    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.alerts.metrics import TextfileDirError, write_metrics

    console = _console()
    cfg = _cfg(textfile_dir=directory)
    if not cfg.textfile_dir:
        raise UserError("no textfile directory: pass --dir DIR or set [alerts] textfile_dir")
    store = get_store()
    try:
        d: date | None = _day(store, day)
        rows, _ = _rows(store, d)  # type: ignore[arg-type]
    except UserError:
        if day is not None:
            raise
        d, rows = None, []  # no verdicts yet: run metrics only
    try:
        out = write_metrics(store, d, rows, cfg.textfile_dir)
    except TextfileDirError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"cannot write {cfg.textfile_dir}/nodewatch.prom: {e.strerror}") from None
    out["day"] = d.isoformat() if d else None
    if as_json:
        _print_json(out)
        return
    console.print(f"wrote {safe(out['path'])}: {out['scored_nodes']} node score(s), {out['verdict_series']} verdict "
                  f"series, {out['flows']} flow(s), {out['quarantine_tables']} quarantine table(s)", highlight=False)


@alerts_app.command("drain-plan")
def drain_plan_cmd(
    day: DayOpt = None,
    min_confidence: Annotated[float | None, typer.Option(help="Lowest verdict confidence to list (0-1; default "
                                                               "[alerts] drain_min_confidence, 0.75 = high severity).")] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Run the scontrol lines (only with [alerts.drain_policy] "
                                                       "apply = true and within its limits).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the scontrol lines that would drain the nodes of the day's confident node verdicts (runs nothing by default)."""
    import math

    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.alerts.drain import DrainRefused, apply_plan, check_policy, plan

    if min_confidence is not None and not (math.isfinite(min_confidence) and 0.0 <= min_confidence <= 1.0):
        raise UserError(f"--min-confidence must be between 0 and 1, got {min_confidence}")
    console = _console()
    cfg = _cfg()
    store = get_store()
    d = _day(store, day)
    rows, _ = _rows(store, d)
    rid = _run_id(store, d, None)
    entries = plan(rows, d, rid, cfg.drain_min_confidence if min_confidence is None else min_confidence)
    results = None
    if apply:
        try:
            check_policy(entries, cfg.drain_policy)
        except DrainRefused as e:
            raise UserError(str(e)) from None
        results = apply_plan(entries, cfg.drain_policy)
    if as_json:
        _print_json({"day": d.isoformat(), "run_id": rid, "nodes": entries, "applied": results})
    else:
        import sys

        for e in entries:
            sys.stdout.write(e["line"] + "\n")
        if not entries:
            console.print(f"# no node verdict of {safe(d.isoformat())} at confidence >= "
                          f"{cfg.drain_min_confidence if min_confidence is None else min_confidence}", highlight=False)
        for r in results or []:
            console.print(f"# {safe(r['node'])}: {'drained' if r['ok'] else 'FAILED'} {safe(r['output'])}", highlight=False)
    if results and not all(r["ok"] for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``alerts`` command group."""
    app.add_typer(alerts_app, name="alerts")
