#!/usr/bin/python3
"""The Python package on a sandbox of a kubernetes engine (run by
test_engine_remote.sh with SANDPOD_LIBRARY, SANDPOD_TOOLS_LIBRARY and
SANDPOD_HOME set): Sandbox.open of a remote sandbox, commands, rpc, the
tool suite, Sandbox.fs through the peer, create/remove with engine=.

usage: remote_python.py NAME ENGINE IMAGE NEW_NAME
Prints "ok" and exits 0, or raises.
"""
import sys

import sandpod
from sandpod import errors


def main():
    name, engine, image, new = sys.argv[1:5]
    sb = sandpod.Sandbox.open(name)
    assert sb.is_remote and sb.engine == engine and sb.workspace == "", (sb.engine, sb.workspace)
    r = sb.shell("echo py; echo e >&2; exit 4")
    assert (r.exit_code, r.stdout, r.stderr) == (4, "py\n", "e\n"), r
    r = sb.exec(["cat"], stdin=b"through stdin")
    assert r.stdout == "through stdin", r
    listed = sb.rpc("tools/list")
    assert len(listed["tools"]) == 17, [t["name"] for t in listed["tools"]]
    t = sandpod.tools(sb)
    res = t.call("write_file", {"path": "py.txt", "content": "from python\n"})
    assert res["ok"], res
    assert sb.shell("cat /workspace/py.txt").stdout == "from python\n"
    res = t.call("read_file", {"path": "../x"})
    assert not res["ok"] and res["error"]["code"] == "escape", res
    t.close()
    # The workspace's Filesystem is the peer's (remote_fs.py checks it whole).
    assert isinstance(sb.fs, sandpod.RemoteFilesystem), sb.fs
    assert sb.fs.read("py.txt").content == "from python\n"
    # A Pod has no paused state: refused in one line, nothing changed.
    for op in (sb.pause, sb.unpause):
        try:
            op()
        except errors.InvalidError as e:
            assert f"its Pod cannot {op.__name__}" in str(e) and "template save" in str(e), e
        else:
            raise AssertionError(f"{op.__name__} of a remote sandbox did not fail")
    sb.start()  # running: nothing to do
    assert sb.shell("echo up").stdout == "up\n"
    sb.close()
    with sandpod.Sandbox.create(new, engine=engine, image=image) as nb:
        assert nb.is_remote and nb.shell("echo new").stdout == "new\n"
    assert new not in sandpod.Sandbox.list(), "the context manager removed it"
    print("ok")


if __name__ == "__main__":
    main()
