"""HostFilesystem against the seeds' Filesystem protocol (seed 001), method by
method, exception by exception, over a bare folder."""

import dataclasses
import inspect
import os
import stat as st
from datetime import datetime
from uuid import UUID

import pytest

import sandpod
from sandpod import errors
from sandpod.filesystem import default_store

P = inspect.Parameter
KW, POS = P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD

# The seed's signatures, written out from seed 001: (name, kind, default).
SEED_SIGNATURES = {
    "read": [("path", POS, P.empty), ("offset", KW, 0), ("limit", KW, None),
             ("encoding", KW, "utf-8")],
    "read_bytes": [("path", POS, P.empty), ("offset", KW, 0), ("limit", KW, None)],
    "exists": [("path", POS, P.empty)],
    "stat": [("path", POS, P.empty)],
    "list": [("path", POS, ".")],
    "glob": [("pattern", POS, P.empty), ("path", KW, ".")],
    "grep": [("pattern", POS, P.empty), ("path", KW, "."), ("glob", KW, None),
             ("max_matches", KW, None)],
    "write": [("path", POS, P.empty), ("content", POS, P.empty), ("mode", KW, "overwrite"),
              ("create_parents", KW, True)],
    "write_bytes": [("path", POS, P.empty), ("content", POS, P.empty),
                    ("mode", KW, "overwrite"), ("create_parents", KW, True)],
    "delete": [("path", POS, P.empty), ("recursive", KW, False)],
    "mkdir": [("path", POS, P.empty), ("parents", KW, True), ("exist_ok", KW, True)],
    "snapshot": [("tag", KW, None)],
    "restore": [("snapshot", POS, P.empty)],
}

SEED_FIELDS = {
    sandpod.FileStat: ["path", "is_file", "is_directory", "size_bytes", "created_at",
                       "modified_at"],
    sandpod.FileEntry: ["name", "path", "is_file", "is_directory"],
    sandpod.GlobMatch: ["path", "is_file"],
    sandpod.GrepMatch: ["path", "line_number", "line_content", "match_start", "match_end"],
    sandpod.ReadResult: ["content", "path", "total_lines", "offset", "limit", "truncated"],
    sandpod.ReadBytesResult: ["content", "path", "size_bytes", "offset", "limit", "truncated"],
    sandpod.WriteResult: ["path", "bytes_written", "mode"],
    sandpod.FilesystemSnapshot: ["snapshot_id", "created_at", "commit_ref", "root_path",
                                 "git_dir", "tag"],
}


@pytest.mark.parametrize("name", sorted(SEED_SIGNATURES))
def test_signatures_are_the_seeds(name):
    for cls in (sandpod.HostFilesystem, sandpod.SandboxFilesystem,
                sandpod.RemoteFilesystem, sandpod.SnapshotableFilesystem):
        sig = inspect.signature(getattr(cls, name))
        got = [(p.name, p.kind, p.default) for p in sig.parameters.values()][1:]
        assert got == SEED_SIGNATURES[name], (cls, name)


@pytest.mark.parametrize("cls", list(SEED_FIELDS), ids=lambda c: c.__name__)
def test_result_types_are_frozen_dataclasses_with_the_seeds_fields(cls):
    assert [f.name for f in dataclasses.fields(cls)] == SEED_FIELDS[cls]
    assert cls.__dataclass_params__.frozen
    assert hasattr(cls, "__slots__")


def test_snapshot_defaults():
    f = {x.name: x.default for x in dataclasses.fields(sandpod.FilesystemSnapshot)}
    assert f["git_dir"] is None and f["tag"] is None


def test_isinstance_protocols(fs):
    assert isinstance(fs, sandpod.Filesystem)
    assert isinstance(fs, sandpod.SnapshotableFilesystem)
    assert not isinstance(object(), sandpod.Filesystem)
    assert fs.root == os.path.realpath(fs.root)
    assert fs.read_only is False


