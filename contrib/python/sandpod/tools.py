"""The model tool suite (contrib/tools/tools.h) over libsandpod_tools.so.

``sandpod.tools(sandbox)`` gives every tool (files, commands, sessions,
snapshots); ``sandpod.tools("/some/folder")`` the filesystem tools over a
bare folder. ``.specs(format=...)`` hands the tools' JSON schemas to a
model in its API's format; ``.call(name, args)`` runs one call and returns
the result object as a dict::

    {"ok": bool, "message": str, "value": ..., "truncated": bool,
     "changes": [...], "error": {"code", "reason", "message"}}  # failures only

A failed tool call is a result (``ok`` False, meant for the model), not an
exception. libsandpod_tools.so is looked for in ``$SANDPOD_TOOLS_LIBRARY``,
next to libsandpod.so, next to this package, then the installed prefix.

Threads: one suite runs one call at a time (calls from several threads
queue); :meth:`Tools.cancel` may be called from any thread while a call
runs. Specs may be read from any thread.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_void_p
from typing import Any, Iterable

from . import _native, _structs as S, errors
from ._native import ErrorPtr, LibraryNotFound, enc
from ._sandbox_protocol import HandleLender

TOOLS_LIBRARY_NAME = "libsandpod_tools.so.0"
FORMATS = ("mcp", "openai", "openai-chat", "openai-freeform", "anthropic")
_APPROVALS = {"never": 0, "untrusted": 1, "on-request": 2}


def _candidates() -> list[str]:
    env = os.environ.get("SANDPOD_TOOLS_LIBRARY")
    if env:
        return [env]
    out: list[str] = []
    core = getattr(_native.lib, "_name", None)
    if core and os.sep in core:
        out.append(os.path.join(os.path.dirname(os.path.realpath(core)), TOOLS_LIBRARY_NAME))
        out.append(os.path.join(os.path.dirname(core), TOOLS_LIBRARY_NAME))
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, TOOLS_LIBRARY_NAME))
    return out + _native.installed("sandpod_tools", TOOLS_LIBRARY_NAME)


_tlib: ctypes.CDLL | None = None
_tlib_lock = threading.Lock()


def _load() -> ctypes.CDLL:
    global _tlib
    with _tlib_lock:
        if _tlib is not None:
            return _tlib
        tried: list[str] = []
        for path in _candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append(path)
                continue
            try:
                lib = ctypes.CDLL(path)
                break
            except OSError as e:
                tried.append(f"{path} ({e})")
        else:
            raise LibraryNotFound(
                "libsandpod_tools.so not found: build and install sandpod (cmake --install "
                "build), or set SANDPOD_TOOLS_LIBRARY to its path; tried: " + ", ".join(tried))
        for name, res, args in (
            ("sp_tools_open_sandbox", c_int,
             [POINTER(c_void_p), c_void_p, POINTER(S.ToolsOpts), POINTER(ErrorPtr)]),
            ("sp_tools_open_root", c_int,
             [POINTER(c_void_p), c_char_p, POINTER(S.ToolsOpts), POINTER(ErrorPtr)]),
            ("sp_tools_free", None, [c_void_p]),
            ("sp_tools_call", c_int, [POINTER(c_void_p), c_void_p, c_char_p, c_char_p, c_size_t]),
            ("sp_tools_call_freeform", c_int,
             [POINTER(c_void_p), c_void_p, c_char_p, c_char_p, c_size_t]),
            ("sp_tools_cancel", None, [c_void_p]),
            ("sp_tools_has", ctypes.c_bool, [c_void_p, c_char_p]),
            ("sp_tools_format_parse", c_int, [POINTER(c_int), c_char_p]),
            ("sp_tools_specs_ex", c_void_p, [c_void_p, c_int, POINTER(S.ToolsSpecsOpts)]),
            ("sp_tools_names", POINTER(c_char_p), []),
        ):
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = args
        _tlib = lib
        return lib




def _take_text(p: int | None) -> str:
    """A malloc'd C string as str, freed."""
    if not p:
        raise MemoryError("libsandpod_tools: out of memory")
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        _native.c_free(p)


def tool_names() -> list[str]:
    """Every tool the suite has."""
    arr = _load().sp_tools_names()
    out = []
    i = 0
    while arr[i] is not None:
        out.append(arr[i].decode())
        i += 1
    return out


