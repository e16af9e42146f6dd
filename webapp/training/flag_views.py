"""The reward-hacking flags' pages (issue 21): a run's flags (a fragment the run pages load, or a
page of its own), one flag with its samples, the one-click annotation queue, confirm/reject."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.training import flag_selectors, flag_services


def _ctx(**extra):
    return {"active_area": "training", **extra}


@requires(Need.READ)
def run_flags(request, pk: int):
    """A training run's flags; the run pages load it into their flags section (htmx)."""
    run = flag_selectors.training_run_get(id=pk)
    flags = list(flag_selectors.run_flags(run=run)[:200])
    context = _ctx(
        run=run,
        flags=flags,
        markers=flag_selectors.chart_markers(run=run, flags=flags),
        settings=flag_services.flag_config_help(),
    )
    template = "training/flags.html"
    if request.htmx:
        template += "#flag-list"
    return render(request, template, context)


@requires(Need.READ)
def flag_detail(request, pk: int):
    flag = flag_selectors.flag_get(id=pk)
    return render(
        request,
        "training/flag.html",
        _ctx(flag=flag, samples=flag_selectors.flag_samples(flag=flag)),
    )


@requires(Need.OPERATE)
@require_POST
def flag_queue(request, pk: int):
    """One click: an annotation queue of the flag's samples (or its existing one), opened."""
    flag = flag_selectors.flag_get(id=pk)
    try:
        queue = flag_services.flag_queue_create(flag=flag, user=request.user)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect("training:flag", pk=flag.pk)
    messages.success(request, f"Annotation queue {queue.name!r} holds the flag's samples.")
    return redirect("calibration:queue", pk=queue.pk)


@requires(Need.LABEL)
@require_POST
def flag_review(request, pk: int):
    """Confirm or reject the flag (kept with who and when)."""
    flag = flag_selectors.flag_get(id=pk)
    try:
        flag_services.flag_review(
            flag=flag,
            user=request.user,
            answer=request.POST.get("answer", ""),
            note=request.POST.get("note", ""),
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("training:flag", pk=flag.pk)


@requires(Need.OPERATE)
@require_POST
def run_flags_compute(request, pk: int):
    """Compute the run's flags again with the settings posted (defaults for the rest)."""
    run = flag_selectors.training_run_get(id=pk)
    values = {k: v for k, v in request.POST.items() if k in flag_services.FLAG_FIELDS and v != ""}
    try:
        results = flag_services.run_flags_compute(
            run=run, config=flag_services.flag_config(values=values)
        )
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        fired = sum(r.fired for r in results)
        messages.success(request, f"{fired} flag(s) fired over {len(results)} evaluations.")
    return redirect("training:run_flags", pk=run.pk)
