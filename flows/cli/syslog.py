"""``nodewatch syslog templates|anonymise|detect|reveal``: syslog templates, PaRS export, vicinity detector (docs/syslog.md)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

syslog_app = typer.Typer(
    help="Syslog analytics (Ghiasvand & Ciorba): templates, anonymised export, vicinity-based failure detection.",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout (nothing else on stdout).")]
DayOpt = Annotated[str, typer.Option(help="UTC day of staged syslog (YYYY-MM-DD).")]


def _day(s: str) -> date:
    from nodewatch.flows.cli import UserError

    try:
        return date.fromisoformat(s)
    except ValueError:
        raise UserError(f"invalid --day {s[:40]!r}: use YYYY-MM-DD") from None


def _cfg():  # noqa: ANN202 - SyslogSettings
    from nodewatch.flows.cli import UserError, settings
    from nodewatch.tasks.core.settings import SettingsError, section
    from nodewatch.tasks.syslog.settings import SyslogSettings

    s = settings()
    try:
        return s, section(s, "syslog", SyslogSettings)
    except SettingsError as e:
        raise UserError(str(e)) from None


def _print_json(obj: Any) -> None:
    import json
    import sys

    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def _run(flow: str, params: dict[str, Any], fn):  # noqa: ANN001, ANN202
    """Run ``fn(store, run_id)`` inside a manifest; data errors become one-line user errors."""
    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.tasks.core.runs import RunRecorder
    from nodewatch.tasks.syslog.anonymise import AnonKeyError
    from nodewatch.tasks.syslog.catalogue import SyslogDataError

    store = get_store()
    rec = RunRecorder(store, flow, params)
    try:
        with rec.step(flow):
            out = fn(store, rec.run_id, rec)
    except (SyslogDataError, AnonKeyError) as e:
        rec.error(str(e))
        rec.finish("failed")
        raise UserError(str(e)) from None
    except BaseException:
        rec.finish("failed")
        raise
    rec.finish()
    return rec.run_id, out


@syslog_app.command("templates")
def templates_cmd(day: DayOpt, top: Annotated[int, typer.Option(min=0, max=10_000, help="Templates to list.")] = 20,
                  json_out: JsonOpt = False) -> None:
    """Template every staged syslog row of a day (drain3; ids stable across runs) and list the top templates."""
    from rich.table import Table

    from nodewatch.flows.cli import console
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.syslog.catalogue import template_day

    d = _day(day)
    _, cfg = _cfg()

    def go(store, run_id, rec):  # noqa: ANN001, ANN202
        r = template_day(store, d, run_id, cfg, rec.after_finish)  # miner CURRENT moves when the run completes
        rec.add_output("syslog_templates", r.summary())
        return r

    run_id, r = _run("syslog_templates", {"day": day}, go)
    cat = r.catalogue.sort_by([("lines_day", "descending")]).slice(0, top).to_pylist()
    if json_out:
        _print_json({"run_id": run_id, **r.summary(), "top": cat})
        return
    console.print(f"run {safe(run_id)}: {r.rows:,} lines of {safe(day)} -> {r.templates} templates "
                  f"({r.counts['new_templates']} new, {r.counts['overflow']:,} overflow lines, "
                  f"{r.counts['truncated']:,} truncated)")
    t = Table(title=f"top {len(cat)} templates of {day}")
    for c in ("id", "lines", "new", "template"):
        t.add_column(c, justify="right" if c in ("id", "lines") else "left")
    for c in cat:
        t.add_row(str(c["template_id"]), f"{c['lines_day']:,}", "yes" if c["new"] else "", safe(c["template"]))
    console.print(t)


@syslog_app.command("anonymise")
def anonymise_cmd(day: DayOpt, out: Annotated[Path | None, typer.Option(
        help="Also copy the anonymised log (gzip) to this file (must not exist).")] = None,
                  json_out: JsonOpt = False) -> None:
    """Export a day's syslog anonymised (PaRS: keyed hashes of variable and sensitive parts; templates and SG kept)."""
    from nodewatch.flows.cli import UserError, console
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.syslog.catalogue import template_day
    from nodewatch.tasks.syslog.detect import export_anonymised

    d = _day(day)
    if out is not None and (out.exists() or out.is_symlink()):
        raise UserError(f"--out {out} exists: choose a new file")
    _, cfg = _cfg()

    def go(store, run_id, rec):  # noqa: ANN001, ANN202
        r = template_day(store, d, run_id, cfg, rec.after_finish)  # miner CURRENT moves when the run completes
        key = export_anonymised(store, d, run_id, r, cfg)
        rec.add_output("syslog_export", key)
        return r, key

    run_id, (r, key) = _run("syslog_anonymise", {"day": day}, go)
    if out is not None:
        from nodewatch.flows.cli import get_store

        data = get_store().fs.cat_file(get_store().path(*key.split("/")))
        with open(out, "xb") as f:
            f.write(data)
    if json_out:
        _print_json({"run_id": run_id, "export": key, "lines": r.rows, "copy": str(out) if out else None})
        return
    console.print(f"run {safe(run_id)}: {r.rows:,} lines anonymised -> {safe(key)}"
                  + (f" (copy: {safe(str(out))})" if out else "")
                  + f"; mapping encrypted in syslog/anon-map/{safe(run_id)}.bin")


