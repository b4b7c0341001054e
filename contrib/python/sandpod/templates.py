"""Templates: a sandbox's settings and a snapshot of its workspace, saved
under a name to create sandboxes from (sandpod/template.h).

Save one with :meth:`sandpod.Sandbox.save_template`, create from one with
``Sandbox.create(template=name)``; :func:`list`, :func:`info` and
:func:`remove` work on a state root's templates. Safe from any thread.
"""

from __future__ import annotations

import builtins
import os
from ctypes import POINTER, byref, c_char_p, c_int, c_void_p
from dataclasses import dataclass
from typing import Any

from . import _structs as S
from ._native import ErrorPtr, call, enc, fn, take_strv

_c_save = fn("sp_template_save", c_int, POINTER(POINTER(S.TemplateInfo)), c_void_p, c_char_p,
           POINTER(S.TemplateOpts), POINTER(ErrorPtr))
_list = fn("sp_template_list", c_int, POINTER(POINTER(c_char_p)), POINTER(S.TemplateOpts),
           POINTER(ErrorPtr))
_info = fn("sp_template_info_get", c_int, POINTER(POINTER(S.TemplateInfo)), c_char_p,
           POINTER(S.TemplateOpts), POINTER(ErrorPtr))
_remove = fn("sp_template_remove", c_int, c_char_p, POINTER(S.TemplateOpts), POINTER(ErrorPtr))
_info_free = fn("sp_template_info_free", None, POINTER(S.TemplateInfo))
_NETWORKS = {0: "none", 1: "default", 2: "host"}


@dataclass(frozen=True)
class Template:
    """What a template records (sp_template_info); env values are not given out."""

    name: str
    path: str
    origin: str
    snapshot: str
    created_at: str
    image: str
    image_id: str
    setup: tuple[str, ...]
    env_names: tuple[str, ...]
    env_pass: tuple[str, ...]
    workdir: str | None
    user: str | None
    network: str
    memory_bytes: int
    nano_cpus: int
    pids_limit: int
    n_mounts: int
    #: the egress policy ("allow RULE" / "deny RULE"); None: none
    egress: tuple[str, ...] | None = None


def _strs(v: Any) -> tuple[str, ...]:
    out: builtins.list[str] = []
    i = 0
    while v and v[i] is not None:
        out.append(v[i].decode("utf-8", "replace"))
        i += 1
    return tuple(out)


def _d(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


def _take(p: Any) -> Template:
    try:
        t = p.contents
        return Template(name=_d(t.name) or "", path=_d(t.path) or "", origin=_d(t.origin) or "",
                        snapshot=_d(t.snapshot) or "", created_at=_d(t.created_at) or "",
                        image=_d(t.image) or "", image_id=_d(t.image_id) or "",
                        setup=_strs(t.setup), env_names=_strs(t.env_names),
                        env_pass=_strs(t.env_pass), workdir=_d(t.workdir), user=_d(t.user),
                        network=_NETWORKS.get(t.network, str(t.network)),
                        memory_bytes=t.memory_bytes, nano_cpus=t.nano_cpus,
                        pids_limit=t.pids_limit, n_mounts=t.n_mounts,
                        egress=_strs(t.egress) if t.egress else None)
    finally:
        _info_free(p)


def _opts(state_root: str | os.PathLike[str] | None, url: str | None) -> S.TemplateOpts:
    o = S.TemplateOpts(version=S.TEMPLATE_OPTS_VERSION)
    o.state_root = enc(state_root)
    o.podman_url = enc(url)
    return o


def _save(handle: Any, name: str, snapshot: bytes | None, force: bool) -> Template:
    o = _opts(None, None)
    o.snapshot = snapshot
    o.force = force
    p = POINTER(S.TemplateInfo)()
    call(_c_save, byref(p), handle, enc(name), byref(o))
    return _take(p)


def list(state_root: str | os.PathLike[str] | None = None) -> builtins.list[str]:
    """The names of a state root's templates, sorted."""
    out = POINTER(c_char_p)()
    call(_list, byref(out), byref(_opts(state_root, None)))
    return take_strv(out)


def info(name: str, state_root: str | os.PathLike[str] | None = None) -> Template:
    """One template's record; ``FileNotFoundError`` when there is none."""
    p = POINTER(S.TemplateInfo)()
    call(_info, byref(p), enc(name), byref(_opts(state_root, None)))
    return _take(p)


def remove(name: str, state_root: str | os.PathLike[str] | None = None) -> None:
    """Remove a template (sandboxes made from it keep their copies)."""
    call(_remove, enc(name), byref(_opts(state_root, None)))