def test_results_are_immutable(fs):
    r = fs.write("a.txt", "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.path = "b"  # type: ignore[misc]


# ----------------------------------------------------------------- read --

def test_read_slices_lines(fs, ws):
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    r = fs.read("f.txt")
    assert r == sandpod.ReadResult(content="".join(f"line {i}\n" for i in range(10)),
                                   path="f.txt", total_lines=10, offset=0, limit=2000,
                                   truncated=False)
    r = fs.read("f.txt", offset=3, limit=2)
    assert r.content == "line 3\nline 4\n"
    assert (r.offset, r.limit, r.total_lines, r.truncated) == (3, 2, 10, True)
    r = fs.read("f.txt", offset=8, limit=5)
    assert r.content == "line 8\nline 9\n" and not r.truncated
    r = fs.read("f.txt", offset=50)
    assert r.content == "" and r.total_lines == 10 and not r.truncated
    (ws / "nonl").write_text("x\ny")
    r = fs.read("nonl")
    assert r.content == "x\ny" and r.total_lines == 2


def test_read_default_limit_is_2000_lines(fs, ws):
    (ws / "big.txt").write_text("x\n" * 2500)
    r = fs.read("big.txt")
    assert r.limit == 2000 and r.truncated and r.content.count("\n") == 2000
    assert r.total_lines == 2500


def test_read_empty_file(fs, ws):
    (ws / "e").write_bytes(b"")
    r = fs.read("e")
    assert r.content == "" and r.total_lines == 0 and not r.truncated


def test_read_unicode_name_and_content(fs):
    fs.write("dossier/été ☃.txt", "héllo wörld ☃\n")
    assert fs.read("dossier/été ☃.txt").content == "héllo wörld ☃\n"
    assert [e.name for e in fs.list("dossier")] == ["été ☃.txt"]


def test_read_errors(fs, ws):
    (ws / "d").mkdir()
    (ws / "bin").write_bytes(b"\x00\x01\xff\xfe")
    with pytest.raises(FileNotFoundError):
        fs.read("missing.txt")
    with pytest.raises(IsADirectoryError):
        fs.read("d")
    with pytest.raises(ValueError):  # binary: not text
        fs.read("bin")
    with pytest.raises(ValueError):
        fs.read("bin", offset=-1)
    with pytest.raises(ValueError):
        fs.read("bin", limit=0)
    with pytest.raises(ValueError):
        fs.read("f", encoding="no-such-codec")


def test_read_other_encoding(fs, ws):
    (ws / "l1.txt").write_bytes("café\nb\n".encode("latin-1"))
    with pytest.raises(ValueError):
        fs.read("l1.txt")
    r = fs.read("l1.txt", encoding="latin-1", limit=1)
    assert r.content == "café\n" and r.total_lines == 2 and r.truncated


def test_read_permission_denied(fs, ws):
    if os.geteuid() == 0:
        pytest.skip("root reads mode 000 files")
    (ws / "secret").write_text("s")
    (ws / "secret").chmod(0)
    with pytest.raises(PermissionError):
        fs.read("secret")


def test_read_bytes(fs, ws):
    data = bytes(range(256)) * 4
    (ws / "b.bin").write_bytes(data)
    r = fs.read_bytes("b.bin")
    assert r.content == data and r.size_bytes == 1024 and not r.truncated and r.offset == 0
    r = fs.read_bytes("b.bin", offset=1000, limit=10)
    assert r.content == data[1000:1010] and r.truncated and r.limit == 10
    r = fs.read_bytes("b.bin", offset=1020, limit=10)
    assert r.content == data[1020:] and not r.truncated
    r = fs.read_bytes("b.bin", offset=5000)
    assert r.content == b"" and not r.truncated
    r = fs.read_bytes("b.bin", limit=0)
    assert r.content == b"" and r.truncated
    with pytest.raises(FileNotFoundError):
        fs.read_bytes("nope")
    (ws / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        fs.read_bytes("d")
    with pytest.raises(ValueError):
        fs.read_bytes("b.bin", limit=-1)


def test_read_bytes_cap(ws, tmp_path):
    (ws / "f").write_bytes(b"a" * 100)
    with sandpod.HostFilesystem(ws, tmp_path / "s", max_read_bytes=10) as f:
        r = f.read_bytes("f")
        assert r.content == b"a" * 10 and r.truncated and r.size_bytes == 100


# ---------------------------------------------------------------- write --

def test_write_modes(fs, ws):
    r = fs.write("a.txt", "one\n", mode="create")
    assert r == sandpod.WriteResult(path="a.txt", bytes_written=4, mode="create")
    with pytest.raises(FileExistsError):
        fs.write("a.txt", "again", mode="create")
    assert (ws / "a.txt").read_text() == "one\n"
    r = fs.write("a.txt", "two\n", mode="append")
    assert r.mode == "append" and r.bytes_written == 4
    assert (ws / "a.txt").read_text() == "one\ntwo\n"
    r = fs.write("a.txt", "three")
    assert r.mode == "overwrite"
    assert (ws / "a.txt").read_text() == "three"
    fs.write("new.txt", "x", mode="append")
    assert (ws / "new.txt").read_text() == "x"
    with pytest.raises(ValueError):
        fs.write("a.txt", "x", mode="truncate")  # type: ignore[arg-type]


def test_write_parents(fs, ws):
    r = fs.write("/workspace/x/y/z.txt", "deep")
    assert r.path == "x/y/z.txt"
    assert (ws / "x/y/z.txt").read_text() == "deep"
    with pytest.raises(FileNotFoundError):
        fs.write("p/q.txt", "x", create_parents=False)
    assert not (ws / "p").exists()


def test_write_bytes_binary_exact(fs, ws):
    data = b"\x00\xff\x80 \n\r\n" * 1000
    r = fs.write_bytes("bin/blob", data)
    assert r.bytes_written == len(data)
    assert (ws / "bin/blob").read_bytes() == data
    assert fs.read_bytes("bin/blob").content == data
    fs.write_bytes("bin/blob", bytearray(b"!"), mode="append")
    assert (ws / "bin/blob").read_bytes() == data + b"!"
    fs.write_bytes("empty", b"")
    assert (ws / "empty").read_bytes() == b""
    with pytest.raises(TypeError):
        fs.write_bytes("t", "str")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fs.write("t", b"bytes")  # type: ignore[arg-type]


def test_write_limits_are_value_errors(ws, tmp_path):
    with sandpod.HostFilesystem(ws, tmp_path / "s", max_write_bytes=48_000) as f:
        f.write("ok", "x" * 48_000)
        with pytest.raises(ValueError):
            f.write("big", "x" * 48_001)
        assert not (ws / "big").exists()
        with pytest.raises(ValueError):  # 17 segments: over the depth limit
            f.write("/".join(["d"] * 17), "x")
        with pytest.raises(ValueError):  # an 81-byte name
            f.write("n" * 81, "x")
        with pytest.raises(ValueError):  # lone surrogate: not UTF-8
            f.write("s", "\udcff")


def test_write_to_folder_and_through_file(fs, ws):
    (ws / "d").mkdir()
    (ws / "f").write_text("x")
    with pytest.raises(IsADirectoryError):
        fs.write("d", "x")
    with pytest.raises((NotADirectoryError, FileExistsError, FileNotFoundError)):
        fs.write("f/child", "x")
    assert (ws / "f").read_text() == "x"


def test_read_only(ws, tmp_path):
    (ws / "a").write_text("keep")
    with sandpod.HostFilesystem(ws, tmp_path / "s", read_only=True) as f:
        assert f.read_only
        assert f.read("a").content == "keep"
        for op in (lambda: f.write("a", "x"), lambda: f.write_bytes("b", b"x"),
                   lambda: f.delete("a"), lambda: f.mkdir("m")):
            with pytest.raises(PermissionError):
                op()
        snap = f.snapshot()
        with pytest.raises(sandpod.SnapshotRestoreError):
            f.restore(snap)
    assert (ws / "a").read_text() == "keep" and sorted(os.listdir(ws)) == ["a"]


# --------------------------------------------------------- delete, mkdir --

def test_delete(fs, ws):
    (ws / "f").write_text("x")
    (ws / "empty").mkdir()
    (ws / "full/sub").mkdir(parents=True)
    (ws / "full/sub/x").write_text("x")
    fs.delete("f")
    assert not (ws / "f").exists()
    fs.delete("empty")
    assert not (ws / "empty").exists()
    with pytest.raises(IsADirectoryError):
        fs.delete("full")
    assert (ws / "full/sub/x").exists()
    fs.delete("full", recursive=True)
    assert not (ws / "full").exists()
    with pytest.raises(FileNotFoundError):
        fs.delete("f")
    with pytest.raises(ValueError):
        fs.delete(".", recursive=True)
    assert ws.is_dir()


def test_delete_symlink_not_target(fs, ws, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("safe")
    os.symlink(outside, ws / "link")
    fs.delete("link")
    assert outside.read_text() == "safe" and not os.path.lexists(ws / "link")


def test_mkdir(fs, ws):
    fs.mkdir("a/b/c")
    assert (ws / "a/b/c").is_dir()
    fs.mkdir("a/b/c")  # exist_ok=True
    with pytest.raises(FileExistsError):
        fs.mkdir("a/b/c", exist_ok=False)
    with pytest.raises(FileNotFoundError):
        fs.mkdir("x/y", parents=False)
    assert not (ws / "x").exists()
    fs.mkdir("top", parents=False, exist_ok=False)
    assert (ws / "top").is_dir()
    (ws / "file").write_text("x")
    with pytest.raises(FileExistsError):
        fs.mkdir("file")


# ----------------------------------------------------------- metadata --

def test_exists_and_stat(fs, ws):
    (ws / "d").mkdir()
    (ws / "f").write_bytes(b"12345")
    os.symlink("f", ws / "l")
    assert fs.exists("f") and fs.exists("d") and fs.exists("l") and fs.exists(".")
    assert not fs.exists("nope")
    assert not fs.exists("../etc/passwd") and not fs.exists("a\0b")
    s = fs.stat("f")
    assert (s.path, s.is_file, s.is_directory, s.size_bytes) == ("f", True, False, 5)
    assert isinstance(s.modified_at, datetime) and s.modified_at.tzinfo is not None
    assert abs(s.modified_at.timestamp() - os.stat(ws / "f").st_mtime) < 0.01
    assert s.created_at is None or isinstance(s.created_at, datetime)
    d = fs.stat("d")
    assert d.is_directory and not d.is_file
    link = fs.stat("l")
    assert not link.is_file and not link.is_directory
    with pytest.raises(FileNotFoundError):
        fs.stat("nope")


def test_list(fs, ws):
    (ws / "b").mkdir()
    (ws / "b/inner").write_text("x")
    (ws / "a.txt").write_text("x")
    (ws / ".hidden").write_text("x")
    (ws / ".git").mkdir()
    got = fs.list()
    assert got == [sandpod.FileEntry(".git", ".git", False, True),
                   sandpod.FileEntry(".hidden", ".hidden", True, False),
                   sandpod.FileEntry("a.txt", "a.txt", True, False),
                   sandpod.FileEntry("b", "b", False, True)]
    assert fs.list("b") == [sandpod.FileEntry("inner", "b/inner", True, False)]
    assert fs.list("/workspace/b") == fs.list("b")
    (ws / "empty").mkdir()
    assert fs.list("empty") == []
    with pytest.raises(FileNotFoundError):
        fs.list("nope")
    with pytest.raises(NotADirectoryError):
        fs.list("a.txt")


def test_non_utf8_names_round_trip(fs, ws):
    raw = os.path.join(os.fsencode(ws), b"caf\xe9.txt")
    with open(raw, "wb") as f:
        f.write(b"latin\n")
    [e] = fs.list()
    assert e.name == "caf\udce9.txt"  # surrogateescape, as os.listdir gives it
    assert fs.read(e.path).content == "latin\n"
    assert [m.path for m in fs.glob("*.txt")] == [e.path]
    [m] = fs.grep("latin")
    assert m.path == e.path


def test_glob(fs, ws):
    for p in ("a.py", "src/b.py", "src/deep/c.py", "src/d.txt", ".hidden.py"):
        (ws / p).parent.mkdir(parents=True, exist_ok=True)
        (ws / p).write_text("x")
    got = fs.glob("**/*.py")
    assert [m.path for m in got] == [".hidden.py", "a.py", "src/b.py", "src/deep/c.py"]
    assert all(m.is_file for m in got)
    assert [m.path for m in fs.glob("*.py", path="src")] == ["src/b.py"]
    assert [(m.path, m.is_file) for m in fs.glob("s*")] == [("src", False)]
    assert fs.glob("*.nothing") == []
    assert [m.path for m in fs.glob("src/{b,d}.*")] == ["src/b.py", "src/d.txt"]


def test_grep(fs, ws):
    (ws / "src").mkdir()
    (ws / "src/a.py").write_text("def foo():\n    return 1\n# foo again\n")
    (ws / "src/b.txt").write_text("foo\n")
    (ws / "z.py").write_text("nothing\n")
    (ws / "bin").write_bytes(b"foo\x00\x01")
    (ws / ".gitignore").write_text("ignored.py\n")
    (ws / "ignored.py").write_text("foo\n")
    got = fs.grep("foo")
    assert [(m.path, m.line_number) for m in got] == [
        ("ignored.py", 1), ("src/a.py", 1), ("src/a.py", 3), ("src/b.txt", 1)]
    m = got[1]
    assert m.line_content == "def foo():" and (m.match_start, m.match_end) == (4, 7)
    assert [m.path for m in fs.grep("foo", glob="*.py")] == ["ignored.py", "src/a.py",
                                                              "src/a.py"]
    assert [m.path for m in fs.grep("foo", path="src", glob="*.txt")] == ["src/b.txt"]
    assert len(fs.grep("foo", max_matches=2)) == 2
    assert fs.grep("r.turn\\s+\\d") == [sandpod.GrepMatch("src/a.py", 2, "    return 1", 4, 12)]
    with pytest.raises(ValueError):
        fs.grep("(unclosed")
    with pytest.raises(ValueError):
        fs.grep("foo", max_matches=0)


def test_grep_offsets_are_character_offsets(fs):
    fs.write("u.txt", "ééé ☃ target\n")
    [m] = fs.grep("target")
    assert m.line_content[m.match_start:m.match_end] == "target"


def test_grep_default_cap_is_1000(fs):
    fs.write("many.txt", "hit\n" * 1500)
    assert len(fs.grep("hit")) == 1000


# ---------------------------------------------------------- containment --

ESCAPES = ["..", "../outside.txt", "a/../../outside.txt", "/etc/passwd",
           "/workspace/../outside.txt", "/workspace/../../etc/passwd", "/tmp"]


@pytest.mark.parametrize("bad", ESCAPES)
def test_escapes_are_refused(fs, ws, tmp_path, bad):
    (tmp_path / "outside.txt").write_text("outside")
    before = sorted(os.listdir(tmp_path))
    for op in (lambda: fs.read(bad), lambda: fs.read_bytes(bad), lambda: fs.stat(bad),
               lambda: fs.list(bad), lambda: fs.write(bad, "pwned"),
               lambda: fs.write_bytes(bad, b"pwned"), lambda: fs.delete(bad, recursive=True),
               lambda: fs.mkdir(bad), lambda: fs.glob("*", path=bad),
               lambda: fs.grep("x", path=bad)):
        with pytest.raises(PermissionError):
            op()
    assert not fs.exists(bad)
    assert (tmp_path / "outside.txt").read_text() == "outside"
    assert sorted(os.listdir(tmp_path)) == before


def test_nul_bytes_are_value_errors(fs, ws, tmp_path):
    (ws / "a").write_text("a")
    for op in (lambda: fs.read("a\0../../x"), lambda: fs.write("a\0b", "x"),
               lambda: fs.write_bytes("a\0", b"x"), lambda: fs.delete("a\0"),
               lambda: fs.mkdir("m\0"), lambda: fs.stat("a\0"), lambda: fs.list("\0"),
               lambda: fs.glob("a\0"), lambda: fs.grep("a", path="a\0")):
        with pytest.raises(ValueError):
            op()
    assert os.listdir(ws) == ["a"] and (ws / "a").read_text() == "a"


def test_symlinks_pointing_out(fs, ws, tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("hunter2")
    os.symlink(secret / "key", ws / "abs-link")
    os.symlink("../secret/key", ws / "rel-link")
    os.symlink(secret, ws / "dir-link")
    for p in ("abs-link", "rel-link", "dir-link/key"):
        with pytest.raises(PermissionError):
            fs.read(p)
        with pytest.raises(PermissionError):
            fs.read_bytes(p)
        with pytest.raises(PermissionError):
            fs.write(p, "pwned")
    with pytest.raises(PermissionError):
        fs.list("dir-link")
    with pytest.raises(PermissionError):
        fs.mkdir("dir-link/new")
    assert not any(m.path.startswith("dir-link/") for m in fs.glob("**/*"))
    assert fs.grep("hunter2") == []
    assert (secret / "key").read_text() == "hunter2" and os.listdir(secret) == ["key"]


def test_symlink_inside_is_followed(fs, ws):
    (ws / "real.txt").write_text("inside\n")
    os.symlink("real.txt", ws / "alias")
    assert fs.read("alias").content == "inside\n"


# ---------------------------------------------------- snapshot / restore --

def test_seed_usage_example(fs):
    fs.write("config.py", "DEBUG = True")
    snapshot_v1 = fs.snapshot(tag="initial")
    fs.write("config.py", "DEBUG = False")
    fs.write("tests.py", "import pytest")
    snapshot_v2 = fs.snapshot(tag="with-tests")
    fs.restore(snapshot_v1)
    assert fs.read("config.py").content == "DEBUG = True"
    assert not fs.exists("tests.py")
    fs.restore(snapshot_v2)
    assert fs.read("config.py").content == "DEBUG = False"
    assert fs.exists("tests.py")


def test_snapshot_record(fs, ws, tmp_path):
    s = fs.snapshot(tag="before-refactor")
    assert isinstance(s.snapshot_id, UUID) and s.snapshot_id.version == 4
    assert isinstance(s.created_at, datetime) and s.created_at.tzinfo is not None
    assert len(s.commit_ref) == 40 and int(s.commit_ref, 16) >= 0
    assert s.root_path == os.path.realpath(ws)
    assert s.git_dir == str(tmp_path / "store.git")
    assert s.tag == "before-refactor"
    assert fs.snapshot().tag is None
    assert not str(s.git_dir).startswith(str(ws))
    with pytest.raises(ValueError):
        fs.snapshot(tag="bad\ntag")
    with pytest.raises(ValueError):
        fs.snapshot(tag="")


def _tree(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            s = os.lstat(p)
            if st.S_ISLNK(s.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif st.S_ISDIR(s.st_mode):
                out[rel] = ("dir", st.S_IMODE(s.st_mode))
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", st.S_IMODE(s.st_mode), f.read())
    return out


def test_restore_is_exact(fs, ws):
    (ws / "src").mkdir()
    (ws / "src/run.sh").write_text("#!/bin/sh\n")
    (ws / "src/run.sh").chmod(0o755)
    (ws / "private").write_text("p")
    (ws / "private").chmod(0o600)
    (ws / "empty/nested").mkdir(parents=True)
    os.symlink("src/run.sh", ws / "link")
    os.symlink("/nowhere/dangling", ws / "dangling")
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "x.log").write_text("ignored but kept")
    (ws / "bin").write_bytes(bytes(range(256)))
    before = _tree(ws)
    snap = fs.snapshot()

    (ws / "src/run.sh").chmod(0o644)
    (ws / "private").write_text("changed")
    os.rmdir(ws / "empty/nested")
    os.remove(ws / "link")
    os.symlink("elsewhere", ws / "link")
    (ws / "x.log").unlink()
    (ws / "new/dir").mkdir(parents=True)
    (ws / "new/dir/file").write_text("new")
    (ws / "created.txt").write_text("after")
    assert _tree(ws) != before

    fs.restore(snap)
    assert _tree(ws) == before


def test_restore_across_instances(ws, tmp_path):
    store = tmp_path / "shared.git"
    with sandpod.HostFilesystem(ws, store) as a:
        a.write("f", "v1")
        snap = a.snapshot()
        a.write("f", "v2")
    with sandpod.HostFilesystem(ws) as b:  # another store: git_dir finds the snapshot
        b.restore(snap)
        assert b.read("f").content == "v1"


def test_bogus_snapshots_raise_restore_error(fs, ws, tmp_path):
    fs.write("keep", "k")
    real = fs.snapshot()
    fs.write("after", "a")
    bogus = [
        dataclasses.replace(real, snapshot_id=UUID(int=12345)),
        dataclasses.replace(real, commit_ref="0" * 40),
        dataclasses.replace(real, git_dir=str(tmp_path / "no-such-store.git")),
    ]
    for s in bogus:
        with pytest.raises(sandpod.SnapshotRestoreError) as ei:
            fs.restore(s)
        assert isinstance(ei.value, sandpod.SnapshotError)
        assert isinstance(ei.value, RuntimeError)
    with pytest.raises(sandpod.SnapshotRestoreError):
        fs.restore("not a snapshot")  # type: ignore[arg-type]
    assert fs.read("after").content == "a"  # nothing was touched
    assert not (tmp_path / "no-such-store.git").exists()


def test_store_inside_root_is_refused(ws):
    for inside in (ws / "store.git", ws, ws / "a/../s"):
        with pytest.raises(ValueError):
            sandpod.HostFilesystem(ws, inside)
    assert os.listdir(ws) == []


def test_snapshot_error_when_store_is_unusable(ws, tmp_path):
    (tmp_path / "notgit").mkdir()
    (tmp_path / "notgit/junk").write_text("x")
    with sandpod.HostFilesystem(ws, tmp_path / "notgit") as f:
        with pytest.raises(sandpod.SnapshotError):
            f.snapshot()


def test_default_store_is_outside_root_and_stable(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("SANDPOD_HOME", str(tmp_path / "home"))
    with sandpod.HostFilesystem(ws) as f:
        assert f.store == default_store(str(ws))
        assert f.store.startswith(str(tmp_path / "home"))
        assert not f.store.startswith(str(ws) + os.sep)
        f.write("a", "1")
        snap = f.snapshot()
        assert snap.git_dir == f.store
    with sandpod.HostFilesystem(str(ws) + "/") as g:
        assert g.store == f.store
        g.write("a", "2")
        g.restore(dataclasses.replace(snap, git_dir=None))
        assert g.read("a").content == "1"


# ------------------------------------------------------------- handler --

@dataclasses.dataclass(frozen=True)
class ReadFileParams:
    path: str
    offset: int = 0
    limit: int | None = None


@dataclasses.dataclass(frozen=True)
class ReadFileResult:
    content: str
    path: str
    truncated: bool


@dataclasses.dataclass(frozen=True)
class ToolResult:
    message: str
    value: object
    success: bool = True


@dataclasses.dataclass(frozen=True)
class ToolContext:
    filesystem: sandpod.Filesystem | None = None


def read_file_handler(params: ReadFileParams, *, context: ToolContext) -> ToolResult:
    """The seed's handler shape, written against the protocol only."""
    if context.filesystem is None:
        return ToolResult(message="No filesystem available in this context.", value=None,
                          success=False)
    try:
        result = context.filesystem.read(params.path, offset=params.offset, limit=params.limit)
    except FileNotFoundError:
        return ToolResult(message=f"File not found: {params.path}", value=None, success=False)
    except PermissionError as e:
        return ToolResult(message=str(e), value=None, success=False)
    return ToolResult(message=f"Read {result.total_lines} lines from {result.path}",
                      value=ReadFileResult(content=result.content, path=result.path,
                                           truncated=result.truncated))


def test_seed_handler_runs_unchanged(fs):
    fs.write("notes/a.md", "one\ntwo\nthree\n")
    ctx = ToolContext(filesystem=fs)
    r = read_file_handler(ReadFileParams("notes/a.md", offset=1, limit=1), context=ctx)
    assert r.success and r.message == "Read 3 lines from notes/a.md"
    assert r.value == ReadFileResult(content="two\n", path="notes/a.md", truncated=True)
    r = read_file_handler(ReadFileParams("missing.md"), context=ctx)
    assert not r.success and r.message == "File not found: missing.md"
    r = read_file_handler(ReadFileParams("../etc/passwd"), context=ctx)
    assert not r.success and "escapes" in r.message
    assert not read_file_handler(ReadFileParams("x"), context=ToolContext()).success


def test_errors_carry_the_c_code(fs):
    with pytest.raises(sandpod.Error) as ei:
        fs.read("../x")
    assert ei.value.code == errors.EESCAPE


def test_closed_filesystem(ws, tmp_path):
    f = sandpod.HostFilesystem(ws, tmp_path / "s")
    f.close()
    f.close()
    with pytest.raises(RuntimeError):
        f.read("x")


def test_root_must_be_a_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        sandpod.HostFilesystem(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        sandpod.HostFilesystem(tmp_path / "file")

