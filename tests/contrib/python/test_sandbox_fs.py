"""SandboxFilesystem on a real sandbox: made with the CLI, opened through
sp_sandbox_open(). Skips without Podman (fails under CI=true)."""

import ctypes
import dataclasses
import os
import shutil
import subprocess
import uuid

import pytest

import sandpod
from sandpod import _native

from conftest import need

pytestmark = pytest.mark.podman

_open = _native.fn("sp_sandbox_open", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                   ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(_native.ErrorPtr))
_free = _native.fn("sp_sandbox_free", None, ctypes.c_void_p)


class _Owner:
    """Stands in for the Python Sandbox: owns the sp_sandbox*."""

    def __init__(self, name: str) -> None:
        self.handle = ctypes.c_void_p()
        _native.call(_open, ctypes.byref(self.handle), name.encode(), None)

    def __del__(self) -> None:
        _free(self.handle)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    cli = os.environ.get("SANDPOD_CLI")
    need("SANDPOD_CLI (run through ctest)", bool(cli))
    need("podman", shutil.which("podman") is not None)
    home = tmp_path_factory.mktemp("home")
    old = os.environ.get("SANDPOD_HOME")
    os.environ["SANDPOD_HOME"] = str(home)

    def sp(*args, check=True):
        r = subprocess.run([cli, *args], capture_output=True, text=True, timeout=300)
        if check and r.returncode != 0:
            raise AssertionError(f"sandpod {' '.join(args)}: {r.returncode}: {r.stderr}")
        return r

    r = sp("image", "exists", check=False)
    if r.returncode > 1 or (r.returncode == 1 and r.stdout.strip() != "false"):
        need(f"a reachable Podman ({r.stderr.strip()})", False)
    if r.returncode == 1:
        sp("image", "build")
    name = "py-fs-" + uuid.uuid4().hex[:8]
    sp("create", "--name", name)
    try:
        yield name, sp
    finally:
        sp("rm", "--force", name, check=False)
        if old is None:
            os.environ.pop("SANDPOD_HOME", None)
        else:
            os.environ["SANDPOD_HOME"] = old


@pytest.fixture
def sfs(sandbox):
    name, _ = sandbox
    owner = _Owner(name)
    return sandpod.SandboxFilesystem(owner.handle, owner)


def test_protocol_both_ways(sandbox, sfs):
    name, sp = sandbox
    assert isinstance(sfs, sandpod.SnapshotableFilesystem)
    assert sfs.root.endswith("/workspace") and not sfs.read_only
    sfs.write("from_py/hello.txt", "from python\n")
    assert sp("exec", name, "--", "cat", "/workspace/from_py/hello.txt").stdout == "from python\n"
    sp("exec", name, "--", "sh", "-c", "echo from container > /workspace/ct.txt")
    assert sfs.read("/workspace/ct.txt").content == "from container\n"
    assert [e.name for e in sfs.list()] == ["ct.txt", "from_py"]
    with pytest.raises(PermissionError):
        sfs.read("/workspace/../sandbox.json")
    with pytest.raises(FileNotFoundError):
        sfs.read("nope")


def test_snapshot_restore_pauses_and_resumes(sandbox, sfs):
    name, sp = sandbox
    sfs.write("state.txt", "before\n")
    snap = sfs.snapshot(tag="py")
    assert snap.tag == "py" and snap.git_dir and snap.git_dir.endswith("snapshots.git")
    assert not snap.git_dir.startswith(sfs.root + os.sep)
    sp("exec", name, "--", "sh", "-c", "echo after > /workspace/state.txt; echo x > /workspace/new")
    sfs.restore(snap)
    assert sfs.read("state.txt").content == "before\n"
    assert not sfs.exists("new")
    # the container was resumed: commands still run and see the restored files
    assert sp("exec", name, "--", "cat", "/workspace/state.txt").stdout == "before\n"
    with pytest.raises(sandpod.SnapshotRestoreError):
        sfs.restore(dataclasses.replace(snap, snapshot_id=uuid.UUID(int=1)))
    with pytest.raises(sandpod.SnapshotRestoreError):
        sfs.restore(dataclasses.replace(snap, git_dir="/nonexistent/store.git"))
