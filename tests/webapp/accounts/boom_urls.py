"""The app's URLs plus one view that fails, to see what a 500 shows (test_production_defaults)."""

from __future__ import annotations

from django.conf import settings
from django.urls import path

from webapp.accounts.permissions import Need, requires
from webapp.config.urls import urlpatterns as app_urlpatterns


@requires(Need.READ)
def boom(request):
    database_url = settings.DATABASE_URL  # a local variable the debug page would list
    broker_url = settings.CELERY_BROKER_URL
    raise RuntimeError(f"it broke ({len(database_url) + len(broker_url)})")


urlpatterns = [*app_urlpatterns, path("boom/", boom)]
