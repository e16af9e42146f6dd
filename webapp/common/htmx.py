"""htmx helpers."""

from __future__ import annotations

from django.http import HttpResponse

# htmx stops polling an element when the response status is 286.
STOP_POLLING = 286


def stop_polling(response: HttpResponse) -> HttpResponse:
    response.status_code = STOP_POLLING
    return response
