"""The root of every error culina raises, CulinaError, and its kinds.

A CulinaError carries what failed (`message`: the thing and its value) and what to do about it
(`hint`) apart, as pip's DiagnosticPipError and the build adapter's AdapterError do, so a caller
or a test can take either. str() is both in one fixed form, `<message>; <hint>`: the form
culina's messages had before the split, so a text a caller matched still matches. Each kind
also derives from the built-in class culina raised for it before (a bad argument is still a
ValueError, a wrong type a TypeError, an unusable GPU a RuntimeError), so that every `except`
written against those keeps catching. `python -m culina` prints a CulinaError as its message
and hint, without a traceback.
"""
from __future__ import annotations


class CulinaError(Exception):
    """A failure the caller can act on: `message` names the thing and its value, `hint` the fix
    ("" where there is none to give)."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message, hint)  # both in args, so that a pickled copy (another process) is whole
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class ArgumentError(CulinaError, ValueError):
    """An argument whose value, shape, layout or device culina cannot take."""


class ArgumentTypeError(CulinaError, TypeError):
    """An argument of a type or dtype culina does not take."""


class RemovedArgumentError(CulinaError, DeprecationWarning):
    """An argument flash-linear-attention 0.6 removed; fla raises DeprecationWarning for it, so
    a port that caught that keeps catching."""


class UnsupportedDeviceError(CulinaError, RuntimeError):
    """The GPU holding the arrays cannot run any code in this culina binary, or the driver is
    too old for it."""


class CacheError(CulinaError):
    """The install's cache cannot be listed or purged."""
