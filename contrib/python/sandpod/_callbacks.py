"""Python callables as C callbacks (internal).

A :class:`Callbacks` makes the CFUNCTYPE objects for one C call, keeps them
alive until the call returns, and remembers the first exception a callable
raised (ctypes could only print it): ``check()`` re-raises it after the
call. Callbacks run on the thread that made the C call.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _structs as S

_PHASES = {0: "scan", 1: "copy", 2: "commit"}


@dataclass(frozen=True)
class HydrateProgress:
    """Where a hydration is (sp_hydrate_progress): phase scan/copy/commit."""

    phase: str
    files: int
    bytes: int
    total_files: int
    total_bytes: int
    path: str | None


class Callbacks:
    def __init__(self) -> None:
        self._keep: list[Any] = []
        self.error: BaseException | None = None

    def _guard(self, f: Callable[..., Any], *args: Any) -> bool:
        if self.error is not None:
            return False
        try:
            f(*args)
            return True
        except BaseException as e:  # noqa: BLE001 - re-raised by check()
            self.error = e
            return False

    def hydrate(self, f: Callable[[HydrateProgress], Any] | None) -> Any:
        """An sp_hydrate_progress callback (NULL for None)."""
        if f is None:
            return S.HydrateProgressFn()

        def cb(_ud: Any, p: Any) -> None:
            c = p.contents
            self._guard(f, HydrateProgress(
                phase=_PHASES.get(c.phase, str(c.phase)), files=c.files, bytes=c.bytes,
                total_files=c.total_files, total_bytes=c.total_bytes,
                path=None if c.path is None else c.path.decode("utf-8", "surrogateescape")))
        fp = S.HydrateProgressFn(cb)
        self._keep.append(fp)
        return fp

    def lines(self, f: Callable[[str], Any] | None) -> Any:
        """An sp_progress_fn: each line as str (NULL for None)."""
        if f is None:
            return S.PodmanProgressFn()

        def cb(line: bytes | None, _ud: Any) -> None:
            self._guard(f, (line or b"").decode("utf-8", "replace"))
        fp = S.PodmanProgressFn(cb)
        self._keep.append(fp)
        return fp

    def logs(self, f: Callable[[str, bytes], Any]) -> Any:
        """An sp_logs_fn: (stream "stdout"/"stderr", bytes); an exception stops it."""
        def cb(stream: int, data: int, n: int, _ud: Any) -> int:
            chunk = ctypes.string_at(data, n) if n else b""
            return 0 if self._guard(f, "stderr" if stream == 2 else "stdout", chunk) else -1
        fp = S.LogsFn(cb)
        self._keep.append(fp)
        return fp

    def check(self) -> None:
        """Raise what a callable raised, if anything."""
        if self.error is not None:
            e, self.error = self.error, None
            raise e
