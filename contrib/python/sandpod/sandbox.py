"""Sandboxes: create, open, run commands, sessions, snapshots (sandbox.h & co).

Threads: a :class:`Sandbox` may be shared by any number of threads. The C
handle (``sp_sandbox``) is not thread-safe, so the object keeps one main
handle, used under a lock for lifecycle, sessions and snapshots, and a pool
of extra handles opened on the same sandbox for :meth:`Sandbox.shell`,
:meth:`Sandbox.exec` and :meth:`Sandbox.logs`, one per concurrent call:
commands from several threads run at the same time. Templates, events and
forks go through the main handle; :meth:`Sandbox.gc` and :meth:`Sandbox.list`
use none. Callables given for progress or logs run on the calling thread.
ctypes releases the GIL during every C call.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import threading
from ctypes import POINTER, byref, c_bool, c_char_p, c_int, c_void_p
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

from . import _structs as S, errors
from ._callbacks import Callbacks, HydrateProgress
from ._native import ErrorPtr, c_free, call, enc, fn, take_strv
from .session import SessionInfo, SessionOutput, _Sessions

_P = c_void_p
_PP = POINTER(c_void_p)

_create = fn("sp_sandbox_create", c_int, _PP, POINTER(S.SandboxOpts), POINTER(ErrorPtr))
_open = fn("sp_sandbox_open", c_int, _PP, c_char_p, POINTER(S.SandboxOpts), POINTER(ErrorPtr))
_free = fn("sp_sandbox_free", None, _P)
_egress = fn("sp_sandbox_egress", c_int, POINTER(c_void_p), _P, POINTER(ErrorPtr))
_egress_change = fn("sp_sandbox_egress_change", c_int, _P, POINTER(S.EgressChangeOpts),
                    POINTER(ErrorPtr))
_egress_log = fn("sp_sandbox_egress_log", c_int, POINTER(c_int), _P, POINTER(ErrorPtr))
_secret_set = fn("sp_sandbox_secret_set", c_int, _P, c_char_p, c_char_p, POINTER(ErrorPtr))
_name = fn("sp_sandbox_name", c_char_p, _P)
_workspace = fn("sp_sandbox_workspace", c_char_p, _P)
_state_dir = fn("sp_sandbox_state_dir", c_char_p, _P)
_image = fn("sp_sandbox_image", c_char_p, _P)
_container_id = fn("sp_sandbox_container_id", c_char_p, _P)
_created_at = fn("sp_sandbox_created_at", c_char_p, _P)
_engine = fn("sp_sandbox_engine", c_char_p, _P)
_is_remote = fn("sp_sandbox_is_remote", c_bool, _P)
_rpc = fn("sp_sandbox_rpc", c_int, _P, c_char_p, c_char_p, POINTER(c_void_p), POINTER(ErrorPtr))
_status_get = fn("sp_sandbox_status_get", c_int, POINTER(POINTER(S.Status)), _P, POINTER(ErrorPtr))
_status_free = fn("sp_sandbox_status_free", None, POINTER(S.Status))
_exec_path_get = fn("sp_sandbox_exec_path", c_int, POINTER(c_void_p), _P)
_start = fn("sp_sandbox_start", c_int, _P, POINTER(ErrorPtr))
_stop = fn("sp_sandbox_stop", c_int, _P, c_int, POINTER(ErrorPtr))
_restart = fn("sp_sandbox_restart", c_int, _P, POINTER(ErrorPtr))
_pause = fn("sp_sandbox_pause", c_int, _P, POINTER(ErrorPtr))
_unpause = fn("sp_sandbox_unpause", c_int, _P, POINTER(ErrorPtr))
_remove = fn("sp_sandbox_remove", c_int, _P, c_bool, POINTER(ErrorPtr))
_list = fn("sp_sandbox_list", c_int, POINTER(POINTER(c_char_p)), c_char_p, POINTER(ErrorPtr))
_shell = fn("sp_sandbox_shell", c_int, POINTER(POINTER(S.RunResult)), _P, c_char_p,
            POINTER(S.RunOpts), POINTER(ErrorPtr))
_exec = fn("sp_sandbox_exec", c_int, POINTER(POINTER(S.RunResult)), _P, S.StrV,
           POINTER(S.RunOpts), POINTER(ErrorPtr))
_run_free = fn("sp_run_result_free", None, POINTER(S.RunResult))
_fork = fn("sp_sandbox_fork", c_int, _PP, _P, c_char_p, POINTER(S.SandboxOpts), POINTER(ErrorPtr))
_snap_open = fn("sp_sandbox_snapshot_open", c_int, _PP, _P, c_void_p, POINTER(ErrorPtr))
_snap_store = fn("sp_sandbox_snapshot_store", c_void_p, _P)
_snap_close = fn("sp_sandbox_snapshot_close", None, _P)
_sb_snap_create = fn("sp_sandbox_snapshot_create", c_int, POINTER(POINTER(S.Snapshot)), _P,
                     c_char_p, POINTER(ErrorPtr))
_sb_snap_list = fn("sp_sandbox_snapshot_list", c_int, POINTER(POINTER(S.Snapshots)), _P,
                   POINTER(ErrorPtr))
_sb_snap_get = fn("sp_sandbox_snapshot_get", c_int, POINTER(POINTER(S.Snapshot)), _P, c_char_p,
                  POINTER(ErrorPtr))
_sb_snap_restore = fn("sp_sandbox_snapshot_restore", c_int, POINTER(POINTER(S.Snapshot)), _P,
                      c_char_p, POINTER(ErrorPtr))
_sb_snap_delete = fn("sp_sandbox_snapshot_delete", c_int, _P, c_char_p, POINTER(ErrorPtr))
_sb_snap_diff = fn("sp_sandbox_snapshot_diff", c_int, POINTER(POINTER(S.SnapDiff)), _P, c_char_p,
                   c_char_p, POINTER(S.SnapshotDiffOpts), POINTER(ErrorPtr))
_sb_snap_export_fd = fn("sp_sandbox_snapshot_export_fd", c_int, _P, c_char_p, c_int, c_int,
                        POINTER(ErrorPtr))
_sb_snap_import_fd = fn("sp_sandbox_snapshot_import_fd", c_int, POINTER(c_void_p), _P, c_int,
                        c_char_p, POINTER(ErrorPtr))
_snapshot_free = fn("sp_snapshot_free", None, POINTER(S.Snapshot))
_snapshots_free = fn("sp_snapshots_free", None, POINTER(S.Snapshots))
_snapdiff_free = fn("sp_snapdiff_free", None, POINTER(S.SnapDiff))
_change_name = fn("sp_snapshot_change_name", c_char_p, c_int)
_snapshot_export = fn("sp_snapshot_export", c_int, _P, c_char_p, c_char_p, c_int, c_int,
                      POINTER(ErrorPtr))
_snapshot_import = fn("sp_snapshot_import", c_int, POINTER(POINTER(S.Snapshot)), _P, c_char_p,
                      c_int, c_char_p, POINTER(ErrorPtr))
_apply = fn("sp_sandbox_apply", c_int, POINTER(POINTER(S.ApplyResult)), _P,
            POINTER(S.ApplyOpts), POINTER(ErrorPtr))
_apply_free = fn("sp_apply_result_free", None, POINTER(S.ApplyResult))
_apply_action_name = fn("sp_apply_action_name", c_char_p, c_int)
_apply_hold_name = fn("sp_apply_hold_name", c_char_p, c_int)
_apply_hold_why = fn("sp_apply_hold_why", c_char_p, c_int)
_create_from_template = fn("sp_sandbox_create_from_template", c_int, _PP, c_char_p,
                           POINTER(S.SandboxOpts), POINTER(ErrorPtr))
_logs = fn("sp_sandbox_logs", c_int, _P, POINTER(S.LogsOpts), S.LogsFn, c_void_p,
           POINTER(ErrorPtr))
_gc = fn("sp_sandbox_gc", c_int, POINTER(POINTER(S.SandboxOrphans)), c_char_p, c_char_p, c_bool,
         POINTER(ErrorPtr))
_orphans_free = fn("sp_sandbox_orphans_free", None, POINTER(S.SandboxOrphans))
_event_append = fn("sp_sandbox_event_append", c_int, POINTER(ctypes.c_uint64), _P,
                   POINTER(S.SandboxEvent), POINTER(ErrorPtr))
_ORPHAN_KINDS = {0: "container", 1: "runtime", 2: "service", 3: "pod", 4: "incomplete", 5: "kept"}

_NETWORKS = {"none": 0, "default": 1, "bridge": 1, "host": 2}
_EXEC_PATHS = {"auto": 0, "rest": 1, "fast": 2}
_USERNS = {"private": 0, "host": 1}
_SECCOMP = {"sandpod": 0, "podman": 1, "unconfined": 2}
_PULL = {None: 0, "default": 0, "missing": 1, "always": 2, "never": 3}


def _s(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


def _choice(table: dict[Any, int], value: Any, what: str) -> int:
    try:
        return table[value]
    except KeyError:
        names = ", ".join(repr(k) for k in table if k is not None)
        raise errors.InvalidError(f"unknown {what} {value!r}: one of {names}",
                                  errors.EINVAL) from None


# ---------------------------------------------------------------- results --


@dataclass(frozen=True)
class Mount:
    """A host folder to hydrate the workspace from (sp_mount).

    ``dst`` is where it lands in the workspace (None: its root).
    ``keep_secrets`` copies files that hold credentials as they are
    (``secrets=keep``); by default they are left out or rewritten without
    them (see the list in contrib/docs/hydration.md).
    """

    src: str | os.PathLike[str]
    dst: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_bytes: int = 0
    follow_symlinks: bool = False
    gitignore: bool = False
    keep_secrets: bool = False


@dataclass(frozen=True)
class RunResult:
    """The outcome of :meth:`Sandbox.shell` / :meth:`Sandbox.exec`.

    A non-zero exit is a result, not an exception. ``stdout``/``stderr`` are
    the captured streams decoded as UTF-8 (``errors="replace"``), capped to
    a head and a tail (``stdout_truncated``); ``stdout_bytes`` is the raw
    capture and ``stdout_total`` what the command wrote in all.
    ``exit_code`` is 128+N when killed by signal N, -1 when unknown.
    """

    exit_code: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    stdout_total: int
    stderr_total: int
    timed_out: bool
    duration_ms: int

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class Status:
    """What a sandbox's container is doing (sp_sandbox_status)."""

    state: str
    running: bool
    oom_killed: bool
    exit_code: int
    container: str | None
    pid: int
    rootless: bool
    limits_apply: bool
    host_uid: int
    host_gid: int


