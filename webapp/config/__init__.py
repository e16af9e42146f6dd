"""The Django project. Importing it makes the Celery app available as ``webapp.config.celery_app``."""

from webapp.config.celery import app as celery_app

__all__ = ["celery_app"]
