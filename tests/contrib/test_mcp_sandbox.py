#!/usr/bin/env python3
"""`sandpod mcp --create` on real Podman, driven over pipes: an MCP client
drives a sandbox end to end. Shell calls (exit codes, stderr, timeouts),
files written by tools seen by commands and the reverse, cancellation of
`sleep 100` (the command must be gone afterwards), progress notifications,
exec_command / write_stdin sessions, snapshots and restore, the events
file, removal of the sandbox at exit with --rm (kept by default, with a hint on
stderr), and .env* files left out of the mounts unless --with-dotenv.

The same suite runs against a remote engine (tests/kube/test_suites_remote.sh
sets SANDPOD_TEST_ENGINES to an engines.json and SANDPOD_ENGINE to one of
its engines): what the test looked at in the host workspace it then looks at
through `sandpod exec` in the workload, as a user of that engine would.

Usage: test_mcp_sandbox.py PATH/TO/sandpod
Exits 77 (skip) without Podman, unless CI=true. Prints 'N passed, M failed'."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_client import (  # noqa: E402
    Checks, Server, error_code, is_error, need_podman, schema_errors, skip, structured, text_of)

SP = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "sandpod")


need_podman()

c = Checks()
tmp = tempfile.mkdtemp(prefix="sandpod-mcpsb-")
home = os.path.join(tmp, "home")
src = os.path.join(tmp, "src")
os.makedirs(home)
os.makedirs(os.path.join(src, "pkg"))
with open(os.path.join(src, "pkg", "data.txt"), "w") as f:
    f.write("from the host\n")
for envf in [".env", ".env.local", os.path.join("pkg", ".env")]:
    with open(os.path.join(src, envf), "w") as f:
        f.write("SECRET=1\n")
env = dict(os.environ, SANDPOD_HOME=home)
ENGINES = os.environ.get("SANDPOD_TEST_ENGINES")
REMOTE = bool(ENGINES)
if REMOTE:
    shutil.copy(ENGINES, os.path.join(home, "engines.json"))
name = "mcp-test-%d" % os.getpid()


def val(resp):
    """The value of a tool result (an empty dict when there is none)."""
    return structured(resp).get("value") or {}


def ws_files(sb):
    """The workspace's files (relative paths) of sandbox SB: the host folder
    of a local sandbox, `find` in the workload of a remote one."""
    if not REMOTE:
        ws = os.path.join(home, "sandboxes", sb, "workspace")
        return sorted(os.path.relpath(os.path.join(d, f), ws)
                      for d, _, fs in os.walk(ws) for f in fs)
    p = subprocess.run([SP, "exec", sb, "--", "sh", "-c", "cd /workspace && find . -type f"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return ["(exec failed: %s)" % p.stderr.strip()]
    return sorted(x[2:] for x in p.stdout.splitlines())


def sandboxes():
    d = os.path.join(home, "sandboxes")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def cleanup():
    for sb in sandboxes():
        subprocess.run([SP, "rm", "--force", sb], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    pidfile = os.path.join(home, "podman.pid")
    if os.path.exists(pidfile):
        try:
            os.kill(int(open(pidfile).read().strip()), signal.SIGTERM)
        except (ValueError, OSError):
            pass
    shutil.rmtree(tmp, ignore_errors=True)


s = Server([SP, "mcp", "--create", "--rm", "--name", name, "--mount", src], env=env)
try:
    r = s.initialize()
    if r is None:
        err = s.stderr_text() if s.p.poll() is not None else ""
        if "podman" in err.lower() and os.environ.get("CI") != "true":
            cleanup()
            skip("no working Podman service: " + err.strip()[:200])
        c.check("initialize", False, err)
        raise SystemExit
    c.check("initialize", "result" in r, r)
    c.check("--rm: the instructions say the work goes with the session",
            ("sandbox %s" % name) in r["result"]["instructions"] and
            "removed" in r["result"]["instructions"], r["result"].get("instructions"))
    # The sandbox is made at the first tool call, not at initialize.
    listed = subprocess.run([SP, "ls"], env=env, stdout=subprocess.PIPE, text=True).stdout
    c.check("initialize made no sandbox yet", name not in listed, listed)
    r = s.call("stat", {"path": "."})
    c.check("the first call makes the sandbox and answers", not is_error(r), r)
    files = ws_files(name)
    c.check(".env* files are left out of the mount by default",
            "pkg/data.txt" in files and
            not any(e in files for e in [".env", ".env.local", "pkg/.env"]), files)
    r = s.request("tools/list")
    names = [t["name"] for t in r["result"]["tools"]]
    for n in ["shell", "exec_command", "write_stdin", "snapshot", "restore", "list_snapshots",
              "read_file"]:
        c.check(f"tools/list has {n}", n in names, names)
    out_schema = {t["name"]: t.get("outputSchema", {}) for t in r["result"]["tools"]}

    def valid(name, resp):
        sc = structured(resp)
        errs = schema_errors(sc, out_schema.get(name, {})) if sc else ["no structuredContent"]
        c.check(f"{name}: structuredContent matches outputSchema", not errs, errs)

    # ------------------------------------ reads answer while a command runs
    s.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
            "params": {"name": "shell", "arguments": {"command": "sleep 3; echo slept"}}})
    time.sleep(0.3)
    t0 = time.time()
    s.send({"jsonrpc": "2.0", "id": "quick", "method": "tools/call",
            "params": {"name": "stat", "arguments": {"path": "."}}})
    first = s.recv(30)
    stat_s = time.time() - t0
    second = s.recv(30)
    shell_s = time.time() - t0
    print(f"a stat sent during a 3 s shell answered in {stat_s * 1000:.0f} ms "
          f"(the shell after {shell_s:.1f} s)")
    c.check("a stat sent after a running shell is answered first",
            [first and first.get("id"), second and second.get("id")] == ["quick", "slow"],
            [first, second])
    valid("shell", second)
    valid("stat", first)

    # ---------------------------------------------------------------- shell
    r = s.call("shell", {"command": "echo out; echo err >&2; exit 3"})
    sc = structured(r)
    c.check("shell: a non-zero exit is a result", is_error(r) is False, r)
    valid("shell", r)
    v = val(r)
    c.check("shell: exit code, stdout, stderr",
            v.get("exit_code") == 3 and v.get("stdout") == "out\n" and v.get("stderr") == "err\n",
            v)
    c.check("shell: text", text_of(r).startswith("Exit code: 3\n") and "Stderr:\nerr\n" in
            text_of(r), text_of(r))
    r = s.call("shell", {"command": "cat pkg/data.txt; id -u; pwd"})
    c.check("shell sees the hydrated workspace as an unprivileged user",
            val(r).get("stdout") == "from the host\n1000\n/workspace\n",
            r)
    r = s.call("write_file", {"path": "made/by/tool.txt", "content": "tool\n"})
    r = s.call("shell", {"command": "cat made/by/tool.txt && echo cmd > made/cmd.txt",
                         "workdir": "."})
    c.check("commands see tool writes", "tool" in text_of(r), r)
    r = s.call("read_file", {"path": "/workspace/made/cmd.txt"})
    c.check("tools see command writes", text_of(r) == "L1: cmd\n", r)
    r = s.call("shell", {"command": "seq 1 100000"})
    sc = structured(r)
    c.check("shell output is capped head and tail", sc.get("truncated") is True and
            "lines omitted" in text_of(r) and "100000" in text_of(r) and
            len(text_of(r)) < 12000, len(text_of(r)))
    t0 = time.time()
    r = s.call("shell", {"command": "echo started; sleep 30", "timeout_ms": 1000})
    sc = structured(r)
    c.check("shell timeout: killed, partial output, code timeout",
            is_error(r) is True and sc.get("error", {}).get("code") == "timeout" and
            "started" in text_of(r) and time.time() - t0 < 15, r)
    r = s.call("shell", {"command": "x", "timeout_ms": 0})
    c.check("shell: bad timeout refused", is_error(r) is True and "'timeout_ms'" in text_of(r), r)

    # --------------------------------------------- cancellation, progress
    s.next_id += 1
    sleep_id = s.next_id
    s.send({"jsonrpc": "2.0", "id": sleep_id, "method": "tools/call",
            "params": {"name": "shell", "arguments": {"command": "sleep 100", "timeout_ms": 300000},
                       "_meta": {"progressToken": "p-1"}}})
    progress = []
    end = time.time() + 20
    while len(progress) < 2 and time.time() < end:
        m = s.recv(5)
        if m is None:
            break
        if m.get("method") == "notifications/progress":
            progress.append(m["params"])
        else:
            s.seen.append(m)
    c.check("progress notifications carry the token",
            len(progress) >= 2 and all(p.get("progressToken") == "p-1" for p in progress), progress)
    c.check("progress increases", len(progress) >= 2 and
            progress[1]["progress"] > progress[0]["progress"], progress)
    t0 = time.time()
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": sleep_id, "reason": "test"}})
    r = s.call("shell", {"command": "ps -ef | grep 'sleep 100' | grep -v grep; echo checked"},
               timeout=60)
    waited = time.time() - t0
    c.check("after cancel the server answers the next call soon", r is not None and waited < 20,
            waited)
    c.check("the cancelled command is gone", text_of(r).endswith("Output:\nchecked\n"), text_of(r))
    late = [m for m in s.seen if m.get("id") == sleep_id]
    c.check("a cancelled request gets no response", late == [], late)

    # ------------------------------------------ cancelling session calls
    def cancel_after(req_id, name, args, delay=1.5):
        s.send({"jsonrpc": "2.0", "id": req_id, "method": "tools/call",
                "params": {"name": name, "arguments": args}})
        time.sleep(delay)
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": req_id}})

    def ps_has(pattern):
        r = s.call("shell", {"command": f"ps -ef | grep '{pattern}' | grep -v grep; echo checked"},
                   timeout=60)
        return not text_of(r).endswith("Output:\nchecked\n"), r

    cancel_after("ec", "exec_command", {"cmd": "sleep 201", "tty": False,
                                        "yield_time_ms": 20000})
    left, r = ps_has("sleep 201")
    c.check("a cancelled exec_command: its command is killed", not left, text_of(r))
    c.check("...and the request gets no response",
            not any(m.get("id") == "ec" for m in s.seen), s.seen)
    r = s.call("exec_command", {"cmd": "sleep 202", "tty": False, "yield_time_ms": 100})
    valid("exec_command", r)
    sid = val(r).get("session_id")
    cancel_after("ws", "write_stdin", {"session_id": sid, "chars": "", "yield_time_ms": 20000})
    left, r = ps_has("sleep 202")
    c.check("a cancelled write_stdin kills the session it talks to", not left, text_of(r))
    r = s.call("write_stdin", {"session_id": sid, "chars": ""})
    c.check("...which is gone afterwards", is_error(r) is True, r)

    # --------------------------------------------------------- sessions
    r = s.call("exec_command", {"cmd": "read line; echo got:$line; sleep 0.2; echo bye",
                                "yield_time_ms": 500})
    v = val(r)
    sid = v.get("session_id")
    c.check("exec_command: a running session", v.get("running") is True and
            isinstance(sid, int), r)
    r = s.call("write_stdin", {"session_id": sid, "chars": "abc\n", "yield_time_ms": 3000})
    v = val(r)
    c.check("write_stdin: output and exit",
            "got:abc" in v.get("output", "") and v.get("running") is False and
            v.get("exit_code") == 0, r)
    r = s.call("write_stdin", {"session_id": sid, "chars": "more\n"})
    c.check("write_stdin on an ended session: not_found", is_error(r) is True and
            structured(r).get("error", {}).get("code") == "not_found", r)
    r = s.call("exec_command", {"cmd": "sleep 1000", "tty": False, "yield_time_ms": 100})
    sid = val(r).get("session_id")
    r = s.call("write_stdin", {"session_id": sid, "kill": True})
    c.check("write_stdin kill", is_error(r) is False and "killed" in text_of(r), r)
    r = s.call("shell", {"command": "ps -ef | grep 'sleep 1000' | grep -v grep; echo ok"})
    c.check("the killed session is gone", text_of(r).endswith("Output:\nok\n"), text_of(r))
    r = s.call("exec_command", {"cmd": "python-not-here"})
    c.check("exec_command of a missing program exits non-zero",
            val(r).get("exit_code") not in (None, 0) or
            val(r).get("running") is True, r)

    # -------------------------------------------------------- snapshots
    r = s.call("snapshot", {"tag": "before"})
    c.check("snapshot", is_error(r) is False and "(before)" in text_of(r), r)
    # Where the container cannot be paused (rootless Podman on cgroup v1),
    # the answer says it kept running; elsewhere it says nothing of the kind.
    sj = json.load(open(os.path.join(home, "sandboxes", name, "sandbox.json")))
    unpausable = sj.get("rootless") and not sj.get("limits_apply")
    c.check("snapshot says whether the container kept running",
            ("kept running" in text_of(r)) == bool(unpausable), r)
    s.call("shell", {"command": "rm -rf pkg && echo junk > junk.txt"})
    r = s.call("restore", {"snapshot": "before"})
    c.check("restore lists the changes", is_error(r) is False and
            "deleted junk.txt" in text_of(r) and "created pkg/data.txt" in text_of(r), r)
    r = s.call("shell", {"command": "cat pkg/data.txt; ls junk.txt 2>&1"})
    c.check("restore brings the workspace back",
            val(r).get("stdout", "").startswith("from the host\n"), r)
    r = s.call("list_snapshots")
    c.check("list_snapshots", "(before)" in text_of(r), r)
    r = s.call("shell", {"command": "echo still running"})
    c.check("the container runs after a snapshot", "still running" in text_of(r), r)

    # ------------------------------------------------------------ events
    ev = os.path.join(home, "sandboxes", name, "events.jsonl")
    lines = open(ev).read().splitlines() if os.path.exists(ev) else []
    # (`sandpod exec`, which ws_files() runs on a remote sandbox, adds
    # "command" events of its own.)
    parsed = [e for e in map(json.loads, lines) if e.get("event") in ("start", "end")]
    ends = [e for e in parsed if e.get("event") == "end"]
    starts = {e.get("call"): e.get("tool") for e in parsed if e.get("event") == "start"}
    for e in ends:
        starts.pop(e.get("call"), None)
    c.check("events.jsonl has start and end lines", len(ends) >= 10 and
            len(parsed) == 2 * len(ends), (len(parsed), "started, no end:", starts))
    c.check("events carry tool, ok, code, duration, bytes, truncated, paths",
            all({"tool", "ok", "code", "duration_ms", "bytes", "truncated", "paths",
                 "sandbox"} <= set(e) for e in ends), ends[:2])
    c.check("a timeout is an event with code timeout",
            any(e["tool"] == "shell" and e["code"] == "timeout" for e in ends))

    # ------------------------------------------------------------- exit
    c.check("the sandbox exists while serving", name in sandboxes(), sandboxes())
    rc = s.close(120)
    c.check("exits 0 at the end of input", rc == 0, s.stderr_text())
    c.check("--create --rm removes the sandbox at exit", name not in sandboxes(), sandboxes())

    # By default the sandbox stays, and stderr says how to get the work;
    # --with-dotenv copies .env files; `sandpod mcp NAME` serves it again.
    k = Server([SP, "mcp", "--create", "--name", name + "-k", "--mount", src, "--with-dotenv"],
               env=env)
    ki = k.initialize()
    c.check("the instructions tell the model how the user gets the work",
            ("sandpod apply %s" % (name + "-k")) in ki["result"]["instructions"] and
            ("sandpod diff %s" % (name + "-k")) in ki["result"]["instructions"],
            ki["result"].get("instructions"))
    k.call("write_file", {"path": "kept.txt", "content": "kept\n"})
    k.close(120)
    c.check("--create keeps the sandbox by default", name + "-k" in sandboxes(), sandboxes())
    hint = k.stderr_text()
    c.check("at exit stderr says how to get the work",
            all(("sandpod %s %s" % (v, name + "-k")) in hint for v in ["diff", "apply", "rm -f"]),
            hint)
    files = ws_files(name + "-k")
    c.check("--with-dotenv copies .env files", ".env" in files and "pkg/.env" in files, files)
    for bad in [["mcp", "--rm", name + "-k"], ["mcp", "--create", "--keep", "--rm"],
                ["mcp", "--with-dotenv", "--root", tmp]]:
        p = subprocess.run([SP] + bad, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        c.check("usage error: " + " ".join(bad),
                p.returncode == 2 and p.stderr.startswith("sandpod") and not p.stdout,
                (p.returncode, p.stderr))
    n = Server([SP, "mcp", name + "-k"], env=env)
    n.initialize()
    r = n.call("shell", {"command": "cat kept.txt"})
    c.check("mcp NAME serves an existing sandbox", "kept" in text_of(r), r)
    n.close(120)
    c.check("mcp NAME leaves the sandbox", name + "-k" in sandboxes(), sandboxes())
finally:
    if s.p.poll() is None:
        s.p.kill()
    cleanup()

c.finish()
