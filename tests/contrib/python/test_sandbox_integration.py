"""Sandboxes from Python against a real Podman service (CTest: test_python_integration).

Every sandbox lives under a private state root (SANDPOD_HOME) removed at the
end, with the Podman service the library may have started for it. Without
Podman the tests skip, except under CI=true.

The same suite runs against a remote engine (tests/kube/test_python_remote.sh
sets SANDPOD_TEST_ENGINES to an engines.json, SANDPOD_ENGINE to one of its
engines and SANDPOD_TEST_IMAGE to the workload image): every sandbox is made
there, what a test looked at in the host workspace it looks at through the
sandbox, and a test of what a remote sandbox does not offer yet is skipped
saying what.
"""

import asyncio
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time

import pytest

import sandpod
from sandpod import errors

pytestmark = pytest.mark.integration
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
ENGINE = os.environ.get("SANDPOD_ENGINE")
REMOTE = dict(engine=ENGINE, image=os.environ.get("SANDPOD_TEST_IMAGE")) if ENGINE else {}


def _skip(why):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (Podman is required under CI=true)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def home():
    # Short: the agent's unix socket lives under the state root.
    d = tempfile.mkdtemp(prefix="sp-py.")
    old = os.environ.get("SANDPOD_HOME")
    os.environ["SANDPOD_HOME"] = os.path.join(d, "home")
    os.makedirs(os.environ["SANDPOD_HOME"])
    if REMOTE:
        shutil.copy(os.environ["SANDPOD_TEST_ENGINES"],
                    os.path.join(os.environ["SANDPOD_HOME"], "engines.json"))
    yield os.environ["SANDPOD_HOME"]
    for name in sandpod.Sandbox.list():
        try:
            with sandpod.Sandbox.open(name) as sb:
                sb.remove()
        except sandpod.Error:
            pass
    pid_file = os.path.join(os.environ["SANDPOD_HOME"], "podman.pid")
    if os.path.exists(pid_file):
        try:
            os.kill(int(open(pid_file).read().strip()), 15)
        except (ValueError, OSError):
            pass
    if old is None:
        del os.environ["SANDPOD_HOME"]
    else:
        os.environ["SANDPOD_HOME"] = old
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def src_dir(home):
    d = os.path.join(os.path.dirname(home), "src")
    os.makedirs(os.path.join(d, "pkg"))
    with open(os.path.join(d, "hello.txt"), "w") as f:
        f.write("hello from the host\n")
    with open(os.path.join(d, "pkg", "mod.py"), "w") as f:
        f.write("X = 1\n")
    return d


def _create(**kw):
    try:
        return sandpod.Sandbox.create(**kw, **REMOTE)
    except sandpod.errors.PodmanError as e:
        _skip(f"podman cannot be reached: {e}")


@pytest.fixture(scope="module")
def sb(home, src_dir):
    s = _create(mounts=[src_dir])
    yield s
    s.remove()


def _isfile(s, rel):
    """A file of the workspace: on the host for a local sandbox, through
    the sandbox for a remote one (its workspace is in its Pod)."""
    if s.is_remote:
        return s.exec(["test", "-f", rel]).exit_code == 0
    return os.path.isfile(os.path.join(s.workspace, rel))


def _not_remote(what):
    """Skip a test of what a remote sandbox does not offer yet."""
    if ENGINE:
        pytest.skip(f"remote: {what}")


def _procs(sb):
    """Command lines of every process in the container."""
    r = sb.shell("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done")
    return [line for line in r.stdout.splitlines() if line.strip()]


# ------------------------------------------------------------- lifecycle --

def test_create_open_list_remove(home, src_dir):
    s = _create(name="py-life", mounts=[sandpod.Mount(src_dir, dst="app")])
    try:
        assert s.name == "py-life"
        assert "py-life" in sandpod.Sandbox.list()
        assert _isfile(s, "app/hello.txt")
        st = s.status()
        assert st.state == "running" and st.running
        with pytest.raises(FileExistsError) as ei:
            sandpod.Sandbox.create(name="py-life", **REMOTE)
        assert ei.value.code == errors.EEXISTS
        with sandpod.Sandbox.open("py-life") as again:  # keep=True: not removed
            assert again.shell("cat app/hello.txt").stdout == "hello from the host\n"
        assert "py-life" in sandpod.Sandbox.list()
    finally:
        s.remove()
    assert "py-life" not in sandpod.Sandbox.list()
    with pytest.raises(ValueError):
        s.shell("true")  # closed by remove


