#!/usr/bin/python3
"""Sandbox.fs on a sandbox of a kubernetes engine (run by
test_engine_snapshots.sh with SANDPOD_LIBRARY, SANDPOD_TOOLS_LIBRARY and
SANDPOD_HOME set): the seeds' Filesystem protocol through the peer's tools.
The same tree is built in the remote workspace and, with HostFilesystem, in
a local folder; every method's results and exceptions are compared with
the local one's, call for call.

usage: remote_fs.py NAME TMPDIR
Prints "ok" and exits 0, or raises. Timings of a few calls go to stderr.
"""
import dataclasses
import inspect
import os
import sys
import threading
import time

import sandpod
from sandpod import errors

# The same tree on both sides, under t/ (the remote workspace has other files).
FILES = {
    "t/a.txt": b"alpha\nbeta\ngamma\n",
    "t/noeol.txt": b"one\ntwo",
    "t/empty.txt": b"",
    "t/bin.dat": b"\x00\xff\xfe binary\n\x80tail",
    "t/latin.txt": b"caf\xe9 au lait\n",
    "t/uni.txt": "h\u00e9llo w\u00f6rld alpha\n".encode(),
    "t/sub/b.py": b"def f():\n    return 'alpha'\n",
    "t/sub/deep/c.md": b"# alpha\nnothing here\n",
    "t/.hidden/h.txt": b"alpha hidden\n",
    "t/.gitignore": b"ignored.txt\n",
    "t/ignored.txt": b"alpha ignored\n",
    "t/many.txt": "".join(f"line {i}\n" for i in range(1, 7001)).encode(),
}
LONG = b"x" * 600 + b"\nshort\n"


def outcome(f, *args, **kw):
    """What a call gives: ("ok", result) or ("raise", exception class)."""
    try:
        return ("ok", f(*args, **kw))
    except errors.Error as e:
        return ("raise", type(e))


def same(rfs, host, name, *args, **kw):
    r = outcome(getattr(rfs, name), *args, **kw)
    h = outcome(getattr(host, name), *args, **kw)
    assert r == h, f"{name}{args}{kw}:\n remote {r}\n local  {h}"
    return r[1]


def raises(cls, f, *args, **kw):
    try:
        f(*args, **kw)
    except errors.Error as e:
        assert type(e) is cls, (f.__name__, args, type(e), e)
        return e
    raise AssertionError(f"{f.__name__}{args}{kw} did not fail")


