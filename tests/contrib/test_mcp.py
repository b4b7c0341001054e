#!/usr/bin/env python3
"""`sandpod mcp --root DIR` driven over pipes through whole conversations:
initialize (version negotiation), tools/list, tool calls good and bad, the
JSON-RPC error codes, garbage and huge messages, ping, elicitation for
approvals, a flood of calls against the bounded queue, and a clean exit at
the end of input.

Usage: test_mcp.py PATH/TO/sandpod
Prints 'N passed, M failed' last; exits 1 on any failure."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_client import Checks, Server, error_code, is_error, structured, text_of  # noqa: E402

SP = sys.argv[1] if len(sys.argv) > 1 else "sandpod"
c = Checks()
tmp = tempfile.mkdtemp(prefix="sandpod-mcp-")
root = os.path.join(tmp, "root")
os.makedirs(os.path.join(root, "src"))
with open(os.path.join(root, "src", "hello.py"), "w") as f:
    f.write("def hello():\n    return 'hi'\n")
env = dict(os.environ, SANDPOD_HOME=os.path.join(tmp, "home"))


def server(*extra):
    return Server([SP, "mcp", "--root", root, *extra], env=env)


try:
    # ------------------------------------------------ initialize, list, ping
    s = server()
    r = s.initialize()
    res = (r or {}).get("result", {})
    c.check("initialize answers 2025-06-18", res.get("protocolVersion") == "2025-06-18", r)
    c.check("initialize declares tools", "tools" in res.get("capabilities", {}), r)
    c.check("serverInfo names sandpod", res.get("serverInfo", {}).get("name") == "sandpod", r)
    c.check("instructions are given", len(res.get("instructions", "")) > 20, r)

    r = s.request("ping")
    c.check("ping answers {}", r is not None and r.get("result") == {}, r)

    r = s.request("tools/list")
    tools = {t["name"]: t for t in (r or {}).get("result", {}).get("tools", [])}
    for name in ["list_dir", "read_file", "write_file", "edit_file", "insert", "delete", "mkdir",
                 "stat", "glob", "grep"]:
        c.check(f"tools/list has {name}", name in tools, sorted(tools))
    c.check("no command tools on a bare folder",
            "shell" not in tools and "exec_command" not in tools, sorted(tools))
    c.check("every tool has an object inputSchema",
            all(t.get("inputSchema", {}).get("type") == "object" for t in tools.values()))
    c.check("annotations mark read-only tools",
            tools.get("read_file", {}).get("annotations", {}).get("readOnlyHint") is True and
            tools.get("delete", {}).get("annotations", {}).get("destructiveHint") is True)

    # ---------------------------------------------------------------- calls
    r = s.call("read_file", {"path": "src/hello.py"})
    c.check("read_file: text content", text_of(r) == "L1: def hello():\nL2:     return 'hi'\n", r)
    c.check("read_file: isError false", is_error(r) is False, r)
    sc = structured(r)
    c.check("read_file: structuredContent", sc.get("ok") is True and
            sc.get("value", {}).get("total_lines") == 2 and sc.get("changes") == [], r)

    # A binary read: an image also comes as MCP image content (and its
    # base64 is not repeated in the text); other bytes only in the result.
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
    with open(os.path.join(root, "dot.png"), "wb") as f:
        f.write(png)
    with open(os.path.join(root, "blob.bin"), "wb") as f:
        f.write(b"\x00\x01\x02\xff")
    r = s.call("read_file", {"path": "dot.png"})
    content = (r or {}).get("result", {}).get("content", [])
    images = [x for x in content if x.get("type") == "image"]
    import base64
    c.check("read_file of a png: image content with its bytes",
            len(images) == 1 and images[0].get("mimeType") == "image/png" and
            base64.b64decode(images[0].get("data", "")) == png, r)
    c.check("read_file of a png: the text names it and holds no base64",
            "image/png" in text_of(r) and images and images[0]["data"] not in text_of(r), r)
    c.check("read_file of a png: structuredContent keeps the bytes",
            structured(r).get("value", {}).get("base64") == base64.b64encode(png).decode(), r)
    r = s.call("read_file", {"path": "blob.bin"})
    content = (r or {}).get("result", {}).get("content", [])
    c.check("read_file of other bytes: no image content, base64 in the text",
            [x.get("type") for x in content] == ["text"] and
            base64.b64encode(b"\x00\x01\x02\xff").decode() in text_of(r), r)

    r = s.call("write_file", {"path": "out/new.txt", "content": "made by mcp\n"})
    c.check("write_file: ok", is_error(r) is False, r)
    c.check("write_file: changes", structured(r).get("changes") ==
            [{"path": "out/new.txt", "action": "created", "bytes": 12}], r)
    c.check("write_file: on disk",
            open(os.path.join(root, "out", "new.txt")).read() == "made by mcp\n")

    r = s.call("edit_file", {"path": "out/new.txt", "old_string": "mcp", "new_string": "MCP"})
    c.check("edit_file: ok", is_error(r) is False, r)
    r = s.call("grep", {"pattern": "MCP"})
    c.check("grep finds the edit", "out/new.txt:1:made by MCP" in text_of(r), r)
    r = s.call("list_dir", {"depth": 2})
    c.check("list_dir: tree", "out/\n  new.txt\nsrc/\n  hello.py\n" in text_of(r), r)

    # tool failures are results with isError, not protocol errors
    r = s.call("read_file", {"path": "missing.txt"})
    c.check("missing file: isError", is_error(r) is True, r)
    c.check("missing file: code not_found",
            structured(r).get("error", {}).get("code") == "not_found", r)
    r = s.call("read_file", {"path": "../../etc/passwd"})
    c.check("escape: code escape", structured(r).get("error", {}).get("code") == "escape", r)
    r = s.call("read_file", {"path": "src/hello.py", "colour": "red"})
    c.check("unknown argument named", is_error(r) is True and "'colour'" in text_of(r), r)
    r = s.call("read_file", {"path": "src/hello.py", "limit": "ten"})
    c.check("wrong type named", is_error(r) is True and "'limit'" in text_of(r), r)
    r = s.call("read_file", {})
    c.check("missing required argument", "missing required argument 'path'" in text_of(r), r)
    r = s.call("read_file", {"path": "src/hello.py\u0000.txt"})
    c.check("NUL in a path refused", is_error(r) is True and "NUL" in text_of(r), r)
    r = s.call("write_file", {"path": "nul.txt", "content": "a\u0000b"})
    c.check("NUL in content refused", is_error(r) is True and
            not os.path.exists(os.path.join(root, "nul.txt")), r)
    r = s.call("list_dir")
    c.check("arguments may be left out", is_error(r) is False, r)

    # ------------------------------------------------- JSON-RPC error codes
    r = s.call("no_such_tool", {})
    c.check("unknown tool: -32602", error_code(r) == -32602, r)
    r = s.request("tools/call", {"arguments": {}})
    c.check("tools/call without name: -32602", error_code(r) == -32602, r)
    r = s.request("tools/call", {"name": "read_file", "arguments": [1]})
    c.check("arguments not an object: -32602", error_code(r) == -32602, r)
    r = s.request("tools/call", 5)
    c.check("params not an object: -32602", error_code(r) == -32602, r)
    r = s.request("resources/list")
    c.check("unknown method: -32601", error_code(r) == -32601 and r.get("id") == s.next_id, r)

    s.send_raw(b"this is not json\n")
    r = s.recv()
    c.check("garbage: -32700 with id null", error_code(r) == -32700 and r.get("id") is None, r)
    s.send_raw(b'{"jsonrpc": "2.0", "id": 7, "method": "ping"\n')
    r = s.recv()
    c.check("truncated JSON: -32700", error_code(r) == -32700, r)
    s.send_raw(b"\xff\xfe\xfd\n")
    r = s.recv()
    c.check("binary garbage: -32700", error_code(r) == -32700, r)
    s.send_raw(b'[{"jsonrpc":"2.0","id":8,"method":"ping"}]\n')
    r = s.recv()
    c.check("batch: -32600", error_code(r) == -32600, r)
    s.send_raw(b"[]\n")
    r = s.recv()
    c.check("empty batch: -32600", error_code(r) == -32600, r)
    s.send_raw(b"42\n")
    r = s.recv()
    c.check("a number: -32600", error_code(r) == -32600, r)
    s.send_raw(b'{"id": 9, "method": "ping"}\n')
    r = s.recv()
    c.check("no jsonrpc: -32600 keeps the id", error_code(r) == -32600 and r.get("id") == 9, r)
    s.send_raw(b'{"jsonrpc": "2.0", "id": 10, "method": 5}\n')
    r = s.recv()
    c.check("method not a string: -32600", error_code(r) == -32600, r)
    s.send_raw(b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}\n')
    r = s.recv()
    c.check("bad id: -32600 with id null", error_code(r) == -32600 and r.get("id") is None, r)
    s.send_raw(b'{"jsonrpc": "2.0", "id": 11}\n')
    r = s.recv()
    c.check("no method: -32600", error_code(r) == -32600, r)
    # Notifications, unknown or not, and stray responses get no answer.
    s.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 999}})
    s.send({"jsonrpc": "2.0", "id": "nobody-asked", "result": {}})
    s.send_raw(b"\n   \n\r\n")
    s.send_raw(b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n')
    r = s.recv()
    c.check("nothing answers notifications; CRLF ping works",
            r is not None and r.get("id") == "crlf" and r.get("result") == {}, r)
    # A message split across writes.
    s.send_raw(b'{"jsonrpc":"2.0",')
    time.sleep(0.3)
    s.send_raw(b'"id":"split","method":"ping"}\n')
    r = s.recv()
    c.check("a message in pieces", r is not None and r.get("id") == "split", r)
    # Two messages in one write.
    s.send_raw(b'{"jsonrpc":"2.0","id":"a","method":"ping"}\n{"jsonrpc":"2.0","id":"b","method":"ping"}\n')
    r1, r2 = s.recv(), s.recv()
    c.check("two messages in one write",
            r1 and r2 and r1.get("id") == "a" and r2.get("id") == "b", [r1, r2])

    # --------------------------------------------------------- big messages
    pad = "x" * (5 << 20)
    r = s.request("ping", {"pad": pad})
    c.check("a 5 MiB message", r is not None and r.get("result") == {})
    body = "0123456789abcde\n" * (3 << 16)  # 3 MiB of text
    r = s.call("write_file", {"path": "big.txt", "content": body})
    c.check("write 3 MiB through MCP", is_error(r) is False and
            os.path.getsize(os.path.join(root, "big.txt")) == len(body), text_of(r))
    r = s.call("write_file", {"path": "huge.txt", "content": pad})
    c.check("5 MiB write refused as too big", is_error(r) is True and
            structured(r).get("error", {}).get("code") == "too_big", text_of(r))
    r = s.call("read_file", {"path": "big.txt", "limit": 5000})
    c.check("a long read is capped", structured(r).get("truncated") is True and
            len(text_of(r)) <= 70000, len(text_of(r)))
    r = s.request("ping")
    c.check("still serving after all that", r is not None and r.get("result") == {}, r)

    rc = s.close()
    c.check("exits 0 at the end of input", rc == 0, s.stderr_text())

    # ----------------------------------------------------------- versions
    for asked, want in [("2024-11-05", "2024-11-05"), ("2025-03-26", "2025-03-26"),
                        ("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"),
                        ("1999-01-01", "2025-11-25"), ("not-a-version", "2025-11-25")]:
        s = server()
        r = s.initialize(asked)
        got = (r or {}).get("result", {}).get("protocolVersion")
        c.check(f"version {asked} -> {want}", got == want, r)
        s.close()
    s = server()
    r = s.request("initialize", {"capabilities": {}})
    c.check("initialize without protocolVersion: -32602", error_code(r) == -32602, r)
    r = s.initialize()
    c.check("initialize after an error", r is not None and "result" in r, r)
    s.close()

    # --------------------------------------------------- disabled, read-only
    s = server("--disable", "grep", "--read-only")
    s.initialize()
    r = s.request("tools/list")
    names = [t["name"] for t in r["result"]["tools"]]
    c.check("--disable and --read-only shape tools/list",
            "grep" not in names and "write_file" not in names and "read_file" in names, names)
    r = s.call("grep", {"pattern": "x"})
    c.check("a disabled tool is unknown", error_code(r) == -32602, r)
    s.close()

    # ------------------------------------------------ approvals, elicitation
    s = server("--approval", "untrusted")
    s.initialize(capabilities={"elicitation": {}})
    s.next_id += 1
    call_id = s.next_id
    s.send({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
            "params": {"name": "write_file",
                       "arguments": {"path": "approved.txt", "content": "ok\n"}}})
    q = s.recv()
    c.check("the server asks with elicitation/create",
            q is not None and q.get("method") == "elicitation/create" and
            "write_file" in q.get("params", {}).get("message", "") and
            "approve" in q.get("params", {}).get("requestedSchema", {}).get("properties", {}), q)
    if q and "id" in q:
        s.send({"jsonrpc": "2.0", "id": q["id"],
                "result": {"action": "accept", "content": {"approve": True}}})
    r = s.wait_for(call_id)
    c.check("an accepted call runs", is_error(r) is False and
            os.path.exists(os.path.join(root, "approved.txt")), r)
    # A ping while the question is open is answered at once.
    s.next_id += 1
    call_id = s.next_id
    s.send({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
            "params": {"name": "delete", "arguments": {"path": "approved.txt"}}})
    q = s.recv()
    r = s.request("ping")
    c.check("ping while a question is open", r is not None and r.get("result") == {}, r)
    if q and "id" in q:
        s.send({"jsonrpc": "2.0", "id": q["id"], "result": {"action": "decline"}})
    r = s.wait_for(call_id)
    c.check("a declined call is denied", is_error(r) is True and
            structured(r).get("error", {}).get("code") == "denied" and
            os.path.exists(os.path.join(root, "approved.txt")), r)
    r = s.call("read_file", {"path": "approved.txt"})
    c.check("safe tools run without asking", is_error(r) is False, r)
    s.close()

    s = server("--approval", "on-request")
    s.initialize()  # no elicitation capability
    r = s.call("delete", {"path": "approved.txt"})
    c.check("no elicitation: denied with a reason", is_error(r) is True and
            "nobody can be asked" in text_of(r) and
            os.path.exists(os.path.join(root, "approved.txt")), r)
    r = s.call("mkdir", {"path": "made-unasked"})
    c.check("on-request: cautious tools (mkdir: additive) run", is_error(r) is False, r)
    r = s.call("edit_file", {"path": "approved.txt", "old_string": "ok", "new_string": "OK"})
    c.check("on-request: edit_file overwrites, so it asks", is_error(r) is True and
            "nobody can be asked" in text_of(r), r)
    s.close()

    # ------------------------------------------------------ a flood of calls
    # A client floods tool calls without reading a single answer while the
    # worker is held (by an approval question the client leaves open). The
    # answers go to a file, so the server is never slowed by its output and
    # reads the flood as fast as it comes. At most 256 calls wait; the rest
    # are told at once that the server is busy; every request gets exactly
    # one answer, memory stays bounded, and the server keeps serving.
    FLOOD = 5000
    PAD = "p" * (16 << 10)  # 16 KiB of arguments per call: 80 MiB in all
    out_path = os.path.join(tmp, "flood.out")
    os.makedirs(os.path.join(root, "flood"), exist_ok=True)
    with open(out_path, "wb") as out_f:
        # ASan's quarantine would keep every freed message; judge the server's
        # own holdings (the variable is ignored by a build without ASan).
        fenv = dict(env, ASAN_OPTIONS=(os.environ.get("ASAN_OPTIONS", "") +
                                       ":quarantine_size_mb=1").lstrip(":"))
        p = subprocess.Popen([SP, "mcp", "--root", root, "--approval", "on-request"],
                             stdin=subprocess.PIPE, stdout=out_f, stderr=subprocess.DEVNULL,
                             env=fenv)

    def answers():
        with open(out_path, "rb") as f:
            return [json.loads(line) for line in f.read().split(b"\n") if line.strip()]

    def wait_until(pred, timeout=120.0):
        end = time.time() + timeout
        while time.time() < end:
            got = answers()
            if pred(got):
                return got
            time.sleep(0.05)
        return answers()

    def send(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()

    def kib(field):
        with open(f"/proc/{p.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return -1

    send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                     "clientInfo": {"name": "flood", "version": "1"}}})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": "hold", "method": "tools/call",
          "params": {"name": "write_file", "arguments": {"path": "flood/hold.txt",
                                                         "content": "held\n"}}})
    got = wait_until(lambda a: any(m.get("method") == "elicitation/create" for m in a), 30)
    question = next((m for m in got if m.get("method") == "elicitation/create"), None)
    c.check("flood: the worker is held by a question", question is not None, got)
    rss_before = kib("VmRSS")
    t0 = time.time()
    batch = b"".join((json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                  "params": {"name": "write_file",
                                             "arguments": {"path": f"flood/{i}.txt",
                                                           "content": PAD}}}) + "\n").encode()
                     for i in range(FLOOD))
    p.stdin.write(batch)
    p.stdin.flush()
    del batch
    send({"jsonrpc": "2.0", "id": "ping-after", "method": "ping"})
    got = wait_until(lambda a: any(m.get("id") == "ping-after" for m in a))
    flood_s = time.time() - t0
    peak = kib("VmHWM")
    rss_after = kib("VmRSS")
    busy = [m for m in got if isinstance(m.get("id"), int) and error_code(m) == -32000]
    c.check("flood: the server answers a ping at once after the flood",
            any(m.get("id") == "ping-after" and m.get("result") == {} for m in got))
    c.check("flood: calls past the bound are refused at once as busy",
            len(busy) == FLOOD - 256, f"{len(busy)} busy answers")
    c.check("flood: the busy error says what to do",
            busy and "server busy" in busy[0]["error"]["message"] and
            "again" in busy[0]["error"]["message"], busy[:1])
    print(f"flood: {FLOOD} calls of {len(PAD) >> 10} KiB in {flood_s:.1f} s; RSS "
          f"{rss_before} KiB before, {rss_after} KiB after, peak {peak} KiB", flush=True)
    c.check("flood: memory stays bounded (under 32 MiB more than before)",
            peak - rss_before < 32 << 10, f"RSS {rss_before} KiB -> peak {peak} KiB")

    # Let the held call and the 256 that wait run (allowed for the session).
    if question:
        send({"jsonrpc": "2.0", "id": question["id"],
              "result": {"action": "accept", "content": {"approve": True, "always": True}}})
    want = set(range(FLOOD)) | {"hold"}
    got = wait_until(lambda a: want <= {m.get("id") for m in a if "method" not in m}, 240)
    ids = [m.get("id") for m in got if "method" not in m and m.get("id") in want]
    c.check("flood: every request gets exactly one answer",
            sorted(map(str, ids)) == sorted(map(str, want)),
            f"{len(ids)} answers for {len(want)} requests, {len(set(map(str, ids)))} distinct")
    ran = [m for m in got if m.get("id") in want and "result" in m]
    c.check("flood: the calls that waited all ran",
            len(ran) == 257 and all(m["result"]["isError"] is False for m in ran),
            [m for m in ran if m["result"]["isError"]][:1])
    c.check("flood: what they wrote is there",
            len(os.listdir(os.path.join(root, "flood"))) == 257)
    send({"jsonrpc": "2.0", "id": "after", "method": "tools/call",
          "params": {"name": "read_file", "arguments": {"path": "flood/hold.txt"}}})
    got = wait_until(lambda a: any(m.get("id") == "after" for m in a), 30)
    r = next((m for m in got if m.get("id") == "after"), None)
    c.check("flood: still serving calls afterwards", text_of(r) == "L1: held\n", r)
    p.stdin.close()
    c.check("flood: exits 0 at the end of input", p.wait(60) == 0)
    shutil.rmtree(os.path.join(root, "flood"), ignore_errors=True)

    # ------------------------------------------------------ signals, EOF
    s = server()
    s.initialize()
    s.p.terminate()
    try:
        rc = s.p.wait(20)
    except Exception:
        rc = None
    c.check("SIGTERM stops the server cleanly", rc == 0, rc)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

c.finish()
