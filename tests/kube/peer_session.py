#!/usr/bin/env python3
"""One MCP session through `sandpod peer connect` (or anything that relays
to the peer's socket): initialize, then each tool call in turn, waiting for
each answer. Prints a JSON array of the calls' results; exits 1 when the
relay ends early or a JSON-RPC error comes back.

usage: peer_session.py CALLS_JSON -- COMMAND...
  CALLS_JSON: [["write_file", {"path": "a", "content": "x"}], ...]
  An argument "@session" stands for the session_id of the latest answer
  that carried one (exec_command's).
"""
import json
import subprocess
import sys


def main():
    sep = sys.argv.index("--")
    calls = json.loads(sys.argv[1])
    cmd = sys.argv[sep + 1:]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def send(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()

    def answer(want_id):
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit("peer_session: the relay ended before answer %d" % want_id)
            msg = json.loads(line)
            if msg.get("id") == want_id:
                if "error" in msg:
                    sys.exit("peer_session: error %s" % json.dumps(msg["error"]))
                return msg["result"]

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "peer_session", "version": "1"}}})
    init = answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    results = []
    session = None
    for i, (name, args) in enumerate(calls, start=1):
        args = {k: (session if v == "@session" else v) for k, v in args.items()}
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": name, "arguments": args}})
        results.append(answer(i))
        sid = ((results[-1].get("structuredContent") or {}).get("value") or {}).get("session_id")
        if sid is not None:
            session = sid
    p.stdin.close()
    rest = p.stdout.read()
    rc = p.wait()
    if rc != 0:
        sys.exit("peer_session: the relay exited %d" % rc)
    json.dump({"server": init.get("serverInfo", {}), "results": results,
               "trailing": rest.decode(errors="replace")}, sys.stdout)


main()
