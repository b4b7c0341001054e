"""The seeds' ``Filesystem`` protocol over libsandpod's contained filesystem.

Types (exactly as the protocol names them): :class:`FileStat`,
:class:`FileEntry`, :class:`GlobMatch`, :class:`GrepMatch`,
:class:`ReadResult`, :class:`ReadBytesResult`, :class:`WriteResult`,
:class:`FilesystemSnapshot`; protocols :class:`Filesystem` and
:class:`SnapshotableFilesystem` (``runtime_checkable``); backends
:class:`HostFilesystem` (a bare host folder) and :class:`SandboxFilesystem`
(a sandbox's workspace).

Every path is resolved beneath the root by libsandpod (``sp_fs``): ``..``,
absolute paths other than ``/workspace/...`` and symlinks leading out are
refused with :class:`PermissionError`, NUL bytes with :class:`ValueError`.

Names are UTF-8. A name on disk that is not valid UTF-8 comes back with
``surrogateescape`` (as :func:`os.listdir` gives it) and can be passed back
as it is; grep's line content is decoded with replacement characters.

Thread safety: one instance may be used from several threads; calls are
serialised by a lock (the C handles are not thread-safe), and the GIL is
released while C works.
"""

from __future__ import annotations

import codecs
import errno as _errno
import ctypes
import hashlib
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, Protocol, runtime_checkable
from uuid import UUID

from . import _cfs as C
from . import _native, errors
from .errors import SnapshotError, SnapshotRestoreError

__all__ = [
    "FileStat", "FileEntry", "GlobMatch", "GrepMatch", "ReadResult", "ReadBytesResult",
    "WriteResult", "FilesystemSnapshot", "Filesystem", "SnapshotableFilesystem",
    "HostFilesystem", "SandboxFilesystem", "WriteMode",
]

WriteMode = Literal["create", "overwrite", "append"]

# dataclass(slots=True) is 3.10's: on 3.9 the result types keep a __dict__
# (frozen still refuses every assignment).
_result = (dataclass(slots=True, frozen=True) if sys.version_info >= (3, 10)
           else dataclass(frozen=True))

# ----------------------------------------------------------------- types --


@_result
class FileStat:
    """Metadata for a file or directory (a symlink is neither)."""

    path: str
    is_file: bool
    is_directory: bool
    size_bytes: int
    created_at: datetime | None
    modified_at: datetime | None


@_result
class FileEntry:
    """Directory listing entry."""

    name: str
    path: str
    is_file: bool
    is_directory: bool


@_result
class GlobMatch:
    """Result from glob operations."""

    path: str
    is_file: bool


@_result
class GrepMatch:
    """Result from grep operations; match_start/match_end index line_content."""

    path: str
    line_number: int
    line_content: str
    match_start: int
    match_end: int


@_result
class ReadResult:
    """Content returned from text read operations."""

    content: str
    path: str
    total_lines: int
    offset: int
    limit: int
    truncated: bool


@_result
class ReadBytesResult:
    """Content returned from binary read operations."""

    content: bytes
    path: str
    size_bytes: int
    offset: int
    limit: int
    truncated: bool


@_result
class WriteResult:
    """Confirmation of a write operation."""

    path: str
    bytes_written: int
    mode: WriteMode


@_result
class FilesystemSnapshot:
    """Immutable capture of filesystem state, storable in session."""

    snapshot_id: UUID
    created_at: datetime
    commit_ref: str
    root_path: str
    git_dir: str | None = None
    tag: str | None = None


# ------------------------------------------------------------- protocols --


@runtime_checkable
class Filesystem(Protocol):
    """Unified filesystem protocol for workspace operations (seed 001)."""

    def read(self, path: str, *, offset: int = 0, limit: int | None = None,
             encoding: str = "utf-8") -> ReadResult: ...

    def read_bytes(self, path: str, *, offset: int = 0,
                   limit: int | None = None) -> ReadBytesResult: ...

    def exists(self, path: str) -> bool: ...

    def stat(self, path: str) -> FileStat: ...

    def list(self, path: str = ".") -> Sequence[FileEntry]: ...

    def glob(self, pattern: str, *, path: str = ".") -> Sequence[GlobMatch]: ...

    def grep(self, pattern: str, *, path: str = ".", glob: str | None = None,
             max_matches: int | None = None) -> Sequence[GrepMatch]: ...

    def write(self, path: str, content: str, *, mode: WriteMode = "overwrite",
              create_parents: bool = True) -> WriteResult: ...

    def write_bytes(self, path: str, content: bytes, *, mode: WriteMode = "overwrite",
                    create_parents: bool = True) -> WriteResult: ...

    def delete(self, path: str, *, recursive: bool = False) -> None: ...

    def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None: ...

    @property
    def root(self) -> str: ...

    @property
    def read_only(self) -> bool: ...


