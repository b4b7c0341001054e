"""A small MCP client over pipes for the tests of `sandpod mcp`, and a
pass/fail counter that prints the closing line 'N passed, M failed'."""

import json
import os
import select
import shutil
import subprocess
import sys
import time


class Server:
    """`sandpod mcp ...` on pipes. Messages are read line by line; server
    notifications and requests seen while waiting for a response are kept
    in `self.seen`."""

    def __init__(self, argv, env=None, cwd=None):
        self.p = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.buf = b""
        self.seen = []
        self.next_id = 1000
        os.set_blocking(self.p.stdout.fileno(), False)

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw((json.dumps(msg) + "\n").encode())

    def read_line(self, timeout=30.0):
        """The next line from the server, or None after `timeout` seconds."""
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                return None
            chunk = self.p.stdout.read(1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def recv(self, timeout=30.0):
        line = self.read_line(timeout)
        return None if line is None else json.loads(line)

    def wait_for(self, want_id, timeout=60.0):
        """The response with id `want_id`; other messages go to self.seen."""
        end = time.time() + timeout
        while True:
            m = self.recv(max(0.0, end - time.time()))
            if m is None:
                return None
            if "id" in m and m["id"] == want_id and "method" not in m:
                return m
            self.seen.append(m)

    def request(self, method, params=None, timeout=60.0, meta=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait_for(self.next_id, timeout)

    def call(self, name, args=None, timeout=120.0):
        params = {"name": name}
        if args is not None:
            params["arguments"] = args
        return self.request("tools/call", params, timeout)

    def initialize(self, version="2025-06-18", capabilities=None):
        r = self.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "sandpod-tests", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def close(self, timeout=60.0):
        """Close stdin; the exit code (None if it did not exit in time)."""
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None

    def stderr_text(self):
        try:
            return self.p.stderr.read().decode(errors="replace")
        except Exception:
            return ""


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, what, cond, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            d = detail if isinstance(detail, str) else json.dumps(detail)[:600]
            print(f"FAIL: {what}" + (f": {d}" if d else ""), flush=True)
        return cond

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)


def text_of(resp):
    try:
        return resp["result"]["content"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return ""


def structured(resp):
    try:
        # The typed object: structuredContent under --structured, else the
        # result's _meta["sandpod/result"].
        res = resp["result"]
        return res.get("structuredContent") or (res.get("_meta") or {}).get("sandpod/result") or {}
    except (KeyError, TypeError):
        return {}


def is_error(resp):
    try:
        return resp["result"]["isError"] is True
    except (KeyError, TypeError):
        return None


def error_code(resp):
    try:
        return resp["error"]["code"]
    except (KeyError, TypeError):
        return None


def schema_errors(v, s, where="$"):
    """Where `v` breaks the JSON Schema `s`: a list of messages. Covers what
    sandpod's schemas use: type (one or a list), properties, required,
    additionalProperties false, items, enum, anyOf."""
    errs = []
    types = s.get("type")
    if types is not None:
        tl = types if isinstance(types, list) else [types]

        def is_type(t):
            return {
                "object": isinstance(v, dict),
                "array": isinstance(v, list),
                "string": isinstance(v, str),
                "boolean": isinstance(v, bool),
                "integer": isinstance(v, int) and not isinstance(v, bool),
                "number": isinstance(v, (int, float)) and not isinstance(v, bool),
                "null": v is None,
            }[t]

        if not any(is_type(t) for t in tl):
            return [f"{where}: {json.dumps(v)[:80]} is not {tl}"]
    if "enum" in s and v not in s["enum"]:
        errs.append(f"{where}: {v!r} not in {s['enum']}")
    if "anyOf" in s:
        alts = [schema_errors(v, a, where) for a in s["anyOf"]]
        if all(alts):
            errs.append(f"{where}: matches no anyOf branch: {min(alts, key=len)}")
    if isinstance(v, dict):
        props = s.get("properties", {})
        for k in s.get("required", []):
            if k not in v:
                errs.append(f"{where}: missing {k}")
        for k, x in v.items():
            if k in props:
                errs += schema_errors(x, props[k], f"{where}.{k}")
            elif s.get("additionalProperties") is False:
                errs.append(f"{where}: unexpected {k}")
    if isinstance(v, list) and "items" in s:
        for i, x in enumerate(v):
            errs += schema_errors(x, s["items"], f"{where}[{i}]")
    return errs


def skip(why):
    """Skip the test (exit 77), or fail it under CI=true, where Podman is
    required."""
    if os.environ.get("CI") == "true":
        print(f"FAIL: {why} (Podman is required under CI=true)")
        print("0 passed, 1 failed")
        sys.exit(1)
    print(f"skipping: {why}")
    sys.exit(77)


def need_podman():
    if not shutil.which("podman"):
        skip("podman is not installed (apt-get install podman runc catatonit)")
