"""``steplab flags``: a training run's reward-hacking flags (issue 21) — the stored ones, or
computed again (``--compute``, with ``--set key=value`` for any setting); a pipeline's
(``--pipeline``: its training runs with the held-out success around them, and its evaluation
rounds); or every pipeline whose name starts with a prefix (``--pipelines``: how often each flag
fired, e.g. over the learning ablation's arms). Django is set up before this module is
imported."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

import click
from django.http import Http404

from trainer_core.evaluation.flags import FLAG_KINDS, FlagResult, config_help, fired_counts
from webapp.common.errors import ApplicationError
from webapp.evaluation.flags import pipeline_flags_compute, pipelines_named
from webapp.training import flag_selectors, flag_services


def _config(pairs: Iterable[str]):
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.ClickException(f"--set takes key=value (got {pair!r}).")
        values[key.strip()] = value.strip()
    try:
        return flag_services.flag_config(values=values)
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None


def _result_line(r: FlagResult) -> str:
    value = "—" if r.value is None else f"{r.value:.3f}"
    p = "" if r.p_value is None else f" p {r.p_value:.3g}"
    what = r.kind + (f" {r.metric}" if r.metric else "")
    mark = "FIRED" if r.fired else "quiet"
    return (
        f"  {mark:<5}  {what:<34} steps {r.start}-{r.end}  {r.statistic} {value}{p} "
        f"(threshold {r.threshold:g}, window {r.window})  {len(r.sample_ids)} samples"
        + (f"  {r.message}" if r.message else "")
    )


def _print_results(title: str, results: list[FlagResult], show_all: bool) -> None:
    click.echo(title)
    shown = [r for r in results if show_all or r.fired]
    for r in shown:
        click.echo(_result_line(r))
    if not shown:
        click.echo("  no flag fired")
    counts = fired_counts(results)
    click.echo(
        "  fired/evaluated: "
        + ", ".join(f"{kind} {fired}/{total}" for kind, (fired, total) in counts.items())
    )


def _print_stored(run) -> None:
    flags = list(flag_selectors.run_flags(run=run)[:500])
    click.echo(f"training run {run.pk} ({run}): {len(flags)} stored flag(s)")
    for f in flags:
        value = "—" if f.value is None else f"{f.value:.3f}"
        review = f.get_review_display() if f.review else "not reviewed"
        queue = f" queue {f.queue_id}" if f.queue_id else ""
        click.echo(
            f"  #{f.pk:<5} {f.kind + (' ' + f.metric if f.metric else ''):<34} steps "
            f"{f.start_step}-{f.end_step}  {f.statistic} {value} (threshold {f.threshold:g}, "
            f"window {f.window})  {len(f.trajectory_ids)} samples{queue}  [{review}]  {f.message}"
        )


def _summary(results_by_pipeline: dict[str, dict[str, list[FlagResult]]]) -> None:
    click.echo("\nhow often each flag fired (windows fired / windows evaluated):")
    header = f"  {'pipeline':<40} " + " ".join(f"{k:>20}" for k in FLAG_KINDS)
    click.echo(header)
    total = {k: [0, 0] for k in FLAG_KINDS}
    for name, parts in results_by_pipeline.items():
        for part, results in parts.items():
            counts = fired_counts(results)
            for k, (f, t) in counts.items():
                total[k][0] += f
                total[k][1] += t
            cells = " ".join(f"{f'{f}/{t}':>20}" for f, t in counts.values())
            click.echo(f"  {(name + ' ' + part)[:40]:<40} {cells}")
    cells = " ".join(f"{f'{f}/{t}':>20}" for f, t in total.values())
    click.echo(f"  {'all':<40} {cells}")


@click.command("flags")
@click.argument("run_id", type=int, required=False)
@click.option("--compute", is_flag=True, help="Compute the flags again (and store those that fire).")  # fmt: skip
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="A flag setting (with --compute); see --settings.")  # fmt: skip
@click.option("--all", "show_all", is_flag=True, help="With --compute: print quiet evaluations too.")  # fmt: skip
@click.option("--pipeline", "pipeline_id", type=int, default=None, help="A pipeline's flags (computed): its training runs and evaluation rounds.")  # fmt: skip
@click.option("--pipelines", "prefix", default="", help="Every pipeline whose name starts with this (computed), with how often each flag fired.")  # fmt: skip
@click.option("--settings", "list_settings", is_flag=True, help="Print every setting with its default and help.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="With --compute: every evaluation as JSON.")  # fmt: skip
def flags(run_id, compute, settings, show_all, pipeline_id, prefix, list_settings, as_json) -> None:
    """A training run's reward-hacking flags (stored; --compute to compute them again)."""
    if list_settings:
        for item in config_help():
            click.echo(f"{item['name']:<18} {item['default']!s:<6} {item['help']}")
        return
    config = _config(settings)
    if prefix or pipeline_id is not None:
        pipelines = pipelines_named(prefix=prefix) if prefix else pipelines_named(id=pipeline_id)
        if not pipelines:
            raise click.ClickException("No pipeline matches.")
        out = {}
        for pipeline in pipelines:
            out[pipeline.name] = parts = pipeline_flags_compute(pipeline=pipeline, config=config)
            for part, results in parts.items():
                _print_results(f"{pipeline.name}: {part}", results, show_all)
        _summary(out)
        return
    if run_id is None:
        raise click.ClickException("Name a training run (or --pipeline ID, --pipelines PREFIX).")
    try:
        run = flag_selectors.training_run_get(id=run_id)
    except Http404:
        raise click.ClickException(f"No training run {run_id}.") from None
    if compute or settings:
        results = flag_services.run_flags_compute(run=run, config=config)
        if as_json:
            click.echo(json.dumps([r.to_dict() for r in results], indent=1, default=str))
            return
        _print_results(f"training run {run.pk} ({run}):", results, show_all)
        sys.exit(0)
    _print_stored(run)
