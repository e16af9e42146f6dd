"""Errors a service raises when the user asked for something that cannot be done.

The message is shown to the user as it is: say what is wrong and what to do about it.
"""

from __future__ import annotations


class ApplicationError(Exception):
    def __init__(self, message: str, *, extra: dict | None = None):
        super().__init__(message)
        self.message = message
        self.extra = extra or {}

    def __str__(self) -> str:
        return self.message
