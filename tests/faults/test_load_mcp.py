#!/usr/bin/env python3
"""Load on one MCP session (issue 8): `sandpod mcp --create` on real Podman
serves 10,000 tool calls (SANDPOD_LONG=1 with --long: 100,000), mixed:
write_file, read_file, list_dir, grep, and shell (through Podman's REST exec)
on the sandbox for one call in 40. Every answer is checked (no error; a file
read back is the one just written; a shell's output is its own).

Leaks, checked not assumed: the server's open fds (/proc/PID/fd) and RSS at
call 1,000 against the last call must not grow beyond a small bound (the
numbers are printed); at exit the sandbox's container is gone, no process
belonging to it remains (conmon, sandpod-agent, commands: by container id in
the command line or cgroup), and this script has no child left.

Usage: test_load_mcp.py [--long] PATH/TO/sandpod
Exits 77 (skip) without Podman (unless CI=true), and with --long unless
SANDPOD_LONG=1. Prints 'N passed, M failed'."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contrib"))
from mcp_client import Checks, Server, is_error, text_of  # noqa: E402

args = [a for a in sys.argv[1:] if a != "--long"]
LONG = "--long" in sys.argv[1:]
SP = os.path.abspath(args[0] if args else "sandpod")
# Bounds on growth between call 1,000 and the last call.
FD_SLACK = 2
RSS_SLACK_KIB = 8 * 1024


def skip(why):
    if os.environ.get("CI") == "true" and not LONG:
        print(f"FAIL: {why} (Podman is required under CI=true)")
        print("0 passed, 1 failed")
        sys.exit(1)
    print(f"skipping: {why}")
    sys.exit(77)


if LONG and os.environ.get("SANDPOD_LONG") != "1":
    skip("the long load test runs with SANDPOD_LONG=1")
if not shutil.which("podman"):
    skip("podman is not installed (apt-get install podman runc catatonit)")

CALLS = 100000 if LONG else 10000
c = Checks()
tmp = tempfile.mkdtemp(prefix="sandpod-loadmcp-")
home = os.path.join(tmp, "home")
os.makedirs(home)
# Shell calls take Podman's REST exec, the path that can leak (an exec
# session's conmon waits 300 s unless sandpod ends it); the agent's fast
# path is loaded by test_load.
env = dict(os.environ, SANDPOD_HOME=home, SANDPOD_EXEC_PATH="rest")
# A sanitized server keeps freed memory in ASan's quarantine (256 MiB by
# default), which grows its RSS with every call until full: bounded to
# 16 MiB, it is full long before call 1,000 and the RSS bound measures
# leaks again (LeakSanitizer checks the rest at exit).
if "libasan" in subprocess.run(["ldd", SP], capture_output=True, text=True).stdout:
    env["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                 "quarantine_size_mb=16"]))
name = "load-mcp-%d" % os.getpid()


def fds_of(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def processes_of(cid):
    """Processes whose command line or cgroup names the container."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{p}/cgroup") as f:
                cg = f.read()
        except OSError:
            continue
        if cid in cmd or cid in cg:
            found.append(f"{p}: {cmd[:120]}")
    return found


def conmons_of(cid):
    return [p for p in processes_of(cid) if "conmon" in p]


def container_id():
    try:
        with open(os.path.join(home, "sandboxes", name, "sandbox.json")) as f:
            return json.load(f).get("container_id")
    except (OSError, ValueError):
        return None


def containers_of_home():
    out = subprocess.run(
        ["podman", "ps", "-a", "--filter", "label=sandpod=1", "--format",
         '{{.ID}} {{index .Labels "sandpod.state"}}'],
        capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if home in l]


