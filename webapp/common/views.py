from __future__ import annotations

from django.http import Http404
from django.shortcuts import render

from webapp.accounts.permissions import Need, requires
from webapp.common.navigation import AREAS_BY_KEY


def area_placeholder(key: str):
    """A page for an area whose issue has not landed yet: says so instead of a dead link."""

    @requires(Need.READ)
    def view(request):
        area = AREAS_BY_KEY.get(key)
        if area is None:
            raise Http404(key)
        return render(request, "common/area_placeholder.html", {"area": area, "active_area": key})

    view.__name__ = f"area_{key}"
    return view
