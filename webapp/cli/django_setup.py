"""Setting Django up for the commands that need the database (and only for those)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if str(BASE_DIR) not in sys.path:
        sys.path.insert(0, str(BASE_DIR))
    import django  # noqa: PLC0415 - only the commands that need the database pay for Django

    django.setup()