@syslog_app.command("reveal")
def reveal_cmd(run: Annotated[str, typer.Option(help="Run id of the export (its mapping).")],
               tokens: Annotated[list[str], typer.Argument(help="Hash tokens of the anonymised log.")],
               json_out: JsonOpt = False) -> None:
    """Map hash tokens of an anonymised export back to the original text (needs the site key)."""
    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.schemas.names import check_path_token
    from nodewatch.tasks.syslog.anonymise import AnonKeyError, anon_key, reveal

    try:
        check_path_token(run, "run id")
    except ValueError as e:
        raise UserError(str(e)) from None
    s, cfg = _cfg()
    store = get_store()
    if not store.exists("syslog", "anon-map", f"{run}.bin"):
        raise UserError(f"no mapping syslog/anon-map/{run}.bin: give the run id printed by `nodewatch syslog anonymise`")
    try:
        got = reveal(anon_key(store, cfg.secret_env), store.fs.cat_file(store.path("syslog", "anon-map", f"{run}.bin")),
                     tokens)
    except AnonKeyError as e:
        raise UserError(str(e)) from None
    if json_out:
        _print_json(got)
        return
    for k, v in got.items():
        console.print(f"{safe(k)} = {safe(v) if v is not None else '(not in this mapping)'}")


@syslog_app.command("detect")
def detect_cmd(day: DayOpt, export: Annotated[bool, typer.Option("--export/--no-export",
               help="Also write the anonymised export.")] = False, json_out: JsonOpt = False) -> None:
    """Score a day: SG per node per window, two-means relative-density threshold per vicinity; outages."""
    from rich.table import Table

    from nodewatch.flows.cli import console
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.syslog.detect import analyse_day

    d = _day(day)
    _, cfg = _cfg()

    def go(store, run_id, rec):  # noqa: ANN001, ANN202
        r = analyse_day(store, d, run_id, cfg, export=export, after_finish=rec.after_finish)
        rec.add_output("syslog", {**r.counts, "export": r.export})
        return r

    run_id, r = _run("syslog_detect", {"day": day, "export": export}, go)
    shared = r.shared()
    if json_out:
        _print_json({"run_id": run_id, "counts": r.counts, "filtered": {str(k): v for k, v in r.filtered.items()},
                     **shared})
        return
    c = r.counts
    console.print(f"run {safe(run_id)}: {c['rows']:,} lines, {c['templates']} templates, {c['filtered_templates']} "
                  f"filtered ({c['filtered_lines']:,} lines), {c['abnormal_nodes']} abnormal nodes, {c['outages']} outages")
    if shared["abnormal"]:
        t = Table(title=f"abnormal nodes of {day} (vicinity {cfg.vicinity}, {cfg.window_min}-min SG)")
        for col in ("node", "score", "window end", "vicinity"):
            t.add_column(col)
        for n, v in sorted(shared["abnormal"].items(), key=lambda kv: -kv[1]["score"]):
            t.add_row(safe(n), f"{v['score']:.1f}", safe(v["window_end"]), safe(v["vicinity"]))
        console.print(t)
    for o in shared["outages"]:
        console.print(f"outage {safe(o['node'])} at {safe(o['outage'])} ({safe(o['kind'])})"
                      + (" regular failure" if o["regular_failure"] else ""))


def register(app: typer.Typer) -> None:
    """Add the ``syslog`` group."""
    app.add_typer(syslog_app, name="syslog")