def main():
    name, tmp = sys.argv[1:3]
    sb = sandpod.Sandbox.open(name)
    assert sb.is_remote
    fs = sb.fs
    assert type(fs) is sandpod.RemoteFilesystem and sb.fs is fs
    assert isinstance(fs, sandpod.SnapshotableFilesystem)
    assert fs.root == "/workspace" and fs.read_only is False

    # The seed's signatures, exactly HostFilesystem's.
    for m in ("read", "read_bytes", "exists", "stat", "list", "glob", "grep", "write",
              "write_bytes", "delete", "mkdir", "snapshot", "restore"):
        a = inspect.signature(getattr(sandpod.RemoteFilesystem, m))
        b = inspect.signature(getattr(sandpod.HostFilesystem, m))
        assert a == b, (m, a, b)

    if fs.exists("t"):  # left by an earlier run that failed
        fs.delete("t", recursive=True)
    local = os.path.join(tmp, "local")
    os.makedirs(local)
    host = sandpod.HostFilesystem(local, store=os.path.join(tmp, "store"))
    for p, data in FILES.items():
        for f in (fs, host):
            w = f.write_bytes(p, data)
            assert w == sandpod.WriteResult(path=p, bytes_written=len(data), mode="overwrite"), w
    for f in (fs, host):
        f.mkdir("t/emptydir")
    assert sb.shell("cd /workspace/t && ln -s a.txt link_in && ln -s /etc/passwd link_out"
                    ).exit_code == 0
    os.symlink("a.txt", os.path.join(local, "t/link_in"))
    os.symlink("/etc/passwd", os.path.join(local, "t/link_out"))

    # Bytes round trips, NULs and non-UTF-8 included; offsets and limits.
    for p, data in FILES.items():
        assert fs.read_bytes(p).content == data, p
        same(fs, host, "read_bytes", p)
        same(fs, host, "read_bytes", p, offset=2, limit=3)
        same(fs, host, "read_bytes", p, offset=1)
        same(fs, host, "read_bytes", p, limit=0)
        same(fs, host, "read_bytes", p, offset=10**6)
    # Text: the same content, counts and truncation, offsets and limits.
    for p in ("t/a.txt", "t/noeol.txt", "t/empty.txt", "t/uni.txt", "t/sub/b.py",
              "t/many.txt", "t/link_in"):
        same(fs, host, "read", p)
        same(fs, host, "read", p, offset=1, limit=1)
        same(fs, host, "read", p, offset=2)
        same(fs, host, "read", p, offset=50)
        same(fs, host, "read", p, limit=2)
    r = fs.read("t/many.txt", offset=6990, limit=100)
    assert (r.total_lines, r.content, r.truncated) == (7000, "".join(
        f"line {i}\n" for i in range(6991, 7001)), False), r
    assert fs.read("t/many.txt").truncated and fs.read("t/many.txt").limit == 2000
    same(fs, host, "read", "t/latin.txt", encoding="latin-1")
    assert fs.read("t/latin.txt", encoding="latin-1").content == "caf\u00e9 au lait\n"
    raises(errors.InvalidError, fs.read, "t/latin.txt")
    raises(errors.InvalidError, fs.read, "t/bin.dat")
    same(fs, host, "read", "t/latin.txt")
    same(fs, host, "read", "t/bin.dat")

    # A line over the peer's cut (500 bytes): read cuts it with the marker;
    # read_bytes still gives every byte (through the peer's fs cat).
    fs.write_bytes("t2/long.txt", LONG)
    r = fs.read("t2/long.txt")
    assert r.content.startswith("x" * 500 + "… [line cut: 600 bytes]\n") and r.total_lines == 2, r
    assert fs.read_bytes("t2/long.txt").content == LONG
    b = fs.read_bytes("t2/long.txt", offset=598, limit=5)
    assert (b.content, b.size_bytes, b.truncated) == (b"xx\nsh", len(LONG), True), b
    fs.write_bytes("-dash.txt", LONG + b"no newline")
    assert fs.read_bytes("-dash.txt").content == LONG + b"no newline"
    fs.delete("-dash.txt")
    t0 = time.perf_counter()
    fs.read_bytes("t2/long.txt")
    print(f"remote_fs: read_bytes (a line over 500 bytes): "
          f"{(time.perf_counter() - t0) * 1000:.1f} ms/call", file=sys.stderr)
    fs.delete("t2", recursive=True)

    # Metadata.
    for p in ("t/a.txt", "t/sub", "t/link_in", "t/link_out", "t/empty.txt", "t/emptydir"):
        a, b = fs.stat(p), host.stat(p)
        assert (a.path, a.is_file, a.is_directory) == (b.path, b.is_file, b.is_directory), (a, b)
        if a.is_file or not a.is_directory:
            assert a.size_bytes == b.size_bytes, (a, b)
        assert a.modified_at is not None and a.modified_at.tzinfo is not None, a
    for p in ("t/a.txt", "t/sub", "t/link_out", "t/nope", "../x", "/etc/passwd", "t/a.txt/x",
              "t/link_out/x", ".", "/workspace/t/a.txt"):
        same(fs, host, "exists", p)
    assert fs.exists("t/link_out") and not fs.exists("../x") and not fs.exists("t/nope")
    assert not fs.exists("t/\0x")

    # Listings, globs and greps: equal as data to the local ones.
    for p in ("t", "t/sub", "t/emptydir", "t/.hidden"):
        same(fs, host, "list", p)
    assert [e.name for e in fs.list("t")][:3] == [".gitignore", ".hidden", "a.txt"], fs.list("t")
    for pat, base in (("**", "t"), ("*.txt", "t"), ("**/*.py", "."), ("t/**/*.md", "."),
                      ("*", "t/sub"), ("{a,noeol}.txt", "t"), (".*", "t"), ("nothing*", "t")):
        same(fs, host, "glob", pat, path=base)
    for pat, kw in (("alpha", {"path": "t"}), ("alpha", {"path": "t", "glob": "*.py"}),
                    ("w.rld", {"path": "t"}), ("^line 69", {"path": "t", "max_matches": 3}),
                    ("alpha", {"path": "t/sub/b.py"}), ("nomatch", {"path": "t"}),
                    ("l", {"path": "t/uni.txt"})):
        same(fs, host, "grep", pat, **kw)
    g = fs.grep("w.rld", path="t")
    assert [(m.path, m.line_content[m.match_start:m.match_end]) for m in g] == [
        ("t/uni.txt", "w\u00f6rld")], g
    assert {m.path for m in fs.grep("alpha", path="t")} >= {"t/.hidden/h.txt", "t/ignored.txt"}

    # Write modes, on both sides, with the same results.
    for f in (fs, host):
        assert f.write("t/w.txt", "one\n", mode="create").mode == "create"
        assert f.write("t/w.txt", "two\n", mode="append").bytes_written == 4
        f.write("t/w/x/y.txt", "deep")
    same(fs, host, "read_bytes", "t/w.txt")
    assert fs.read("t/w.txt").content == "one\ntwo\n"
    same(fs, host, "write", "t/w.txt", "three", mode="create")
    same(fs, host, "write", "t/w.txt", "four\n")
    same(fs, host, "read", "t/w.txt")
    same(fs, host, "write", "t/none/x.txt", "x", create_parents=False)
    same(fs, host, "write", "t/a.txt/x.txt", "x", create_parents=False)
    same(fs, host, "write_bytes", "t/sub", b"x")
    same(fs, host, "write", "/workspace/t/abs.txt", "abs\n")
    same(fs, host, "read", "t/abs.txt")
    # A replacement of a file the workload changed since it was read here.
    fs.read("t/w.txt")
    assert sb.shell("printf 'changed by the workload\\n' >/workspace/t/w.txt").exit_code == 0
    fs.write("t/w.txt", "mine\n")
    assert fs.read_bytes("t/w.txt").content == b"mine\n"

    # Errors: the same classes as locally, for the same failures.
    for f, args, kw in (
            ("read", ("t/missing",), {}), ("read_bytes", ("t/missing",), {}),
            ("stat", ("t/missing",), {}), ("list", ("t/missing",), {}),
            ("read", ("t/sub",), {}), ("read_bytes", ("t/sub",), {}),
            ("list", ("t/a.txt",), {}), ("read", ("t/a.txt/x",), {}),
            ("read", ("../x",), {}), ("read", ("/etc/passwd",), {}),
            ("read", ("t/link_out",), {}), ("read_bytes", ("t/link_out",), {}),
            ("write", ("../x", "x"), {}), ("write", ("/etc/x", "x"), {}),
            ("write", ("t/link_out", "x"), {}), ("stat", ("../x",), {}),
            ("list", ("..",), {}), ("glob", ("*",), {"path": "../"}),
            ("grep", ("x",), {"path": "/etc"}), ("delete", ("../x",), {}),
            ("mkdir", ("../x",), {}),
            ("write", ("t/a.txt", "x"), {"mode": "create"}),
            ("write", ("t/a.txt", "x"), {"mode": "bogus"}),
            ("write", ("t/a.txt", b"x"), {}), ("write_bytes", ("t/a.txt", "x"), {}),
            ("delete", ("t/sub",), {}), ("delete", ("t/missing",), {}),
            ("delete", (".",), {}, ),
            ("mkdir", ("t/sub",), {"exist_ok": False}),
            ("mkdir", ("t/sub",), {"parents": False, "exist_ok": False}),
            ("mkdir", ("t/a.txt",), {}), ("mkdir", ("t/a.txt",), {"parents": False}),
            ("mkdir", ("t/x/y",), {"parents": False}),
            ("grep", ("(",), {"path": "t"}), ("read", ("t/a\0b",), {}),
            ("read", ("t/a.txt",), {"offset": -1}), ("read", ("t/a.txt",), {"limit": 0}),
            ("read", ("t/a.txt",), {"encoding": "no-such-codec"})):
        try:
            h = outcome(getattr(host, f), *args, **kw)
        except (TypeError, ValueError) as e:
            h = ("raise", type(e))
        try:
            r = outcome(getattr(fs, f), *args, **kw)
        except (TypeError, ValueError) as e:
            r = ("raise", type(e))
        assert h[0] == "raise", (f, args, kw, h)
        assert r == h, f"{f}{args}{kw}: remote {r}, local {h}"
    e = raises(errors.NotFoundError, fs.read, "t/missing")
    assert isinstance(e, FileNotFoundError)
    assert isinstance(raises(errors.EscapeError, fs.read, "../x"), PermissionError)
    assert isinstance(raises(errors.IsADirectoryErr, fs.delete, "t/sub"), IsADirectoryError)
    assert fs.exists("t/sub/b.py"), "a refused delete deleted nothing"
    # mkdir's combinations.
    for f in (fs, host):
        f.mkdir("t/m1")
        f.mkdir("t/m1")
        f.mkdir("t/m2", parents=False)
        f.mkdir("t/m2", parents=False, exist_ok=True)
        f.mkdir("t/m3/a/b", exist_ok=False)
    same(fs, host, "list", "t/m3/a")
    # Deletes.
    for f in (fs, host):
        f.delete("t/link_out")
        f.delete("t/emptydir")
        f.delete("t/w", recursive=True)
    assert os.path.exists("/etc/passwd")
    same(fs, host, "list", "t")

    # Snapshots: take, change, restore; bad records refused.
    s = fs.snapshot(tag="rfs-snap")
    assert isinstance(s, sandpod.FilesystemSnapshot) and s.tag == "rfs-snap", s
    assert len(s.commit_ref) == 40 and s.root_path == "/workspace", s
    assert s.created_at.tzinfo is not None and sb.get_snapshot(str(s.snapshot_id)).commit == \
        s.commit_ref
    fs.write("t/a.txt", "changed\n")
    fs.write("t/after.txt", "new\n")
    fs.delete("t/sub", recursive=True)
    fs.restore(s)
    assert fs.read_bytes("t/a.txt").content == FILES["t/a.txt"]
    assert not fs.exists("t/after.txt") and fs.read_bytes("t/sub/b.py").content == FILES[
        "t/sub/b.py"]
    raises(errors.SnapshotRestoreError, fs.restore,
           dataclasses.replace(s, commit_ref="0" * 40))
    raises(errors.SnapshotRestoreError, fs.restore,
           dataclasses.replace(s, snapshot_id=__import__("uuid").uuid4()))
    raises(errors.SnapshotRestoreError, fs.restore, "not a snapshot")
    bad_tag = same(fs, host, "snapshot", tag="bad\ntag")
    assert issubclass(bad_tag, ValueError), bad_tag

    # Threads: one instance from several at once.
    bad = []

    def reader():
        try:
            for _ in range(5):
                assert fs.read_bytes("t/a.txt").content == FILES["t/a.txt"]
                assert [m.path for m in fs.glob("*.py", path="t/sub")] == ["t/sub/b.py"]
        except BaseException as e:  # noqa: BLE001
            bad.append(e)
    ts = [threading.Thread(target=reader) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad, bad

    # What a call costs over the fake (stderr, for the record).
    for label, f in (("stat", lambda: fs.stat("t/a.txt")),
                     ("exists", lambda: fs.exists("t/a.txt")),
                     ("read (small)", lambda: fs.read("t/a.txt")),
                     ("read_bytes (binary)", lambda: fs.read_bytes("t/bin.dat")),
                     ("read_bytes (text)", lambda: fs.read_bytes("t/a.txt")),
                     ("read (7000 lines, 58 KB)", lambda: fs.read("t/many.txt", limit=10)),
                     ("glob", lambda: fs.glob("**", path="t")),
                     ("write", lambda: fs.write("t/perf.txt", "x\n")),
                     ("list", lambda: fs.list("t")),
                     ("grep", lambda: fs.grep("alpha", path="t"))):
        n = 20
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        print(f"remote_fs: {label}: {(time.perf_counter() - t0) / n * 1000:.1f} ms/call",
              file=sys.stderr)

    # Closed with its sandbox: later calls fail cleanly.
    fs.delete("t", recursive=True)
    sb.close()
    raises(errors.SandpodRuntimeError, fs.stat, "a.txt")
    host.close()
    print("ok")


if __name__ == "__main__":
    main()
