"""Exceptions: one class per protocol error code (proto/PROTOCOL.md), plus
the client's own failures.

Every exception this package raises on purpose derives from Error and
carries ``code`` (the wire string, e.g. ``"too_large"``, or a local one such
as ``"connection"``) and ``message`` (the daemon's text, or a local one).
"""

import builtins

__all__ = [
    "Error", "InvalidRequest", "UnknownMethod", "InvalidParams", "TooLarge",
    "Empty", "Busy", "Internal", "ConnectionError", "Timeout", "NotSupported",
    "error_from_wire",
]


class Error(Exception):
    """Base of every gpured failure. ``code`` is the protocol's error code
    (or a local one: ``connection``, ``timeout``, ``not_supported``) and
    ``message`` the daemon's (or a local) description."""

    code = "error"

    def __init__(self, message="", code=None):
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(message)

    def __str__(self):
        return "%s: %s" % (self.code, self.message) if self.message else self.code


class InvalidRequest(Error):
    """The byte stream was not valid msgpack-RPC; the daemon closed the
    connection."""
    code = "invalid_request"


class UnknownMethod(Error):
    """No such method."""
    code = "unknown_method"


class InvalidParams(Error):
    """The method's parameters were wrong; the message says which and why."""
    code = "invalid_params"


class TooLarge(Error):
    """The data (or a region) is larger than the daemon's limit."""
    code = "too_large"


class Empty(Error):
    """``min`` or ``max`` of no elements."""
    code = "empty"


class Busy(Error):
    """The daemon was at its connection limit (or shutting down) and closed
    the connection."""
    code = "busy"


class Internal(Error):
    """The daemon's backend failed (a GPU error, say); the message names it."""
    code = "internal"


class ConnectionError(Error, builtins.ConnectionError):
    """The connection is gone (closed by either side, or broken). Also a
    builtin ConnectionError. Every later call on the client raises it too:
    close the client and make a new one."""
    code = "connection"


class Timeout(ConnectionError, builtins.TimeoutError):
    """No answer (or no progress sending) within the client's timeout. The
    connection is closed, as libgpured does: a reply may still be on its
    way, and could not be told apart from later ones."""
    code = "timeout"


class NotSupported(Error):
    """The input cannot be sent as it is, e.g. an array in GPU memory
    (pass ``allow_copy=True`` to copy it to the host)."""
    code = "not_supported"


_BY_CODE = {c.code: c for c in (InvalidRequest, UnknownMethod, InvalidParams,
                                TooLarge, Empty, Busy, Internal)}


def error_from_wire(err):
    """The exception for a response's error map ``{"code", "message"}``.
    Unknown codes give a plain Error with that code."""
    if isinstance(err, dict):
        code = err.get("code")
        message = err.get("message")
    else:
        code, message = None, None
    if not isinstance(code, str):
        code = "internal"
        message = "malformed error in response: %r" % (err,)
    if not isinstance(message, str):
        message = ""
    cls = _BY_CODE.get(code)
    if cls is None:
        return Error(message, code=code)
    return cls(message)
