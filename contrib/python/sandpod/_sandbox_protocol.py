"""The sandbox as the parts it hands out see it: its sessions (session.py),
its filesystem on another engine (remote_fs.py) and a tool suite over it
(tools.py). Each takes a :class:`~sandpod.Sandbox` and uses only what is
typed here, so none of them imports sandbox.py, which imports them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from ctypes import c_void_p
from typing import Any, Callable, Protocol, runtime_checkable


class SandboxHandle(Protocol):
    """The sandbox's main C handle, used under its lock."""

    name: str
    _lock: AbstractContextManager[Any]

    def _main(self) -> c_void_p: ...


@runtime_checkable
class HandleLender(Protocol):
    """A sandbox that lends C handles of its own, one per user: what a tool
    suite over a sandbox (rather than a folder) is told apart by."""

    def _borrow(self) -> c_void_p: ...

    def _give_back(self, h: c_void_p) -> None: ...

    def _on_close(self, cb: Callable[[], None]) -> None: ...


class SnapshotRecord(Protocol):
    """A snapshot record, as :class:`~sandpod.Snapshot` holds it."""

    @property
    def id(self) -> str: ...

    @property
    def tag(self) -> str | None: ...

    @property
    def commit(self) -> str: ...

    @property
    def root(self) -> str: ...

    @property
    def store(self) -> str: ...

    @property
    def created_at(self) -> str: ...


class SnapshottingSandbox(SandboxHandle, HandleLender, Protocol):
    """A sandbox whose workspace lives elsewhere: its files through a tool
    suite, its snapshots through its store."""

    def snapshot(self, tag: str | None = None) -> SnapshotRecord: ...

    def get_snapshot(self, ref: str) -> SnapshotRecord: ...

    def restore(self, ref: str) -> Any: ...
