"""Bulk actions on a selection of trajectories: the list page's hook for other apps.

An app registers an action in its ``AppConfig.ready()``::

    bulk.register(BulkAction("score", "Score selected", "rewards:score_selection", Need.OPERATE))

The list page shows a button per action the user may run; pressing it POSTs the selected ids as
``selected`` (and ``next``, the list URL) to the action's view. Tagging is built in; exporting
the selection as canonical JSONL is registered here; scoring and adding to an annotation queue
are registered by the rewards and calibration apps.
"""

from __future__ import annotations

from dataclasses import dataclass

from webapp.accounts.permissions import Need, user_can


@dataclass(frozen=True)
class BulkAction:
    name: str
    label: str
    url_name: str  # a view that accepts POST with ``selected`` ids
    need: Need = Need.OPERATE
    method: str = "post"
    order: int = 100


_ACTIONS: dict[str, BulkAction] = {}


def register(action: BulkAction) -> BulkAction:
    existing = _ACTIONS.get(action.name)
    if existing is not None and existing != action:
        raise ValueError(f"bulk action {action.name!r} is registered twice with different settings")
    _ACTIONS[action.name] = action
    return action


def actions_for(user) -> list[BulkAction]:
    return sorted(
        (a for a in _ACTIONS.values() if user_can(user, a.need)), key=lambda a: (a.order, a.label)
    )


def selected_ids(request, *, limit: int = 10_000) -> list[int]:
    return [int(i) for i in request.POST.getlist("selected") if i.isdigit()][:limit]
