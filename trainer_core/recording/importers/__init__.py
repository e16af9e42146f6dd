"""Importers of real agent logs into the canonical trajectory schema.

    from trainer_core.recording.importers import import_path
    results = import_path("run.traj")          # detects the format by content

One module per format registers one Importer; ``format_names()`` lists them in detection order
(more specific formats first). Many files at once: ``import_files`` / ``convert_files`` (all or
nothing) and ``validate_files`` (a report per file).
"""

from __future__ import annotations

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
from trainer_core.recording.importers.files import (
    FileReport,
    convert_files,
    import_files,
    validate_files,
)

__all__ = [
    "FileReport",
    "ImportFailure",
    "ImportResult",
    "RecordError",
    "Source",
    "convert_files",
    "format_names",
    "import_files",
    "import_path",
    "import_source",
    "importers",
    "register_importer",
    "validate_files",
]
