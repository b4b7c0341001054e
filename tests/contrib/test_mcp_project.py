#!/usr/bin/env python3
"""`sandpod mcp --project DIR`: one sandbox per project, however many
sessions, made only when a tool is called, answered at once, stopped (or
removed when unchanged) by the last session, and a hydration stopped by
SIGTERM leaving nothing behind. Real Podman.

Usage: test_mcp_project.py PATH/TO/sandpod. Prints 'N passed, M failed'."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_client import Checks, Server, is_error, need_podman, skip, text_of  # noqa: E402

SP = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "sandpod")


need_podman()

c = Checks()
tmp = tempfile.mkdtemp(prefix="sandpod-mcpproj-")
home = os.path.join(tmp, "home")
proj = os.path.join(tmp, "my project")  # a space: the mount spec is escaped
os.makedirs(home)
os.makedirs(os.path.join(proj, "src"))
os.makedirs(os.path.join(proj, "build"))
for path, text in [("src/a.txt", "alpha\n"), (".gitignore", "build/\n"), ("build/out.o", "x\n"),
                   (".env", "SECRET=1\n")]:
    with open(os.path.join(proj, path), "w") as f:
        f.write(text)
env = dict(os.environ, SANDPOD_HOME=home)


def sp(*args, timeout=120):
    return subprocess.run([SP, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def boxes():
    """{name: state} of every sandbox (incomplete ones too)."""
    p = sp("ls", "--json")
    try:
        items = json.loads(p.stdout)["sandboxes"]
    except (ValueError, KeyError):
        return {"(ls failed)": p.stdout + p.stderr}
    return {b["name"]: b.get("state", "") for b in items}


def session(*extra, cwd=proj):
    return Server([SP, "mcp", "--project", ".", *extra], env=env, cwd=cwd)


def cleanup():
    for n in boxes():
        sp("rm", "-f", n)
    shutil.rmtree(tmp, ignore_errors=True)


try:
    chk = sp("mcp", "--check", "--project", proj)
    if chk.returncode != 0 and os.environ.get("CI") != "true":
        cleanup()
        skip("no working Podman service: " + chk.stdout.strip()[-300:])
    name = next((w for line in chk.stdout.splitlines() if ", sandbox " in line
                 for w in [line.rsplit(" ", 1)[-1]]), None)
    c.check("--check names the project's sandbox and says it would start",
            chk.returncode == 0 and name and name.startswith("p-my_project-") and
            "would start here" in chk.stdout, chk.stdout + chk.stderr)
    c.check("--check says where the agent comes from",
            "ok: sandpod-agent /" in chk.stdout, chk.stdout)
    p = subprocess.run([SP, "mcp", "--check"], env=dict(env, SANDPOD_AGENT="none"),
                       stdout=subprocess.PIPE, text=True)
    c.check("--check warns when there is no agent, and still says the server would start",
            p.returncode == 0 and "warning: SANDPOD_AGENT=none" in p.stdout and
            "would start here" in p.stdout, p.stdout)

    # ------------------------------------------- health checks make nothing
    for i in range(3):
        s = session()
        t0 = time.monotonic()
        r = s.initialize()
        tl = s.request("tools/list")
        took = time.monotonic() - t0
        c.check(f"health check {i}: initialize and tools/list answered",
                r and "result" in r and tl and len(tl["result"]["tools"]) == 17, (r, tl))
        print(f"health check {i}: initialize + tools/list in {took * 1000:.0f} ms")
        c.check(f"health check {i}: exits cleanly", s.close() == 0, s.stderr_text())
    c.check("sessions that only list tools make no sandbox", boxes() == {}, boxes())

    # -------------------------------------------------- the first session
    s = session()
    s.initialize()
    r = s.call("read_file", {"path": "src/a.txt"})
    c.check("the first call makes the sandbox and reads from it",
            text_of(r) == "L1: alpha\n", r)
    r = s.call("shell", {"command": "ls -A; ls build 2>&1; cat .env 2>&1; echo w > made.txt"})
    out = text_of(r)
    c.check("the project is hydrated with .gitignore honoured and .env* left out",
            "src" in out and "No such file" in out and "SECRET" not in out, out)
    c.check("the text reaches the model as text (no JSON)", out.startswith("Exit code: 0"), out)
    c.check("one sandbox, named for the project, running", boxes() == {name: "running"}, boxes())
    meta = json.load(open(os.path.join(home, "sandboxes", name, "sandbox.json")))
    c.check("sandbox.json says an MCP session made it", meta.get("made_by") == "mcp", meta)
    c.check("the session exits", s.close() == 0, s.stderr_text())
    c.check("the last session stops the changed sandbox and keeps it",
            boxes() == {name: "exited"}, boxes())

    # ------------------------------------------- two sessions side by side
    a, b = session(), session()
    a.initialize()
    b.initialize()
    ra = a.call("read_file", {"path": "made.txt"})
    rb = b.call("read_file", {"path": "made.txt"})
    c.check("a later session reuses the sandbox and its work",
            text_of(ra) == "L1: w\n" and text_of(rb) == "L1: w\n", (ra, rb))
    c.check("the first to leave exits", a.close() == 0, a.stderr_text())
    c.check("...and leaves the sandbox running for the other", boxes() == {name: "running"},
            boxes())
    r = b.call("shell", {"command": "cat made.txt"})
    c.check("the other session's commands still run", text_of(r).endswith("Output:\nw\n"), r)
    c.check("the other exits", b.close() == 0, b.stderr_text())
    c.check("the last one stops it", boxes() == {name: "exited"}, boxes())

    # ------ a client that kills the server (Codex: SIGTERM, SIGKILL 200 ms on;
    # Claude Code: SIGINT, SIGTERM, SIGKILL within half a second)
    for how in ("codex", "claude", "sigkill"):
        s = session()
        s.initialize()
        r = s.call("stat", {"path": "made.txt"})
        c.check(f"{how}: the session starts the sandbox", boxes() == {name: "running"}, boxes())
        if how == "codex":
            s.p.send_signal(signal.SIGTERM)
            time.sleep(0.2)
        elif how == "claude":
            s.p.send_signal(signal.SIGINT)
            time.sleep(0.1)
            s.p.send_signal(signal.SIGTERM)
            time.sleep(0.4)
        s.p.kill()
        s.p.wait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and boxes() != {name: "exited"}:
            time.sleep(0.2)
        c.check(f"{how}: killed, the server's finisher still stops the sandbox",
                boxes() == {name: "exited"}, boxes())

    # -------------------------------- ten sessions: still exactly one sandbox
    for i in range(10):
        s = session()
        s.initialize()
        if i % 2:
            s.request("tools/list")
        else:
            s.call("stat", {"path": "made.txt"})
        s.close()
    c.check("ten more sessions and health checks: exactly one sandbox, stopped",
            boxes() == {name: "exited"}, boxes())

    # --------------------------------- unchanged since it was made: removed
    s = session()
    s.initialize()
    r = s.call("delete", {"path": "made.txt"})
    c.check("delete the session's only change", not is_error(r), r)
    s.close()
    err = s.stderr_text()
    c.check("back as it was made: the last session removes the sandbox",
            boxes() == {} and "nothing in it changed" in err, (boxes(), err))

    # ----------------------- bad input: a clear error, nothing made or lost
    p = sp("mcp", "--project", os.path.join(tmp, "missing"))
    c.check("--project of a missing folder: a clear error",
            p.returncode == 1 and "missing" in p.stderr, p.stderr)
    p = sp("mcp", "--project", proj, "--mount", proj)
    c.check("--project with --mount: a usage error", p.returncode == 2 and "--project" in p.stderr,
            p.stderr)
    p = sp("mcp", "--project", proj, "--rm")
    c.check("--rm goes with --create only", p.returncode == 2, p.stderr)
    c.check("none of them made a sandbox", boxes() == {}, boxes())

    # ---------------- a large project: answered at once, progress, SIGTERM
    big = os.path.join(tmp, "big")
    for d in range(40):
        os.makedirs(os.path.join(big, f"d{d}"))
        for f in range(500):
            with open(os.path.join(big, f"d{d}", f"f{f}"), "w") as fh:
                fh.write("x" * 4096)
    bigname = sp("mcp", "--check", "--project", big).stdout
    bigname = next((line.rsplit(" ", 1)[-1] for line in bigname.splitlines()
                    if ", sandbox " in line), "?")
    s = session(cwd=big)
    t0 = time.monotonic()
    r = s.initialize()
    c.check("a large project: initialize answers at once", r and "result" in r, r)
    print(f"large project: initialize in {(time.monotonic() - t0) * 1000:.0f} ms")
    s.send({"jsonrpc": "2.0", "id": "big", "method": "tools/call",
            "params": {"name": "stat", "arguments": {"path": "d0/f0"},
                       "_meta": {"progressToken": "tok"}}})
    state = os.path.join(home, "sandboxes", bigname)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not os.path.isdir(os.path.join(state, "workspace")):
        time.sleep(0.05)
    c.check("the call starts making the sandbox", os.path.isdir(state), state)
    c.check("a ping is answered while the sandbox is made",
            s.request("ping", timeout=5) is not None, None)
    s.p.send_signal(signal.SIGTERM)
    try:
        rc = s.p.wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    c.check("SIGTERM during hydration ends the server promptly", rc == 0, rc)
    c.check("...and leaves no half-made sandbox", not os.path.exists(state) and boxes() == {},
            (os.listdir(os.path.join(home, "sandboxes")), boxes()))
    ctr = subprocess.run(["podman", "ps", "-a", "--filter", f"label=sandpod.state={state}",
                          "--format", "{{.Names}}"], stdout=subprocess.PIPE, text=True)
    c.check("...nor a container", ctr.stdout.strip() == "", ctr.stdout)

    s = session(cwd=big)
    s.initialize()
    s.send({"jsonrpc": "2.0", "id": "big2", "method": "tools/call",
            "params": {"name": "stat", "arguments": {"path": "d39/f499"},
                       "_meta": {"progressToken": "tok2"}}})
    r = s.wait_for("big2", timeout=300)
    notes = [m for m in s.seen if m.get("method") == "notifications/progress"]
    c.check("the waiting call is answered once the sandbox is made", r and not is_error(r), r)
    msgs = [n["params"].get("message", "") for n in notes]
    print(f"progress notifications while waiting: {len(notes)}; last: {msgs[-1:]} ")
    c.check("while it waits, progress says how far the sandbox is",
            not notes or any("waits for the sandbox" in m for m in msgs), msgs)
    s.close()
finally:
    cleanup()
c.finish()
