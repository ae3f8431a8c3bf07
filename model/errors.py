"""The project's exception root and the model's own errors.

Every error the stack raises on purpose derives from :class:`AikoError`; it lives
in the lowest layer (the model imports nothing else) so that every package can
subclass it. Each subclass carries the data a caller needs, and its message is
one line.
"""

from __future__ import annotations

__all__ = ["AikoError", "ParameterError", "StateError", "JointReferenceError"]


class AikoError(Exception):
    """Root of every deliberate error of the aiko stack."""


class ParameterError(AikoError, ValueError):
    """A parameter is out of its domain."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        self.name = name
        self.value = value
        self.reason = reason
        super().__init__(f"{name} = {value!r}: {reason}")


class StateError(AikoError, ValueError):
    """A model state has the wrong shape or non-finite entries."""

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason
        super().__init__(f"{what}: {reason}")


class JointReferenceError(AikoError, ValueError):
    """Joint references of the wrong shape or with non-finite entries."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"joint references: {reason}")
