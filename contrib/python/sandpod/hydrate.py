"""Copying host folders into a folder, as a sandbox's create does (sp_hydrate).

:func:`hydrate` fills any folder from :class:`sandpod.Mount` specs with
the same rules (globs, .gitignore, size caps, symlinks contained by
``allowed_roots``) and reports what it copied, skipped and overrode.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_void_p
from dataclasses import dataclass
from typing import Any

from . import _structs as S, errors
from ._callbacks import Callbacks, HydrateProgress
from ._native import ErrorPtr, call, enc, fn
from .sandbox import Mount, _mounts

_hydrate = fn("sp_hydrate", c_int, POINTER(POINTER(S.HydrateResult)), c_char_p,
              POINTER(S.Mount), c_size_t, POINTER(S.HydrateOpts), POINTER(ErrorPtr))
_free = fn("sp_hydrate_result_free", None, POINTER(S.HydrateResult))
_skip_name = fn("sp_hydrate_skip_name", c_char_p, c_int)
_type_name = fn("sp_fs_type_name", c_char_p, c_int)


@dataclass(frozen=True)
class HydrateResult:
    """What :func:`hydrate` did. ``entries``: (path, type, size, mount index);
    ``skipped``: (path, mount, reason, detail), reason ``"secret"`` for a
    file left out because it holds credentials; ``overridden``: (path,
    winning mount, losing mount or -1); ``rewritten``: (path, mount, detail)
    for each file copied with its credentials taken out."""

    files: int
    dirs: int
    symlinks: int
    bytes: int
    excluded: int
    hardlinks: int
    elapsed_ms: int
    entries: tuple[tuple[str, str, int, int], ...]
    skipped: tuple[tuple[str, int, str, str | None], ...]
    overridden: tuple[tuple[str, int, int], ...]
    rewritten: tuple[tuple[str, int, str], ...] = ()


def _s(b: bytes | None) -> str:
    return "" if b is None else b.decode("utf-8", "surrogateescape")


def hydrate(workspace: str | os.PathLike[str],
            mounts: Iterable[Mount | str | os.PathLike[str]], *,
            allowed_roots: Iterable[str] | None = None,
            progress: Callable[[HydrateProgress], Any] | None = None) -> HydrateResult:
    """Copy ``mounts`` into the existing folder ``workspace`` (a later
    mount wins over an earlier one; on failure the folder is as it was). ``progress`` gets a
    :class:`HydrateProgress` after every entry (on this thread)."""
    keep: list[object] = []
    arr, n = _mounts(mounts, keep)
    if n == 0:
        raise errors.InvalidError("hydrate needs at least one mount", errors.EINVAL)
    cbs = Callbacks()
    o = S.HydrateOpts(version=S.HYDRATE_OPTS_VERSION, progress=cbs.hydrate(progress))
    o.allowed_roots = S.strv_ptr(list(allowed_roots) if allowed_roots is not None else None, keep)
    p = POINTER(S.HydrateResult)()
    try:
        call(_hydrate, byref(p), enc(workspace), arr, n, byref(o))
    except errors.Error:
        cbs.check()
        raise
    try:
        r = p.contents
        cbs.check()
        return HydrateResult(
            files=r.files, dirs=r.dirs, symlinks=r.symlinks, bytes=r.bytes,
            excluded=r.excluded, hardlinks=r.hardlinks, elapsed_ms=r.elapsed_ms,
            entries=tuple((_s(e.path), _s(_type_name(e.type)), e.size, e.mount)
                          for e in (r.entries[i] for i in range(r.n_entries))),
            skipped=tuple((_s(k.path), k.mount, _s(_skip_name(k.reason)),
                           None if k.detail is None else _s(k.detail))
                          for k in (r.skipped[i] for i in range(r.n_skipped))),
            overridden=tuple((_s(v.path), v.mount, v.previous)
                             for v in (r.overridden[i] for i in range(r.n_overridden))),
            rewritten=tuple((_s(w.path), w.mount, _s(w.detail))
                            for w in (r.rewritten[i] for i in range(r.n_rewritten))))
    finally:
        _free(p)
