"""What every response and every error page gets (docs/security.md, "Production-safe defaults").

``ContentSecurityPolicyMiddleware`` adds ``settings.STEPLAB_CONTENT_SECURITY_POLICY`` to every
response. ``QuietExceptionReporterFilter`` keeps settings, the process environment and cookies
off error pages: production shows the plain 500 page anyway, and the debug page that the run
command shows on loopback lists no connection string either.
"""

from __future__ import annotations

import os
import re

from django.conf import settings
from django.views.debug import SafeExceptionReporterFilter

# The parts of a request's META that describe the request itself. runserver copies the whole
# process environment into META (DATABASE_URL, CELERY_BROKER_URL, API keys): none of it is shown.
REQUEST_META_KEYS = {
    "CONTENT_LENGTH",
    "CONTENT_TYPE",
    "PATH_INFO",
    "QUERY_STRING",
    "REMOTE_ADDR",
    "REQUEST_METHOD",
    "SCRIPT_NAME",
    "SERVER_NAME",
    "SERVER_PORT",
    "SERVER_PROTOCOL",
}
SECRET_NAMES = re.compile(
    r"API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|COOKIE|SESSION|CSRF|_URL$|DSN", re.I
)


class ContentSecurityPolicyMiddleware:
    """Adds the Content-Security-Policy header (unless a view set its own).

    Django's own debug pages (404 and 500 while DEBUG is on, which the run command allows only on
    loopback) style themselves inline, so they go without it."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.policy = settings.STEPLAB_CONTENT_SECURITY_POLICY

    def __call__(self, request):
        response = self.get_response(request)
        if settings.DEBUG and response.status_code in (404, 500):
            return response
        response.headers.setdefault("Content-Security-Policy", self.policy)
        return response


def _secret_values() -> list[str]:
    """The values that must never appear on an error page, longest first."""
    db = settings.DATABASES.get("default", {})
    values = [
        settings.SECRET_KEY,
        getattr(settings, "DATABASE_URL", ""),
        settings.CELERY_BROKER_URL,
        str(db.get("PASSWORD") or ""),
    ]
    values += [value for name, value in os.environ.items() if SECRET_NAMES.search(name)]
    return sorted({v for v in values if isinstance(v, str) and len(v) >= 8}, key=len, reverse=True)


class QuietExceptionReporterFilter(SafeExceptionReporterFilter):
    """Django's filter, plus: no settings at all, no environment in META, no cookie values, and
    any local variable holding a secret value (a connection string, the secret key) hidden."""

    hidden_settings = SECRET_NAMES

    def get_safe_settings(self):
        return {"SETTINGS": "not shown on error pages (docs/security.md)"}

    def get_safe_request_meta(self, request):
        if not hasattr(request, "META"):
            return {}
        return {
            key: self.cleanse_setting(key, value)
            for key, value in request.META.items()
            if key in REQUEST_META_KEYS or key.startswith("HTTP_")
        }

    def get_safe_cookies(self, request):
        if not hasattr(request, "COOKIES"):
            return {}
        return dict.fromkeys(request.COOKIES, self.cleansed_substitute)

    def get_traceback_frame_variables(self, request, tb_frame):
        secrets = _secret_values()
        cleansed = []
        for name, value in super().get_traceback_frame_variables(request, tb_frame):
            if isinstance(value, str) and any(secret in value for secret in secrets):
                value = self.cleansed_substitute
            cleansed.append((name, value))
        return cleansed