@dataclass(frozen=True)
class ExecPath:
    """Which way commands reach the container, and why (sp_sandbox_exec_path)."""

    path: str  # "fast": through sandpod-agent; "rest": a Podman exec each
    reason: str


@dataclass(frozen=True)
class Snapshot:
    """A snapshot record (sp_snapshot)."""

    id: str
    tag: str | None
    commit: str
    root: str
    store: str
    created_at: str
    files: int
    dirs: int
    symlinks: int
    bytes: int


@dataclass(frozen=True)
class Change:
    """One changed path of a diff: kind is added/modified/deleted/type_changed."""

    path: str
    kind: str
    content_changed: bool
    old_mode: int
    new_mode: int


@dataclass(frozen=True)
class Diff:
    """What changed between two snapshots, or a snapshot and the workspace."""

    from_commit: str
    to: str
    changes: tuple[Change, ...]
    added: int
    modified: int
    deleted: int
    type_changed: int
    patch: str | None = None


@dataclass(frozen=True)
class ApplyResult:
    """What :meth:`Sandbox.apply` did (or would do) to the host folder."""

    to: str
    from_snapshot: str
    changes: tuple[tuple[str, str], ...]  # (action, path)
    conflicts: tuple[tuple[str, str], ...]  # (path, reason)
    skipped: int
    applied: bool
    patch: str | None = None
    #: What was held back: (path, hold, reason, count); hold is
    #: "version-control", "review", "link-out", "special" or "keeps-held".
    held: tuple[tuple[str, str, str, int], ...] = ()
    #: Changes the mount's include/exclude/gitignore filters left out.
    filtered: int = 0
    #: The id of the snapshot whose content was applied.
    snapshot: str = ""
    #: With ``branch``: the new commit's id.
    commit: str | None = None


@dataclass(frozen=True)
class Orphan:
    """Something :meth:`Sandbox.gc` found that no sandbox owns (sp_sandbox_orphan).

    ``kind`` is "container", "runtime" (a lost conmon), "service", "pod",
    "incomplete" (a state folder a killed create left) or "kept" (a sandbox
    an MCP session kept, from sp_sandbox_gc_kept); for the last two
    ``container`` is the sandbox's name."""

    kind: str
    container: str
    state_dir: str | None
    reason: str
    pid: int
    removed: bool
    error: str | None


