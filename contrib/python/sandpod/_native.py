"""Finding and loading libsandpod.so, and turning its errors into exceptions.

Internal: the rest of the package declares the prototypes it uses on
:data:`lib` and calls them through :func:`call`.

The library is looked for, in order:

1. ``$SANDPOD_LIBRARY`` (a path to ``libsandpod.so``);
2. next to this package (a build tree's ``cmake --install`` or a copy);
3. the installed prefix (``ctypes.util.find_library``, then the usual
   ``lib`` folders of the prefix ``cmake --install`` put this package in,
   of ``/usr/local`` and of ``/usr``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from typing import Any

from . import errors

LIBRARY_NAME = "libsandpod.so.0"


class LibraryNotFound(errors.Error, ImportError):
    """libsandpod.so could not be found or loaded."""


def _candidates() -> list[str]:
    out: list[str] = []
    env = os.environ.get("SANDPOD_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    for name in (LIBRARY_NAME, "libsandpod.so"):
        out.append(os.path.join(here, name))
    return out + installed("sandpod", LIBRARY_NAME)


def _own_prefix() -> str:
    """The prefix this package was installed under by ``cmake --install``
    (``<prefix>/lib/python3.X/dist-packages/sandpod``), wherever it moved."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", ".."))


def installed(short: str, file_name: str) -> list[str]:
    """Where an installed prefix may hold lib<short>.so (file_name): the
    dynamic linker's cache (after ``ldconfig``), then the lib folders of
    this package's own prefix, ``/usr/local`` (where ``cmake --install``
    puts it by default; no ``ldconfig`` needed) and ``/usr``."""
    out: list[str] = []
    found = ctypes.util.find_library(short)
    if found:
        out.append(found)
    for prefix in dict.fromkeys((_own_prefix(), "/usr/local", "/usr")):
        for libdir in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
            out.append(os.path.join(prefix, libdir, file_name))
    return out


def _load() -> ctypes.CDLL:
    tried: list[str] = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise LibraryNotFound(
        "libsandpod.so not found: build and install sandpod (cmake --install build), "
        "or set SANDPOD_LIBRARY to the path of libsandpod.so; tried: " + ", ".join(tried)
    )


lib = _load()


class SpError(ctypes.Structure):
    """struct sp_error (sandpod/error.h)."""

    _fields_ = [
        ("code", ctypes.c_int),
        ("sys_errno", ctypes.c_int),
        ("message", ctypes.c_char_p),
        ("reason", ctypes.c_int),
    ]


ErrorPtr = ctypes.POINTER(SpError)

lib.sp_error_free.argtypes = [ErrorPtr]
lib.sp_error_free.restype = None
lib.sp_strerror.argtypes = [ctypes.c_int]
lib.sp_strerror.restype = ctypes.c_char_p

# libc's free(), for the few results libsandpod documents as plain malloc'd.
c_free = ctypes.CDLL(None).free
c_free.argtypes = [ctypes.c_void_p]
c_free.restype = None


def take_strv(out: Any) -> list[str]:
    """The strings of a malloc'd NULL-terminated ``char **`` (each string and
    the array freed with free())."""
    names: list[str] = []
    if not out:
        return names
    raw = ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))
    i = 0
    while raw[i]:
        names.append((ctypes.string_at(raw[i]) or b"").decode("utf-8", "surrogateescape"))
        c_free(raw[i])
        i += 1
    c_free(ctypes.cast(out, ctypes.c_void_p))
    return names


def fn(name: str, restype: Any, *argtypes: Any) -> Callable[..., Any]:
    """A C function with this prototype.

    Each call gets a function object of its own (``lib[name]``, not the one
    ``lib.name`` caches and shares), so two modules that declare the same
    function with different but compatible types never overwrite each
    other's ``argtypes``."""
    f = lib[name]
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


def exception(err: ErrorPtr, rc: int,
              wrap: type[errors.Error] | None = None) -> errors.Error:
    """The exception for a failed call; frees ``err``."""
    if err:
        e = err.contents
        msg = (e.message or b"").decode("utf-8", "replace")
        code, reason, sys_errno = e.code, e.reason, e.sys_errno
        lib.sp_error_free(err)
    else:
        code, reason, sys_errno = rc, 0, 0
        msg = (lib.sp_strerror(rc) or b"error").decode()
    if wrap is not None:
        return wrap(msg, code, reason, sys_errno)
    return errors.from_code(msg, code, reason, sys_errno)


def call(f: Callable[..., int], *args: Any,
         wrap: type[errors.Error] | None = None) -> int:
    """Call ``f(*args, &err)``; raise the mapped exception when it fails.

    ``wrap`` forces an exception class (e.g. SnapshotError) while keeping
    code, reason and errno.
    """
    err = ErrorPtr()
    rc = f(*args, ctypes.byref(err))
    if rc < 0:
        raise exception(err, rc, wrap)
    if err:
        lib.sp_error_free(err)
    return rc


def enc(s: str | os.PathLike[str] | None) -> bytes | None:
    """A str or path as the UTF-8 bytes C expects (None stays NULL)."""
    if s is None:
        return None
    return os.fsencode(s)
