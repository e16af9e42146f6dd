"""Where apps above training add sections to a training run's page without training importing
them. The evaluation app registers its checkpoint curve in its ``AppConfig.ready()``::

    hooks.register_run_section("evaluation/partials/checkpoint_curve.html", context_for_run)

The page includes each template with ``section`` (what ``context_for_run(run=run)`` returns) beside
the page's own context (``run``, ``checkpoints``, ``can``...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_SECTIONS: list[tuple[str, Callable[[Any], dict[str, Any]]]] = []


def register_run_section(template: str, context_for_run: Callable[[Any], dict[str, Any]]) -> None:
    if all(existing != template for existing, _ in _SECTIONS):
        _SECTIONS.append((template, context_for_run))


def run_sections(run: Any) -> list[dict[str, Any]]:
    return [{"template": t, "section": context(run=run)} for t, context in _SECTIONS]
