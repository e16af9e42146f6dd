from __future__ import annotations

from webapp.accounts.permissions import Need, user_can
from webapp.common.navigation import AREAS


def navigation(request):
    user = getattr(request, "user", None)
    return {
        "nav_areas": AREAS,
        "can": {need.value: user_can(user, need) for need in Need},
    }
