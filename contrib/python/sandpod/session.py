"""Interactive sessions: the exec_command / write_stdin pair (sandpod/session.h).

A session is one command that outlives the call that started it, on a
pseudo-terminal unless ``tty=False``. It belongs to the C handle that
started it (the sandbox's main handle), so every session call of a
:class:`~sandpod.Sandbox` goes through that handle under its lock; several
threads may use the sessions of one Sandbox, one call at a time.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_void_p
from dataclasses import dataclass
from typing import Any

from . import _structs as S
from ._native import ErrorPtr, call, enc, fn
from ._sandbox_protocol import SandboxHandle

_start = fn("sp_session_start", c_int, POINTER(POINTER(S.SessionOutput)), c_void_p, c_char_p,
            POINTER(S.SessionOpts), POINTER(ErrorPtr))
_write = fn("sp_session_write", c_int, POINTER(POINTER(S.SessionOutput)), c_void_p, c_int,
            c_char_p, c_size_t, POINTER(S.SessionWriteOpts), POINTER(ErrorPtr))
_kill = fn("sp_session_kill", c_int, c_void_p, c_int, POINTER(ErrorPtr))
_signal = fn("sp_session_signal", c_int, c_void_p, c_int, c_int, POINTER(ErrorPtr))
_list = fn("sp_session_list", c_int, POINTER(POINTER(S.SessionInfo)), POINTER(c_size_t),
           c_void_p, POINTER(ErrorPtr))
_info_free = fn("sp_session_info_free", None, POINTER(S.SessionInfo), c_size_t)
_output_free = fn("sp_session_output_free", None, POINTER(S.SessionOutput))


@dataclass(frozen=True)
class SessionOutput:
    """What a session printed since the previous call.

    ``exit_code`` is set once ``exited`` (the session is then gone);
    ``output`` is decoded with ``errors="replace"``, ``output_bytes`` raw.
    """

    session_id: int
    output_bytes: bytes
    truncated: bool
    total_bytes: int
    exited: bool
    exit_code: int | None
    note: str | None
    wall_ms: int

    @property
    def output(self) -> str:
        return self.output_bytes.decode("utf-8", "replace")


@dataclass(frozen=True)
class SessionInfo:
    """A live session (sp_session_info)."""

    id: int
    command: str
    tty: bool
    running: bool
    age_ms: int
    idle_ms: int
    pending_bytes: int
    host_pid: int


def _output(p: Any) -> SessionOutput:
    try:
        c = p.contents
        return SessionOutput(
            session_id=c.session_id,
            output_bytes=ctypes.string_at(c.output, c.output_len) if c.output else b"",
            truncated=c.truncated, total_bytes=c.total_bytes, exited=c.exited,
            exit_code=c.exit_code if c.exited else None,
            note=c.note.decode("utf-8", "replace") if c.note else None, wall_ms=c.wall_ms)
    finally:
        _output_free(p)


class _Sessions:
    """The sessions of one Sandbox (its main handle, under its lock)."""

    def __init__(self, sb: SandboxHandle) -> None:
        self._sb = sb

    def start(self, command: str, *, tty: bool, yield_time_ms: int, max_output_tokens: int,
              cwd: str | None, env: dict[str, str] | None, user: str | None, rows: int,
              cols: int, close_stdin: bool) -> SessionOutput:
        keep: list[object] = []
        o = S.SessionOpts(version=S.SESSION_OPTS_VERSION, no_tty=not tty, rows=rows, cols=cols,
                          yield_time_ms=yield_time_ms, max_output_tokens=max_output_tokens,
                          close_stdin=close_stdin)
        o.workdir = enc(cwd)
        o.user = enc(user)
        o.env = S.strv_ptr([f"{k}={v}" for k, v in env.items()] if env else None, keep)
        p = POINTER(S.SessionOutput)()
        with self._sb._lock:
            call(_start, byref(p), self._sb._main(), enc(command), byref(o))
        return _output(p)

    def write(self, session_id: int, chars: str | bytes, *, yield_time_ms: int,
              max_output_tokens: int, close_stdin: bool) -> SessionOutput:
        data = chars.encode() if isinstance(chars, str) else bytes(chars)
        o = S.SessionWriteOpts(version=S.SESSION_WRITE_OPTS_VERSION, yield_time_ms=yield_time_ms,
                               max_output_tokens=max_output_tokens, close_stdin=close_stdin)
        p = POINTER(S.SessionOutput)()
        with self._sb._lock:
            call(_write, byref(p), self._sb._main(), int(session_id), data, len(data), byref(o))
        return _output(p)

    def kill(self, session_id: int) -> None:
        with self._sb._lock:
            call(_kill, self._sb._main(), int(session_id))

    def signal(self, session_id: int, signo: int) -> None:
        with self._sb._lock:
            call(_signal, self._sb._main(), int(session_id), int(signo))

    def list(self) -> list[SessionInfo]:
        p = POINTER(S.SessionInfo)()
        n = c_size_t()
        with self._sb._lock:
            call(_list, byref(p), byref(n), self._sb._main())
        try:
            out = []
            for i in range(n.value):
                c = p[i]
                out.append(SessionInfo(id=c.id, command=(c.command or b"").decode("utf-8",
                                                                                  "replace"),
                                       tty=c.tty, running=c.running, age_ms=c.age_ms,
                                       idle_ms=c.idle_ms, pending_bytes=c.pending_bytes,
                                       host_pid=c.host_pid))
            return out
        finally:
            _info_free(p, n.value)
