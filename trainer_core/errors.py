"""One flat hierarchy of trainer_core errors. Messages say what is wrong and what to do."""

from __future__ import annotations


class SteplabError(Exception):
    """Base of every error trainer_core raises on purpose."""


class ConfigError(SteplabError):
    """A configuration value is missing or invalid."""


class InputError(SteplabError):
    """Input data (a file, a record) is malformed."""


class EnvironmentUnavailable(SteplabError):
    """Something the code needs on this machine (a binary, a device) is missing."""


class TransientError(SteplabError):
    """A failure worth retrying (a network blip, a rate limit)."""


class SandboxError(SteplabError):
    """A sandbox operation failed: a setup command, a path outside the workspace, a bad call."""


class PolicyError(SteplabError):
    """A policy could not produce an action for a reason that is not the model's output (the
    API refused the key, the server is down after retries, the model directory is unusable)."""


def describe_validation_error(exc, *, whole: str = "value") -> str:
    """A pydantic ValidationError as one line: ``field.path: message; ...`` (``whole`` names an
    error about the object itself)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in exc.errors())
