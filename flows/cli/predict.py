"""``nodewatch predict train|report|stream``: failure prediction with usability at scale (see docs/predict.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from nodewatch.flows.cli._json import JsonOpt
from nodewatch.flows.cli._json import print_json as _print_json

predict_app = typer.Typer(
    help="Failure prediction (Frank ch. 4): lead-time ensemble, voting, UC usability, online warnings.", no_args_is_help=True
)


def _settings_section() -> Any:
    from nodewatch.flows.cli import UserError, settings
    from nodewatch.tasks.core.settings import SettingsError, section
    from nodewatch.tasks.predict.train import PredictSettings

    try:
        return section(settings(), "predict", PredictSettings)
    except SettingsError as e:
        raise UserError(str(e)) from None


@predict_app.command("train")
def train(
    sim_nodes: Annotated[int, typer.Option(help="Nodes of the simulated cluster.", min=8, max=20000)] = 1000,
    days: Annotated[int, typer.Option(help="Simulated days.", min=3, max=400)] = 60,
    node_days: Annotated[int, typer.Option(help="Random node-days rendered for ok sequences.", min=5, max=5000)] = 200,
    precursor_share: Annotated[float, typer.Option(help="Share of failures with a precursor.", min=0.0, max=1.0)] = 0.7,
    precursor_median_s: Annotated[
        float, typer.Option(help="Median lead of a precursor ramp before its failure, seconds.", min=60.0, max=86400.0)
    ] = 3600.0,
    precursor_sigma: Annotated[float, typer.Option(help="Log-normal sigma of the precursor lead.", min=0.0, max=5.0)] = 1.0,
    node_mtbf_days: Annotated[float, typer.Option(help="Mean up-time of a healthy simulated node.", min=1.0, max=1e5)] = 200.0,
    splits: Annotated[int, typer.Option(help="Monte-Carlo cross-validation rounds.", min=1, max=50)] = 3,
    epochs: Annotated[int, typer.Option(help="Training epochs (full batch, 10:1 ok:failure).", min=1, max=5000)] = 300,
    stride: Annotated[int, typer.Option(help="Use every n-th step of an ok node-day.", min=1, max=240)] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the simulation and the splits.", min=0)] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Train the six lead-time networks + LSTM voter on the simulator (15-s telemetry), cross-validate, register."""
    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.tasks.core.runs import new_run_id
    from nodewatch.tasks.predict.train import fps_markdown, train_predictor
    from nodewatch.tasks.simulate.config import SimConfig

    try:
        cfg = SimConfig(n_nodes=sim_nodes, step_s=15, seed=seed, precursor_share=precursor_share, node_mtbf_days=node_mtbf_days,
                        precursor_median_s=precursor_median_s, precursor_sigma=precursor_sigma)
    except ValueError as e:
        raise UserError(f"simulator settings: {e}") from None
    run_id = new_run_id("predict_train", {"sim_nodes": sim_nodes, "days": days, "seed": seed})
    store = get_store()
    with console.status("simulating telemetry, training and cross-validating ...") if not as_json else _null():
        try:
            params = train_predictor(store, run_id, cfg, days, node_days, splits, epochs, stride, seed)
        except ValueError as e:
            raise UserError(str(e)) from None
    if as_json:
        _print_json(params)
        return
    console.print(f"predictor {params['run_id']} registered (models/predict/CURRENT); P(E) = {params['p_e']:.3g}")
    console.print(fps_markdown(params["fps"]), markup=False, highlight=False)


def _null() -> Any:
    import contextlib

    return contextlib.nullcontext()


@predict_app.command("report")
def report(
    run: Annotated[str | None, typer.Option(help="Predictor run id (default: CURRENT).")] = None,
    nodes: Annotated[int | None, typer.Option(help="Site node count (default: [predict] site_nodes).", min=1, max=10**7)] = None,
    as_json: JsonOpt = False,
) -> None:
    """FPS table (Table 4.1 c/d layout) and usability: UC of each scheme at the site and the largest machine with UC < 5 %."""
    from nodewatch.flows.cli import UserError, console, get_store
    from nodewatch.schemas.names import UnsafeNameError, check_path_token
    from nodewatch.tasks.predict import registry
    from nodewatch.tasks.predict.report import usability, usability_markdown
    from nodewatch.tasks.predict.train import fps_markdown

    sec = _settings_section()
    site = nodes or sec.site_nodes
    store = get_store()
    try:
        rid = check_path_token(run, "run id") if run else store.current(registry.AREA)
    except UnsafeNameError as e:
        raise UserError(str(e)) from None
    if rid is None:
        raise UserError("no trained failure predictor in the store: run `nodewatch predict train` first")
    try:
        params = store.read_json(registry.AREA, rid, "params.json")
    except FileNotFoundError:
        raise UserError(f"no predictor run {rid!r} in the store") from None
    except ValueError:
        raise UserError(f"predictor run {rid!r}: params.json is not valid JSON") from None
    use = usability(params, site, sec.uc_limit)
    if as_json:
        _print_json({"run_id": rid, "site_nodes": site, "fps": params.get("fps", []), "usability": use.to_dict(orient="records")})
        return
    console.print(f"predictor {rid}: FPS table (cross-validated, {params.get('cv', {}).get('splits', '?')} rounds)")
    console.print(fps_markdown(params.get("fps", [])), markup=False, highlight=False)
    console.print(f"usability at {site:,} nodes (UC, eq. 4.4; criterion UC < {sec.uc_limit:.0%}):")
    console.print(usability_markdown(use, site, sec.uc_limit), markup=False, highlight=False)


@predict_app.command("stream")
def stream(
    path: Annotated[str, typer.Argument(help="An LDMS store_csv file that is being appended to.")],
    follow: Annotated[bool, typer.Option("--follow/--no-follow", help="Keep reading as the file grows (Ctrl-C stops).")] = True,
    poll: Annotated[float, typer.Option(help="Seconds between reads while following.", min=0.05, max=60.0)] = 1.0,
    max_seconds: Annotated[float | None, typer.Option(help="Stop following after this many seconds.", min=0.0)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per warning (JSON lines) on stdout.")] = False,
) -> None:
    """Follow a growing LDMS CSV and print a warning (node, time, lead time, confidence) when a failure is predicted."""
    import json
    import sys

    from nodewatch.flows.cli import UserError, get_store
    from nodewatch.flows.cli._safe import safe
    from nodewatch.tasks.predict import registry
    from nodewatch.tasks.predict.stream import LdmsFollower, StreamError

    try:
        pred = registry.load(get_store())
    except registry.PredictorFileError as e:
        raise UserError(str(e)) from None
    try:
        follower = LdmsFollower(path, pred)
        for w in follower.run(follow=follow, poll_s=poll, max_seconds=max_seconds):
            if as_json:
                sys.stdout.write(json.dumps(w) + "\n")
            else:
                typer.echo(
                    f"WARNING {safe(w['node'])}: failure predicted in {w['lead_min']:g} min "
                    f"(at {safe(w['at'])}, confidence {w['confidence']:.3f})"
                )
            sys.stdout.flush()
    except StreamError as e:
        raise UserError(str(e)) from None
    except KeyboardInterrupt:
        return


def register(app: typer.Typer) -> None:
    """Add the ``predict`` group."""
    app.add_typer(predict_app, name="predict")