def test_stop_start(home):
    _not_remote("start/stop are local-only (sp_sandbox_stop, sp_sandbox_start)")
    with _create(name="py-stop") as s:
        s.stop(timeout=1)
        assert s.status().running is False
        s.start()
        assert s.shell("true").exit_code == 0


def test_context_manager_removes_unless_keep(home):
    with _create(name="py-ctx") as s:
        assert s.shell("echo in").stdout == "in\n"
    assert "py-ctx" not in sandpod.Sandbox.list()
    with _create(name="py-kept", keep=True) as s:
        pass
    assert "py-kept" in sandpod.Sandbox.list()
    sandpod.Sandbox.open("py-kept").remove()
    assert "py-kept" not in sandpod.Sandbox.list()


def test_missing_sandbox_is_file_not_found(home):
    with pytest.raises(FileNotFoundError) as ei:
        sandpod.Sandbox.open("py-no-such")
    assert isinstance(ei.value, sandpod.Error)
    assert ei.value.code == errors.ENOTFOUND
    assert "py-no-such" in str(ei.value)


def test_bad_options_are_value_errors(home):
    with pytest.raises(ValueError) as ei:
        sandpod.Sandbox.create(name="bad name!", **REMOTE)
    assert ei.value.code == errors.EINVAL
    with pytest.raises(ValueError):
        sandpod.Sandbox.create(network="wifi", **REMOTE)
    assert "bad name!" not in sandpod.Sandbox.list()


def test_create_setup_env_and_failing_setup(home):
    with _create(name="py-setup", env={"GREETING": "hi"},
                 setup=["echo made > /workspace/setup.txt"]) as s:
        assert s.shell("cat setup.txt; echo $GREETING").stdout == "made\nhi\n"
    with pytest.raises(sandpod.Error) as ei:
        sandpod.Sandbox.create(name="py-setup-bad", setup=["echo nope >&2; exit 3"], **REMOTE)
    assert "nope" in str(ei.value)
    assert "py-setup-bad" not in sandpod.Sandbox.list()


# -------------------------------------------------------------- commands --

