"""Importers of real agent logs into the canonical trajectory schema.

    from trainer_core.recording.importers import import_path
    results = import_path("run.traj")          # detects the format by content

One module per format registers one Importer; ``format_names()`` lists them in detection order
(more specific formats first). Many files at once: ``import_files`` / ``convert_files`` (all or
nothing) and ``validate_files`` (a report per file). ``read_path`` reads one path into one outcome
per file (a result or the failure that refused it), bounded by ``ImportLimits``.
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
    read_path,
    register_importer,
)
from trainer_core.recording.importers.files import (
    FileReport,
    convert_files,
    import_files,
    validate_files,
)
from trainer_core.recording.importers.limits import ImportLimits

__all__ = [
    "FileReport",
    "ImportFailure",
    "ImportLimits",
    "ImportResult",
    "RecordError",
    "Source",
    "convert_files",
    "format_names",
    "import_files",
    "import_path",
    "import_source",
    "importers",
    "read_path",
    "register_importer",
    "validate_files",
]
