"""What each view needs, declared on the view and enforced by RolePermissionMiddleware.

The table (../shared/ARCHITECTURE.md, "Who may do what"):

=========  =======================================================================  ============
need       what it covers                                                           lowest role
=========  =======================================================================  ============
READ       read every page, download exports                                        viewer
LABEL      label steps, trajectories and pairs                                      annotator
OPERATE    import; launch and cancel jobs; create queues; build datasets;           operator
           register checkpoints as policies; apply a calibration
ADMINISTER edit domain profiles, rubrics and policies; manage users                 admin
PUBLIC     the login page (no account needed)                                       anyone
=========  =======================================================================  ============
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from webapp.accounts.models import ROLE_RANK, Role


class Need(enum.StrEnum):
    PUBLIC = "public"
    READ = "read"
    LABEL = "label"
    OPERATE = "operate"
    ADMINISTER = "administer"


LOWEST_ROLE: dict[Need, Role] = {
    Need.READ: Role.VIEWER,
    Need.LABEL: Role.ANNOTATOR,
    Need.OPERATE: Role.OPERATOR,
    Need.ADMINISTER: Role.ADMIN,
}

PERMISSION_ATTR = "steplab_permission"


def user_can(user: Any, need: Need | str) -> bool:
    need = Need(need)
    if need is Need.PUBLIC:
        return True
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return ROLE_RANK[Role(user.effective_role)] >= ROLE_RANK[LOWEST_ROLE[need]]


def requires(need: Need) -> Callable:
    """Declare what a view needs: ``@requires(Need.OPERATE)``. Works on the function that
    ``SomeView.as_view()`` returns, too: ``requires(Need.READ)(SomeView.as_view())``."""

    def decorate(view: Callable) -> Callable:
        setattr(view, PERMISSION_ATTR, Need(need))
        if need is Need.PUBLIC:
            # Django's LoginRequiredMiddleware reads this attribute.
            view.login_required = False
        return view

    return decorate


def declared_need(view: Callable) -> Need | None:
    return getattr(view, PERMISSION_ATTR, None)