@runtime_checkable
class SnapshotableFilesystem(Filesystem, Protocol):
    """Filesystem that supports snapshot and restore operations."""

    def snapshot(self, *, tag: str | None = None) -> FilesystemSnapshot: ...

    def restore(self, snapshot: FilesystemSnapshot) -> None: ...


# --------------------------------------------------------------- helpers --

_MODES = {"overwrite": C.SP_FS_OVERWRITE, "create": C.SP_FS_CREATE, "append": C.SP_FS_APPEND}


def _path(path: str | os.PathLike[str]) -> bytes:
    """A tool path as C bytes; NUL bytes (which C would cut at) are refused."""
    b = os.fsencode(path)
    if b"\0" in b:
        raise errors.InvalidError("path contains a NUL byte", errors.EINVAL)
    return b


def _s(b: bytes | None) -> str:
    return os.fsdecode(b) if b is not None else ""


def _dt(ns: int) -> datetime | None:
    if ns == 0:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)


def _count(name: str, v: int | None, minimum: int) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, not {v}")
    return v


def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        raise ValueError(f"unknown encoding: {encoding}") from None


def _write_args(content: Any, mode: str) -> bytes:
    """write_bytes' content as bytes, after checking it and the mode."""
    if not isinstance(content, (bytes, bytearray, memoryview)):
        raise TypeError(f"content must be bytes, not {type(content).__name__}")
    if mode not in _MODES:
        raise ValueError(f"mode must be 'create', 'overwrite' or 'append', not {mode!r}")
    return bytes(content)


def _split_lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


