"""Images on the Podman service (sandpod/podman.h): pull, build, list,
remove, exists.

Each call connects to the service the way sandboxes do (``url``, then
$SANDPOD_URL, the system sockets, a private service in the state root).
``progress``/``output`` callables get each line the service prints, on the
calling thread; an exception from one propagates after the call. Safe from
any thread (each call has its own connection).
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Callable, Iterator
from ctypes import POINTER, byref, c_bool, c_char_p, c_int, c_size_t, c_void_p
from dataclasses import dataclass
from typing import Any

from . import _structs as S, errors
from ._callbacks import Callbacks
from ._native import ErrorPtr, c_free, call, enc, fn

DEFAULT_IMAGE = "localhost/sandpod-busybox:latest"

_open = fn("sp_podman_open", c_int, POINTER(c_void_p), POINTER(S.PodmanOpts), POINTER(ErrorPtr))
_free = fn("sp_podman_free", None, c_void_p)
_exists = fn("sp_podman_image_exists", c_int, POINTER(c_bool), c_void_p, c_char_p,
             POINTER(ErrorPtr))
_id = fn("sp_podman_image_id", c_int, POINTER(c_void_p), c_void_p, c_char_p, POINTER(ErrorPtr))
_pull = fn("sp_podman_image_pull_with", c_int, POINTER(c_void_p), c_void_p, c_char_p,
           POINTER(S.PodmanPullOpts), POINTER(ErrorPtr))
_build = fn("sp_podman_image_build", c_int, POINTER(c_void_p), c_void_p, c_char_p,
            POINTER(S.PodmanBuildOpts), POINTER(ErrorPtr))
_build_busybox = fn("sp_podman_image_build_busybox", c_int, POINTER(c_void_p), c_void_p,
                    c_char_p, c_char_p, c_bool, POINTER(ErrorPtr))
_list = fn("sp_podman_image_list", c_int, POINTER(POINTER(S.PodmanImageInfo)),
           POINTER(c_size_t), c_void_p, POINTER(ErrorPtr))
_list_free = fn("sp_podman_image_list_free", None, POINTER(S.PodmanImageInfo), c_size_t)
_remove = fn("sp_podman_image_remove", c_int, c_void_p, c_char_p, c_bool, POINTER(ErrorPtr))


@dataclass(frozen=True)
class Image:
    """A local image (sp_podman_image_info): id (hex), repository tags,
    created (Unix seconds), size (bytes)."""

    id: str
    names: tuple[str, ...]
    created: int
    size: int


@contextlib.contextmanager
def _podman(url: str | None, state_root: str | os.PathLike[str] | None) -> Iterator[c_void_p]:
    o = S.PodmanOpts(version=S.PODMAN_OPTS_VERSION)
    o.url = enc(url)
    o.state_root = enc(state_root)
    h = c_void_p()
    call(_open, byref(h), byref(o))
    try:
        yield h
    finally:
        _free(h)


def _take_str(p: c_void_p) -> str:
    if not p:
        return ""
    try:
        return c_char_p(p.value).value.decode()  # type: ignore[union-attr]
    finally:
        c_free(p)


def _run(cbs: Callbacks, f: Any, *args: Any) -> None:
    try:
        call(f, *args)
    except errors.Error:
        cbs.check()
        raise
    cbs.check()


def exists(name: str, *, url: str | None = None,
           state_root: str | os.PathLike[str] | None = None) -> bool:
    """Whether the service has an image of that name or id."""
    out = c_bool()
    with _podman(url, state_root) as p:
        call(_exists, byref(out), p, enc(name))
    return out.value


def image_id(name: str, *, url: str | None = None,
             state_root: str | os.PathLike[str] | None = None) -> str:
    """An image's full id; ``FileNotFoundError`` when there is none."""
    out = c_void_p()
    with _podman(url, state_root) as p:
        call(_id, byref(out), p, enc(name))
    return _take_str(out)


def pull(reference: str, *, tls_verify: bool = True,
         progress: Callable[[str], Any] | None = None, url: str | None = None,
         state_root: str | os.PathLike[str] | None = None) -> str:
    """Pull an image from a registry; returns its id. ``tls_verify=False``
    also speaks plain HTTP to a registry without TLS (only for a trusted
    one, such as on 127.0.0.1). ``FileNotFoundError`` when the registry has
    no such image, ``RuntimeError`` (PodmanError) for the rest."""
    cbs = Callbacks()
    o = S.PodmanPullOpts(version=S.PODMAN_PULL_OPTS_VERSION, no_tls_verify=not tls_verify,
                         progress=cbs.lines(progress))
    out = c_void_p()
    with _podman(url, state_root) as p:
        _run(cbs, _pull, byref(out), p, enc(reference), byref(o))
    return _take_str(out)


def build(context: str | os.PathLike[str] = ".", *, tag: str | None = None,
          containerfile: str | os.PathLike[str] | None = None,
          output: Callable[[str], Any] | None = None, url: str | None = None,
          state_root: str | os.PathLike[str] | None = None) -> str:
    """Build an image from a Containerfile (``podman build -f FILE -t TAG
    CONTEXT``); returns its id. ``containerfile`` None: CONTEXT/Containerfile,
    else CONTEXT/Dockerfile. ``output`` gets each line the build prints."""
    cbs = Callbacks()
    o = S.PodmanBuildOpts(version=S.PODMAN_BUILD_OPTS_VERSION, output=cbs.lines(output))
    o.containerfile = enc(containerfile)
    o.tag = enc(tag)
    out = c_void_p()
    with _podman(url, state_root) as p:
        _run(cbs, _build, byref(out), p, enc(context), byref(o))
    return _take_str(out)


def build_default(*, tag: str | None = None, busybox: str | os.PathLike[str] | None = None,
                  force: bool = False, url: str | None = None,
                  state_root: str | os.PathLike[str] | None = None) -> str:
    """Build sandpod's offline image (static busybox; nothing fetched) as
    ``tag`` (None: :data:`DEFAULT_IMAGE`); an existing one is kept unless
    ``force``. Returns its id (or the tag when kept)."""
    out = c_void_p()
    with _podman(url, state_root) as p:
        call(_build_busybox, byref(out), p, enc(tag), enc(busybox), force)
    return _take_str(out)


def list(*, url: str | None = None,
         state_root: str | os.PathLike[str] | None = None) -> builtins.list[Image]:
    """The local images, newest first."""
    arr = POINTER(S.PodmanImageInfo)()
    n = c_size_t()
    with _podman(url, state_root) as p:
        call(_list, byref(arr), byref(n), p)
    try:
        out: builtins.list[Image] = []
        for i in range(n.value):
            it = arr[i]
            names: builtins.list[str] = []
            j = 0
            while it.names and it.names[j] is not None:
                names.append(it.names[j].decode("utf-8", "replace"))
                j += 1
            out.append(Image(id=(it.id or b"").decode(), names=tuple(names),
                             created=it.created, size=it.size))
        return out
    finally:
        _list_free(arr, n.value)


def remove(name: str, *, force: bool = False, url: str | None = None,
           state_root: str | os.PathLike[str] | None = None) -> None:
    """Remove an image; ``FileNotFoundError`` when there is none,
    ``RuntimeError`` when in use (unless ``force``)."""
    with _podman(url, state_root) as p:
        call(_remove, p, enc(name), force)
