#!/usr/bin/env bash
# `sandpod peer serve --agent`: the command tools through a workload's
# sandpod-agent, as in a Pod, without one. The built agent runs as a plain
# process with its run folder in a scratch folder (as tests/sandbox/
# test_agent.c does); the peer serves over `peer connect`: shell with
# output and exit code, a timeout that kills, exec_command + write_stdin
# sessions, a command's file seen by read_file. Hostile: the agent's socket
# name replaced by a symlink, by a socket another uid owns, by one another
# uid serves, and by a regular file: each refused with a clear error, and
# no byte reaches the impostor.
#
# Usage: test_peer_agent.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_peer_agent.sh PATH/TO/sandpod}
AGENT=$(cd "$(dirname "$SP")" && pwd)/sandpod-agent
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 is missing: skipping"
    exit 77
fi
if [ ! -x "$AGENT" ]; then
    echo "no sandpod-agent beside $SP: skipping"
    exit 77
fi
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-peeragent.XXXXXX")
peer_pid=
agent_pid=
evil_pid=
stop() {
    for p in $peer_pid $agent_pid $evil_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
}
trap 'stop; rm -rf "$T"' EXIT
. "$HERE/lib.sh"

W=$T/ws
RUN=$T/agent-run # the shared emptyDir /.sandpod/run in a Pod
mkdir -p "$W/sub" "$RUN" "$T/peer-run"
# The peer and the agent see the workspace at the same path, as in a Pod.
(cd "$W" && exec "$AGENT" "$RUN") >"$T/agent.err" 2>&1 &
agent_pid=$!
for _ in $(seq 100); do [ -S "$RUN/agent.sock" ] && break; sleep 0.1; done
check "the agent listens" [ -S "$RUN/agent.sock" ]

run peer serve --root "$W" --store "$T/store" --socket "$T/peer-run/peer.sock" --agent-uid 5
expect 2 "--agent-uid without --agent"
run peer connect --socket "$T/x" --agent "$RUN/agent.sock"
expect 2 "connect takes no --agent"

"$SP" peer serve --root "$W" --store "$T/store" --socket "$T/peer-run/peer.sock" \
    --agent "$RUN/agent.sock" 2>"$T/peer.err" &
peer_pid=$!
for _ in $(seq 50); do [ -S "$T/peer-run/peer.sock" ] && break; sleep 0.1; done

session() {
    python3 "$HERE/../kube/peer_session.py" "$1" -- "$SP" peer connect \
        --socket "$T/peer-run/peer.sock" >"$T/out" 2>"$T/err"
    rc=$?
}

# ---------------------------------------------------------------- shell --
session '[["shell", {"command": "echo out; echo err >&2; exit 3"}],
          ["shell", {"command": "pwd", "workdir": "sub"}],
          ["shell", {"command": "printf from-shell > made.txt"}],
          ["read_file", {"path": "made.txt"}],
          ["shell", {"command": "echo $$ > slept.pid; exec sleep 60", "timeout_ms": 1000}]]'
expect 0 "an MCP session with shell calls"
json "exit code 3, not an error" 'j["results"][0]["structuredContent"]["value"]["exit_code"] == 3 and not j["results"][0]["isError"]'
json "stdout and stderr apart" 'j["results"][0]["structuredContent"]["value"]["stdout"] == "out\n" and j["results"][0]["structuredContent"]["value"]["stderr"] == "err\n"'
json "a relative workdir is below the workspace" "j['results'][1]['structuredContent']['value']['stdout'].strip() == '$W/sub'"
file_is "$W/made.txt" 'from-shell' "the command wrote into the workspace"
json "read_file sees the command's file" '"from-shell" in j["results"][3]["content"][0]["text"]'
json "the timeout is an error" 'j["results"][4]["isError"] and "timed out" in j["results"][4]["content"][0]["text"]'
json "the timeout came in time" 'j["results"][4]["structuredContent"]["value"]["duration_ms"] < 10000'
slept=$(cat "$W/slept.pid" 2>/dev/null)
check "the timed-out command is gone" sh -c "[ -n '$slept' ] && ! kill -0 '$slept' 2>/dev/null"

