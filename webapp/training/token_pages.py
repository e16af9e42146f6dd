"""The token view of a training sample (issue 21): one completion of a decoupled RL run's
group, as the trainer consumed it — its stored ids, the loss mask (labels), the step of each
token and the behaviour log-prob recorded at sampling — with the decoded text. Token text comes
from a model: the templates escape it (autoescape, never marked safe)."""

from __future__ import annotations

from typing import Any

from django.shortcuts import render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.training import rl_pages
from webapp.training.token_samples import sample_tokens


@requires(Need.READ)
def group_sample_tokens(request, pk: int, group: int, index: int):
    """``?start=``: the first token shown."""
    run = rl_pages.rl_run_page_get(id=pk)
    raw = request.GET.get("start") or ""
    start = int(raw) if raw.isdigit() else 0
    context: dict[str, Any] = {"active_area": "training", "run": run, "index": index}
    try:
        context |= sample_tokens(run=run, group_id=group, index=index, start=start)
    except ApplicationError as exc:
        context["error"] = exc.message
    context["page_url"] = f"{request.path}?start="
    return render(request, "training/sample_tokens.html", context)
