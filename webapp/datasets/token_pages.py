"""The token view of a dataset row (issue 21): the exact tokens a trainer encodes from it,
coloured by loss mask and by step, with the rendered chat template and the row's drift check.
Token text comes from models and imports: the templates escape it (autoescape, never marked safe)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.shortcuts import render

from webapp.accounts.permissions import Need, requires
from webapp.common.errors import ApplicationError
from webapp.datasets import selectors, token_check


def _int(value: str | None, default: int | None) -> int | None:
    return int(value) if value and value.isdigit() else default


@requires(Need.READ)
def row_tokens(request, pk: int, index: int):
    """``?split=`` (train), ``?policy=`` or ``?model=`` (whose tokenizer: a policy's, a model
    directory's), ``?start=`` (the first token shown)."""
    snapshot = selectors.snapshot_get(id=pk)
    split = request.GET.get("split") or "train"
    context = {
        "active_area": "datasets",
        "snapshot": snapshot,
        "index": index,
        "split": split,
        "start": _int(request.GET.get("start"), 0),
    }
    try:
        context |= token_check.row_tokens(
            snapshot=snapshot,
            index=index,
            split=split,
            policy_id=_int(request.GET.get("policy"), None),
            model_dir=request.GET.get("model") or "",
            start=context["start"],
        )
    except ApplicationError as exc:
        context["error"] = exc.message
    policy = context.get("policy")
    query = urlencode(
        {
            "split": split,
            "policy": policy.pk if policy else "",
            "model": request.GET.get("model", ""),
        }
    )
    context["row_query"] = query  # the next and previous rows with the same tokenizer
    context["page_url"] = f"{request.path}?{query}&start="
    return render(request, "datasets/row_tokens.html", context)
