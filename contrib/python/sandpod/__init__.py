"""sandpod: hardened Podman sandboxes around a host workspace, from Python.

Pure Python over ``libsandpod.so`` (ctypes); see contrib/python/README.md.
"""

from __future__ import annotations

from .errors import Error, SnapshotError, SnapshotRestoreError
from ._native import LibraryNotFound
from .filesystem import (FileEntry, FileStat, Filesystem, FilesystemSnapshot, GlobMatch,
                         GrepMatch, HostFilesystem, ReadBytesResult, ReadResult,
                         SandboxFilesystem, SnapshotableFilesystem, WriteResult)
from .remote_fs import RemoteFilesystem
from .sandbox import (ApplyResult, Change, Diff, ExecPath, GcResult, Mount, Orphan, RunResult,
                      Sandbox, Snapshot, Status)
from ._callbacks import HydrateProgress
from . import images, templates
from .hydrate import HydrateResult, hydrate
from .images import Image
from .templates import Template
from .session import SessionInfo, SessionOutput
from .tools import Tools, tools
from .aio import AsyncSandbox

__all__ = ["Error", "SnapshotError", "SnapshotRestoreError", "LibraryNotFound",
           "Filesystem", "SnapshotableFilesystem", "HostFilesystem", "SandboxFilesystem",
           "RemoteFilesystem",
           "FileStat", "FileEntry", "GlobMatch", "GrepMatch", "ReadResult",
           "ReadBytesResult", "WriteResult", "FilesystemSnapshot"]
__all__ += ["Sandbox", "AsyncSandbox", "Mount", "RunResult", "Status", "Snapshot", "Change",
            "Diff", "ApplyResult", "SessionInfo", "SessionOutput", "Tools", "tools"]
__all__ += ["ExecPath", "GcResult", "Orphan", "HydrateProgress", "HydrateResult", "hydrate",
            "images", "Image", "templates", "Template"]
__version__ = "0.1.0"
