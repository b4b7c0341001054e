"""asyncio: every blocking call of a Sandbox run in a thread pool.

``await sb.shell(...)`` and ``await sb.exec(...)`` can be cancelled
(``task.cancel()``, ``asyncio.wait_for`` timing out): the command's process
group is killed in the container before the CancelledError propagates, so a
cancelled call leaves nothing running there (a process that made a process
group of its own with setsid escapes the kill; the sandbox's stop or remove
still ends it). The libsandpod call itself cannot be interrupted; the kill
makes it return.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import secrets
from typing import Any, Callable, TypeVar

from .sandbox import (ApplyResult, Diff, ExecPath, GcResult, RunResult, Sandbox, Snapshot,
                      Status)
from .session import SessionInfo, SessionOutput

T = TypeVar("T")

# $1 = a token: the pid of this sh (the leader of the process group the
# agent, or libsandpod's REST wrapper, gives every command) goes to a file
# a second command can kill the group by; the rest is the command's argv.
_WRAPPER = ('t=$1; shift; f=/tmp/.sandpod-py-$t.pid; echo $$ > "$f"; '
            '"$@"; r=$?; rm -f "$f"; exit $r')
_KILL = ('f=/tmp/.sandpod-py-{t}.pid; i=0; '
         'while [ ! -s "$f" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; '
         'p=$(cat "$f" 2>/dev/null) && [ -n "$p" ] && kill -KILL -- -$p $p 2>/dev/null; '
         'rm -f "$f"; exit 0')


class AsyncSandbox:
    """An asyncio face of :class:`~sandpod.Sandbox`.

    Make one with ``await AsyncSandbox.create(...)`` / ``await
    AsyncSandbox.open(...)`` (same arguments as Sandbox's) or wrap an
    existing Sandbox. ``async with`` removes the sandbox on exit as the
    Sandbox's ``with`` does. ``workers`` threads run the blocking calls
    (commands from several tasks run at once).
    """

    def __init__(self, sandbox: Sandbox, *, workers: int = 8) -> None:
        self.sandbox = sandbox
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=f"sandpod-{sandbox.name}")

    @property
    def name(self) -> str:
        return self.sandbox.name

    @property
    def workspace(self) -> str:
        return self.sandbox.workspace

    @property
    def state_dir(self) -> str:
        return self.sandbox.state_dir

    @property
    def sessions(self) -> Any:
        return self.sandbox.sessions

    @property
    def image(self) -> str | None:
        return self.sandbox.image

    @property
    def container_id(self) -> str | None:
        return self.sandbox.container_id

    @property
    def engine(self) -> str:
        return self.sandbox.engine

    @property
    def is_remote(self) -> bool:
        return self.sandbox.is_remote

    async def rpc(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await self._run(self.sandbox.rpc, method, params)

    @property
    def created_at(self) -> str | None:
        return self.sandbox.created_at

    @classmethod
    async def create(cls, *args: Any, workers: int = 8, **kw: Any) -> AsyncSandbox:
        loop = asyncio.get_running_loop()
        sb = await loop.run_in_executor(None, functools.partial(Sandbox.create, *args, **kw))
        return cls(sb, workers=workers)

    @classmethod
    async def open(cls, *args: Any, workers: int = 8, **kw: Any) -> AsyncSandbox:
        loop = asyncio.get_running_loop()
        sb = await loop.run_in_executor(None, functools.partial(Sandbox.open, *args, **kw))
        return cls(sb, workers=workers)

    async def _run(self, f: Callable[..., T], *args: Any, **kw: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(f, *args, **kw))

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._run(self.sandbox.__exit__, *exc)
        finally:
            self._pool.shutdown(wait=False)

    async def aclose(self) -> None:
        """Free the handles; the sandbox stays."""
        await self._run(self.sandbox.close)
        self._pool.shutdown(wait=False)

    # -- commands, cancellable ----------------------------------------------

    async def shell(self, command: str, **kw: Any) -> RunResult:
        """:meth:`Sandbox.shell`; cancelling kills the command."""
        return await self._cancellable(["/bin/sh", "-c", command], kw)

    async def exec(self, argv: list[str] | tuple[str, ...], **kw: Any) -> RunResult:
        """:meth:`Sandbox.exec`; cancelling kills the command."""
        return await self._cancellable(list(argv), kw)

    async def _cancellable(self, argv: list[str], kw: dict[str, Any]) -> RunResult:
        if not argv:
            return await self._run(self.sandbox.exec, argv, **kw)
        token = secrets.token_hex(8)
        full = ["/bin/sh", "-c", _WRAPPER, "sh", token, *argv]
        cf = self._pool.submit(functools.partial(self.sandbox.exec, full, **kw))
        af = asyncio.wrap_future(cf)
        try:
            return await asyncio.shield(af)
        except asyncio.CancelledError:
            await self._kill(token, kw.get("user"))
            # The command is gone; wait for its call to come back so its
            # handle returns to the pool (and nothing still runs on return).
            try:
                await asyncio.wait_for(asyncio.shield(af), 15)
            except Exception:
                pass
            raise

    async def _kill(self, token: str, user: str | None) -> None:
        # Not in the pool: every worker may be busy with commands. As the
        # command's user, who may signal it.
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, functools.partial(
            self.sandbox.exec, ["/bin/sh", "-c", _KILL.format(t=token)], timeout=30, user=user))

    # -- the rest, in the pool ----------------------------------------------

    async def status(self) -> Status:
        return await self._run(self.sandbox.status)

    async def exec_path(self) -> ExecPath:
        return await self._run(self.sandbox.exec_path)

    async def start(self) -> None:
        await self._run(self.sandbox.start)

    async def stop(self, timeout: int = -1) -> None:
        await self._run(self.sandbox.stop, timeout)

    async def restart(self) -> None:
        await self._run(self.sandbox.restart)

    async def remove(self, keep_workspace: bool = False) -> None:
        await self._run(self.sandbox.remove, keep_workspace)

    async def exec_command(self, command: str, **kw: Any) -> SessionOutput:
        return await self._run(self.sandbox.exec_command, command, **kw)

    async def write_stdin(self, session_id: int, chars: str | bytes = "",
                          **kw: Any) -> SessionOutput:
        return await self._run(self.sandbox.write_stdin, session_id, chars, **kw)

    async def kill_session(self, session_id: int) -> None:
        await self._run(self.sandbox.kill_session, session_id)

    async def list_sessions(self) -> list[SessionInfo]:
        return await self._run(self.sandbox.list_sessions)

    async def snapshot(self, tag: str | None = None) -> Snapshot:
        return await self._run(self.sandbox.snapshot, tag)

    async def snapshots(self) -> list[Snapshot]:
        return await self._run(self.sandbox.snapshots)

    async def restore(self, ref: str | Snapshot) -> Snapshot:
        return await self._run(self.sandbox.restore, ref)

    async def diff(self, a: str | Snapshot, b: str | Snapshot | None = None,
                   **kw: Any) -> Diff:
        return await self._run(self.sandbox.diff, a, b, **kw)

    async def export(self, ref: str | Snapshot, path: str | os.PathLike[str],
                     **kw: Any) -> None:
        await self._run(self.sandbox.export, ref, path, **kw)

    async def import_(self, path: str | os.PathLike[str], tag: str | None = None) -> Snapshot:
        return await self._run(self.sandbox.import_, path, tag)

    async def pause(self) -> None:
        await self._run(self.sandbox.pause)

    async def unpause(self) -> None:
        await self._run(self.sandbox.unpause)

    async def get_snapshot(self, ref: str | Snapshot) -> Snapshot:
        return await self._run(self.sandbox.get_snapshot, ref)

    async def delete_snapshot(self, ref: str | Snapshot) -> None:
        await self._run(self.sandbox.delete_snapshot, ref)

    async def apply(self, **kw: Any) -> ApplyResult:
        return await self._run(self.sandbox.apply, **kw)

    async def fork(self, name: str | None = None, snapshot: str | Snapshot | None = None, *,
                   keep: bool = False, workers: int = 8) -> AsyncSandbox:
        sb = await self._run(self.sandbox.fork, name, snapshot, keep=keep)
        return AsyncSandbox(sb, workers=workers)

    async def logs(self, **kw: Any) -> str | None:
        """:meth:`Sandbox.logs`; a ``callback`` runs on a worker thread."""
        return await self._run(self.sandbox.logs, **kw)

    async def network(self) -> list[tuple[str, str]] | None:
        return await self._run(self.sandbox.network)

    async def network_change(self, **kw: Any) -> list[tuple[str, str]]:
        return await self._run(self.sandbox.network_change, **kw)

    async def network_log(self) -> list[dict[str, Any]]:
        return await self._run(self.sandbox.network_log)

    async def secret_set(self, name: str, source: str | None) -> None:
        return await self._run(self.sandbox.secret_set, name, source)

    async def save_template(self, name: str, **kw: Any) -> Any:
        return await self._run(self.sandbox.save_template, name, **kw)

    async def record_event(self, command: str, **kw: Any) -> int:
        return await self._run(self.sandbox.record_event, command, **kw)

    async def events(self) -> list[dict[str, Any]]:
        return await self._run(self.sandbox.events)

    @staticmethod
    async def gc(**kw: Any) -> GcResult:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(Sandbox.gc, **kw))

    @staticmethod
    async def list(state_root: str | os.PathLike[str] | None = None) -> list[str]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, Sandbox.list, state_root)

    @property
    def fs(self) -> Any:
        """The workspace's Filesystem (synchronous; see :attr:`Sandbox.fs`)."""
        return self.sandbox.fs