# ------------------------------------------------------------- sessions --
session '[["exec_command", {"cmd": "read a; echo got-$a; read b; echo then-$b; exit 4", "tty": false}],
          ["write_stdin", {"session_id": "@session", "chars": "one\n", "yield_time_ms": 1000}],
          ["write_stdin", {"session_id": "@session", "chars": "two\n", "yield_time_ms": 2000}],
          ["exec_command", {"cmd": "echo $$ > sess.pid; exec sleep 60"}],
          ["write_stdin", {"session_id": "@session", "kill": true}]]'
expect 0 "an MCP session with exec_command and write_stdin"
json "the session runs" 'j["results"][0]["structuredContent"]["value"]["running"]'
json "write_stdin reaches it" '"got-one" in j["results"][1]["structuredContent"]["value"]["output"]'
json "its exit code" 'j["results"][2]["structuredContent"]["value"]["exit_code"] == 4 and "then-two" in j["results"][2]["structuredContent"]["value"]["output"]'
json "kill answers" 'not j["results"][4]["isError"]'
sp=$(cat "$W/sess.pid" 2>/dev/null)
for _ in $(seq 50); do kill -0 "$sp" 2>/dev/null || break; sleep 0.1; done
check "the killed session's process is gone" sh -c "[ -n '$sp' ] && ! kill -0 '$sp' 2>/dev/null"

# A session left running when the client goes: the peer keeps it (a dropped
# stream loses nothing); its kill is the agent's, when the peer stops.
session '[["exec_command", {"cmd": "echo $$ > kept.pid; exec sleep 60"}]]'
expect 0 "a session left running"
kept=$(cat "$W/kept.pid" 2>/dev/null)
check "it outlives the client" sh -c "[ -n '$kept' ] && kill -0 '$kept'"

# ------------------------------------------------------------ cancelled --
# notifications/cancelled for a running shell call: its command dies while
# the connection stays open (a second connection to the agent kills it).
rm -f "$W/c.pid"
python3 - "$SP" "$T/peer-run/peer.sock" "$W/c.pid" >"$T/out" 2>"$T/err" <<'PY'
import json, os, subprocess, sys, time
sp, sock, pidfile = sys.argv[1:4]
p = subprocess.Popen([sp, "peer", "connect", "--socket", sock],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def send(m):
    p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}})
p.stdout.readline()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "shell",
      "arguments": {"command": "echo $$ > c.pid; exec sleep 60", "timeout_ms": 60000}}})
end = time.time() + 10
while not (os.path.exists(pidfile) and open(pidfile).read().strip()) and time.time() < end:
    time.sleep(0.05)
pid = int(open(pidfile).read())
send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
end = time.time() + 10
while time.time() < end:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        print("gone while connected")
        break
    time.sleep(0.05)
p.stdin.close()
p.wait()
PY
rc=$?
expect_rc 0 "a cancelled call"
out_has "gone while connected" "cancel kills the command through the agent"