def cleanup():
    d = os.path.join(home, "sandboxes")
    for sb in os.listdir(d) if os.path.isdir(d) else []:
        subprocess.run([SP, "rm", "--force", sb], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    for line in containers_of_home():
        subprocess.run(["podman", "rm", "-f", line.split()[0]], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    pidfile = os.path.join(home, "podman.pid")
    if os.path.exists(pidfile):
        try:
            os.kill(int(open(pidfile).read().strip()), signal.SIGTERM)
        except (ValueError, OSError):
            pass
    shutil.rmtree(tmp, ignore_errors=True)


s = Server([SP, "mcp", "--create", "--rm", "--name", name], env=env)
cid = None
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
    # The sandbox is made at the first tool call, not at initialize.
    c.check("the first call makes the sandbox", not is_error(s.call("stat", {"path": "."})))
    cid = container_id()
    c.check("the sandbox has a container", bool(cid))
    pid = s.p.pid
    for d in range(7):
        s.call("write_file", {"path": f"d{d}/.keep", "content": ""})
    at_1000 = None
    bad = 0
    t0 = time.time()
    for i in range(1, CALLS + 1):
        k = i % 40
        path = f"d{i % 7}/f{i % 50}.txt"
        body = f"line {i}\nneedle {i % 13}\n"
        if k == 0:
            r = s.call("shell", {"command": f"echo call {i}; cat {path} >/dev/null 2>&1; true"})
            ok = not is_error(r) and f"call {i}" in text_of(r)
        elif k % 4 == 1:
            r = s.call("write_file", {"path": path, "content": body})
            ok = r is not None and not is_error(r)
            if ok:
                r = s.call("read_file", {"path": path})
                ok = not is_error(r) and f"line {i}" in text_of(r)
        elif k % 4 == 2:
            r = s.call("list_dir", {"path": f"d{i % 7}"})
            ok = r is not None and not is_error(r)
        elif k % 4 == 3:
            r = s.call("grep", {"pattern": f"needle {i % 13}$", "path": "."})
            ok = r is not None and not is_error(r)
        else:
            r = s.call("read_file", {"path": "/workspace/" + path})
            ok = r is not None and not is_error(r) or "not found" in text_of(r).lower() \
                or "no such" in text_of(r).lower()
        if not ok:
            bad += 1
            if bad <= 5:
                c.check(f"call {i}", False, r)
        if r is None:
            c.check(f"the server answers call {i}", False, s.stderr_text()[-2000:])
            break
        if i == 1000:
            at_1000 = (fds_of(pid), rss_kib(pid))
    took = time.time() - t0
    at_end = (fds_of(pid), rss_kib(pid))
    # The container's own conmon, and none per finished command (a reaped
    # pair takes a moment to exit; a leaked one stays for 300 s).
    cm = conmons_of(cid) if cid else []
    for _ in range(100):
        if len(cm) <= 1:
            break
        time.sleep(0.05)
        cm = conmons_of(cid)
    print(f"conmon processes of the container after {CALLS // 40} REST shell calls: {len(cm)}",
          flush=True)
    c.check("no exec conmon left behind", len(cm) == 1, cm[:6])
    c.check("every call answered as expected", bad == 0, f"{bad} bad answers")
    print(f"{CALLS} calls in {took:.1f} s ({1000 * took / CALLS:.2f} ms each); server fds "
          f"{at_1000[0]} at call 1000, {at_end[0]} at the end; RSS {at_1000[1]} KiB at call "
          f"1000, {at_end[1]} KiB at the end", flush=True)
    c.check("server fds do not grow", at_end[0] <= at_1000[0] + FD_SLACK, (at_1000, at_end))
    c.check("server RSS does not grow", at_end[1] <= at_1000[1] + RSS_SLACK_KIB,
            (at_1000, at_end))
    c.check("clean exit", s.close(timeout=120) == 0, s.stderr_text()[-2000:])
    left = containers_of_home()
    c.check("no container left", left == [], left)
    procs = processes_of(cid) if cid else []
    c.check("no process of the container left", procs == [], procs)
    try:
        kid = os.waitpid(-1, os.WNOHANG)
        c.check("no child left", False, kid)
    except ChildProcessError:
        c.check("no child left", True)
finally:
    if s.p.poll() is None:
        s.p.kill()
        s.p.wait()
    cleanup()
c.finish()
