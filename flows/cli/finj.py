"""``nodewatch finj generate|run|train``: fault injection campaigns and fault classifiers (docs/finj.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nodewatch.flows.cli._json import JsonOpt
from nodewatch.flows.cli._json import print_json as _print_json

finj_app = typer.Typer(
    help="Fault injection (FINJ) on this node and fault classification (Netti et al.).",
    no_args_is_help=True,
)


@finj_app.command("generate")
def generate_cmd(
    out: Annotated[Path, typer.Option(help="Workload file to write (must not exist).")],
    span: Annotated[float, typer.Option(help="Length of the workload in seconds.")] = 7500.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    fault_gap: Annotated[float, typer.Option(help="Mean seconds between fault starts (exponentiated Weibull).")] = 330.0,
    fault_duration: Annotated[
        float, typer.Option(help="Mean fault duration in seconds (Johnson SU; the paper's are about 5 min).")
    ] = 240.0,
    blocks: Annotated[
        bool,
        typer.Option(
            help="Two blocks like the paper's Table 1: CPU/memory faults with CPU "
            "applications, then disk faults with the file I/O application."
        ),
    ] = False,
    cores: Annotated[int, typer.Option(help="Cores of the target node (default: this machine's).")] = 0,
    pin: Annotated[
        str | None,
        typer.Option(help="Pin the whole workload to these cores (e.g. '1': a 1-core target node on core 1)."),
    ] = None,
    stand_in: Annotated[
        str,
        typer.Option(
            help="Comma list of faults to keep with their stand-in where this kernel lacks the paper's mechanism "
            "(pagefail: cgroup memory limit instead of fail_page_alloc); otherwise they are left out as unavailable."
        ),
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """Write a seeded FINJ workload (exponentiated-Weibull fault gaps, Johnson SU durations, applications 75% of the time)."""
    import math
    import os

    from nodewatch.flows.cli import UserError
    from nodewatch.tasks.finj.availability import unavailable
    from nodewatch.tasks.finj.catalog import FAULTS
    from nodewatch.tasks.finj.workload import GeneratorSpec, concat, format_workload, generate, parse_cores

    for name, v in (("--span", span), ("--fault-gap", fault_gap), ("--fault-duration", fault_duration)):
        if not (math.isfinite(v) and v > 0):
            raise UserError(f"{name} must be > 0, got {v}")
    if span > 30 * 86400:
        raise UserError(f"--span {span} is longer than 30 days")
    if fault_duration < 20:
        raise UserError("--fault-duration must be >= 20 s (a 60-s window needs a fault that lasts)")
    n = cores or os.cpu_count() or 1
    if not 1 <= n <= 4096:
        raise UserError(f"--cores must be in 1..4096, got {cores}")
    core_ids = None
    if pin is not None:
        try:
            core_ids = parse_cores(pin, n)
        except ValueError as e:
            raise UserError(f"--pin: {e}") from None
    if out.exists() or out.is_symlink():
        raise UserError(f"{out} exists: choose a new file")
    stand_ins = _stand_ins(stand_in)
    missing = unavailable(stand_ins)
    common = dict(
        core_ids=core_ids,
        fault_gap_mean=fault_gap,
        fault_dur_mean=fault_duration,
        fault_dur_min=min(120.0, fault_duration / 2),
        fault_dur_max=2 * fault_duration,
        min_fault_gap=min(60.0, fault_gap / 2),
    )
    if blocks:
        cpu = GeneratorSpec(
            span=span * 0.68,
            faults=tuple(f for f in ("cpufreq", "ddot", "dial", "leak", "memeater", "pagefail") if f not in missing),
            apps=("dgemm", "linsolve", "stream"),
            **common,
        )
        hdd = GeneratorSpec(span=span * 0.31, faults=("copy", "ioerr"), apps=("fileio",), busy=0.85, **common)
        tasks = concat([generate(cpu, seed, n), generate(hdd, seed + 1, n)])
    else:
        tasks = generate(GeneratorSpec(span=span, faults=tuple(sorted(FAULTS - set(missing))), **common), seed, n)
    try:
        with open(out, "x") as fh:
            fh.write(format_workload(tasks))
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror}") from None
    faults = [t for t in tasks if t.is_fault]
    summary = {
        "out": str(out),
        "tasks": len(tasks),
        "faults": len(faults),
        "seed": seed,
        "seconds": max((t.timestamp + t.duration for t in tasks), default=0),
        "unavailable": missing,
        "stand_ins": list(stand_ins),
    }
    if as_json:
        _print_json(summary)
    else:
        typer.echo(f"wrote {out}: {len(tasks)} tasks ({len(faults)} faults) over {summary['seconds']:.0f} s, seed {seed}")
        for name, why in missing.items():
            typer.echo(f"  {name} left out, unavailable on this machine: {why}")


def _stand_ins(text: str) -> tuple[str, ...]:
    """``--stand-in`` parsed and checked (one-line error naming the bad name)."""
    from nodewatch.flows.cli import UserError
    from nodewatch.tasks.finj.availability import STAND_INS

    names = tuple(sorted({x.strip() for x in text.split(",") if x.strip()}))
    bad = [x for x in names if x not in STAND_INS]
    if bad:
        raise UserError(f"--stand-in: {', '.join(bad)} has no opt-in stand-in; choose from {', '.join(STAND_INS)}")
    return names


@finj_app.command("run")
def run_cmd(
    workload: Annotated[Path, typer.Argument(help="FINJ workload file (timestamp; duration; seqNum; isFault; cores; args).")],
    out: Annotated[Path, typer.Option(help="Campaign directory to create (must be new or empty).")],
    node: Annotated[str | None, typer.Option(help="Node name written as ProducerName (default: this host).")] = None,
    sample: Annotated[bool, typer.Option(help="Run the 1-s sampler during the campaign.")] = True,
    mlock: Annotated[
        bool, typer.Option(help="Lock the sampler's memory (root, ~270 MB): it keeps sampling on a thrashing machine.")
    ] = True,
    cpu_shares: Annotated[
        int, typer.Option(help="CPU weight of the campaign's cgroup (cpu.shares, 0 = default 1024); high: it owns its cores.")
    ] = 0,
    stand_in: Annotated[
        str,
        typer.Option(
            help="Comma list of faults to run as their stand-in where this kernel lacks the paper's mechanism "
            "(pagefail: cgroup memory limit); otherwise they are reported unavailable and not run."
        ),
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """Run a fault-injection campaign on this node with 1-s sampling (Ctrl-C stops it and cleans up)."""
    from nodewatch.flows.cli import UserError, settings
    from nodewatch.schemas.names import check_node_name
    from nodewatch.tasks.finj.config import finj_settings
    from nodewatch.tasks.finj.engine import EngineConfig, run_campaign
    from nodewatch.tasks.finj.workload import WorkloadError, read_workload

    fs = finj_settings(settings())
    if not 0 <= cpu_shares <= 262144:
        raise UserError(f"--cpu-shares must be in 0..262144, got {cpu_shares}")
    try:
        tasks = read_workload(workload)
    except WorkloadError as e:
        raise UserError(str(e)) from None
    stand_ins = _stand_ins(stand_in)
    if node is not None:
        check_node_name(node)
    if out.is_symlink() or (out.exists() and (not out.is_dir() or any(out.iterdir()))):
        raise UserError(f"{out} exists and is not an empty directory")
    cfg = EngineConfig(
        out=out,
        node=node or "",
        max_task_s=fs.max_task_s,
        mem_cap=fs.mem_cap_mib * 2**20,
        disk_cap=fs.disk_cap_mib * 2**20,
        sample=sample,
        mlock=mlock,
        cpu_shares=cpu_shares,
        stand_ins=stand_ins,
    )
    if not as_json:
        from nodewatch.flows.cli import err_console
        from nodewatch.tasks.finj.availability import unavailable

        named = {t.program for t in tasks if t.is_fault}
        for prog_name, why in unavailable(stand_ins).items():
            if prog_name in named:
                err_console.print(f"{prog_name} unavailable on this machine, its tasks will not run: {why}", markup=False)
    if as_json:
        summary = run_campaign(tasks, cfg)
        _print_json(summary)
    else:
        from rich.progress import Progress

        from nodewatch.flows.cli import err_console

        with Progress(console=err_console, transient=True) as prog:
            bar = prog.add_task("campaign", total=len(tasks))
            summary = run_campaign(tasks, cfg, progress=lambda done, total: prog.update(bar, completed=done))
        c = summary["counts"]
        typer.echo(
            f"campaign {summary['run_id']} in {out}: {summary['seconds']:.0f} s, {c['started']} tasks started, "
            f"{c['timeout']} hit their limit, {c['failed']} failed, {c['unavailable']} unavailable"
            + (" (interrupted)" if summary["interrupted"] else "")
        )
        for prog_name, why in summary["unavailable"].items():
            typer.echo(f"  {prog_name} unavailable: {why}")
    if summary["interrupted"]:
        raise typer.Exit(130)


@finj_app.command("train")
def train_cmd(
    campaigns: Annotated[list[Path], typer.Argument(help="Campaign directories written by 'nodewatch finj run'.")],
    models: Annotated[str, typer.Option(help="Comma list of classifiers to evaluate: rf,dt,svc,nn.")] = "rf,dt,svc,nn",
    seed: Annotated[int, typer.Option(help="Random seed (core choice, folds, models).")] = 0,
    source: Annotated[
        str,
        typer.Option(
            help="raw: the sampler's raw.csv (all /proc fields, per core); staged: the "
            "campaign's telemetry as staged by 'nodewatch ingest telemetry' (for the nightly step)."
        ),
    ] = "raw",
    levels: Annotated[
        str,
        typer.Option(
            help="all: gauges as levels (the paper's features); derivative: node-wide memory/load gauges "
            "enter as changes per second (robust to other users of a shared machine)."
        ),
    ] = "all",
    view: Annotated[
        str,
        typer.Option(
            help="campaign (the target node as the campaign sees it): CPU metrics cover only the campaign's cores "
            "(summary.json) with other tenants' niced CPU time as idle, and memory/paging are the target node's own, "
            "summed from the run's cgroups (apps + faults + sys) instead of the machine's meminfo/vmstat; "
            "node: the whole machine's /proc as sampled (the paper's view)."
        ),
    ] = "campaign",
    as_json: JsonOpt = False,
) -> None:
    """Cross-validate RF/DT/SVC/NN on campaign windows, print F-score tables, store the RF in models/finj/."""
    from nodewatch.flows.cli import UserError, err_console, get_store, settings
    from nodewatch.models.finj.classify import MODELS
    from nodewatch.tasks.finj.dataset import CampaignError
    from nodewatch.tasks.finj.train import train

    settings()
    names = [m.strip() for m in models.split(",") if m.strip()]
    bad = [m for m in names if m not in MODELS]
    if bad or not names:
        raise UserError(f"--models: unknown {', '.join(bad) or '(none)'}; choose from {', '.join(MODELS)}")
    if source not in ("raw", "staged"):
        raise UserError(f"--source must be raw or staged, got {source!r}")
    if levels not in ("all", "derivative"):
        raise UserError(f"--levels must be all or derivative, got {levels!r}")
    if view not in ("campaign", "node"):
        raise UserError(f"--view must be campaign or node, got {view!r}")
    for c in campaigns:
        if not c.is_dir() or c.is_symlink():
            raise UserError(f"{c}: not a campaign directory")
    try:
        res = train(
            campaigns,
            get_store(),
            names,
            seed,
            progress=None if as_json else lambda s: err_console.print(f"cv: {s}"),
            source=source,
            levels=levels,
            view=view,
        )
    except CampaignError as e:
        raise UserError(str(e)) from None
    if as_json:
        res.pop("report")
        _print_json(res)
    else:
        from nodewatch.tasks.core.escape import strip_control

        typer.echo(strip_control(res["report"], multiline=True))
        typer.echo(f"model {res['run_id']} stored in {res['path']}")


@finj_app.command("signatures")
def signatures_cmd(
    campaign: Annotated[Path, typer.Argument(help="A finished campaign whose ldms/<node>.csv was ingested into the store.")],
    out: Annotated[Path | None, typer.Option(help="JSON file to write (default: the simulator's fault_signatures.json).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure fault-class signatures on a campaign's staged telemetry for the simulator."""
    import json

    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.tasks.finj.dataset import CampaignError
    from nodewatch.tasks.finj.signatures import measure
    from nodewatch.tasks.finj.staged import campaign_span, raw_from_staged
    from nodewatch.tasks.simulate.fault_classes import SIGNATURES_FILE

    if not campaign.is_dir() or campaign.is_symlink():
        raise UserError(f"{campaign}: not a campaign directory")
    try:
        node, start, end, events = campaign_span(campaign)
        raw = raw_from_staged(get_store(), node, start, end, events)
    except CampaignError as e:
        raise UserError(str(e)) from None
    sig = measure(raw, f"{campaign.name} (node {node}, {end - start:.0f} s)")
    target = out or SIGNATURES_FILE
    target.write_text(json.dumps(sig, indent=1, sort_keys=True) + "\n")
    if as_json:
        _print_json(sig)
    else:
        typer.echo(f"wrote {target}: {len(sig['classes'])} fault classes from {sig['seconds']} s of staged telemetry")


def register(app: typer.Typer) -> None:
    """Add the ``finj`` group."""
    app.add_typer(finj_app, name="finj")
