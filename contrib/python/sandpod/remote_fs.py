"""The seeds' ``Filesystem`` protocol over a sandbox on another engine.

A sandbox of a kubernetes engine keeps its workspace in its Pod: the file
calls go to the sandpod peer beside it, as tool calls (read_file,
write_file, list_dir, stat, glob, grep, delete, mkdir, through
``sandpod.tools(sandbox)``), and snapshots to its store through
:meth:`Sandbox.snapshot` / :meth:`Sandbox.restore`. The peer resolves every
path beneath ``/workspace`` (``..``, other absolute paths and symlinks out
are refused there); results and exceptions are those of
:class:`~sandpod.HostFilesystem` for the same files, but for what the
tools cannot carry (see :class:`RemoteFilesystem`).
"""

from __future__ import annotations

import base64
import ctypes
import os
import posixpath
import re
import tempfile
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from . import _native, _structs as S, errors
from ._sandbox_protocol import SnapshottingSandbox
from .errors import SnapshotError, SnapshotRestoreError
from .filesystem import (FileEntry, FileStat, FilesystemSnapshot, GlobMatch, GrepMatch,
                         ReadBytesResult, ReadResult, WriteMode, WriteResult, _BadTag, _count,
                         _FsBase, _is_utf8, _path, _write_args)

__all__ = ["RemoteFilesystem"]

# The JSON names of the peer's error codes and reasons (sp_code_name(),
# sp_reason_name(): a reason's is its constant's, R_IS_DIRECTORY ->
# "is_directory").
_CODES = {"ok": errors.OK, "error": errors.ERROR, "invalid": errors.EINVAL,
          "not_found": errors.ENOTFOUND, "exists": errors.EEXISTS, "escape": errors.EESCAPE,
          "too_big": errors.ETOOBIG, "podman": errors.EPODMAN, "timeout": errors.ETIMEOUT,
          "read_only": errors.EREADONLY, "denied": errors.EDENIED,
          "cancelled": errors.ECANCELED}
_REASONS = {n[2:].lower(): v for n, v in vars(errors).items()
            if n.startswith("R_") and isinstance(v, int)}
_TYPES = {"file", "dir"}
_CUT = re.compile(r"… \[line cut: (\d+) bytes\]$")
_PAGE_LINES = 5000      # read_file's largest limit
_MAX_LIST = 5000        # list_dir's
_MAX_FOUND = 10000      # glob's and grep's
_DEFAULT_LINES = 2000   # HostFilesystem.read's default limit
_DEFAULT_MATCHES = 1000  # HostFilesystem.grep's

_peer_command = _native.fn("sp_sandbox_peer_command", ctypes.c_int, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int,
                           ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_native.ErrorPtr))


def _failure(res: dict[str, Any]) -> errors.Error:
    """A failed tool result as the exception HostFilesystem raises for it."""
    e = res.get("error") or {}
    code = _CODES.get(e.get("code", ""), errors.ERROR)
    reason = _REASONS.get(e.get("reason", ""), errors.R_NONE)
    return errors.from_code(e.get("message") or res.get("message") or "tool call failed",
                            code, reason)


def _dt(ns: Any) -> datetime | None:
    if not ns:
        return None
    return datetime.fromtimestamp(int(ns) / 1e9, tz=timezone.utc)