class _FsBase:
    """The protocol over an ``sp_fs*``; subclasses provide the handle."""

    _fs: ctypes.c_void_p
    _lock: Any
    _read_only: bool
    _root: str

    # -- plumbing ----------------------------------------------------------

    def _call(self, f: Any, *args: Any) -> int:
        with self._lock:
            # Checked again under the lock: a close() on another thread may
            # have freed the handle since the caller read it.
            self._handle()
            return _native.call(f, *args)

    def _handle(self) -> ctypes.c_void_p:
        if not self._fs:
            raise errors.SandpodRuntimeError("filesystem is closed", errors.ERROR)
        return self._fs

    # -- metadata ----------------------------------------------------------

    @property
    def root(self) -> str:
        """Workspace root path (absolute, on the host)."""
        return self._root

    @property
    def read_only(self) -> bool:
        """True if write operations are disabled."""
        return self._read_only

    # -- reads -------------------------------------------------------------

    def read(self, path: str, *, offset: int = 0, limit: int | None = None,
             encoding: str = "utf-8") -> ReadResult:
        """Read lines ``offset`` .. ``offset+limit`` of a text file.

        ``limit=None`` is the backend default, 2000 lines. An offset past the
        end gives empty content. Lines longer than 2000 bytes are cut with a
        marker. A file that is not valid text in ``encoding`` raises
        ValueError (use read_bytes).
        """
        _count("offset", offset, 0)
        _count("limit", limit, 1)
        p = _path(path)
        if not _is_utf8(encoding):
            return self._read_other(path, offset, limit, encoding)
        opts = C.ReadOpts(C.SP_FS_READ_OPTS_VERSION, offset, limit or 0)
        out = ctypes.POINTER(C.Text)()
        self._call(C.fs_read, ctypes.byref(out), self._handle(), p, ctypes.byref(opts))
        try:
            t = out.contents
            content = ctypes.string_at(t.content, t.content_len).decode("utf-8")
            return ReadResult(content=content, path=_s(t.path), total_lines=t.total_lines,
                              offset=t.offset, limit=t.limit, truncated=bool(t.truncated))
        finally:
            C.fs_text_free(out)

    def _read_other(self, path: str, offset: int, limit: int | None,
                    encoding: str) -> ReadResult:
        raw = self.read_bytes(path)
        if raw.truncated:
            raise errors.TooBigError(f"file too large to decode as {encoding}: {path}",
                                     errors.ETOOBIG)
        lines = _split_lines(raw.content.decode(encoding))
        n = limit or 2000
        part = lines[offset:offset + n]
        return ReadResult(content="".join(part), path=raw.path, total_lines=len(lines),
                          offset=offset, limit=n, truncated=offset + n < len(lines))

    def read_bytes(self, path: str, *, offset: int = 0,
                   limit: int | None = None) -> ReadBytesResult:
        """Read up to ``limit`` bytes from byte ``offset`` (None: to the end,
        capped at 64 MiB with ``truncated`` set)."""
        _count("offset", offset, 0)
        _count("limit", limit, 0)
        p = _path(path)
        # C's limit 0 means "to the end": ask for one byte and drop it.
        want = 1 if limit == 0 else (limit or 0)
        out = ctypes.POINTER(C.Bytes)()
        self._call(C.fs_read_bytes, ctypes.byref(out), self._handle(), p, offset, want)
        try:
            b = out.contents
            data = ctypes.string_at(b.data, b.len) if b.len else b""
            truncated = bool(b.truncated)
            if limit == 0:
                data, truncated = b"", offset < b.size
            return ReadBytesResult(content=data, path=_s(b.path), size_bytes=b.size,
                                   offset=b.offset, limit=limit if limit is not None else b.len,
                                   truncated=truncated)
        finally:
            C.fs_bytes_free(out)

    def exists(self, path: str) -> bool:
        """True when the path exists inside the root (a symlink counts);
        escaping or invalid paths are False."""
        try:
            p = _path(path)
        except ValueError:
            return False
        with self._lock:
            return bool(C.fs_exists(self._handle(), p))

    def stat(self, path: str) -> FileStat:
        """Metadata, without following a final symlink. ``created_at`` is
        None where the file system keeps no birth time."""
        out = ctypes.POINTER(C.Info)()
        self._call(C.fs_stat, ctypes.byref(out), self._handle(), _path(path))
        try:
            i = out.contents
            return FileStat(path=_s(i.path), is_file=i.type == C.SP_FS_FILE,
                            is_directory=i.type == C.SP_FS_DIR, size_bytes=i.size,
                            created_at=_dt(i.btime_ns), modified_at=_dt(i.mtime_ns))
        finally:
            C.fs_info_free(out)

    def list(self, path: str = ".") -> Sequence[FileEntry]:
        """Direct children of a folder, sorted by path. Symlinks are listed
        with is_file and is_directory both False."""
        opts = C.ListOpts(C.SP_FS_LIST_OPTS_VERSION, 1, 0, None)
        out = ctypes.POINTER(C.Entries)()
        self._call(C.fs_list, ctypes.byref(out), self._handle(), _path(path),
                   ctypes.byref(opts))
        try:
            e = out.contents
            return [FileEntry(name=_s(x.name), path=_s(x.path), is_file=x.type == C.SP_FS_FILE,
                              is_directory=x.type == C.SP_FS_DIR)
                    for x in (e.v[i] for i in range(e.n))]
        finally:
            C.fs_entries_free(out)

    def glob(self, pattern: str, *, path: str = ".") -> Sequence[GlobMatch]:
        """Paths below ``path`` matching ``pattern`` (``*``, ``**``, ``?``,
        ``[...]``, ``{a,b}``), hidden names included, sorted by path;
        returned paths are relative to the root."""
        opts = C.GlobOpts(C.SP_FS_GLOB_OPTS_VERSION, _path(path), 0, True)
        out = ctypes.POINTER(C.Entries)()
        self._call(C.fs_glob_ex, ctypes.byref(out), self._handle(), _path(pattern),
                   ctypes.byref(opts))
        try:
            e = out.contents
            return [GlobMatch(path=_s(x.path), is_file=x.type == C.SP_FS_FILE)
                    for x in (e.v[i] for i in range(e.n))]
        finally:
            C.fs_entries_free(out)

    def grep(self, pattern: str, *, path: str = ".", glob: str | None = None,
             max_matches: int | None = None) -> Sequence[GrepMatch]:
        """Lines matching a PCRE2 regex in the text files below ``path``
        (hidden files and ignore-file-named ones included, ``.git`` and
        binary files skipped, symlinks not followed), sorted by (path,
        line_number); one match per line. ``max_matches`` None: 1000.
        A bad regex raises ValueError."""
        _count("max_matches", max_matches, 1)
        opts = C.GrepOpts(C.SP_FS_GREP_OPTS_VERSION, _path(path),
                          None if glob is None else _path(glob), max_matches or 0,
                          False, False, None, True, True)
        out = ctypes.POINTER(C.Matches)()
        self._call(C.fs_grep, ctypes.byref(out), self._handle(), _path(pattern),
                   ctypes.byref(opts))
        try:
            m = out.contents
            res = []
            for i in range(m.n):
                x = m.v[i]
                line = x.line or b""
                # C gives byte offsets; the protocol's are indexes into the str.
                start = len(line[:x.match_start].decode("utf-8", "replace"))
                end = len(line[:x.match_end].decode("utf-8", "replace"))
                res.append(GrepMatch(path=_s(x.path), line_number=x.line_number,
                                     line_content=line.decode("utf-8", "replace"),
                                     match_start=start, match_end=end))
            return res
        finally:
            C.fs_matches_free(out)

    # -- writes ------------------------------------------------------------

    def write(self, path: str, content: str, *, mode: WriteMode = "overwrite",
              create_parents: bool = True) -> WriteResult:
        """Write text as UTF-8 (see write_bytes)."""
        if not isinstance(content, str):
            raise TypeError(f"content must be str, not {type(content).__name__}")
        return self.write_bytes(path, content.encode("utf-8"), mode=mode,
                                create_parents=create_parents)

    def write_bytes(self, path: str, content: bytes, *, mode: WriteMode = "overwrite",
                    create_parents: bool = True) -> WriteResult:
        """Write bytes atomically (temp file + rename; append rewrites).

        Raises FileExistsError (mode="create"), FileNotFoundError (missing
        parent, create_parents=False), PermissionError (read-only, escape),
        ValueError (over the size, depth or name-length limits, bad mode).
        """
        data = _write_args(content, mode)
        p = _path(path)
        opts = C.WriteOpts(C.SP_FS_WRITE_OPTS_VERSION, _MODES[mode], not create_parents)
        n = ctypes.c_size_t()
        self._call(C.fs_write_bytes, ctypes.byref(n), self._handle(), p, data, len(data),
                   ctypes.byref(opts))
        return WriteResult(path=self._normalized(path), bytes_written=n.value, mode=mode)

    def _normalized(self, path: str) -> str:
        p = _path(path)
        out = ctypes.c_void_p()
        _native.call(C.fs_path_normalize, ctypes.byref(out), p, len(p))
        try:
            return _s(ctypes.string_at(out.value))
        finally:
            C.c_free(out)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete a file, a symlink (never its target), an empty folder, or
        with ``recursive`` a folder and its contents. A non-empty folder
        without ``recursive`` raises IsADirectoryError; the root itself
        cannot be deleted (ValueError)."""
        try:
            self._call(C.fs_delete, self._handle(), _path(path), bool(recursive))
        except errors.InvalidError as e:
            if e.errno == _errno.ENOTEMPTY:
                raise errors.IsADirectoryErr(e.message, e.code, e.reason, e.errno) from None
            raise

    def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create a folder (0755). A file in the way is FileExistsError
        whatever ``exist_ok`` says."""
        self._call(C.fs_mkdir, self._handle(), _path(path), bool(parents), bool(exist_ok))

    # -- snapshots ---------------------------------------------------------

    def _with_store(self, git_dir: str | None, body: Any, wrap: type[SnapshotError]) -> Any:
        raise NotImplementedError

    def snapshot(self, *, tag: str | None = None) -> FilesystemSnapshot:
        """Capture the whole workspace exactly (content, modes, symlinks,
        empty folders, ignored files) in the snapshot store.

        Raises ValueError for a bad tag (control characters, over 200 bytes,
        empty), SnapshotError when the store fails."""
        t = None if tag is None else _path(tag)

        def body(store: ctypes.c_void_p) -> FilesystemSnapshot:
            out = ctypes.POINTER(C.Snapshot)()
            try:
                _native.call(C.snapshot_create, ctypes.byref(out), store, t)
            except errors.InvalidError as e:
                raise _BadTag(e.message, e.code, e.reason, e.errno) from None
            try:
                return _record(out.contents)
            finally:
                C.snapshot_free(out)

        return self._with_store(None, body, SnapshotError)

    def restore(self, snapshot: FilesystemSnapshot) -> None:
        """Make the workspace equal to ``snapshot`` again; what was created
        after it is removed. The snapshot is looked up by id in its
        ``git_dir`` (this filesystem's store when None) and its commit must
        equal ``commit_ref``. Raises SnapshotRestoreError otherwise, on a
        read-only filesystem, or when the restore fails."""
        if not isinstance(snapshot, FilesystemSnapshot):
            raise SnapshotRestoreError(f"not a FilesystemSnapshot: {snapshot!r}", errors.EINVAL)
        if self._read_only:
            raise SnapshotRestoreError("filesystem is read-only", errors.EREADONLY)
        ref = str(snapshot.snapshot_id).encode()

        def body(store: ctypes.c_void_p) -> None:
            out = ctypes.POINTER(C.Snapshot)()
            _native.call(C.snapshot_get, ctypes.byref(out), store, ref)
            try:
                commit = (out.contents.commit or b"").decode()
            finally:
                C.snapshot_free(out)
            if commit != snapshot.commit_ref:
                raise SnapshotRestoreError(
                    f"snapshot {snapshot.snapshot_id} is commit {commit} in the store, "
                    f"not {snapshot.commit_ref}", errors.EINVAL)
            _native.call(C.snapshot_restore, None, store, ref)

        self._with_store(snapshot.git_dir, body, SnapshotRestoreError)


