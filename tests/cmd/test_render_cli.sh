#!/usr/bin/env bash
# sandpod render and sandpod peer on the host, no container: the Pod's JSON
# and its refusals; kubectl reading the manifest offline; a peer serving a
# bare folder on a unix socket, reached through `peer connect` by an MCP
# session (write_file, snapshot, restore); install-agent.
#
# Usage: test_render_cli.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_render_cli.sh PATH/TO/sandpod}
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 is missing: skipping"
    exit 77
fi
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/sandpod-render.XXXXXX")
peer_pid=
trap '[ -n "$peer_pid" ] && kill "$peer_pid" 2>/dev/null; rm -rf "$T"' EXIT
. "$HERE/lib.sh"

# ------------------------------------------------------------- render --
run render --help
expect 0 "render --help"
out_has "anyone who may read Pods sees it" "help warns that -e values are in the spec"
out_has "podPidsLimit" "help names the pids gap"
out_has "NetworkPolicy" "help names the network gap"
out_has "network=none" "help explains the gap tokens"

run render --name box -e KEY=visible -e PASSED --memory 512M --cpus 0.5
expect 0 "render"
json "render is a Pod" 'j["kind"] == "Pod" and j["metadata"]["generateName"] == "sp-box-"'
json "pass-through names only" 'j["metadata"]["annotations"]["sandpod.env-pass"] == "PASSED" and j["spec"]["containers"][0]["env"] == [{"name": "KEY", "value": "visible"}]'
json "limits" 'j["spec"]["containers"][0]["resources"]["limits"] == {"memory": "512Mi", "cpu": "500m"}'
PASSED=hidden-value-42 run render --name box -e PASSED
out_lacks "hidden-value-42" "a pass-through value stays out of the manifest"

run render --name box --deadline 0 --namespace ns1 --runtime-class gvisor --sandpod-image r/s:1
json "own options" '"activeDeadlineSeconds" not in j["spec"] and j["metadata"]["namespace"] == "ns1" and j["spec"]["runtimeClassName"] == "gvisor" and j["spec"]["containers"][1]["image"] == "r/s:1"'

run render --name My_Box
expect 1 "a name a Pod cannot carry"
err_has "lowercase" "the name error says why"
run render --memory lots
expect 2 "bad --memory"
err_has "--memory must be a size" "the memory error says why"
run render --deadline -5
expect 2 "negative --deadline"
run render --mount "$T"
expect 1 "--mount is refused"
err_has "hydrated through the peer" "the mount error says why"
run render --user sandbox
expect 1 "a user name"
run render --namespace Prod
expect 1 "an upper-case namespace"
run render extra
expect 2 "an operand"

# kubectl without a server: `create --dry-run=client` needs the API's
# discovery, so a --local verb is what reads a manifest offline (it parses
# apiVersion/kind and the JSON; it does not check field types).
if command -v kubectl >/dev/null 2>&1; then
    run render --name box
    if KUBECONFIG=/dev/null kubectl label --local -f "$T/out" -o json sandpod.test=1 \
        >"$T/kout" 2>"$T/kerr"; then
        ok
        check "kubectl read the Pod back" python3 -c '
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
b["metadata"]["labels"].pop("sandpod.test")
sys.exit(0 if a == b else 1)' "$T/out" "$T/kout"
    else
        bad "kubectl label --local: $(head -c 300 "$T/kerr")"
    fi
else
    echo "kubectl is missing: its check skipped"
fi

# --------------------------------------------------------------- peer --
run peer
expect 2 "peer without an operation"
run peer srve
expect 2 "an unknown operation"
err_has "did you mean 'serve'" "a suggestion"
run peer serve --root "$T"
expect 2 "serve without --store and --socket"
run peer connect --socket "$T/nothing.sock"
expect 1 "connect to no peer"
err_has "connecting to the peer" "connect says what failed"

W=$T/ws
mkdir -p "$W" "$T/run"
: >"$T/run/not-a-socket"
run peer serve --root "$W" --store "$T/store" --socket "$T/run/not-a-socket"
expect 1 "serve refuses to replace a file"

"$SP" peer serve --root "$W" --store "$T/store" --socket "$T/run/peer.sock" 2>"$T/peer.err" &
peer_pid=$!
for _ in $(seq 50); do [ -S "$T/run/peer.sock" ] && break; sleep 0.1; done
check "the socket is 0600" [ "$(stat -c %a "$T/run/peer.sock")" = 600 ]

session() {
    python3 "$HERE/../kube/peer_session.py" "$1" -- "$SP" peer connect --socket "$T/run/peer.sock" \
        >"$T/out" 2>"$T/err"
    rc=$?
}
session '[["write_file", {"path": "a.txt", "content": "one\n"}], ["snapshot", {"tag": "t1"}], ["write_file", {"path": "a.txt", "content": "two\n"}], ["write_file", {"path": "new.txt", "content": "x"}]]'
expect 0 "an MCP session through peer connect"
json "the calls succeeded" 'all(not r["isError"] for r in j["results"])'
file_is "$W/a.txt" 'two\n' "write_file reached the folder"
check "the store is outside the workspace" [ -d "$T/store" ]
# A second connection: the peer serves one after another.
session '[["restore", {"snapshot": "t1"}], ["read_file", {"path": "a.txt"}]]'
expect 0 "a second session"
file_is "$W/a.txt" 'one\n' "restore through the peer"
check "restore removed what came after" [ ! -e "$W/new.txt" ]
kill -TERM "$peer_pid"
wait "$peer_pid"
rc=$?
peer_pid=
expect_rc 0 "serve ends cleanly on SIGTERM"
check "serve removed its socket" [ ! -e "$T/run/peer.sock" ]

# ------------------------------------------------------ install-agent --
mkdir -p "$T/bin"
printf '#!/bin/sh\necho agent\n' >"$T/fake-agent"
SANDPOD_AGENT=$T/fake-agent run peer install-agent "$T/bin"
expect 0 "install-agent"
check "the agent is a copy" cmp -s "$T/fake-agent" "$T/bin/agent"
check "mode 0555" [ "$(stat -c %a "$T/bin/agent")" = 555 ]
SANDPOD_AGENT=$T/missing run peer install-agent "$T/bin"
expect 1 "install-agent without an agent"
check "nothing but the agent in the folder" [ "$(ls -A "$T/bin")" = agent ]
chmod 0500 "$T/bin"
SANDPOD_AGENT=$T/fake-agent run peer install-agent "$T/bin"
chmod 0700 "$T/bin"
if [ "$(id -u)" != 0 ]; then expect 1 "install-agent into a read-only folder"; fi

finish
