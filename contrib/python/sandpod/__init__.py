"""sandpod: hardened Podman sandboxes around a host workspace, from Python.

Pure Python over ``libsandpod.so`` (ctypes); see the README's Python section.
"""

from __future__ import annotations

from .errors import Error, SnapshotError, SnapshotRestoreError
from ._native import LibraryNotFound
from .filesystem import (FileEntry, FileStat, Filesystem, FilesystemSnapshot, GlobMatch,
                         GrepMatch, HostFilesystem, ReadBytesResult, ReadResult,
                         SandboxFilesystem, SnapshotableFilesystem, WriteResult)

__all__ = ["Error", "SnapshotError", "SnapshotRestoreError", "LibraryNotFound",
           "Filesystem", "SnapshotableFilesystem", "HostFilesystem", "SandboxFilesystem",
           "FileStat", "FileEntry", "GlobMatch", "GrepMatch", "ReadResult",
           "ReadBytesResult", "WriteResult", "FilesystemSnapshot"]
__version__ = "0.1.0"