def test_shell_and_exec_results(sb):
    r = sb.shell("echo out; echo err >&2; exit 7")
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert r.stdout_bytes == b"out\n" and not r.timed_out and not r.truncated
    assert not r.ok and r.duration_ms >= 0
    r = sb.exec(["printf", "%s|", "a b", "$HOME"])
    assert r.exit_code == 0 and r.stdout == "a b|$HOME|"
    r = sb.exec(["/no/such/program"])
    assert r.exit_code == 127
    with pytest.raises(ValueError):
        sb.exec([])
    assert sb.shell("pwd").stdout == "/workspace\n"
    assert sb.shell("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sb.shell("echo $A$B", env={"A": "1", "B": "2"}).stdout == "12\n"


def test_stdin_and_invalid_utf8(sb):
    assert sb.exec(["cat"], stdin="line1\nline2\n").stdout == "line1\nline2\n"
    assert sb.shell("wc -c", stdin=b"\x00\x01\x02").stdout.strip() == "3"
    r = sb.shell("printf '\\377ok'")
    assert r.stdout_bytes == b"\xffok" and r.stdout == "\ufffdok"


def test_timeout_kills_the_command(sb):
    t0 = time.monotonic()
    r = sb.shell("sleep 30 & sleep 31; echo never", timeout=1)
    assert r.timed_out and "never" not in r.stdout
    assert time.monotonic() - t0 < 20
    assert not [p for p in _procs(sb) if "sleep 3" in p]


def test_truncation_keeps_head_and_tail(sb):
    r = sb.shell("seq 1 100000", max_bytes=1000)
    assert r.stdout_truncated and not r.stderr_truncated
    assert r.stdout.startswith("1\n2\n") and r.stdout.rstrip().endswith("100000")
    assert r.stdout_total == len("".join(f"{i}\n" for i in range(1, 100001)))
    assert len(r.stdout_bytes) < 2000


def test_many_threads_share_one_sandbox(sb):
    n = 8
    results = [None] * n
    barrier = threading.Barrier(n)
    sb.shell("rm -rf /tmp/par && mkdir /tmp/par")

    # Each command counts the commands inside the sandbox beside it. In
    # the first round it waits (up to 20 s) for another one to be there:
    # a fixed sleep made the count depend on the machine's speed, and a
    # loaded one (each remote command taking seconds) saw 1.
    def cmd(i, k):
        wait = ("t=0; while [ $(ls /tmp/par | wc -l) -lt 2 ] && [ $t -lt 200 ]; "
                "do sleep 0.1; t=$((t+1)); done; " if k == 0 else "")
        return (f"touch /tmp/par/{i}-{k}; {wait}n=$(ls /tmp/par | wc -l); "
                f"rm /tmp/par/{i}-{k}; echo {i}-{k} $n")

    def work(i):
        barrier.wait()
        results[i] = [sb.shell(cmd(i, k)) for k in range(3)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    most = 0
    for i, rs in enumerate(results):
        for k, r in enumerate(rs):
            who, count = r.stdout.split()
            assert who == f"{i}-{k}", r.stdout
            most = max(most, int(count))
    # At once, not one after the other: some command saw another running
    # (serialized commands would each wait 20 s in vain and see 1).
    assert most >= 2, most


# -------------------------------------------------------------- sessions --

def test_sessions(sb):
    o = sb.exec_command("read x; echo got:$x", tty=False, yield_time_ms=200)
    assert not o.exited and o.session_id > 0
    sid = o.session_id
    assert sid in [s.id for s in sb.list_sessions()]
    o = sb.write_stdin(sid, "abc\n", yield_time_ms=3000)
    out = o.output
    while not o.exited:
        o = sb.write_stdin(sid, yield_time_ms=1000)
        out += o.output
    assert "got:abc" in out and o.exit_code == 0
    o = sb.exec_command("sleep 300", yield_time_ms=100)
    sb.kill_session(o.session_id)
    assert o.session_id not in [s.id for s in sb.list_sessions() if s.running]
    with pytest.raises(sandpod.Error):
        sb.write_stdin(999999, "x")


# ------------------------------------------------------------- snapshots --

def test_snapshot_diff_restore_round_trip(sb):
    sb.shell("mkdir -p snapt && echo one > snapt/a.txt")
    s1 = sb.snapshot("py-one")
    assert s1.tag == "py-one" and len(s1.id) == 36
    sb.shell("echo two > snapt/a.txt; echo new > snapt/b.txt; rm hello.txt")
    s2 = sb.snapshot("py-two")
    assert [s.id for s in sb.snapshots()][-2:] == [s1.id, s2.id]
    assert sb.get_snapshot(s1) == s1 == sb.get_snapshot(s1.id[:8])
    d = sb.diff(s1, s2, patch=True)
    kinds = {c.path: c.kind for c in d.changes}
    assert kinds == {"snapt/a.txt": "modified", "snapt/b.txt": "added", "hello.txt": "deleted"}
    assert (d.added, d.modified, d.deleted) == (1, 1, 1)
    assert "+two" in d.patch
    assert sb.diff("py-two").changes == ()  # against the live workspace
    sb.restore("py-one")
    assert sb.shell("cat snapt/a.txt hello.txt; ls snapt").stdout == \
        "one\nhello from the host\na.txt\n"
    with pytest.raises(sandpod.SnapshotRestoreError) as ei:
        sb.restore("py-no-such-tag")
    assert isinstance(ei.value, sandpod.SnapshotError) and ei.value.code == errors.ENOTFOUND
    with pytest.raises(sandpod.SnapshotError):
        sb.diff("py-no-such-tag")


def test_export_import(sb, tmp_path):
    sb.shell("mkdir -p exp && echo exported > exp/f.txt")
    s = sb.snapshot("py-exp")
    tgz = tmp_path / "snap.tar.gz"
    sb.export(s, tgz)
    with tarfile.open(tgz) as tf:
        assert tf.extractfile("exp/f.txt").read() == b"exported\n"
    sb.shell("rm -r exp")
    imp = sb.import_(tgz, tag="py-imported")
    assert imp.tag == "py-imported" and imp.id != s.id
    assert sb.shell("test -e exp").exit_code != 0  # the workspace is untouched
    sb.restore(imp)
    assert sb.shell("cat exp/f.txt").stdout == "exported\n"
    with pytest.raises(sandpod.SnapshotError):
        sb.import_(tmp_path / "missing.tar")


def test_fork(sb):
    sb.shell("echo forked > fork.txt")
    snap = sb.snapshot("py-fork")
    sb.shell("echo later > fork.txt")
    with sb.fork("py-forked", snapshot=snap.id) as f:
        assert f.shell("cat fork.txt").stdout == "forked\n"
        f.shell("echo child > fork.txt")
        assert sb.shell("cat fork.txt").stdout == "later\n"
    assert "py-forked" not in sandpod.Sandbox.list()
    # The Snapshot object itself, as fork and create(from_=) take it.
    with sb.fork("py-forked-obj", snapshot=snap) as f:
        assert f.shell("cat fork.txt").stdout == "forked\n"
    with _create(name="py-from-obj", from_=(sb.name, snap)) as f:
        assert f.shell("cat fork.txt").stdout == "forked\n"


def test_apply_back_to_host(home, tmp_path):
    host = tmp_path / "proj"
    host.mkdir()
    (host / "keep.txt").write_text("v1\n")
    with _create(name="py-apply", mounts=[str(host)]) as s:
        s.shell("echo v2 > keep.txt; echo made > new.txt")
        dry = s.apply(dry_run=True)
        assert not dry.applied and sorted(dry.changes) == [("add", "new.txt"),
                                                           ("modify", "keep.txt")]
        assert (host / "keep.txt").read_text() == "v1\n"
        r = s.apply()
        assert r.applied and not r.conflicts and r.snapshot
        assert (host / "keep.txt").read_text() == "v2\n"
        assert (host / "new.txt").read_text() == "made\n"
        # from_ and snapshot take Snapshot objects: the changes between two.
        one = s.snapshot("py-apply-one")
        s.shell("echo v3 > keep.txt; echo later > later.txt")
        two = s.snapshot("py-apply-two")
        s.shell("echo unreviewed > keep.txt")
        dry = s.apply(from_=one, snapshot=two, dry_run=True)
        assert sorted(dry.changes) == [("add", "later.txt"), ("modify", "keep.txt")]
        assert dry.from_snapshot == one.id and dry.snapshot == two.id


def test_apply_holds_back_what_the_host_would_run(home, tmp_path):
    host = tmp_path / "proj"
    (host / ".git").mkdir(parents=True)
    (host / ".git" / "config").write_text("[core]\n")
    with _create(name="py-apply-held", mounts=[str(host)]) as s:
        s.shell("printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' >> .git/config; "
                "echo '* filter=x' > .gitattributes; ln -s /etc/shadow out; echo ok > ok.txt")
        r = s.apply()
        assert r.applied and [c[1] for c in r.changes] == ["ok.txt"]
        held = {h[0]: h[1] for h in r.held}
        assert held == {".git": "version-control", ".gitattributes": "review", "out": "link-out"}
        assert (host / ".git" / "config").read_text() == "[core]\n"
        assert not (host / ".gitattributes").exists() and not (host / "out").is_symlink()
        r = s.apply(allow_paths=[".gitattributes"], allow_links_out=True)
        assert r.applied and (host / ".gitattributes").exists() and (host / "out").is_symlink()


def test_apply_as_a_branch(home, tmp_path):
    import subprocess
    host = tmp_path / "proj"
    host.mkdir()
    (host / "a.txt").write_text("one\n")
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@x", "-C", str(host)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(git + args, check=True)
    with _create(name="py-apply-branch", mounts=[str(host)]) as s:
        s.shell("echo two > a.txt")
        r = s.apply(branch="from-sandbox", message="the work")
        assert r.applied and r.commit and len(r.commit) == 40
        assert (host / "a.txt").read_text() == "one\n"
        show = subprocess.run(git + ["show", "from-sandbox:a.txt"], check=True,
                              capture_output=True, text=True).stdout
        assert show == "two\n"
        with pytest.raises(sandpod.errors.Error):
            s.apply(branch="from-sandbox")


# ----------------------------------------------------------------- tools --

def test_tools_specs_and_calls(sb):
    with sandpod.tools(sb) as t:
        oa = t.specs("openai")
        an = t.specs(format="anthropic")
        names = {s["name"] for s in oa}
        assert {"read_file", "shell", "exec_command", "snapshot"} <= names
        assert all(s["type"] == "function" and "parameters" in s for s in oa)
        assert {s["name"] for s in an} == names and all("input_schema" in s for s in an)
        assert "tools" in t.specs("mcp")
        with pytest.raises(ValueError):
            t.specs("gemini")
        r = t.call("shell", {"command": "echo tooled > tool.txt; echo done"})
        assert r["ok"] and "done" in r["message"]
        r = t.call("read_file", {"path": "tool.txt"})
        assert r["ok"] and "tooled" in r["message"]
        r = t.call("read_file", {"path": "no/such.txt"})
        assert r["ok"] is False and r["error"]["code"] == "not_found"
        r = t.call("read_file", '{"path": "tool.txt", "bogus": 1}')
        assert r["ok"] is False and "bogus" in r["error"]["message"]


def test_tools_cancel_from_another_thread(sb):
    with sandpod.tools(sb) as t:
        out = {}
        th = threading.Thread(target=lambda: out.update(
            r=t.call("shell", {"command": "sleep 4646", "timeout_ms": 60000})))
        th.start()
        time.sleep(1.5)
        assert [p for p in _procs(sb) if "sleep 4646" in p]
        t0 = time.monotonic()
        t.cancel()
        th.join(30)
        assert not th.is_alive() and time.monotonic() - t0 < 30
        assert out["r"]["ok"] is False
        assert not [p for p in _procs(sb) if "sleep 4646" in p]
        assert t.call("shell", {"command": "echo after"})["ok"]


def test_example_agent_loop(sb, home):
    env = dict(os.environ)
    r = subprocess.run([os.environ.get("PYTHON", "/usr/bin/python3"),
                        os.path.join(SRC, "contrib", "python", "examples", "agent_loop.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "model: the tests pass" in r.stdout
    assert "tool shell ->" in r.stdout


# ----------------------------------------------------------------- async --

def test_async_shell_and_cancel_kills(sb):
    async def main():
        a = sandpod.AsyncSandbox(sb)
        r1, r2 = await asyncio.gather(a.shell("echo one"), a.exec(["echo", "two"]))
        assert (r1.stdout, r2.stdout) == ("one\n", "two\n")
        r = await a.shell("exit 4")
        assert r.exit_code == 4
        task = asyncio.create_task(a.shell("sleep 4242 & sleep 4343; echo never"))
        await asyncio.sleep(2)
        assert [p for p in _procs(sb) if "sleep 4343" in p]
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - t0 < 30
        left = [p for p in _procs(sb) if "sleep 4242" in p or "sleep 4343" in p]
        assert left == []
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(a.exec(["sleep", "4444"]), 1)
        assert not [p for p in _procs(sb) if "sleep 4444" in p]
        snap = await a.snapshot("py-async")
        assert snap.tag == "py-async"
    asyncio.run(main())


def test_async_cancel_kills_as_another_user(sb):
    _not_remote("commands run as the sandbox's user only (exec user=)")

    async def main():
        a = sandpod.AsyncSandbox(sb)
        # A command run as another user is killed as that user.
        task = asyncio.create_task(a.exec(["sleep", "4545"], user="1001:1001"))
        await asyncio.sleep(1.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not [p for p in _procs(sb) if "sleep 4545" in p]
    asyncio.run(main())


def test_close_while_a_command_runs_waits_for_its_handle(sb, monkeypatch):
    from sandpod import sandbox as mod

    freed, bad = [], []
    real_free, real_shell = mod._free, mod._shell

    def free(h):
        freed.append(h.value)
        real_free(h)

    def shell(out, h, *rest):
        rc = real_shell(out, h, *rest)
        if h.value in freed:
            bad.append("the handle of a running command was freed under it")
        return rc

    monkeypatch.setattr(mod, "_free", free)
    monkeypatch.setattr(mod, "_shell", shell)
    other = sandpod.Sandbox.open(sb.name)
    out = {}

    def run():
        out["r"] = other.shell("sleep 1; echo done")

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.4)
    other.close()  # the running command's handle is freed when it comes back
    t.join()
    assert out["r"].stdout == "done\n"
    assert bad == [] and len(freed) == 2  # the main handle and the command's
    with pytest.raises(ValueError):
        other.shell("true")
    assert sb.shell("echo still").stdout == "still\n"


def test_fs_property_is_the_protocol_over_the_workspace(sb):
    """sandbox.fs: the seeds' protocol on the live workspace, one object
    sharing the sandbox's lock; a snapshot restores what a command changed;
    after close() it fails cleanly instead of touching a freed handle."""
    fs = sb.fs
    assert fs is sb.fs
    assert isinstance(fs, sandpod.SnapshotableFilesystem)
    fs.write("from-py.txt", "written by python\n")
    assert sb.shell("cat from-py.txt").stdout == "written by python\n"
    snap = fs.snapshot(tag="py-fs")
    sb.shell("echo changed > from-py.txt && touch extra.txt")
    assert fs.read("from-py.txt").content == "changed\n"
    fs.restore(snap)
    assert fs.read("from-py.txt").content == "written by python\n"
    assert not fs.exists("extra.txt")
    other = sandpod.Sandbox.open(sb.name)
    ofs = other.fs
    assert ofs.read("from-py.txt").content == "written by python\n"
    other.close()
    with pytest.raises(sandpod.Error):
        ofs.read("from-py.txt")
    with pytest.raises(sandpod.Error):
        ofs.snapshot()
