"""The API beyond the filesystem that needs no Podman: hydrate with a
progress callable, templates of an empty state root, images against a
service nobody serves, AsyncSandbox mirroring every Sandbox method, and
every argument that names a snapshot taking a Snapshot object."""

import asyncio
import inspect
import os

import pytest

import sandpod
from sandpod import errors


def test_hydrate_copies_mounts_with_progress(tmp_path):
    a = tmp_path / "a"
    (a / "sub").mkdir(parents=True)
    (a / "sub" / "x.txt").write_text("x" * 10)
    (a / "skip.log").write_text("no")
    b = tmp_path / "b"
    b.mkdir()
    (b / "x.txt").write_text("from b")
    ws = tmp_path / "ws"
    ws.mkdir()
    seen = []
    r = sandpod.hydrate(ws, [sandpod.Mount(a, exclude=("*.log",)), sandpod.Mount(b, dst="sub")],
                        progress=seen.append)
    assert (ws / "sub" / "x.txt").read_text() == "from b"
    assert not (ws / "skip.log").exists()
    assert r.files == 1 and r.excluded == 1
    assert ("sub/x.txt", "file", 6, 1) in r.entries
    assert r.overridden == (("sub/x.txt", 1, 0),)
    assert seen and {p.phase for p in seen} <= {"scan", "copy", "commit"}
    assert all(isinstance(p, sandpod.HydrateProgress) for p in seen)


def test_hydrate_errors_and_callback_exceptions(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("f")
    with pytest.raises(FileNotFoundError):
        sandpod.hydrate(ws, [tmp_path / "missing"])
    with pytest.raises(ValueError):
        sandpod.hydrate(ws, [])
    with pytest.raises(PermissionError):
        sandpod.hydrate(ws, [sandpod.Mount(src, dst="../out")])

    class Stop(Exception):
        pass

    def boom(_p):
        raise Stop("from the callback")

    # The callable's exception is the call's, not a traceback ctypes prints.
    with pytest.raises(Stop):
        sandpod.hydrate(ws, [src], progress=boom)


def test_templates_of_an_empty_state_root(tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    assert sandpod.templates.list(state_root=root) == []
    with pytest.raises(FileNotFoundError) as e:
        sandpod.templates.info("nope", state_root=root)
    assert e.value.code == errors.ENOTFOUND
    with pytest.raises(FileNotFoundError):
        sandpod.templates.remove("nope", state_root=root)
    with pytest.raises(ValueError):
        sandpod.templates.info("bad/name", state_root=root)


def test_images_without_a_service(tmp_path):
    url = f"unix://{tmp_path}/nobody.sock"
    for call in (lambda: sandpod.images.list(url=url),
                 lambda: sandpod.images.exists("x", url=url),
                 lambda: sandpod.images.pull("127.0.0.1:1/x:1", tls_verify=False, url=url),
                 lambda: sandpod.images.remove("x", url=url)):
        with pytest.raises(RuntimeError) as e:
            call()
        assert e.value.code == errors.EPODMAN


def test_async_sandbox_mirrors_every_sandbox_method():
    def public(c):
        return {n for n in dir(c) if not n.startswith("_")}

    missing = public(sandpod.Sandbox) - public(sandpod.AsyncSandbox) - {"close"}
    assert missing == set()
    assert "aclose" in public(sandpod.AsyncSandbox)
    for name in public(sandpod.Sandbox):
        attr = inspect.getattr_static(sandpod.Sandbox, name)
        if callable(attr) or isinstance(attr, (staticmethod, classmethod)):
            if name == "close":
                continue
            f = getattr(sandpod.AsyncSandbox, name)
            assert inspect.iscoroutinefunction(f), name


# Every argument that names a snapshot, (method, parameter): each takes a
# Snapshot object as well as a str.
SNAPSHOT_ARGS = {("create", "from_"), ("fork", "snapshot"), ("get_snapshot", "ref"),
                 ("restore", "ref"), ("delete_snapshot", "ref"), ("diff", "a"), ("diff", "b"),
                 ("export", "ref"), ("apply", "from_"), ("apply", "snapshot"),
                 ("save_template", "snapshot")}


def test_every_snapshot_argument_takes_a_snapshot_object():
    named = set()
    for cls in (sandpod.Sandbox, sandpod.AsyncSandbox):
        for name in dir(cls):
            f = getattr(cls, name)
            if name.startswith("_") or not callable(f) or inspect.isclass(f):
                continue
            for p in inspect.signature(f).parameters.values():
                if p.name in ("ref", "a", "b", "from_") or "snapshot" in p.name:
                    named.add((name, p.name))
                    assert "Snapshot" in str(p.annotation), (cls.__name__, name, p.name)
    assert named == SNAPSHOT_ARGS

    from sandpod.sandbox import _ref
    snap = sandpod.Snapshot(id="0b5e3c1e-0000-4000-8000-000000000001", tag="t", commit="c",
                            root="", store="", created_at="", files=0, dirs=0, symlinks=0,
                            bytes=0)
    assert _ref(snap) == snap.id.encode()
    assert _ref("t") == b"t" and _ref(None) is None
    with pytest.raises(TypeError, match="sandpod.Snapshot or a str"):
        _ref(3)


def test_async_gc_and_list_run_in_threads(tmp_path):
    async def go():
        return await sandpod.AsyncSandbox.list(tmp_path)
    assert asyncio.run(go()) == []