@dataclass(frozen=True)
class GcResult:
    """What :meth:`Sandbox.gc` found (and removed unless a dry run)."""

    orphans: tuple[Orphan, ...]
    unlabelled: int
    #: Incomplete sandboxes left alone: a create holds their lock, or they
    #: changed less than a minute ago.
    incomplete_busy: int = 0


def _snapshot(p: Any) -> Snapshot:
    c = p.contents
    return Snapshot(id=_s(c.id) or "", tag=_s(c.tag), commit=_s(c.commit) or "",
                    root=_s(c.root) or "", store=_s(c.store) or "",
                    created_at=_s(c.created_at) or "", files=c.files, dirs=c.dirs,
                    symlinks=c.symlinks, bytes=c.bytes)


def _ref(snapshot: str | Snapshot | None) -> bytes | None:
    """A snapshot argument as C takes it: a :class:`Snapshot` by its id, a
    str (id, tag or id prefix) as it is, None as NULL."""
    if isinstance(snapshot, Snapshot):
        return enc(snapshot.id)
    if snapshot is None or isinstance(snapshot, str):
        return enc(snapshot)
    raise TypeError(f"a snapshot is a sandpod.Snapshot or a str (id, tag or id prefix), "
                    f"not {type(snapshot).__name__}")


def _take_snapshot(p: Any) -> Snapshot:
    try:
        return _snapshot(p)
    finally:
        _snapshot_free(p)


def _run_result(p: Any) -> RunResult:
    c = p.contents
    try:
        return RunResult(
            exit_code=c.exit_code,
            stdout_bytes=ctypes.string_at(c.out, c.out_len) if c.out else b"",
            stderr_bytes=ctypes.string_at(c.err, c.err_len) if c.err else b"",
            stdout_truncated=c.out_truncated, stderr_truncated=c.err_truncated,
            stdout_total=c.out_total, stderr_total=c.err_total,
            timed_out=c.timed_out, duration_ms=c.duration_ms)
    finally:
        _run_free(p)


def _run_opts(timeout: float | None, cwd: str | None, env: dict[str, str] | None,
              stdin: bytes | str | None, user: str | None, max_bytes: int,
              max_lines: int, keep: list[object]) -> S.RunOpts:
    o = S.RunOpts(version=S.RUN_OPTS_VERSION)
    # timeout in seconds: None = the library's 60 s; 0 or negative = none.
    if timeout is not None:
        o.timeout_ms = -1 if timeout <= 0 else max(1, int(timeout * 1000))
    o.workdir = enc(cwd)
    o.env = S.strv_ptr([f"{k}={v}" for k, v in env.items()] if env else None, keep)
    if stdin is not None:
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        buf = ctypes.create_string_buffer(data, len(data) or 1)
        keep.append(buf)
        o.stdin_data = ctypes.cast(buf, c_void_p)
        o.stdin_len = len(data)
    o.user = enc(user)
    o.max_bytes = max_bytes
    o.max_lines = max_lines
    return o


def _mounts(mounts: Iterable[Mount | str | os.PathLike[str]], keep: list[object]) -> tuple[Any, int]:
    """sp_mount[] for a list of Mounts or paths (kept alive by ``keep``)."""
    ms = [m if isinstance(m, Mount) else Mount(src=m) for m in mounts]
    if not ms:
        return None, 0
    arr = (S.Mount * len(ms))()
    for i, m in enumerate(ms):
        arr[i].host_path = enc(m.src)
        arr[i].mount_path = enc(m.dst)
        arr[i].include = S.strv_ptr(list(m.include) or None, keep)
        arr[i].exclude = S.strv_ptr(list(m.exclude) or None, keep)
        arr[i].max_bytes = m.max_bytes
        arr[i].follow_symlinks = m.follow_symlinks
        arr[i].gitignore = m.gitignore
        arr[i].keep_secrets = m.keep_secrets
    keep.append(arr)
    return ctypes.cast(arr, POINTER(S.Mount)), len(ms)


def _base_opts(state_root: str | os.PathLike[str] | None, url: str | None,
               exec_path: str | None) -> S.SandboxOpts:
    o = S.SandboxOpts(version=S.SANDBOX_OPTS_VERSION)
    o.state_root = enc(state_root)
    o.podman_url = enc(url)
    if exec_path is not None:
        o.exec_path = _choice(_EXEC_PATHS, exec_path, "exec path")
    return o


# ---------------------------------------------------------------- sandbox --