class Tools:
    """A tool suite over a sandbox or a bare folder. See :func:`sandpod.tools`."""

    def __init__(self, target: HandleLender | str | os.PathLike[str], *,
                 approval: str = "never", read_only: bool = False,
                 disabled: Iterable[str] = (), deny: Iterable[str] = (),
                 snapshot_store: str | os.PathLike[str] | None = None,
                 events_path: str | os.PathLike[str] | None = None,
                 max_output_bytes: int = 0, max_output_lines: int = 0,
                 max_text_bytes: int = 0, timeout: float | None = None,
                 no_stale_check: bool = False) -> None:
        self._lib = _load()
        self._lock = threading.Lock()
        self._ctx = c_void_p()
        self._sb: HandleLender | None = None
        self._handle: c_void_p | None = None
        keep: list[object] = []
        o = S.ToolsOpts(version=S.TOOLS_OPTS_VERSION)
        if approval not in _APPROVALS:
            raise errors.InvalidError(f"unknown approval {approval!r}: one of "
                                      + ", ".join(_APPROVALS), errors.EINVAL)
        o.approval = _APPROVALS[approval]
        o.read_only = read_only
        o.disabled = S.strv_ptr(list(disabled) or None, keep)
        o.deny = S.strv_ptr(list(deny) or None, keep)
        o.snapshot_store = enc(snapshot_store)
        o.events_path = enc(events_path)
        o.max_output_bytes = max_output_bytes
        o.max_output_lines = max_output_lines
        o.max_text_bytes = max_text_bytes
        if timeout is not None:
            o.timeout_ms = max(1, int(timeout * 1000))
        o.no_stale_check = no_stale_check
        if isinstance(target, HandleLender):
            # The context borrows a C handle that no other thread may use
            # while it lives: one of the sandbox's own, taken from its pool.
            self._sb = target
            self._handle = target._borrow()
            try:
                _native.call(self._lib.sp_tools_open_sandbox, byref(self._ctx), self._handle,
                             byref(o))
            except BaseException:
                target._give_back(self._handle)
                raise
            target._on_close(self.close)
        else:
            _native.call(self._lib.sp_tools_open_root, byref(self._ctx), enc(target), byref(o))

    def close(self) -> None:
        """Free the context (kills the sessions its calls started)."""
        with self._lock:
            if self._ctx:
                self._lib.sp_tools_free(self._ctx)
                self._ctx = c_void_p()
                if self._sb is not None and self._handle is not None:
                    self._sb._give_back(self._handle)
                    self._handle = None

    def __enter__(self) -> Tools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _ctx_or_raise(self) -> c_void_p:
        if not self._ctx:
            raise errors.InvalidError("the tool suite is closed", errors.EINVAL)
        return self._ctx

    def has(self, name: str) -> bool:
        """Whether this suite offers a tool."""
        return bool(self._lib.sp_tools_has(self._ctx_or_raise(), name.encode()))

    def names(self) -> list[str]:
        """The tools this suite offers."""
        return [n for n in tool_names() if self.has(n)]

    def specs(self, format: str = "openai", *, strict: bool = False) -> Any:
        """The tools' specs in a model API's format, parsed from JSON.

        ``format``: "openai" (Responses function tools), "openai-chat"
        (Chat Completions), "openai-freeform" (apply_patch as a custom
        grammar tool), "anthropic", or "mcp" (a tools/list result).
        ``strict`` gives the form valid under OpenAI's and Anthropic's strict
        tool rules.
        """
        fmt = c_int()
        if format not in FORMATS or self._lib.sp_tools_format_parse(byref(fmt),
                                                                     format.encode()) < 0:
            raise errors.InvalidError(f"unknown spec format {format!r}: one of "
                                      + ", ".join(FORMATS), errors.EINVAL)
        o = S.ToolsSpecsOpts(version=S.TOOLS_SPECS_OPTS_VERSION, strict=strict)
        return json.loads(_take_text(self._lib.sp_tools_specs_ex(self._ctx_or_raise(),
                                                                  fmt.value, byref(o))))

    def call(self, name: str, args: dict[str, Any] | str | None = None) -> dict[str, Any]:
        """Run one tool call; ``args`` a dict or its JSON text. Returns the result dict."""
        text = (args if isinstance(args, str) else json.dumps(args or {})).encode()
        return self._call(self._lib.sp_tools_call, name, text)

    def call_freeform(self, name: str, text: str) -> dict[str, Any]:
        """Run a freeform call (an OpenAI custom tool: apply_patch's raw patch)."""
        return self._call(self._lib.sp_tools_call_freeform, name, text.encode())

    def _call(self, f: Any, name: str, data: bytes) -> dict[str, Any]:
        out = c_void_p()
        with self._lock:
            f(byref(out), self._ctx_or_raise(), name.encode(), data, len(data))
        result: dict[str, Any] = json.loads(_take_text(out.value))
        return result

    def cancel(self) -> None:
        """Cancel the call running on another thread (kills its command)."""
        ctx = self._ctx
        if ctx:
            self._lib.sp_tools_cancel(ctx)


def tools(target: HandleLender | str | os.PathLike[str], **opts: Any) -> Tools:
    """The model tool suite over a :class:`~sandpod.Sandbox` or a bare folder."""
    return Tools(target, **opts)
