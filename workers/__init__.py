"""Celery tasks: thin wrappers that load a Job row, call a webapp service and report progress."""