class Sandbox:
    """A sandbox: a workspace folder and a hardened container around it.

    Make one with :meth:`create` or :meth:`open`. As a context manager,
    ``with Sandbox.create(...) as sb:`` removes the sandbox on exit (unless
    created or opened with ``keep=True``); ``close()`` only frees the
    handles and leaves the sandbox. Safe to share between threads (see the
    module's notes).

    Every argument that names a snapshot takes a :class:`Snapshot` (as
    :meth:`snapshot` and :meth:`snapshots` return them) or a str: an id, a
    tag or a unique id prefix.
    """

    def __init__(self, handle: c_void_p, *, keep: bool, state_root: Any, url: str | None,
                 exec_path: str | None) -> None:
        self._handle = handle
        self._keep = keep
        self._state_root = state_root
        self._url = url
        self._exec_path = exec_path
        self._lock = threading.RLock()
        self._pool: list[c_void_p] = []
        self._all: list[c_void_p] = []
        self._pool_lock = threading.Lock()
        self._closed = False
        self._removed = False
        self._closers: list[Any] = []
        self.name: str = _s(_name(handle)) or ""
        # "" for a sandbox on another engine: its workspace is in its Pod.
        self.workspace: str = _s(_workspace(handle)) or ""
        self.state_dir: str = _s(_state_dir(handle)) or ""
        self.engine: str = _s(_engine(handle)) or "local"
        self.is_remote: bool = bool(_is_remote(handle))
        self.sessions = _Sessions(self)

    # -- making and finding --------------------------------------------------

    @classmethod
    def create(cls, name: str | None = None, *, image: str | None = None,
               mounts: Iterable[Mount | str | os.PathLike[str]] = (),
               allowed_roots: Iterable[str] | None = None,
               network: Literal["none", "default", "bridge", "host"] = "none",
               env: dict[str, str] | None = None, env_pass: Iterable[str] | None = None,
               workdir: str | None = None, user: str | None = None,
               memory: int | None = None, cpus: float | None = None,
               pids_limit: int | None = None, tmpfs: int | None = None,
               writable_root: bool = False, cap_add: Iterable[str] | None = None,
               setup: Iterable[str] | None = None, setup_network: bool = False,
               setup_timeout: float | None = None,
               pull: Literal["default", "missing", "always", "never"] | None = None,
               pull_no_tls_verify: bool = False, userns: str | None = None,
               seccomp: str | None = None, exec_path: str | None = None,
               state_root: str | os.PathLike[str] | None = None, url: str | None = None,
               keep: bool = False, template: str | None = None,
               from_: str | tuple[str, str | Snapshot | None] | None = None,
               progress: Callable[[HydrateProgress], Any] | None = None,
               pull_progress: Callable[[str], Any] | None = None,
               engine: str | None = None, allow: Iterable[str] | None = None,
               deny: Iterable[str] | None = None,
               egress_hosts: str | os.PathLike[str] | None = None,
               setup_allow: Iterable[str] | None = None,
               secrets: Mapping[str, str] | None = None,
               secret_for: Mapping[str, str | Iterable[str]] | None = None,
               secret_in: Mapping[str, str] | None = None,
               egress_ca: str | os.PathLike[str] | None = None) -> Sandbox:
        """Create and start a sandbox (sp_sandbox_create); nothing is left on failure.

        ``memory`` is bytes (None: 1 GiB), ``cpus`` a CPU count (None: 1),
        ``tmpfs`` the size of /tmp in bytes, ``setup`` shell commands run
        once after hydration (one that fails makes create fail). Raises
        ``FileExistsError`` for a name in use, ``ValueError`` for bad options.

        ``template``: start from a saved template (its image, settings and
        workspace; the other options override or add, as
        sp_sandbox_create_from_template documents); ``from_``: fork an
        existing sandbox, ``name`` or ``(name, snapshot)`` (None: its newest
        snapshot), these options replacing its configuration where given
        (sp_sandbox_fork). ``progress`` is called
        with a :class:`HydrateProgress` while the mounts are copied,
        ``pull_progress`` with each line of an image pull; both on the
        calling thread. An exception either raises removes the new sandbox
        and propagates.

        ``allow``, ``deny``: egress rules (``sandpod create --allow/--deny``,
        sandpod/egress.h); with either, the sandbox's only network is its
        egress proxy and what no rule allows is refused. ``egress_hosts``: a
        hosts(5) file the proxy resolves names from before DNS.
        ``setup_allow``: allow rules in force only while ``setup`` runs.

        ``secrets``: brokered secrets, ``{"NAME": "env:VAR" or
        "file:PATH"}`` (``create --secret``); the workload's ``$NAME``
        holds a stand-in and the egress proxy puts the value in its place
        on requests to the hosts ``secret_for`` names, ``{"NAME": HOST or
        [HOST, ...]}`` (``api.example.com``, ``*.example.com:8443``,
        ``http://10.0.0.5:8080``); ``secret_in``: ``{"NAME": "query"}``
        (or ``"body"``, ``"query,body"``).
        Needs ``allow`` or ``deny``. Over HTTPS the proxy terminates the
        connection with a CA of its own, which the sandbox's TLS variables
        point at, and verifies the host against the host's CA bundle and
        ``egress_ca`` (a PEM file, ``create --egress-ca``).

        ``engine``: where it runs, an engine of ``sandpod engine ls`` (None:
        the state root's default, normally local Podman). On a kubernetes
        engine the sandbox is a Pod: commands, sessions, snapshots, diff,
        apply, fork, logs, :meth:`rpc`, ``sandpod.tools(...)`` and
        :attr:`fs` (through the peer's tools) work on it; stop, restart,
        pause and unpause raise ``InvalidError`` saying so, as a Pod has
        no such state (see :attr:`is_remote`).
        """
        keep_alive: list[object] = []
        o = _base_opts(state_root, url, exec_path)
        o.name = enc(name)
        o.image = enc(image)
        o.mounts, o.n_mounts = _mounts(mounts, keep_alive)
        o.allowed_roots = S.strv_ptr(list(allowed_roots) if allowed_roots is not None else None,
                                     keep_alive)
        o.env = S.strv_ptr([f"{k}={v}" for k, v in env.items()] if env else None, keep_alive)
        o.env_pass = S.strv_ptr(list(env_pass) if env_pass else None, keep_alive)
        o.workdir = enc(workdir)
        o.user = enc(user)
        o.network = _choice(_NETWORKS, network, "network")
        if memory is not None:
            o.memory_bytes = int(memory)
        if cpus is not None:
            o.nano_cpus = int(cpus * 1e9)
        if pids_limit is not None:
            o.pids_limit = int(pids_limit)
        if tmpfs is not None:
            o.tmpfs_bytes = int(tmpfs)
        o.writable_root = writable_root
        o.cap_add = S.strv_ptr(list(cap_add) if cap_add else None, keep_alive)
        o.setup = S.strv_ptr(list(setup) if setup else None, keep_alive)
        o.setup_network = setup_network
        if setup_timeout is not None:
            o.setup_timeout_ms = -1 if setup_timeout <= 0 else int(setup_timeout * 1000)
        o.pull = _choice(_PULL, pull, "pull policy")
        o.pull_no_tls_verify = pull_no_tls_verify
        if userns is not None:
            o.userns = _choice(_USERNS, userns, "user namespace")
        if seccomp is not None:
            o.seccomp = _choice(_SECCOMP, seccomp, "seccomp profile")
        cbs = Callbacks()
        o.progress = ctypes.cast(cbs.hydrate(progress), c_void_p)
        o.pull_progress = ctypes.cast(cbs.lines(pull_progress), c_void_p)
        o.engine = enc(engine)
        if allow is not None:
            o.allow = S.strv_ptr(list(allow), keep_alive)
        if deny is not None:
            o.deny = S.strv_ptr(list(deny), keep_alive)
        o.egress_hosts = enc(egress_hosts)
        if setup_allow is not None:
            o.setup_allow = S.strv_ptr(list(setup_allow), keep_alive)
        if secrets:
            o.secrets = S.strv_ptr([f"{k}={v}" for k, v in secrets.items()], keep_alive)
        if secret_for:
            o.secret_for = S.strv_ptr(
                [f"{k}={h}" for k, v in secret_for.items()
                 for h in ([v] if isinstance(v, str) else v)], keep_alive)
        if secret_in:
            o.secret_in = S.strv_ptr([f"{k}={v}" for k, v in secret_in.items()], keep_alive)
        o.egress_ca = enc(egress_ca)
        h = c_void_p()
        try:
            if template is not None and from_ is not None:
                raise errors.InvalidError("template and from_ exclude each other", errors.EINVAL)
            if template is not None:
                call(_create_from_template, byref(h), enc(template), byref(o))
            elif from_ is not None:
                src, snap = (from_, None) if isinstance(from_, str) else from_
                s_h = c_void_p()
                call(_open, byref(s_h), enc(src), byref(_base_opts(state_root, url, None)))
                try:
                    call(_fork, byref(h), s_h, _ref(snap), byref(o))
                finally:
                    _free(s_h)
            else:
                call(_create, byref(h), byref(o))
        except errors.Error:
            cbs.check()
            raise
        sb = cls(h, keep=keep, state_root=state_root, url=url, exec_path=exec_path)
        if cbs.error is not None:
            try:
                sb.remove()
            finally:
                cbs.check()
        return sb

    @classmethod
    def open(cls, name: str, *, state_root: str | os.PathLike[str] | None = None,
             url: str | None = None, exec_path: str | None = None,
             keep: bool = True) -> Sandbox:
        """Open an existing sandbox by name. ``FileNotFoundError`` when there is none.

        ``keep`` defaults to True here: leaving a ``with`` block does not
        remove a sandbox that was merely opened.
        """
        o = _base_opts(state_root, url, exec_path)
        h = c_void_p()
        call(_open, byref(h), enc(name), byref(o))
        return cls(h, keep=keep, state_root=state_root, url=url, exec_path=exec_path)

    @staticmethod
    def list(state_root: str | os.PathLike[str] | None = None) -> list[str]:
        """Names of the sandboxes under a state root, sorted."""
        out = POINTER(c_char_p)()
        call(_list, byref(out), enc(state_root))
        return take_strv(out)

    def fork(self, name: str | None = None, snapshot: str | Snapshot | None = None, *,
             keep: bool = False) -> Sandbox:
        """A new sandbox from one of this one's snapshots (None: the newest)."""
        o = _base_opts(self._state_root, self._url, None)
        o.name = enc(name)
        h = c_void_p()
        with self._lock:
            call(_fork, byref(h), self._main(), _ref(snapshot), byref(o))
        return Sandbox(h, keep=keep, state_root=self._state_root, url=self._url,
                       exec_path=self._exec_path)

    # -- handles ------------------------------------------------------------

    def _main(self) -> c_void_p:
        if self._closed:
            raise errors.InvalidError(f"sandbox {self.name} is closed", errors.EINVAL)
        return self._handle

    def _borrow(self) -> c_void_p:
        """A handle of its own for one command (the C handle is single-threaded)."""
        self._main()
        with self._pool_lock:
            if self._pool:
                return self._pool.pop()
        o = _base_opts(self._state_root, self._url, self._exec_path)
        h = c_void_p()
        call(_open, byref(h), enc(self.name), byref(o))
        with self._pool_lock:
            self._all.append(h)
        return h

    def _give_back(self, h: c_void_p) -> None:
        with self._pool_lock:
            if not self._closed:
                self._pool.append(h)
                return
            self._all.remove(h)
        _free(h)  # closed while it was in use: its caller frees it

    def _on_close(self, cb: Any) -> None:
        """Run cb first at close (a tool suite borrowing one of the handles)."""
        with self._pool_lock:
            self._closers.append(cb)

    def close(self) -> None:
        """Free the handles (and kill the sessions started here); the sandbox stays."""
        with self._lock:
            if self._closed:
                return
            with self._pool_lock:
                closers, self._closers = self._closers, []
            for cb in closers:
                cb()
            # Handles lent to running commands stay: _give_back frees them.
            with self._pool_lock:
                self._closed = True
                idle, self._pool = self._pool, []
                for h in idle:
                    self._all.remove(h)
            for h in idle:
                _free(h)
            fs = getattr(self, "_fs", None)
            if fs is not None:
                fs._detach()
            _free(self._handle)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if not self._keep and not self._removed and not self._closed:
                self.remove()
        finally:
            self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"Sandbox({self.name!r})"

    # -- facts and lifecycle -------------------------------------------------

    @property
    def image(self) -> str | None:
        with self._lock:
            return _s(_image(self._main()))

    @property
    def container_id(self) -> str | None:
        with self._lock:
            return _s(_container_id(self._main()))

    def rpc(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One JSON-RPC request to the sandpod peer of a sandbox on another
        engine (sp_sandbox_rpc): MCP's ``tools/list``, ``tools/call``...;
        returns the answer's ``result``, parsed. A dropped stream is opened
        again and the request resent under the same key: it runs once.
        Raises ``InvalidError`` on a local sandbox."""
        out = c_void_p()
        text = json.dumps(params if params is not None else {})
        with self._lock:
            call(_rpc, self._main(), enc(method), enc(text), byref(out))
        try:
            return json.loads(ctypes.string_at(out.value).decode("utf-8", "surrogateescape"))
        finally:
            c_free(out)

    # -- egress ----------------------------------------------------------------

    def network(self) -> list[tuple[str, str]] | None:
        """The egress policy as ``(verdict, rule)`` pairs in the order they
        are decided (``("deny", "*.evil.com")``); None when the sandbox has
        none (its network is its ``network`` option's)."""
        out = c_void_p()
        with self._lock:
            call(_egress, byref(out), self._main())
        if not out.value:
            return None
        return [tuple(line.split(" ", 1)) for line in take_strv(out)]  # type: ignore[misc]

    def network_change(self, *, allow: Iterable[str] = (), deny: Iterable[str] = (),
                       remove: Iterable[str] = ()) -> list[tuple[str, str]]:
        """Change the policy while the sandbox runs (sp_sandbox_egress_change):
        in force within 100 ms, open connections it no longer allows are
        cut. All or nothing; returns the new policy."""
        keep: list[object] = []
        ch = S.EgressChangeOpts(version=S.EGRESS_CHANGE_OPTS_VERSION)
        ch.allow = S.strv_ptr(list(allow) or None, keep)
        ch.deny = S.strv_ptr(list(deny) or None, keep)
        ch.remove = S.strv_ptr(list(remove) or None, keep)
        with self._lock:
            call(_egress_change, self._main(), byref(ch))
        return self.network() or []

    def secret_set(self, name: str, source: str | None) -> None:
        """Rotate brokered secret ``name`` while the sandbox runs
        (sp_sandbox_secret_set, ``sandpod secret NAME set``): ``source`` is
        ``"env:VAR"`` or ``"file:PATH"``, read here; the proxy uses the new
        value from its next request on. ``None`` takes the secret away (its
        stand-in then goes out as it is). Raises ``InvalidError`` for a
        secret the sandbox was not made with."""
        with self._lock:
            call(_secret_set, self._main(), enc(name), enc(source))

    def network_log(self) -> list[dict[str, Any]]:
        """The proxy's connection records so far, oldest first (one dict per
        connection: time, proto, host, port, addr, verdict, up, down, ms,
        rule, why); [] before the first."""
        fd = c_int(-1)
        try:
            with self._lock:
                call(_egress_log, byref(fd), self._main())
        except errors.NotFoundError:
            return []
        with os.fdopen(fd.value, "rb") as f:
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]

    @property
    def created_at(self) -> str | None:
        with self._lock:
            return _s(_created_at(self._main()))

    @property
    def fs(self) -> Any:
        """The workspace as the seeds' ``Filesystem`` and
        ``SnapshotableFilesystem`` protocols (:class:`sandpod.SandboxFilesystem`;
        its snapshots pause the container). One per sandbox, sharing the
        sandbox's lock: the C handle under it is not thread-safe. On a
        sandbox of another engine (:attr:`is_remote`) it is a
        :class:`sandpod.RemoteFilesystem`: the same protocol through the
        tool suite of the sandpod peer beside the workspace."""
        from .filesystem import SandboxFilesystem
        from .remote_fs import RemoteFilesystem

        with self._lock:
            fs = getattr(self, "_fs", None)
            if fs is None:
                h = self._main()  # a closed sandbox raises here
                # The workspace is on this host, or its peer's tools serve it.
                fs = (RemoteFilesystem(self) if not self.workspace
                      else SandboxFilesystem(h, self, lock=self._lock))
                self._fs = fs
            return fs

    def status(self) -> Status:
        """Ask Podman what the container is doing."""
        p = POINTER(S.Status)()
        with self._lock:
            call(_status_get, byref(p), self._main())
        try:
            c = p.contents
            return Status(state=_s(c.state) or "", running=c.running, oom_killed=c.oom_killed,
                          exit_code=c.exit_code, container=_s(c.container), pid=c.pid,
                          rootless=c.rootless, limits_apply=c.limits_apply,
                          host_uid=c.host_uid, host_gid=c.host_gid)
        finally:
            _status_free(p)

    def exec_path(self) -> ExecPath:
        """Which way commands reach the container now, and why: "fast"
        (sandpod-agent, its pid 1) or "rest" (a Podman exec each). Asks no
        engine."""
        out = c_void_p()
        with self._lock:
            path = _exec_path_get(byref(out), self._main())
        try:
            why = ctypes.string_at(out.value).decode("utf-8", "surrogateescape")
        finally:
            c_free(out)
        return ExecPath(path="fast" if path == _EXEC_PATHS["fast"] else "rest", reason=why)

    def start(self) -> None:
        with self._lock:
            call(_start, self._main())

    def stop(self, timeout: int = -1) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds (negative: 10)."""
        with self._lock:
            call(_stop, self._main(), int(timeout))

    def restart(self) -> None:
        with self._lock:
            call(_restart, self._main())

    def pause(self) -> None:
        with self._lock:
            call(_pause, self._main())

    def unpause(self) -> None:
        with self._lock:
            call(_unpause, self._main())

    def remove(self, keep_workspace: bool = False) -> None:
        """Remove the container and the state folder, then close the handles."""
        with self._lock:
            call(_remove, self._main(), keep_workspace)
            self._removed = True
        self.close()

    # -- commands -----------------------------------------------------------

    def shell(self, command: str, *, timeout: float | None = None, cwd: str | None = None,
              env: dict[str, str] | None = None, stdin: bytes | str | None = None,
              user: str | None = None, max_bytes: int = 0, max_lines: int = 0) -> RunResult:
        """Run ``sh -c command`` to completion.

        ``timeout`` in seconds (None: 60; 0: none); on timeout the command's
        process group is killed and ``timed_out`` set. ``max_bytes`` /
        ``max_lines`` cap each stream (0: 8192 bytes, 200 lines; head and
        tail kept).
        """
        keep: list[object] = []
        o = _run_opts(timeout, cwd, env, stdin, user, max_bytes, max_lines, keep)
        return self._run(_shell, enc(command), o)

    def exec(self, argv: list[str] | tuple[str, ...], *, timeout: float | None = None,
             cwd: str | None = None, env: dict[str, str] | None = None,
             stdin: bytes | str | None = None, user: str | None = None,
             max_bytes: int = 0, max_lines: int = 0) -> RunResult:
        """Run ``argv`` without a shell; as :meth:`shell` otherwise."""
        if not argv:
            raise errors.InvalidError("exec needs a command", errors.EINVAL)
        keep: list[object] = []
        o = _run_opts(timeout, cwd, env, stdin, user, max_bytes, max_lines, keep)
        return self._run(_exec, S.strv_ptr(list(argv), keep), o)

    def _run(self, f: Any, what: Any, o: S.RunOpts) -> RunResult:
        h = self._borrow()
        try:
            p = POINTER(S.RunResult)()
            call(f, byref(p), h, what, byref(o))
            return _run_result(p)
        finally:
            self._give_back(h)

    # -- sessions (see session.py) ------------------------------------------

    def exec_command(self, command: str, *, tty: bool = True, yield_time_ms: int = 0,
                     max_output_tokens: int = 0, cwd: str | None = None,
                     env: dict[str, str] | None = None, user: str | None = None,
                     rows: int = 0, cols: int = 0, close_stdin: bool = False) -> SessionOutput:
        """Start an interactive session; returns its first output and ``session_id``."""
        return self.sessions.start(command, tty=tty, yield_time_ms=yield_time_ms,
                                   max_output_tokens=max_output_tokens, cwd=cwd, env=env,
                                   user=user, rows=rows, cols=cols, close_stdin=close_stdin)

    def write_stdin(self, session_id: int, chars: str | bytes = "", *, yield_time_ms: int = 0,
                    max_output_tokens: int = 0, close_stdin: bool = False) -> SessionOutput:
        """Send input (or nothing, to poll) to a session; returns what it printed since."""
        return self.sessions.write(session_id, chars, yield_time_ms=yield_time_ms,
                                   max_output_tokens=max_output_tokens, close_stdin=close_stdin)

    def kill_session(self, session_id: int) -> None:
        """Kill a session's whole process tree."""
        self.sessions.kill(session_id)

    def list_sessions(self) -> list[SessionInfo]:
        return self.sessions.list()

    # -- snapshots ----------------------------------------------------------

    def _with_store(self, fn_: Any, wrap: type[errors.Error] = errors.SnapshotError) -> Any:
        with self._lock:
            h = c_void_p()
            call(_snap_open, byref(h), self._main(), None, wrap=wrap)
            try:
                return fn_(_snap_store(h))
            finally:
                _snap_close(h)

    def _snap_call(self, f: Any, out: Any, *args: Any,
                   wrap: type[errors.Error] = errors.SnapshotError) -> None:
        """One sp_sandbox_snapshot_* call on the main handle, either engine:
        a local sandbox's store paused around it, a remote one's peer asked."""
        with self._lock:
            call(f, out, self._main(), *args, wrap=wrap)

    def snapshot(self, tag: str | None = None) -> Snapshot:
        """Snapshot the workspace (the container is paused meanwhile)."""
        p = POINTER(S.Snapshot)()
        self._snap_call(_sb_snap_create, byref(p), enc(tag))
        return _take_snapshot(p)

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot, oldest first."""
        p = POINTER(S.Snapshots)()
        self._snap_call(_sb_snap_list, byref(p))
        try:
            return [_snapshot(p.contents.v[i]) for i in range(p.contents.n)]
        finally:
            _snapshots_free(p)

    def get_snapshot(self, ref: str | Snapshot) -> Snapshot:
        """One snapshot by id, tag or prefix (a Snapshot: its record anew)."""
        p = POINTER(S.Snapshot)()
        self._snap_call(_sb_snap_get, byref(p), _ref(ref))
        return _take_snapshot(p)

    def restore(self, ref: str | Snapshot) -> Snapshot:
        """Make the workspace equal to a snapshot. Raises SnapshotRestoreError."""
        p = POINTER(S.Snapshot)()
        self._snap_call(_sb_snap_restore, byref(p), _ref(ref), wrap=errors.SnapshotRestoreError)
        return _take_snapshot(p)

    def delete_snapshot(self, ref: str | Snapshot) -> None:
        with self._lock:
            call(_sb_snap_delete, self._main(), _ref(ref), wrap=errors.SnapshotError)

    def diff(self, a: str | Snapshot, b: str | Snapshot | None = None, *,
             patch: bool = False, context_lines: int = 0) -> Diff:
        """What changed from snapshot ``a`` to ``b`` (None: the live workspace)."""
        o = S.SnapshotDiffOpts(version=S.SNAPSHOT_DIFF_OPTS_VERSION, patch=patch,
                               context_lines=context_lines)
        p = POINTER(S.SnapDiff)()
        self._snap_call(_sb_snap_diff, byref(p), _ref(a), _ref(b), byref(o))
        try:
            d = p.contents
            ch = tuple(Change(path=_s(d.v[i].path) or "",
                              kind=_s(_change_name(d.v[i].kind)) or "",
                              content_changed=d.v[i].content_changed,
                              old_mode=d.v[i].old_mode, new_mode=d.v[i].new_mode)
                       for i in range(d.n))
            return Diff(from_commit=_s(d.from_) or "", to=_s(d.to) or "", changes=ch,
                        added=d.added, modified=d.modified, deleted=d.deleted,
                        type_changed=d.type_changed, patch=_s(d.patch))
        finally:
            _snapdiff_free(p)

    def export(self, ref: str | Snapshot, path: str | os.PathLike[str], *,
               gzip: bool | None = None) -> None:
        """Write a snapshot as a tar archive (gzip: by default when path ends in .gz/.tgz)."""
        r = _ref(ref)
        if gzip is None:
            gzip = os.fspath(path).endswith((".gz", ".tgz"))
        # Written here under a temporary name, renamed into place once
        # whole; the library reads the sandbox's store, or has its peer
        # write the archive where the store is elsewhere.
        dest = os.fspath(path)
        tmp = f"{dest}.sandpod-{os.getpid()}-{threading.get_ident()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            try:
                with self._lock:
                    call(_sb_snap_export_fd, self._main(), r, fd, 1 if gzip else 0,
                         wrap=errors.SnapshotError)
            finally:
                os.close(fd)
            os.replace(tmp, dest)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)

    def import_(self, path: str | os.PathLike[str], tag: str | None = None) -> Snapshot:
        """Read a tar archive into a new snapshot (the workspace is untouched)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:  # a SnapshotError, as the library's own
            raise errors.SnapshotError(
                f"{os.fspath(path)}: {e.strerror}",
                errors.ENOTFOUND if e.errno == errno.ENOENT else errors.ERROR,
                errno=e.errno or 0) from e
        idp = c_void_p()
        try:
            with self._lock:
                call(_sb_snap_import_fd, byref(idp), self._main(), fd, enc(tag),
                     wrap=errors.SnapshotError)
        finally:
            os.close(fd)
        new_id = ctypes.string_at(idp.value).decode()
        c_free(idp)
        return self.get_snapshot(new_id)

    def apply(self, *, to: str | os.PathLike[str] | None = None,
              from_: str | Snapshot | None = None, subdir: str | None = None,
              dry_run: bool = False, force: bool = False, patch: bool = False,
              max_file_bytes: int = 0, snapshot: str | Snapshot | None = None,
              allow_paths: Sequence[str] = (), allow_links_out: bool = False,
              all: bool = False, max_files: int = 0, max_bytes: int = 0,
              branch: str | None = None, message: str | None = None) -> ApplyResult:
        """Copy the sandbox's changes back to a host folder (sp_sandbox_apply).

        ``to`` None: the first mount's source; conflicts (the host changed
        too) stop the apply unless ``force``. Version-control data, special
        files, symlinks out of the folder (unless ``allow_links_out``) and
        review paths such as ``.gitattributes`` or ``.vscode/`` (unless a
        glob of ``allow_paths`` names them) are held back and listed in
        ``held``; the mount's filters apply unless ``all``. ``from_``:
        count the changes from that snapshot instead of the baseline.
        ``snapshot``: apply that snapshot's content (the one a review
        showed) instead of the workspace now. ``branch``: write the changes as one commit on
        that new branch of the host folder's git repository (its parent is
        HEAD; work tree, index, HEAD, config and hooks untouched).
        """
        o = S.ApplyOpts(version=S.APPLY_OPTS_VERSION, dry_run=dry_run, force=force,
                        patch=patch, max_file_bytes=max_file_bytes,
                        allow_links_out=allow_links_out, all=all, max_files=max_files,
                        max_bytes=max_bytes)
        o.from_ = _ref(from_)
        o.to = enc(to)
        o.subdir = enc(subdir)
        o.snapshot = _ref(snapshot)
        o.branch = enc(branch)
        o.message = enc(message)
        allow = (c_char_p * (len(allow_paths) + 1))(*[enc(a) for a in allow_paths], None)
        if allow_paths:
            o.allow_paths = ctypes.cast(allow, POINTER(c_char_p))
        p = POINTER(S.ApplyResult)()
        with self._lock:
            call(_apply, byref(p), self._main(), byref(o))
        try:
            r = p.contents
            return ApplyResult(
                to=_s(r.to) or "", from_snapshot=_s(r.from_) or "",
                changes=tuple((_s(_apply_action_name(r.changes[i].action)) or "",
                               _s(r.changes[i].path) or "") for i in range(r.n_changes)),
                conflicts=tuple((_s(r.conflicts[i].path) or "", _s(r.conflicts[i].reason) or "")
                                for i in range(r.n_conflicts)),
                skipped=r.skipped, applied=r.applied, patch=_s(r.patch),
                held=tuple((_s(r.held[i].path) or "", _s(_apply_hold_name(r.held[i].why)) or "",
                            _s(_apply_hold_why(r.held[i].why)) or "", r.held[i].count)
                           for i in range(r.n_held)),
                filtered=r.filtered, snapshot=_s(r.snapshot) or "", commit=_s(r.commit))
        finally:
            _apply_free(p)

    # -- logs, templates, events, gc ------------------------------------------

    def logs(self, *, tail: int | None = None, since: str | None = None,
             timestamps: bool = False, follow: bool = False,
             callback: Callable[[str, bytes], Any] | None = None) -> str | None:
        """What the container's main process (the agent) printed (sp_sandbox_logs).

        Without ``callback``, returns it all as one str; with one, calls
        ``callback(stream, data)`` ("stdout"/"stderr", bytes, pieces that need
        not end at a line) as it comes and returns None; an exception from
        it stops the logs and propagates. ``tail``: only the last lines;
        ``since``: RFC 3339 or Unix seconds; ``follow``: until the
        container stops.
        """
        chunks: list[bytes] = []
        cbs = Callbacks()
        fp = cbs.logs(callback if callback is not None else
                      (lambda _stream, data: chunks.append(data)))
        o = S.LogsOpts(version=S.LOGS_OPTS_VERSION, follow=follow,
                       tail=-1 if tail is None else int(tail), timestamps=timestamps)
        o.since = enc(since)
        h = self._borrow()  # a follow may take long: not under the main lock
        try:
            try:
                call(_logs, h, byref(o), fp, None)
            except errors.Error:
                cbs.check()
                raise
        finally:
            self._give_back(h)
        cbs.check()
        return None if callback is not None else b"".join(chunks).decode("utf-8", "replace")

    def save_template(self, name: str, *, snapshot: str | Snapshot | None = None,
                      force: bool = False) -> Any:
        """Save this sandbox as a template (sp_template_save): its settings
        and a snapshot (None: a fresh one now). ``force`` replaces one of
        that name. Returns its :class:`sandpod.templates.Template`."""
        from . import templates

        with self._lock:
            return templates._save(self._main(), name, _ref(snapshot), force)

    def record_event(self, command: str, *, source: str | None = None,
                     summary: str | None = None, paths: Iterable[str] | None = None,
                     ok: bool = True, code: int = 0, status: int = 0,
                     duration_ms: int = 0) -> int:
        """Append a "command" record to the sandbox's events.jsonl
        (sp_sandbox_event_append); returns its ``call`` number."""
        keep: list[object] = []
        ev = S.SandboxEvent(version=S.SANDBOX_EVENT_VERSION, ok=ok, code=code, status=status,
                            duration_ms=duration_ms)
        ev.command = enc(command)
        ev.source = enc(source)
        ev.summary = enc(summary)
        ev.paths = S.strv_ptr(list(paths) if paths is not None else None, keep)
        n = ctypes.c_uint64()
        with self._lock:
            call(_event_append, byref(n), self._main(), byref(ev))
        return n.value

    def events(self, *, connections: bool = True) -> list[dict[str, Any]]:
        """The records of the sandbox's events.jsonl (tool calls, commands),
        oldest first; with ``connections`` (the default) and an egress
        policy, its proxy's connection records too (``"event":
        "connection"``, :meth:`network_log`), merged in by time."""
        import json

        try:
            with open(os.path.join(self.state_dir, "events.jsonl"), encoding="utf-8") as f:
                recs = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            recs = []
        if connections and self.network() is not None:
            recs += self.network_log()
            recs.sort(key=lambda r: r.get("ts") or r.get("time") or "")
        return recs

    @staticmethod
    def gc(*, url: str | None = None, state_root: str | os.PathLike[str] | None = None,
           dry_run: bool = False) -> GcResult:
        """Find and (unless ``dry_run``) remove what sandpod left that nothing
        owns: orphaned containers, incomplete sandboxes, lost conmons,
        unreachable services (sp_sandbox_gc). ``state_root`` limits it to
        that root's containers."""
        p = POINTER(S.SandboxOrphans)()
        root = os.path.abspath(state_root) if state_root is not None else None
        call(_gc, byref(p), enc(url), enc(root), dry_run)
        try:
            o = p.contents
            items = tuple(Orphan(kind=_ORPHAN_KINDS.get(it.kind, str(it.kind)),
                                 container=_s(it.container) or "", state_dir=_s(it.state_dir),
                                 reason=_s(it.reason) or "", pid=it.pid, removed=it.removed,
                                 error=_s(it.error))
                          for it in (o.items[i] for i in range(o.n)))
            return GcResult(orphans=items, unlabelled=o.unlabelled,
                            incomplete_busy=o.incomplete_busy)
        finally:
            _orphans_free(p)
