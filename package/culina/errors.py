"""Exceptions culina raises beyond the built-in ones (bad arguments are ValueError/TypeError)."""


class UnsupportedDeviceError(RuntimeError):
    """The GPU holding the arrays cannot run any code in this culina binary."""
