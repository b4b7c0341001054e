#!/usr/bin/env python3
"""`sandpod mcp --root DIR` driven over pipes through whole conversations:
initialize (version negotiation), tools/list, tool calls good and bad, the
JSON-RPC error codes, garbage and huge messages, ping, elicitation for
approvals, and a clean exit at the end of input.

Usage: test_mcp.py PATH/TO/sandpod
Prints 'N passed, M failed' last; exits 1 on any failure."""

import json
import os
import shutil
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
                        ("1999-01-01", "2025-06-18"), ("not-a-version", "2025-06-18")]:
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
    r = s.call("edit_file", {"path": "approved.txt", "old_string": "ok", "new_string": "OK"})
    c.check("on-request: cautious tools run", is_error(r) is False, r)
    s.close()

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
