#!/usr/bin/python3
"""A read beside a running command, through an MCP server (run by
test_engine_remote.sh on `sandpod mcp NAME` of a remote sandbox): a shell
call that waits for a file, then a read_file call; the read must be
answered while the shell call still runs (it is what writes nothing and
waits), then the file is made and the shell call ends.

usage: mcp_concurrent.py COMMAND...   prints "ok" or exits 1 saying why
"""
import json
import subprocess
import sys
import time


def main():
    p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def send(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()

    def read():
        line = p.stdout.readline()
        if not line:
            sys.exit("the server ended early")
        return json.loads(line)

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "t", "version": "1"}}})
    read()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "shell", "arguments": {
              "command": "while [ ! -e /workspace/go ]; do sleep 0.1; done; echo done"}}})
    time.sleep(0.5)
    send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
          "params": {"name": "list_dir", "arguments": {"path": "."}}})
    first = read()
    if first.get("id") != 3:
        sys.exit("the read waited for the running command: first answer %r" % first)
    # Now let the command end (through the workload, not the busy lane).
    subprocess.run(sys.argv[1:2] + ["sh", sys.argv[sys.argv.index("mcp") + 1],
                                    "touch /workspace/go"], check=True)
    second = read()
    if second.get("id") != 2 or "done" not in second["result"]["content"][0]["text"]:
        sys.exit("the command's answer: %r" % second)
    p.stdin.close()
    p.wait(60)
    print("ok")


if __name__ == "__main__":
    main()
