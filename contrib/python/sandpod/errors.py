"""Exceptions raised by the sandpod package.

Every failure of a libsandpod call is raised as an exception that is *both*
a :class:`sandpod.Error` (carrying the C error's ``code``, ``reason`` and
``errno``) and the built-in exception the seeds' ``Filesystem`` protocol
documents for that situation (``FileNotFoundError``, ``IsADirectoryError``,
...), so code written against the protocol catches what it expects.
"""

from __future__ import annotations

import errno as _errno

# Stable C error codes (sandpod/error.h, sp_code). Never renumbered.
OK = 0
ERROR = -1
EINVAL = -2
ENOTFOUND = -3
EEXISTS = -4
EESCAPE = -5
ETOOBIG = -6
EPODMAN = -7
ETIMEOUT = -8
EREADONLY = -9
EDENIED = -10
ECANCELED = -11

# Stable reasons (sp_reason).
R_NONE = 0
R_IS_DIRECTORY = 1
R_NOT_DIRECTORY = 2
R_NOT_EMPTY = 3
R_EXISTS = 4
R_PATCH_PARSE = 5
R_PATCH_CONFLICT = 6
R_TOO_LARGE = 7
R_STALE = 8
R_NOT_TEXT = 9
R_NOT_UNIQUE = 10
R_NO_STORE = 11
R_CROSS_DEVICE = 12
R_SERVICE = 13
R_ELSEWHERE = 14


class Error(Exception):
    """Base of every sandpod failure.

    Attributes:
        code: the C ``sp_code`` (negative int, e.g. ``sandpod.errors.ENOTFOUND``).
        reason: the C ``sp_reason`` (int, ``R_*``) or 0.
        errno: the errno behind it, or 0.
        message: libsandpod's one-line message.
    """

    def __init__(self, message: str, code: int = ERROR, reason: int = R_NONE, errno: int = 0):
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.errno = errno

    def __str__(self) -> str:
        return self.message


class NotFoundError(Error, FileNotFoundError):
    """The named thing does not exist (``SP_ENOTFOUND``)."""


class ExistsError(Error, FileExistsError):
    """The named thing exists and must not (``SP_EEXISTS``)."""


class IsADirectoryErr(Error, IsADirectoryError):
    """A file was expected and a folder is there."""


class NotADirectoryErr(Error, NotADirectoryError):
    """A folder was expected."""


class EscapeError(Error, PermissionError):
    """A path would leave the workspace (``SP_EESCAPE``)."""


class ReadOnlyError(Error, PermissionError):
    """A write through a read-only handle (``SP_EREADONLY``)."""


class DeniedError(Error, PermissionError):
    """Refused by policy (``SP_EDENIED``)."""


class AccessError(Error, PermissionError):
    """The operating system refused access (EACCES/EPERM)."""


class InvalidError(Error, ValueError):
    """Bad argument or input (``SP_EINVAL``)."""


class TooBigError(Error, ValueError):
    """A size, depth or count limit was hit (``SP_ETOOBIG``)."""


class PodmanError(Error, RuntimeError):
    """The Podman service failed or is unreachable (``SP_EPODMAN``)."""


class TimeoutErr(Error, TimeoutError):
    """A deadline passed (``SP_ETIMEOUT``)."""


class SandpodRuntimeError(Error, RuntimeError):
    """Anything without a better code (``SP_ERROR``)."""


class SnapshotError(Error, RuntimeError):
    """Taking, listing or reading a snapshot failed (seeds: ``SnapshotError``)."""


class SnapshotRestoreError(SnapshotError):
    """Restoring a snapshot failed (seeds: ``SnapshotRestoreError``)."""


def from_code(message: str, code: int, reason: int = R_NONE, sys_errno: int = 0) -> Error:
    """The exception for a C error: the most specific class for code+reason."""
    # libsandpod reports "is a folder" / "not a folder" as SP_EINVAL (or
    # SP_ERROR) with the errno behind it.
    plain = code in (ERROR, EINVAL)
    if reason == R_IS_DIRECTORY or (plain and sys_errno == _errno.EISDIR):
        cls: type[Error] = IsADirectoryErr
    elif reason == R_NOT_DIRECTORY or (plain and sys_errno == _errno.ENOTDIR):
        cls = NotADirectoryErr
    elif code == ENOTFOUND:
        cls = NotFoundError
    elif code == EEXISTS:
        cls = ExistsError
    elif code == EESCAPE:
        cls = EscapeError
    elif code == EREADONLY:
        cls = ReadOnlyError
    elif code == EDENIED:
        cls = DeniedError
    elif code == EINVAL:
        cls = InvalidError
    elif code == ETOOBIG:
        cls = TooBigError
    elif code == EPODMAN:
        cls = PodmanError
    elif code == ETIMEOUT:
        cls = TimeoutErr
    elif code == ERROR and sys_errno in (_errno.EACCES, _errno.EPERM):
        cls = AccessError
    else:
        cls = SandpodRuntimeError
    return cls(message, code, reason, sys_errno)
