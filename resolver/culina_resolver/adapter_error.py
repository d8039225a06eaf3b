"""The root of every error the adapter reports, and the one exit that turns it into a message.

An AdapterError carries what failed (`message`: the thing and its value) and what to do about it
(`hint`) apart, as pip's DiagnosticPipError does, so a caller or a test can take either; str() is
both on one line. Each subclass names, in `context`, what could not be done ("cannot install",
"cannot build"). Every PEP 517 hook and every setuptools command the adapter adds runs under
`exits_with_message`: an AdapterError ends the process with one line, `<project>: <context>:
<message>. <hint>`, never a traceback. Anything else is a defect and keeps its traceback.
"""
from __future__ import annotations

import functools
from typing import Callable, TypeVar

Function = TypeVar("Function", bound=Callable)


class AdapterError(Exception):
    """A failure the user can act on: `message` names what failed and the value, `hint` the fix
    ("" when the message already says it)."""

    context = ""  # what could not be done, before the message: "cannot install"; "" for nothing

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message, hint)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}. {self.hint}" if self.hint else self.message


def exit_message(error: AdapterError) -> str:
    """The one line an AdapterError ends the process with: the project's name (when its
    configuration can be read), the error's context, the message and the hint."""
    from . import project_config  # here: project_config's own errors derive from AdapterError

    try:
        name = project_config.current().name
    except project_config.ConfigError:
        name = ""
    return ": ".join(part for part in (name, error.context, str(error)) if part)


def exits_with_message(function: Function) -> Function:
    """`function` (a hook, or a setuptools command's run) with an AdapterError turned into
    SystemExit(exit_message(error)): pip shows the line and no traceback."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except AdapterError as error:
            raise SystemExit(exit_message(error)) from None

    return run  # type: ignore[return-value]