# -------------------------------------------------------------- hostile --
# An impostor socket that logs every connection and every byte.
evil() { # evil PATH [UID]: listen on PATH (as UID once bound), log to $T/evil.log
    : >"$T/evil.log"
    python3 - "$1" "${2:-}" "$T/evil.log" <<'PY' &
import os, socket, sys
path, uid, log = sys.argv[1], sys.argv[2], sys.argv[3]
f = open(log, "a", buffering=1)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
if uid:
    os.setgid(int(uid)); os.setuid(int(uid))
s.listen(8)  # SO_PEERCRED names who listens: uid, when given
f.write("ready\n")
while True:
    c, _ = s.accept()
    f.write("connection\n")
    while True:
        b = c.recv(4096)
        if not b:
            break
        f.write("bytes %d\n" % len(b))
    c.close()
PY
    evil_pid=$!
    for _ in $(seq 50); do grep -q ready "$T/evil.log" && break; sleep 0.1; done
}
evil_stop() {
    kill "$evil_pid" 2>/dev/null
    wait "$evil_pid" 2>/dev/null
    evil_pid=
}
refused() { # refused WHY DESC: a shell call fails saying WHY; the impostor got no byte
    session '[["shell", {"command": "echo should-not-run"}]]'
    expect 0 "$2: the session"
    json "$2: refused" "j['results'][0]['isError'] and '$1' in j['results'][0]['content'][0]['text']"
    check "$2: no byte sent" sh -c "! grep -q bytes '$T/evil.log'"
}

mv "$RUN/agent.sock" "$RUN/real.sock"
evil "$RUN/evil.sock"
ln -s evil.sock "$RUN/agent.sock"
refused "it is a symbolic link" "a symlink to another socket"
check "a symlink: not even a connection" sh -c "! grep -q connection '$T/evil.log'"
rm "$RUN/agent.sock"
ln -s real.sock "$RUN/agent.sock"
refused "it is a symbolic link" "a symlink to the real agent"
rm "$RUN/agent.sock"
evil_stop
rm -f "$RUN/evil.sock"

: >"$RUN/agent.sock"
: >"$T/evil.log"
refused "it is not a socket" "a regular file"
rm "$RUN/agent.sock"

if [ "$(id -u)" = 0 ]; then
    evil "$RUN/agent.sock"
    chown 65534:65534 "$RUN/agent.sock"
    refused "another uid than the workload" "a socket another uid owns"
    check "another uid's socket: not even a connection" sh -c "! grep -q connection '$T/evil.log'"
    evil_stop
    rm -f "$RUN/agent.sock"
    evil "$RUN/agent.sock" 65534
    refused "another uid than the workload" "our socket, served by another uid"
    check "served by another uid: connected, then dropped" grep -q connection "$T/evil.log"
    evil_stop
    rm -f "$RUN/agent.sock"
else
    echo "not root: the other-uid cases run against --agent-uid below only"
fi

# The peer expects another uid than the agent's: the real agent is refused.
mv "$RUN/real.sock" "$RUN/agent.sock"
kill -TERM "$peer_pid"
wait "$peer_pid"
rc=$?
peer_pid=
expect_rc 0 "serve ends cleanly on SIGTERM"
for _ in $(seq 50); do kill -0 "$kept" 2>/dev/null || break; sleep 0.1; done
check "the session left running went with the peer" sh -c "! kill -0 '$kept' 2>/dev/null"

"$SP" peer serve --root "$W" --store "$T/store" --socket "$T/peer-run/peer.sock" \
    --agent "$RUN/agent.sock" --agent-uid $(($(id -u) + 1)) 2>"$T/peer.err" &
peer_pid=$!
for _ in $(seq 50); do [ -S "$T/peer-run/peer.sock" ] && break; sleep 0.1; done
: >"$T/evil.log"
refused "another uid than the workload" "the agent under another uid than --agent-uid"
kill -TERM "$peer_pid"
wait "$peer_pid"
peer_pid=

# The real agent, back under its name, serves again: refusals are per command.
"$SP" peer serve --root "$W" --store "$T/store" --socket "$T/peer-run/peer.sock" \
    --agent "$RUN/agent.sock" 2>"$T/peer.err" &
peer_pid=$!
for _ in $(seq 50); do [ -S "$T/peer-run/peer.sock" ] && break; sleep 0.1; done
session '[["shell", {"command": "echo back"}]]'
expect 0 "the real agent again"
json "it answers" 'j["results"][0]["structuredContent"]["value"]["stdout"] == "back\n"'

finish
