"""sandpod: hardened Podman sandboxes around a host workspace, from Python.

Pure Python over ``libsandpod.so`` (ctypes); see the README's Python section.
"""

from __future__ import annotations

from .errors import Error, SnapshotError, SnapshotRestoreError
from ._native import LibraryNotFound

__all__ = ["Error", "SnapshotError", "SnapshotRestoreError", "LibraryNotFound"]
__version__ = "0.1.0"
