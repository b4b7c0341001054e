#!/usr/bin/python3
"""The Python package's snapshot methods on a sandbox of a kubernetes
engine (run by test_engine_snapshots.sh with SANDPOD_LIBRARY,
SANDPOD_TOOLS_LIBRARY and SANDPOD_HOME set): the store is the peer's, asked
through sp_sandbox_snapshot_*; the same records, diffs and exceptions as on
a local sandbox.

usage: remote_snapshots.py NAME TMPDIR
Prints "ok" and exits 0, or raises.
"""
import asyncio
import calendar
import os
import sys
import time
from ctypes import POINTER, byref

import sandpod
from sandpod import _structs as S, errors
from sandpod import sandbox as sbmod
from sandpod._native import call


def expect_error(cls, code, words, f, *args):
    try:
        f(*args)
    except errors.Error as e:
        assert type(e) is cls, (type(e), e)
        assert e.code == code, (e.code, e)
        assert words in str(e), e
    else:
        raise AssertionError(f"{f.__name__}{args} did not fail")


def exists(sb, path):
    return sb.shell(f"test -e /workspace/{path}").exit_code == 0


def main():
    name, tmp = sys.argv[1:3]
    sb = sandpod.Sandbox.open(name)
    assert sb.is_remote
    before = [s.id for s in sb.snapshots()]

    s = sb.snapshot("py-snap")
    assert s.tag == "py-snap" and len(s.commit) == 40 and len(s.id) == 36, s
    assert s.root == "/workspace" and s.store == "/sandpod/store", s
    assert s.created_at.endswith("Z") and s.files >= 1, s
    listed = sb.snapshots()
    assert [x.id for x in listed] == before + [s.id], (before, listed)
    assert listed[-1] == s, (listed[-1], s)
    assert sb.get_snapshot("py-snap") == s
    assert sb.get_snapshot(s.id[:8]) == s
    # The C record's created_at_ns crossed the wire exactly (past 2^53: a
    # double would have lost its last digits): it is created_at's time.
    p = POINTER(S.Snapshot)()
    call(sbmod._sb_snap_get, byref(p), sb._main(), s.id.encode())
    ns = p.contents.created_at_ns
    sbmod._snapshot_free(p)
    secs, frac = s.created_at.rstrip("Z").split(".")
    want = calendar.timegm(time.strptime(secs, "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(frac.ljust(9, "0"))
    assert ns == want and ns > 2**53, (ns, want, s.created_at)

    # A change in the workspace: the diff with the live workspace shows it.
    assert sb.shell("printf 'hello\\n' > /workspace/py-new.txt; chmod 0640 /workspace/py-new.txt"
                    ).exit_code == 0
    d = sb.diff("py-snap")
    assert (d.from_commit, d.to) == (s.commit, "workspace"), d
    assert [(c.path, c.kind, c.new_mode) for c in d.changes] == [("py-new.txt", "added", 0o640)], d
    assert (d.added, d.modified, d.deleted, d.type_changed, d.patch) == (1, 0, 0, 0, None), d
    d = sb.diff(s, patch=True)
    assert "+hello" in d.patch, d.patch
    s2 = sb.snapshot()
    assert s2.tag is None
    d = sb.diff(s, s2)
    assert (d.to, d.added, d.changes[0].path) == (s2.commit, 1, "py-new.txt"), d

    # Bad refs: the right exception, code and message; nothing changed.
    expect_error(errors.SnapshotError, errors.ENOTFOUND, "no-such-snap", sb.get_snapshot,
                 "no-such-snap")
    expect_error(errors.SnapshotRestoreError, errors.ENOTFOUND, "no-such-snap", sb.restore,
                 "no-such-snap")
    assert exists(sb, "py-new.txt"), "a failed restore changed the workspace"
    expect_error(errors.SnapshotError, errors.ENOTFOUND, "no-such-snap", sb.delete_snapshot,
                 "no-such-snap")
    expect_error(errors.SnapshotError, errors.ENOTFOUND, "no-such-snap", sb.diff, "no-such-snap")
    expect_error(errors.SnapshotError, errors.EINVAL, "which snapshot", sb.get_snapshot, "")
    expect_error(errors.SnapshotError, errors.EINVAL, "tag", sb.snapshot, "")
    assert [x.id for x in sb.snapshots()] == before + [s.id, s2.id]

    # Restore: the file made after the snapshot is gone.
    r = sb.restore("py-snap")
    assert r == s, (r, s)
    assert not exists(sb, "py-new.txt"), "restore left the new file"
    assert sb.diff(s).changes == ()

    # Export here, import back as a new snapshot (the workspace untouched).
    tar = os.path.join(tmp, "s2.tar")
    sb.export(s2, tar)
    assert os.path.getsize(tar) > 0 and not [f for f in os.listdir(tmp) if f.endswith(".tmp")]
    imp = sb.import_(tar, tag="py-imported")
    assert imp.tag == "py-imported" and (imp.files, imp.bytes) == (s2.files, s2.bytes), (imp, s2)
    assert sb.diff(s2, imp).changes == (), "the import is not the exported tree"
    assert not exists(sb, "py-new.txt"), "import changed the workspace"
    expect_error(errors.SnapshotError, errors.ENOTFOUND, "no-such-snap", sb.export,
                 "no-such-snap", os.path.join(tmp, "none.tar"))
    assert not os.path.exists(os.path.join(tmp, "none.tar"))

    # Delete: gone from the list, a get of it not found.
    for x in (s, s2, imp):
        sb.delete_snapshot(x)
    assert [x.id for x in sb.snapshots()] == before
    expect_error(errors.SnapshotError, errors.ENOTFOUND, "py-snap", sb.get_snapshot, "py-snap")

    # The asyncio twins go the same way.
    async def aio():
        ab = await sandpod.AsyncSandbox.open(name)
        try:
            a = await ab.snapshot("py-aio")
            assert (await ab.get_snapshot("py-aio")) == a
            assert (await ab.snapshots())[-1] == a
            await ab.delete_snapshot(a)
        finally:
            await ab.aclose()  # the sandbox stays
    asyncio.run(aio())
    assert [x.id for x in sb.snapshots()] == before
    sb.close()
    print("ok")


if __name__ == "__main__":
    main()
