"""``steplab branch``: branch a stored trajectory at a step (docs/branching.md) — restore its
environment there, sample M continuations of a policy on the workers, print the step's value
estimate and pairs, and optionally write the pairs as DPO rows or PRM labels."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from django.http import Http404

from webapp.cli.output import follow
from webapp.common.errors import ApplicationError
from webapp.rollouts import branch_selectors, branch_services
from webapp.rollouts.selectors import policy_find


@click.command("branch")
@click.argument("trajectory", type=int)
@click.option("--step", "step", type=int, required=True, help="The step to branch at.")
@click.option("--policy", "policy_name", required=True, help="A policy's name or id.")
@click.option("-m", "--samples", default=4, show_default=True, help="Continuations (M), 1..32.")
@click.option("--seed", default=0, show_default=True)
@click.option("--max-steps", default=20, show_default=True, help="Actions per continuation.")
@click.option("--follow/--no-follow", "following", default=True, show_default=True)
@click.option("--dpo", "dpo_path", type=click.Path(dir_okay=False), help="Write DPO rows here.")
@click.option("--prm", "prm_path", type=click.Path(dir_okay=False), help="Write PRM labels here.")
def branch(
    trajectory, step, policy_name, samples, seed, max_steps, following, dpo_path, prm_path
) -> None:
    """Branch a trajectory at a step: restore its environment, sample M continuations.

    TRAJECTORY is branched at --step with --policy; imported logs (no environment here) are
    refused with the reason."""
    policy = policy_find(name=policy_name)
    if policy is None:
        raise click.ClickException(f"No policy {policy_name!r}; see `steplab policies list`.")
    try:
        context = branch_selectors.branch_form_context(trajectory_id=trajectory, step=step)
        branch_set = branch_services.branch_launch(
            trajectory=context["row"], step=step, policy=policy, samples=samples, seed=seed,
            max_steps=max_steps,
        )  # fmt: skip
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    except Http404:
        raise click.ClickException(f"No trajectory {trajectory}.") from None
    click.echo(f"branch set {branch_set.pk}: {samples} continuations, job {branch_set.job_id}")
    if not following:
        return
    job = follow(branch_set.job_id)
    branch_set = branch_selectors.branch_set_get(id=branch_set.pk)
    if branch_set.value is not None:
        click.echo(
            f"value of step {step}: {branch_set.value:.3f} "
            f"[{branch_set.value_low:.3f}, {branch_set.value_high:.3f}] "
            f"({branch_set.successes}/{branch_set.known} succeeded); "
            f"{len(branch_set.pairs)} pair(s)"
        )
    for kind, path in (("dpo", dpo_path), ("prm", prm_path)):
        if path:
            rows, _ = branch_selectors.branch_export_rows(branch_set=branch_set, kind=kind)
            text = "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows)
            Path(path).write_text(text)
            click.echo(f"{len(rows)} {kind} row(s) written to {path}")
    sys.exit(0 if job.status == "succeeded" else 1)