class RemoteFilesystem:
    """The protocol over a remote sandbox's ``/workspace`` (``sb.fs`` when
    ``sb.is_remote``). Every method has HostFilesystem's signature, result
    types and exceptions.

    What differs from a local workspace, all from what the tools carry:
    ``read`` cuts lines longer than 500 bytes (the peer's cut; locally
    2000) and reads the whole file to find its line structure;
    ``read_bytes`` of a UTF-8 text file with such a long line takes one
    exec more (the peer's ``fs cat``); a binary file over the peer's read
    limit (4 MiB) raises TooBigError;
    ``glob`` beyond 10000 paths raises TooBigError and ``grep`` returns at
    most 10000 matches; ``create_parents=False`` is checked before the
    write (the tool always creates parents); a name that is not UTF-8
    comes back with replacement characters; EACCES is SandpodRuntimeError
    (the peer sends no errno). Each call is one or more round trips to
    the peer.

    Thread safety: the tool suite it calls through runs one call at a time
    (its own lock, on a sandbox handle of its own, so the sandbox's other
    calls go on meanwhile); snapshots use the sandbox's lock.
    """

    def __init__(self, sandbox: SnapshottingSandbox) -> None:
        self._sb = sandbox
        self._lock = threading.RLock()
        self._tools: Any = None
        self._closed = False
        self._root = "/workspace"
        self._read_only = False

    # -- plumbing ----------------------------------------------------------

    def _detach(self) -> None:
        """The sandbox is being closed: every later call fails cleanly."""
        with self._lock:
            self._closed = True
            t, self._tools = self._tools, None
        if t is not None:
            t.close()

    def _suite(self) -> Any:
        with self._lock:
            if self._closed:
                raise errors.SandpodRuntimeError("filesystem is closed", errors.ERROR)
            if self._tools is None:
                from .tools import Tools
                self._tools = Tools(self._sb)
            return self._tools

    def _try(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """One tool call's result dict, failed or not."""
        res: dict[str, Any] = self._suite().call(tool, args)
        return res

    def _call(self, tool: str, args: dict[str, Any]) -> Any:
        """One tool call's value; a failure raised as HostFilesystem would."""
        res = self._try(tool, args)
        if not res.get("ok"):
            raise _failure(res)
        return res.get("value") or {}

    @staticmethod
    def _p(path: str) -> str:
        return os.fsdecode(_path(path))  # NUL bytes are InvalidError, as locally

    # -- metadata ----------------------------------------------------------

    @property
    def root(self) -> str:
        """Workspace root path (absolute, in the Pod)."""
        return self._root

    read_only = _FsBase.read_only  # True if write operations are disabled

    # -- reads -------------------------------------------------------------

    def _page(self, path: str, offset: int) -> Any:
        return self._call("read_file", {"path": path, "offset": offset, "limit": _PAGE_LINES})

    def _lines(self, path: str, first: Any = None) -> tuple[list[str], str, int]:
        """A text file's lines (each ending in a newline, the last one
        as on disk), its path, and how many were cut. ``first``: its first
        page, already read."""
        out: list[str] = []
        offset, cut, shown = 1, 0, path
        while True:
            v = first if first is not None else self._page(path, offset)
            first = None
            if v.get("mode") == "binary":
                raise errors.InvalidError(
                    f"{v.get('path', path)} is not valid UTF-8 text; read its bytes with "
                    "read_bytes() instead", errors.EINVAL, errors.R_NOT_TEXT)
            shown = v.get("path", path)
            cut += int(v.get("lines_cut", 0))
            out += v.get("content", "").splitlines(keepends=True)
            total, end = int(v.get("total_lines", 0)), int(v.get("end_line", 0))
            if end >= total or not v.get("next_offset"):
                break
            offset = int(v["next_offset"])
        if out:
            # The tool ends every line with a newline: the file's size says
            # whether its last one has it (a cut line says its own size).
            size = sum(int(m.group(1)) + 1 if cut and (m := _CUT.search(s[:-1]))
                       else len(s.encode("utf-8")) for s in out)
            st = self._call("stat", {"path": path})
            if st.get("type") == "file" and int(st.get("size", 0)) == size - 1:
                out[-1] = out[-1][:-1]
        return out, shown, cut

    def read(self, path: str, *, offset: int = 0, limit: int | None = None,
             encoding: str = "utf-8") -> ReadResult:
        """Lines ``offset`` .. ``offset+limit`` of a text file (see the
        class notes for the line cut)."""
        _count("offset", offset, 0)
        _count("limit", limit, 1)
        p = self._p(path)
        if not _is_utf8(encoding):
            return self._read_other(path, offset, limit, encoding)
        lines, shown, _ = self._lines(p)
        n = limit or _DEFAULT_LINES
        return ReadResult(content="".join(lines[offset:offset + n]), path=shown,
                          total_lines=len(lines), offset=offset, limit=n,
                          truncated=offset + n < len(lines))

    def read_bytes(self, path: str, *, offset: int = 0,
                   limit: int | None = None) -> ReadBytesResult:
        """Up to ``limit`` bytes from byte ``offset`` (None: to the end)."""
        _count("offset", offset, 0)
        _count("limit", limit, 0)
        p = self._p(path)
        v = self._page(p, 1)
        shown = v.get("path", p)
        if v.get("mode") == "binary":
            data = base64.b64decode(v.get("base64", ""), validate=True)
        else:
            lines, shown, cut = self._lines(p, v)
            data = self._cat(p, shown) if cut else "".join(lines).encode("utf-8")
        part = data[offset:] if limit is None else data[offset:offset + limit]
        return ReadBytesResult(content=part, path=shown, size_bytes=len(data), offset=offset,
                               limit=limit if limit is not None else len(part),
                               truncated=offset + len(part) < len(data))

    def _cat(self, p: str, shown: str) -> bytes:
        """A text file whose lines the tools cut, byte for byte: the peer's
        `sandpod fs --root /workspace cat` (its fs code confines the path
        as the tools' does), one exec more."""
        argv = S.strv(["fs", "--root", self._root, "cat", "./" + p if p.startswith("-") else p])
        code = ctypes.c_int(-1)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            with self._sb._lock:
                _native.call(_peer_command, self._sb._main(), argv, out.fileno(), err.fileno(),
                             ctypes.byref(code))
            if code.value != 0:
                err.seek(0)
                why = err.read().decode("utf-8", "replace").strip().splitlines()
                raise errors.SandpodRuntimeError(
                    f"{shown}: the sandpod peer could not read its bytes: "
                    + (why[-1] if why else f"exit {code.value}"), errors.ERROR)
            out.seek(0)
            return out.read()

    def exists(self, path: str) -> bool:
        """True when the path exists inside the root (a symlink counts);
        escaping or invalid paths are False."""
        try:
            p = self._p(path)
        except ValueError:
            return False
        res = self._try("stat", {"path": p})
        if res.get("ok"):
            return True
        e = _failure(res)
        if isinstance(e, (errors.NotFoundError, errors.EscapeError, errors.InvalidError,
                          errors.NotADirectoryErr)):
            return False
        raise e

    def stat(self, path: str) -> FileStat:
        """Metadata, without following a final symlink."""
        v = self._call("stat", {"path": self._p(path)})
        t = v.get("type")
        return FileStat(path=v.get("path", path), is_file=t == "file", is_directory=t == "dir",
                        size_bytes=int(v.get("size", 0)), created_at=_dt(v.get("btime_ns")),
                        modified_at=_dt(v.get("mtime_ns")))

    def list(self, path: str = ".") -> Sequence[FileEntry]:
        """Direct children of a folder, sorted by path."""
        p = self._p(path)
        out: list[FileEntry] = []
        offset = 1
        while True:
            v = self._call("list_dir", {"path": p, "depth": 1, "offset": offset,
                                        "limit": _MAX_LIST, "ignore": []})
            for x in v.get("entries", []):
                t = x.get("type")
                out.append(FileEntry(name=posixpath.basename(x["path"]), path=x["path"],
                                     is_file=t == "file", is_directory=t == "dir"))
            if not v.get("next_offset"):
                break
            offset = int(v["next_offset"])
        return sorted(out, key=lambda e: e.path)

    def glob(self, pattern: str, *, path: str = ".") -> Sequence[GlobMatch]:
        """Paths below ``path`` matching ``pattern``, hidden names included,
        sorted by path; relative to the root."""
        res = self._call("glob", {"pattern": self._p(pattern), "path": self._p(path),
                                  "limit": _MAX_FOUND, "hidden": True})
        if res.get("truncated"):
            raise errors.TooBigError(f"over {_MAX_FOUND} paths match {pattern!r}: narrow it",
                                     errors.ETOOBIG, errors.R_TOO_LARGE)
        return [GlobMatch(path=x["path"], is_file=x.get("type") == "file")
                for x in res.get("entries", [])]

    def grep(self, pattern: str, *, path: str = ".", glob: str | None = None,
             max_matches: int | None = None) -> Sequence[GrepMatch]:
        """Lines matching a PCRE2 regex in the text files below ``path``
        (hidden and ignored files included), sorted by (path, line_number)."""
        _count("max_matches", max_matches, 1)
        args: dict[str, Any] = {"pattern": self._p(pattern), "path": self._p(path),
                                "limit": min(max_matches or _DEFAULT_MATCHES, _MAX_FOUND),
                                "hidden": True, "no_ignore": True}
        if glob is not None:
            args["include"] = self._p(glob)
        v = self._call("grep", args)
        res = []
        for x in v.get("matches", []):
            line = x.get("line", "")
            b = line.encode("utf-8", "surrogateescape")
            start = len(b[:int(x.get("match_start", 0))].decode("utf-8", "replace"))
            end = len(b[:int(x.get("match_end", 0))].decode("utf-8", "replace"))
            res.append(GrepMatch(path=x["path"], line_number=int(x["line_number"]),
                                 line_content=line, match_start=start, match_end=end))
        return res

    # -- writes ------------------------------------------------------------

    write = _FsBase.write  # text as UTF-8, through write_bytes
    _read_other = _FsBase._read_other  # other encodings: read_bytes, decoded here

    def write_bytes(self, path: str, content: bytes, *, mode: WriteMode = "overwrite",
                    create_parents: bool = True) -> WriteResult:
        """Write bytes atomically (the peer's temp file + rename)."""
        data = _write_args(content, mode)
        p = self._p(path)
        if not create_parents:
            self._parent_exists(p)
        args = {"path": p, "content": base64.b64encode(data).decode("ascii"),
                "mode": mode, "encoding": "base64"}
        res = self._try("write_file", args)
        if not res.get("ok") and (res.get("error") or {}).get("reason") == "stale":
            # The peer refuses to replace a file changed since a read through
            # it (a model's guard); a filesystem write replaces it regardless.
            self._try("read_file", {"path": p, "limit": 1})
            res = self._try("write_file", args)
        if not res.get("ok"):
            raise _failure(res)
        v = res.get("value") or {}
        return WriteResult(path=v.get("path", p), bytes_written=int(v.get("bytes_written", 0)),
                           mode=mode)

    def _parent_exists(self, p: str) -> None:
        parent = posixpath.dirname(p.rstrip("/"))
        if parent in ("", "/", "/workspace", "."):
            return
        res = self._try("stat", {"path": parent})
        if not res.get("ok"):
            e = _failure(res)
            if isinstance(e, errors.NotFoundError):
                raise errors.NotFoundError(f"{parent}: no such folder (create_parents=False)",
                                           errors.ENOTFOUND)
            raise e
        if (res.get("value") or {}).get("type") != "dir":
            raise errors.NotADirectoryErr(f"{parent} is not a folder", errors.EINVAL,
                                          errors.R_NOT_DIRECTORY)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        """Delete a file, a symlink, an empty folder, or with ``recursive`` a
        folder and its contents. A non-empty folder without ``recursive``
        raises IsADirectoryError; the root itself ValueError."""
        res = self._try("delete", {"path": self._p(path), "recursive": bool(recursive)})
        if not res.get("ok"):
            e = _failure(res)
            if e.reason == errors.R_NOT_EMPTY:
                raise errors.IsADirectoryErr(e.message, e.code, e.reason) from None
            raise e

    def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create a folder. A file in the way is FileExistsError whatever
        ``exist_ok`` says."""
        p = self._p(path)
        if parents and not exist_ok:
            # The tool's parents=True accepts an existing folder: refuse it here.
            res = self._try("stat", {"path": p})
            if res.get("ok"):
                raise errors.ExistsError(f"{p} exists", errors.EEXISTS, errors.R_EXISTS)
        res = self._try("mkdir", {"path": p, "parents": bool(parents)})
        if res.get("ok"):
            return
        e = _failure(res)
        if isinstance(e, errors.ExistsError) and exist_ok:
            st = self._try("stat", {"path": p})
            if st.get("ok") and (st.get("value") or {}).get("type") == "dir":
                return
        raise e

    # -- snapshots ---------------------------------------------------------

    def snapshot(self, *, tag: str | None = None) -> FilesystemSnapshot:
        """Capture the whole workspace in the peer's snapshot store."""
        self._suite()
        if tag is not None:
            _path(tag)
        try:
            s = self._sb.snapshot(tag)
        except errors.Error as e:
            if e.code == errors.EINVAL:  # a tag the store refuses: ValueError, as locally
                raise _BadTag(e.message, e.code, e.reason, e.errno) from None
            if isinstance(e, SnapshotError):
                raise
            raise SnapshotError(e.message, e.code, e.reason, e.errno) from None
        return FilesystemSnapshot(
            snapshot_id=UUID(s.id), created_at=_when(s.created_at), commit_ref=s.commit,
            root_path=s.root or self._root, git_dir=s.store or None, tag=s.tag)

    def restore(self, snapshot: FilesystemSnapshot) -> None:
        """Make the workspace equal to ``snapshot`` again. Raises
        SnapshotRestoreError for another store's snapshot, a commit that
        differs from the store's, or a failed restore."""
        self._suite()
        if not isinstance(snapshot, FilesystemSnapshot):
            raise SnapshotRestoreError(f"not a FilesystemSnapshot: {snapshot!r}", errors.EINVAL)
        if self._read_only:
            raise SnapshotRestoreError("filesystem is read-only", errors.EREADONLY)
        ref = str(snapshot.snapshot_id)
        try:
            s = self._sb.get_snapshot(ref)
        except errors.Error as e:
            raise SnapshotRestoreError(e.message, e.code, e.reason, e.errno) from None
        if snapshot.git_dir is not None and s.store and snapshot.git_dir != s.store:
            raise SnapshotRestoreError(f"snapshot belongs to another store: {snapshot.git_dir}",
                                       errors.EINVAL)
        if s.commit != snapshot.commit_ref:
            raise SnapshotRestoreError(
                f"snapshot {snapshot.snapshot_id} is commit {s.commit} in the store, "
                f"not {snapshot.commit_ref}", errors.EINVAL)
        self._sb.restore(ref)

    def __repr__(self) -> str:
        return f"RemoteFilesystem({self._sb.name!r}, {self._root!r})"


def _when(text: str) -> datetime:
    try:
        d = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(timezone.utc)
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)
