"""Enforce the permission every view declares (see permissions.py).

Runs after Django's LoginRequiredMiddleware, so anonymous visitors have already been sent to the
login page. A view that declares nothing is refused: forgetting a declaration must never open a
page to everyone.
"""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied

from webapp.accounts.permissions import LOWEST_ROLE, Need, declared_need, user_can

logger = logging.getLogger(__name__)


class RolePermissionMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        need = declared_need(view_func)
        if need is None:
            logger.error("view %s declares no permission; refusing %s", view_func, request.path)
            raise PermissionDenied(
                "This page declares no permission, so it is closed. "
                "(Developers: decorate the view with @requires(Need...).)"
            )
        if need is Need.PUBLIC or user_can(request.user, need):
            return None
        role = LOWEST_ROLE[need]
        raise PermissionDenied(f"This needs the {role.label.lower()} role or higher.")
