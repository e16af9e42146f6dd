"""``steplab gdi``: GDI ranking (docs/gdi.md) — recompute every trajectory's GDI in batches
(after changing ``STEPLAB_GDI_WEIGHTS``, or to bring recency up to date), or show one
trajectory's components. Django is set up before this module is imported."""

from __future__ import annotations

import json

import click

from webapp.common.errors import ApplicationError
from webapp.trajectories.gdi import gdi_recompute, gdi_recompute_all, gdi_show, gdi_weights


@click.group()
def gdi() -> None:
    """GDI ranking of trajectories: recompute it for the whole database, or show one's components."""


@gdi.command("recompute")
@click.option("--weights", default=None, help="e.g. reward=0.5,reuse=0.2 (others keep their setting); this run only.")  # fmt: skip
@click.option("--batch", default=1000, show_default=True, type=click.IntRange(1, 50_000), help="Trajectories per batch.")  # fmt: skip
@click.option("--id", "ids", multiple=True, type=int, help="Only these trajectories (repeatable).")  # fmt: skip
def recompute(weights: str | None, batch: int, ids: tuple[int, ...]) -> None:
    """Recompute and store the GDI of every trajectory (or of --id ones), in batches."""
    try:
        chosen = gdi_weights(text=weights) if weights is not None else None
    except ApplicationError as exc:
        raise click.ClickException(exc.message) from None
    if ids:
        done = gdi_recompute(ids=ids, weights=chosen)
    else:
        done = gdi_recompute_all(
            weights=chosen,
            batch=batch,
            on_batch=lambda n: click.echo(f"  {n} trajectories…", err=True),
        )
    used = chosen or gdi_weights()
    click.echo(
        f"Recomputed the GDI of {done} trajectories with weights "
        + ", ".join(f"{name}={value:.3f}" for name, value in used.items())
    )


@gdi.command("show")
@click.argument("trajectory_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(trajectory_id: int, as_json: bool) -> None:
    """Show a trajectory's GDI: each component, its weight and what it came from."""
    found = gdi_show(trajectory_id=trajectory_id)
    if found is None:
        raise click.ClickException(
            f"Trajectory {trajectory_id} has no GDI yet (no such trajectory, or never computed): "
            f"run `steplab gdi recompute --id {trajectory_id}`."
        )
    if as_json:
        click.echo(json.dumps(found, default=str, indent=2))
        return
    click.echo(f"Trajectory {trajectory_id}: GDI {found['total']:.4f} (as of {found['computed_at']:%Y-%m-%d %H:%M} UTC)")  # fmt: skip
    sources = {
        "reward": found["reward_source"] or "—",
        "reuse": f"{found['builds']} dataset build(s)",
        "feedback": f"{found['feedback_signals']} settled human answer(s)"
        if found["feedback_signals"]
        else "none yet (neutral)",
        "recency": f"from {found['recency_from']:%Y-%m-%d %H:%M}",
    }
    for name, value in found["components"].items():
        click.echo(f"  {name:<9} {value:.4f}  × {found['weights'][name]:.3f}   {sources[name]}")
