"""Importers of real agent logs into the canonical trajectory schema.

    from trainer_core.recording.importers import import_path
    results = import_path("run.traj")          # detects the format by content

One module per format registers one Importer; ``format_names()`` lists them in detection order
(more specific formats first).
"""

from __future__ import annotations

import importlib

from trainer_core.recording.importers.base import (
    ImportFailure,
    ImportResult,
    RecordError,
    Source,
    format_names,
    import_path,
    import_source,
    importers,
    register_importer,
)

# Detection order: the first importer whose sniff() accepts the content parses it.
BUILTIN_MODULES = [
    "steplab_jsonl",
    "swe_agent",
    "mini_swe_agent",
    "openhands",
    "inspect_ai",
    "tau_bench",
    "claude_code",
    "agentgym",
    "anthropic_messages",
    "openai_chat",
]

_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in BUILTIN_MODULES:
        try:
            importlib.import_module(f"trainer_core.recording.importers.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"trainer_core.recording.importers.{name}":
                raise


__all__ = [
    "ImportFailure",
    "ImportResult",
    "RecordError",
    "Source",
    "format_names",
    "import_path",
    "import_source",
    "importers",
    "register_importer",
]