def _record(s: Any) -> FilesystemSnapshot:
    return FilesystemSnapshot(
        snapshot_id=UUID(s.id.decode()),
        created_at=datetime.fromtimestamp(s.created_at_ns / 1e9, tz=timezone.utc),
        commit_ref=s.commit.decode(), root_path=_s(s.root), git_dir=_s(s.store),
        tag=None if s.tag is None else s.tag.decode("utf-8", "replace"))


class _BadTag(errors.InvalidError):
    """A tag sp_snapshot_create() refused: stays a ValueError."""


def _rewrap(e: errors.Error, wrap: type[SnapshotError]) -> errors.Error:
    """Store failures as ``wrap`` (a bad tag stays ValueError)."""
    if isinstance(e, (wrap, _BadTag)):
        return e
    return wrap(e.message, e.code, e.reason, e.errno)


def default_store(root: str) -> str:
    """Where HostFilesystem keeps a root's snapshots when ``store`` is None:
    ``<state root>/host-fs/<name>-<hash>/snapshots.git``, the state root
    being sandpod's ($SANDPOD_HOME, $XDG_DATA_HOME/sandpod or
    ~/.local/share/sandpod) and the hash that of the root's real path, so
    a later HostFilesystem on the same folder finds its snapshots."""
    out = ctypes.c_void_p()
    _native.call(C.state_root, ctypes.byref(out))
    try:
        base = os.fsdecode(ctypes.string_at(out.value))
    finally:
        C.c_free(out)
    real = os.path.realpath(root)
    h = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    name = os.path.basename(real) or "root"
    return os.path.join(base, "host-fs", f"{name}-{h}", "snapshots.git")


