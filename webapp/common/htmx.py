"""htmx helpers."""

from __future__ import annotations

from django.http import HttpResponse

# htmx stops polling an element when the response status is 286.
STOP_POLLING = 286


def stop_polling(response: HttpResponse) -> HttpResponse:
    response.status_code = STOP_POLLING
    return response


def follow_job(response: HttpResponse, *, job) -> HttpResponse:
    """The answer to a page part's live poll (``partials/follow_job.html``): 286 once the job it
    follows has ended (or there is none), so the part is swapped in one last time and the
    polling stops."""
    return stop_polling(response) if job is None or job.is_terminal else response
