#!/usr/bin/env python3
"""`sandpod mcp --root DIR` and `sandpod tools`: what the MCP spec and the
strict tool modes of OpenAI and Anthropic ask for, checked from the outside.

- tools/list: tool names as the 2025-11-25 revision wants them, annotations
  that match what each tool does, the approval tier that follows from them,
  no outputSchema (it rides in _meta) unless --structured;
- every tool's typed object (_meta["sandpod/result"], or structuredContent
  under --structured) matches its schema, the text comes once (content),
  integers stay integers;
- ordering: a read sent after a write waits for it and sees it; a cancelled
  call gets no answer and changes nothing;
- the end of stdin: every request already sent is answered;
- specs: openai-chat's shape, and --strict schemas valid under the strict
  rules (every property required, optional ones nullable,
  additionalProperties false everywhere, no other keyword), whose nulls the
  tools read as "left out".

Usage: test_mcp_lanes.py PATH/TO/sandpod. Prints 'N passed, M failed'."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_client import Checks, Server, is_error, schema_errors, structured, text_of  # noqa: E402

SP = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "sandpod")
c = Checks()
tmp = tempfile.mkdtemp(prefix="sandpod-mcplanes-")
root = os.path.join(tmp, "root")
os.makedirs(os.path.join(root, "src"))
with open(os.path.join(root, "src", "a.txt"), "w") as f:
    f.write("alpha\nbeta\n")
with open(os.path.join(root, "order.txt"), "w") as f:
    f.write("old\n")
BIG = "".join(f"line {i:05d} of a fifteen kilobyte file, some text to fill it up\n"
              for i in range(230))
with open(os.path.join(root, "big.txt"), "w") as f:
    f.write(BIG)


def server(*args):
    return Server([SP, "mcp", "--root", root, *args])


def out_schema(t):
    """A tool's output schema: outputSchema under --structured, else its
    _meta["sandpod/outputSchema"]."""
    return t.get("outputSchema") or t.get("_meta", {}).get("sandpod/outputSchema", {})


def tier_of(ann):
    if ann.get("readOnlyHint"):
        return "safe"
    if ann.get("destructiveHint") or ann.get("openWorldHint"):
        return "dangerous"
    return "cautious"


# ------------------------------------------------------------ tools/list
s = server()
init = s.initialize("2025-11-25")
res = (init or {}).get("result", {})
c.check("2025-11-25 negotiated when offered", res.get("protocolVersion") == "2025-11-25", init)
c.check("2025-11-25: serverInfo has a description",
        isinstance(res.get("serverInfo", {}).get("description"), str), res)
tools = {t["name"]: t for t in s.request("tools/list")["result"]["tools"]}
for name, t in tools.items():
    ann = t.get("annotations", {})
    c.check(f"{name}: a name as 2025-11-25 asks", re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", name), name)
    c.check(f"{name}: every hint is stated",
            all(isinstance(ann.get(h), bool) for h in
                ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")), ann)
    c.check(f"{name}: the tier follows the annotations",
            t.get("_meta", {}).get("sandpod/tier") == tier_of(ann), t)
    # Claude Code and Codex would show the model structuredContent in place
    # of the text: by default there is none, and no outputSchema asks for it.
    c.check(f"{name}: no outputSchema by default; the schema is in _meta",
            "outputSchema" not in t and out_schema(t).get("type") == "object", t)
ann = {n: t["annotations"] for n, t in tools.items()}
c.check("mkdir is additive, not destructive",
        ann["mkdir"]["destructiveHint"] is False and ann["mkdir"]["readOnlyHint"] is False, ann)
for n in ("edit_file", "insert", "write_file", "delete", "apply_patch"):
    c.check(f"{n} overwrites or deletes: destructive", ann[n]["destructiveHint"] is True, ann[n])
for n in ("read_file", "stat", "list_dir", "glob", "grep"):
    c.check(f"{n} is read-only, idempotent, closed-world",
            ann[n]["readOnlyHint"] and ann[n]["idempotentHint"] and not ann[n]["openWorldHint"],
            ann[n])
c.check("edit_file is not idempotent", ann["edit_file"]["idempotentHint"] is False, ann)

# ----------------------------------- structuredContent against outputSchema
calls = [
    ("list_dir", {}),
    ("read_file", {"path": "big.txt", "limit": 5000}),
    ("stat", {"path": "src/a.txt"}),
    ("glob", {"pattern": "**/*.txt"}),
    ("grep", {"pattern": "beta"}),
    ("write_file", {"path": "w/new.txt", "content": "one\ntwo\n"}),
    ("edit_file", {"path": "w/new.txt", "old_string": "two", "new_string": "2"}),
    ("insert", {"path": "w/new.txt", "line": 0, "text": "zero"}),
    ("mkdir", {"path": "w/sub"}),
    ("delete", {"path": "w/sub"}),
    ("apply_patch", {"patch": "*** Begin Patch\n*** Add File: w/p.txt\n+hi\n*** End Patch\n"}),
    ("read_file", {"path": "missing.txt"}),
    ("read_file", {"path": "src/a.txt", "limit": "ten"}),
]
results = {}
s.close()
for mode in ("default", "--structured"):
    s = server(*([mode] if mode != "default" else []))
    s.initialize("2025-11-25")
    mtools = {t["name"]: t for t in s.request("tools/list")["result"]["tools"]}
    c.check(f"{mode}: outputSchema only under --structured",
            all(("outputSchema" in t) == (mode != "default") for t in mtools.values()), mode)
    for name, args in calls:
        s.next_id += 1
        s.send({"jsonrpc": "2.0", "id": s.next_id, "method": "tools/call",
                "params": {"name": name, "arguments": args}})
        line = s.read_line(60)
        r = json.loads(line) if line else None
        if mode == "default":
            results.setdefault(name, (r, line))
            results["last"] = (r, line)
        res = (r or {}).get("result", {})
        c.check(f"{mode} {name}: structuredContent only under --structured",
                ("structuredContent" in res) == (mode != "default"), res)
        sc = structured(r) if r else None
        errs = schema_errors(sc, out_schema(mtools[name])) if sc else ["no typed object"]
        c.check(f"{mode} {name} {json.dumps(args)[:40]}: the typed object matches the schema",
                not errs, errs)
        content = res.get("content", [])
        c.check(f"{mode} {name}: one text content, no message in the typed object",
                len(content) == 1 and content[0].get("type") == "text" and
                "message" not in (sc or {}), r)
    s.close()
c.check("a bad argument is a tool error (isError), not a protocol error",
        is_error(results["last"][0]) is True and "'limit'" in text_of(results["last"][0]),
        results["last"][0])
r, line = results["read_file"]
size = len(BIG)
c.check("read_file: the text is the numbered view, the value the raw file",
        text_of(r).startswith("L1: line 00000") and structured(r)["value"]["content"] == BIG, r)
ratio = len(line) / size
print(f"read_file of a {size}-byte file: a {len(line)}-byte answer ({ratio:.2f}x)")
c.check("read_file: the file's text is not carried three times", ratio < 2.5, ratio)
st = structured(results["stat"][0])["value"]
c.check("stat: mtime_ns stays an integer", isinstance(st.get("mtime_ns"), int) and
        b'"mtime_ns":1.' not in results["stat"][1], results["stat"][1][-200:])

# ------------------------------------------- the snapshot tools, with a store
s = server("--store", os.path.join(tmp, "store"))
s.initialize()
snap_tools = {t["name"]: t for t in s.request("tools/list")["result"]["tools"]}
for name, args in [("snapshot", {"tag": "t1"}), ("list_snapshots", {}),
                   ("restore", {"snapshot": "t1"}), ("restore", {"snapshot": "nope"})]:
    r = s.call(name, args)
    sc = structured(r)
    errs = schema_errors(sc, out_schema(snap_tools[name])) if sc else ["no content"]
    c.check(f"{name} {args}: structuredContent matches outputSchema", not errs, errs or r)
s.close()

# ------------------------------------- ordering, with an approval to hold a write
s = server("--approval", "untrusted")
s.initialize(capabilities={"elicitation": {}})


def next_question(srv):
    while True:
        m = srv.recv(30)
        if m is None or m.get("method") == "elicitation/create":
            return m
        srv.seen.append(m)


s.send({"jsonrpc": "2.0", "id": "w", "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "order.txt", "content": "new\n"}}})
q = next_question(s)
c.check("the write asks first", q is not None, q)
s.send({"jsonrpc": "2.0", "id": "r", "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "order.txt"}}})
early = s.recv(1.0)
c.check("a read sent after a write waits for it", early is None, early)
s.send({"jsonrpc": "2.0", "id": q["id"], "result": {"action": "accept",
                                                     "content": {"approve": True}}})
a, b = s.recv(30), s.recv(30)
c.check("answers in order: the write, then the read",
        [a and a.get("id"), b and b.get("id")] == ["w", "r"], [a, b])
c.check("the read sees the write", text_of(b) == "L1: new\n", b)

s.send({"jsonrpc": "2.0", "id": "w2", "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "order.txt", "content": "x\n"}}})
q = next_question(s)
s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "w2", "reason": "the user pressed Esc"}})
r = s.call("stat", {"path": "order.txt"}, timeout=30)
c.check("after a cancel the next call is answered", is_error(r) is False, r)
c.check("the cancelled call gets no answer, and wrote nothing",
        not any(m.get("id") == "w2" for m in s.seen) and
        open(os.path.join(root, "order.txt")).read() == "new\n", s.seen)
c.check("exits 0", s.close() == 0)

# ------------------------------------------- the end of stdin: drain
msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "write_file", "arguments": {"path": "drain.txt", "content": "d\n"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "read_file", "arguments": {"path": "drain.txt"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "grep", "arguments": {"pattern": "beta"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
         "params": {"name": "delete", "arguments": {"path": "drain.txt"}}}]
p = subprocess.run([SP, "mcp", "--root", root],
                   input="".join(json.dumps(m) + "\n" for m in msgs).encode(),
                   capture_output=True, timeout=120)
out = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
ids = [m.get("id") for m in out]
c.check("a pipe of requests: every one answered before exit", sorted(ids) == [1, 2, 3, 4, 5, 6],
        ids)
c.check("...in order where it matters, the read seeing the write",
        ids.index(2) < ids.index(3) < ids.index(6) and
        text_of(next(m for m in out if m.get("id") == 3)) == "L1: d\n", out)
c.check("...and exits 0", p.returncode == 0, p.stderr.decode())

# A question nobody can answer any more: the call is denied, and answered.
msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "delete", "arguments": {"path": "order.txt"}}}]
p = subprocess.run([SP, "mcp", "--root", root, "--approval", "on-request"],
                   input="".join(json.dumps(m) + "\n" for m in msgs).encode(),
                   capture_output=True, timeout=120)
out = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
ans = next((m for m in out if m.get("id") == 2), None)
c.check("stdin closed during an approval question: denied, answered, nothing deleted",
        is_error(ans) is True and "nobody can be asked" in text_of(ans) and
        os.path.exists(os.path.join(root, "order.txt")) and p.returncode == 0, out)

# ------------------------------------------------------------- the specs
STRICT_KEYS = {"type", "properties", "required", "additionalProperties", "items", "enum",
               "anyOf", "description"}


def strict_errors(schema, where):
    errs = [f"{where}: keyword {k}" for k in schema if k not in STRICT_KEYS]
    props = schema.get("properties")
    t = schema.get("type")
    if props is not None or t == "object" or (isinstance(t, list) and "object" in t):
        if schema.get("additionalProperties") is not False:
            errs.append(f"{where}: additionalProperties is not false")
        if sorted(schema.get("required", [])) != sorted(props or {}):
            errs.append(f"{where}: not every property is required")
    for k, v in (props or {}).items():
        errs += strict_errors(v, f"{where}.{k}")
    if isinstance(schema.get("items"), dict):
        errs += strict_errors(schema["items"], f"{where}[]")
    for i, a in enumerate(schema.get("anyOf", [])):
        errs += strict_errors(a, f"{where}|{i}")
    return errs


def tools_json(*args):
    p = subprocess.run([SP, "tools", *args], capture_output=True, timeout=60)
    return json.loads(p.stdout) if p.returncode == 0 else p.stderr.decode()


loose = {t["name"]: t["inputSchema"] for t in tools_json("--format", "mcp")["tools"]}
chat = tools_json("--format", "openai-chat")
c.check("openai-chat: {type: function, function: {name, description, parameters}}",
        isinstance(chat, list) and len(chat) == len(loose) and
        all(t["type"] == "function" and set(t["function"]) == {"name", "description", "parameters"}
            for t in chat), chat)
for fmt, get in [("openai", lambda t: (t["name"], t["parameters"], t["strict"])),
                 ("openai-chat", lambda t: (t["function"]["name"], t["function"]["parameters"],
                                            t["function"]["strict"])),
                 ("anthropic", lambda t: (t["name"], t["input_schema"], t["strict"])),
                 ("mcp", lambda t: (t["name"], t["inputSchema"], True))]:
    specs = tools_json("--format", fmt, "--strict")
    specs = specs["tools"] if fmt == "mcp" else specs
    errs = []
    for t in specs:
        name, schema, strict = get(t)
        errs += strict_errors(schema, f"{name}")
        if strict is not True:
            errs.append(f"{name}: strict is not true")
        req = set(loose[name].get("required", []))
        for k, v in schema["properties"].items():
            if k in req:
                continue
            ty = v.get("type")
            # Nullable: "null" among the types, or a {type: null} branch of anyOf.
            nullable = (isinstance(ty, list) and "null" in ty) or \
                any(a.get("type") == "null" for a in v.get("anyOf", []))
            if not nullable or ("enum" in v and None not in v["enum"]):
                errs.append(f"{name}.{k}: optional but not nullable")
    c.check(f"--format {fmt} --strict: valid under the strict rules", not errs and specs, errs[:8])
p = subprocess.run([SP, "tools", "--format", "nope"], capture_output=True)
c.check("a bad --format: usage error naming openai-chat",
        p.returncode == 2 and b"openai-chat" in p.stderr, p.stderr)

s = server()
s.initialize()
r = s.call("read_file", {"path": "src/a.txt", "offset": None, "limit": None, "mode": None,
                         "max_levels": None})
c.check("a strict call: null means left out", is_error(r) is False and
        text_of(r) == "L1: alpha\nL2: beta\n", r)
r = s.call("read_file", {"path": None})
c.check("null for a required argument is still refused", is_error(r) is True, r)
s.close()

shutil.rmtree(tmp, ignore_errors=True)
c.finish()