class HostFilesystem(_FsBase):
    """The protocol over a bare host folder, contained by libsandpod.

    Args:
        root: an existing folder.
        store: the snapshot store folder (a bare git repository, created on
            the first snapshot); must not be inside ``root`` (ValueError). None:
            :func:`default_store` of the root.
        read_only: refuse every write with PermissionError.
        max_write_bytes: largest single write (default 4 MiB); more is
            ValueError.
        max_read_bytes: largest read_bytes answer (default 64 MiB).
    """

    def __init__(self, root: str | os.PathLike[str], store: str | os.PathLike[str] | None = None,
                 *, read_only: bool = False, max_write_bytes: int | None = None,
                 max_read_bytes: int | None = None) -> None:
        self._fs = ctypes.c_void_p()
        self._store = ctypes.c_void_p()
        self._lock = threading.RLock()
        self._read_only = bool(read_only)
        opts = C.FsOpts(version=C.SP_FS_OPTS_VERSION, read_only=self._read_only,
                        max_write_bytes=_count("max_write_bytes", max_write_bytes, 1) or 0,
                        max_read_bytes=_count("max_read_bytes", max_read_bytes, 1) or 0)
        h = ctypes.c_void_p()
        _native.call(C.fs_open, ctypes.byref(h), _path(root), ctypes.byref(opts))
        self._fs = h
        self._root = os.path.realpath(os.fsdecode(root))
        self._store_dir = (os.path.abspath(os.fsdecode(store)) if store is not None
                           else default_store(self._root))
        real = os.path.realpath(self._store_dir)
        if real == self._root or real.startswith(self._root.rstrip(os.sep) + os.sep):
            self.close()
            raise errors.InvalidError(
                f"snapshot store must be outside the workspace: {self._store_dir}", errors.EINVAL)

    @property
    def store(self) -> str:
        """The snapshot store folder."""
        return self._store_dir

    def _with_store(self, git_dir: str | None, body: Any, wrap: type[SnapshotError]) -> Any:
        with self._lock:
            try:
                if git_dir is not None and os.path.abspath(git_dir) != self._store_dir:
                    other = self._open_store(git_dir, no_create=True)
                    try:
                        return body(other)
                    finally:
                        C.snapstore_free(other)
                if not self._store:
                    self._store = self._open_store(self._store_dir, no_create=False)
                return body(self._store)
            except errors.Error as e:
                raise _rewrap(e, wrap) from None

    def _open_store(self, path: str, *, no_create: bool) -> ctypes.c_void_p:
        opts = C.SnapstoreOpts(version=C.SP_SNAPSTORE_OPTS_VERSION, no_create=no_create)
        h = ctypes.c_void_p()
        _native.call(C.snapstore_open, ctypes.byref(h), _path(self._root), _path(path),
                     ctypes.byref(opts))
        return h

    def close(self) -> None:
        """Free the C handles (also done when the object is collected)."""
        with self._lock:
            if self._store:
                C.snapstore_free(self._store)
                self._store = ctypes.c_void_p()
            if self._fs:
                C.fs_free(self._fs)
                self._fs = ctypes.c_void_p()

    def __enter__(self) -> HostFilesystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_fs", None) is not None:
            self.close()

    def __repr__(self) -> str:
        return f"HostFilesystem({self._root!r}, store={self._store_dir!r})"


class SandboxFilesystem(_FsBase):
    """The protocol over a sandbox's workspace.

    Args:
        handle: the ``sp_sandbox*`` (a ctypes.c_void_p); its ``sp_fs`` (owned
            by the sandbox) serves the file calls, and snapshots go through
            ``sp_sandbox_snapshot_open()`` so the container is paused while
            the store reads or writes the workspace.
        owner: the Python object owning ``handle``; kept alive as long as
            this filesystem.
        lock: the lock guarding ``handle`` (share the sandbox's, since an
            ``sp_sandbox`` is not thread-safe); a new one when None.
    """

    def __init__(self, handle: ctypes.c_void_p, owner: object, *, lock: Any = None) -> None:
        self._owner = owner
        self._sb = handle
        self._lock = lock if lock is not None else threading.RLock()
        self._read_only = False
        err = _native.ErrorPtr()
        with self._lock:
            fs = C.sandbox_fs(handle, ctypes.byref(err))
        if not fs:
            raise _native.exception(err, errors.ERROR)
        self._fs = ctypes.c_void_p(fs)
        self._root = os.fsdecode(C.sandbox_workspace(handle))

    def _detach(self) -> None:
        """The sandbox's handle is being freed: every later call fails cleanly."""
        with self._lock:
            self._fs = ctypes.c_void_p()
            self._sb = ctypes.c_void_p()

    def _with_store(self, git_dir: str | None, body: Any, wrap: type[SnapshotError]) -> Any:
        with self._lock:
            self._handle()
            h = ctypes.c_void_p()
            try:
                _native.call(C.sandbox_snapshot_open, ctypes.byref(h), self._sb, None)
                store = C.sandbox_snapshot_store(h)
                if git_dir is not None and os.path.abspath(git_dir) != os.fsdecode(
                        C.snapstore_path(store)):
                    raise SnapshotRestoreError(
                        f"snapshot belongs to another store: {git_dir}", errors.EINVAL)
                return body(ctypes.c_void_p(store))
            except errors.Error as e:
                raise _rewrap(e, wrap) from None
            finally:
                C.sandbox_snapshot_close(h)

    def __repr__(self) -> str:
        return f"SandboxFilesystem({self._root!r})"
