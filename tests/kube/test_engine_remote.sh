#!/usr/bin/env bash
# Sandboxes on a kubernetes engine, end to end through the Podman-backed
# fake API server (fake_podman.py: each Pod is run by `podman kube play`):
# `create --engine`, commands (sh, exec with stdin, env, workdir, exit
# codes, a command that is not there), the tool suite through the peer
# (call, mcp), snapshots (snapshot, snapshots, restore), what is not there
# yet says so, inspect/ls name the engine, rm, gc --engine collects a Pod no
# sandbox owns, a Pod deleted under a command is said to be, a peer stream
# dropped mid-call is resumed (the call runs once), a v4-only API server,
# 429s on create, a Pod whose image cannot be had; Podman is left with no
# Pod of the test's.
#
# With SANDPOD_K8S_E2E=1 the same runs against a real cluster instead
# (opt-in, never in CI): KUBECONFIG (and SANDPOD_K8S_CONTEXT,
# SANDPOD_K8S_NAMESPACE, default "default") name it, SANDPOD_K8S_IMAGE the
# sandpod image pushed where the cluster pulls from (build-sandpod-image.sh
# then podman push), SANDPOD_K8S_WORKLOAD the workload image (default
# docker.io/library/busybox:1.36); the fault injections are left out and
# what only a real cluster shows is checked too (a tmpfs /tmp, no
# service-account token).
#
# Usage: test_engine_remote.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_engine_remote.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)

PREFIX=sandpod-remote
E2E=${SANDPOD_K8S_E2E:-0}
if [ "$E2E" = 1 ]; then
    # A real cluster: no Podman, no fake.
    T=$(mktemp -d "${TMPDIR:-/tmp}/$PREFIX.XXXXXX")
    export SANDPOD_HOME=$T/home
    mkdir -p "$SANDPOD_HOME"
    . "$SRC/tests/cmd/lib.sh"
    : "${KUBECONFIG:?SANDPOD_K8S_E2E=1 needs KUBECONFIG}" "${SANDPOD_K8S_IMAGE:?and SANDPOD_K8S_IMAGE}"
    ctx=null
    [ -n "${SANDPOD_K8S_CONTEXT:-}" ] && ctx="\"$SANDPOD_K8S_CONTEXT\""
    cat >"$SANDPOD_HOME/engines.json" <<EOF
{"engines": {"fake": {"kind": "kubernetes", "kubeconfig": "$KUBECONFIG", "context": $ctx,
                      "image": "$SANDPOD_K8S_IMAGE",
                      "namespace": "${SANDPOD_K8S_NAMESPACE:-default}",
                      "accept": "${SANDPOD_K8S_ACCEPT:-seccomp}"}}}
EOF
    WIMG=${SANDPOD_K8S_WORKLOAD:-docker.io/library/busybox:1.36}
    kc() { kubectl --kubeconfig "$KUBECONFIG" ${SANDPOD_K8S_CONTEXT:+--context "$SANDPOD_K8S_CONTEXT"} -n "${SANDPOD_K8S_NAMESPACE:-default}" "$@"; }
    pod_exists() { kc get pod "$1" >/dev/null 2>&1; }
    fault() { return 1; }
    e2e_cleanup() {
        local d
        for d in "$SANDPOD_HOME"/sandboxes/*/; do
            [ -d "$d" ] && "$SP" rm --force "$(basename "$d")" >/dev/null 2>&1
        done
        rm -rf "$T"
    }
    trap e2e_cleanup EXIT
else
. "$SRC/tests/cmd/podman_lib.sh"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
. "$HERE/fake_lib.sh"
pod_exists() { podman pod exists "$1"; }
fake_engine "rt$$-"
fi
# Sandbox names carry the run's pid: Pods are sp-<name>-xxxxx.
B=rt$$-a

run create --engine fake --name "$B" --image "$WIMG" -e GREETING=hi
if [ "$rc" -ne 0 ] && [ "$(id -u)" != 0 ] && grep -q "did not start" "$T/err"; then
    # As test_render_kube: rootless kube play does not work on every host.
    echo "skipping: rootless podman kube play fails here: $(head -n 1 "$T/err")"
    exit 77
fi
expect 0 "create --engine fake"
out_is "$B\n" "create prints the name"
POD=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["remote"]["pod"])' \
    "$SANDPOD_HOME/sandboxes/$B/sandbox.json")
check "sandbox.json records the engine's Pod ($POD)" pod_exists "$POD"
if [ "$E2E" != 1 ]; then
    # What a Pod lacks of a local sandbox's protections is refused unless
    # the engine accepts it by name (the fake's engine accepts "userns" and
    # "seccomp": its Pods have the node's ids rootful, and Podman's
    # default seccomp filter).
    python3 -c '
import json, sys
p = sys.argv[1]
d = json.load(open(p))
strict = dict(d["engines"]["fake"])
strict.pop("accept", None)
d["engines"]["strict"] = strict
json.dump(d, open(p, "w"))' "$SANDPOD_HOME/engines.json"
    run create --engine strict --name "$B-strict" --image "$WIMG"
    expect 1 "create on an engine that accepts no weaker Pod"
    err_has "is weaker than a local sandbox; " "... saying so"
    err_has "keyctl and new user namespaces allowed (RuntimeDefault seccomp" \
        "... naming what the Pod lacks"
    if [ "$(id -u)" = 0 ]; then
        err_has "no user namespace (its uid 0 is the node's" "... the node's ids too (rootful)"
        err_has "--accept userns,seccomp" "... and how to accept both by name"
    else
        err_has "--accept seccomp" "... and how to accept it by name"
    fi
    check "... leaving no sandbox" [ ! -e "$SANDPOD_HOME/sandboxes/$B-strict" ]
    no_strict_pod() { ! podman pod ls --format '{{.Name}}' | grep -q "^sp-$B-strict-"; }
    check "... and no Pod" no_strict_pod
fi
json_file() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }
check "sandbox.json: engine fake, kind kubernetes, no host workspace" json_file \
    "$SANDPOD_HOME/sandboxes/$B/sandbox.json" \
    'j["engine"] == "fake" and j["engine_kind"] == "kubernetes" and "workspace" not in j'
if [ "$E2E" = 1 ]; then
    check "the Pod carries the owner label" sh -c "kubectl --kubeconfig '$KUBECONFIG' get pod -A -l sandpod.owner -o name | grep -q '$POD'"
    run sh "$B" 'grep " /tmp " /proc/mounts'
    out_has "tmpfs" "a real cluster: /tmp is a tmpfs"
    run sh "$B" 'test -e /var/run/secrets/kubernetes.io/serviceaccount/token'
    expect_rc 1 "a real cluster: no service-account token in the workload"
else
    check "the Pod carries the owner label" sh -c \
        "curl -sf --cacert '$T/ca.pem' -H 'Authorization: Bearer token-one' 'https://127.0.0.1:$PORT/api/v1/namespaces/default/pods/$POD' | grep -q sandpod.owner"
fi

# A workspace hydrated here and streamed into the Pod (peer import): the
# same filters as a local --mount, the import tagged base.
mkdir -p "$T/proj/src" "$T/proj/build"
printf 'int main;\n' >"$T/proj/src/main.c"
printf 'SECRET=1\n' >"$T/proj/.env"
printf 'obj\n' >"$T/proj/build/out.o"
printf 'build/\n' >"$T/proj/.gitignore"
chmod 0750 "$T/proj/src"
run create --engine fake --name "rt$$-m" --image "$WIMG" --mount "src=$T/proj,exclude=.env,gitignore"
expect 0 "create --engine --mount"
run sh "rt$$-m" 'cd /workspace && find . | sort && stat -c %a src && cat src/main.c'
out_is '.\n./.gitignore\n./src\n./src/main.c\n750\nint main;\n' \
    "--mount on the engine: the files, not .env nor the ignored build/, modes kept"
run snapshots "rt$$-m" --json
json "the import (hydrated), then the baseline (base)" '[s["tag"] for s in j["snapshots"]] == ["hydrated", "base"]'
# diff and the store's commands run by the peer on its store, as locally.
run sh "rt$$-m" 'echo "int main(void);" > /workspace/src/main.c; echo n > /workspace/new.txt'
run diff "rt$$-m"
expect 0 "diff NAME on the engine: from the baseline"
out_is 'A  new.txt\nM  src/main.c\n' "... what changed since create"
run diff --json "rt$$-m"
json "diff --json" 'j["ok"] and sorted(c["path"] for c in j["changes"]) == ["new.txt", "src/main.c"]'
run snapshot "rt$$-m" --tag x
run snapshot rm "rt$$-m" x
expect 0 "snapshot rm on the engine"
out_has "deleted snapshot" "... says so"
run snapshot gc "rt$$-m"
expect 0 "snapshot gc on the engine"
run diff "rt$$-m" no-such-snapshot
expect 1 "diff from a snapshot that is not there"
err_has "no snapshot 'no-such-snapshot'" "... says which"
run inspect "rt$$-m" --json
json "inspect records the mount" 'j["mounts"][0]["host_path"] == "'"$T/proj"'"'
run rm --force "rt$$-m"
expect 0 "rm --force rt$$-m"
# pods_asked: how many Pods the API server was asked to make so far.
pods_asked() {
    curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' \
        "https://127.0.0.1:$PORT/fake/requests" | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin) if r["method"] == "POST" and r["path"].split("?")[0].endswith("/pods")))'
}
[ "$E2E" = 1 ] || pods_before=$(pods_asked)
run create --engine fake --name "rt$$-n" --image "$WIMG" --mount "src=$T/no-such-folder"
expect 1 "create --mount of a folder that is not there fails"
check "... leaving no sandbox" [ ! -e "$SANDPOD_HOME/sandboxes/rt$$-n" ]
err_has "mount source not found" "... and saying which mount"
if [ "$E2E" != 1 ]; then
    no_pod_asked() { [ "$pods_before" -gt 0 ] && [ "$(pods_asked)" = "$pods_before" ]; }
    check "... asking the API server for no Pod: the mount is checked first" no_pod_asked
fi
# Egress rules (test_engine_egress.sh): a hosts file that cannot be read is
# refused in one line, before a Pod or a NetworkPolicy is made.
run create --engine fake --name "rt$$-eg" --image "$WIMG" --allow example.com \
    --egress-hosts "$T/no-such-hosts"
expect 1 "create --egress-hosts of a file that is not there fails"
err_has "read the egress hosts file" "... saying which"
check "... leaving no sandbox" [ ! -e "$SANDPOD_HOME/sandboxes/rt$$-eg" ]
if [ "$E2E" != 1 ]; then
    check "... asking the API server for no Pod" no_pod_asked
fi

# Commands.
run sh "$B" 'echo out; echo "$GREETING"; pwd; id -u; echo err >&2; exit 3'
expect_rc 3 "sh: the command's exit code"
out_is 'out\nhi\n/workspace\n1000\n' "sh: stdout, -e env, workdir, user"
err_has "err" "sh: stderr"
runin 'one
two
' exec -i "$B" -- cat
expect 0 "exec -i: stdin to the end"
out_is 'one\ntwo\n' "exec -i: the command's output"
run exec -w /tmp -e X=y "$B" -- sh -c 'echo "$PWD $X"'
out_is '/tmp y\n' "exec -w -e"
run exec "$B" -- nosuchcommand
expect_rc 127 "exec of a command that is not there: 127"
run exec --user 0 "$B" -- id -u
expect_rc 125 "exec as another user: refused (sandpod's own failure)"
err_has "commands run as its user" "... saying why"
# A timeout kills the command's whole process group in the workload, as
# locally (closing the pods/exec stream would end nothing there).
# The timeout leaves the command time to start first: under ASan on a
# loaded machine, 1.5 s passed before the Pod's exec ran anything.
run sh --timeout 6000 "$B" 'sleep 1001 & echo started; sleep 1002'
expect_rc 124 "sh --timeout exits 124"
out_has "started" "... with what it printed before"
err_has "timed out" "... saying so"
run sh "$B" 'sleep 0.5; for p in /proc/[0-9]*; do tr "\0" " " <$p/cmdline 2>/dev/null; echo; done | grep -c "^sleep 100[12]" || true'
out_is '0\n' "... and nothing of it is left running (its background job too)"
run sh "$B" 'ls /tmp/.sandpod-*.pgid 2>/dev/null | wc -l'
out_is '1\n' "... nor its pgid file (the one there is this command's own)"

run run --engine fake --image "$WIMG" -- sh -c 'echo ran; exit 5'
expect_rc 5 "run --engine: create, the command, remove"
out_is 'ran\n' "... its output"

# The tool suite, through the peer.
run call "$B" write_file '{"path": "src/a.txt", "content": "one\n"}'
expect 0 "call write_file"
run call "$B" read_file '{"path": "src/a.txt"}'
json "call read_file: what was written" 'j["value"]["content"] == "one\n"'
run sh "$B" 'cat /workspace/src/a.txt'
out_is 'one\n' "the workload sees the peer's write"
run call "$B" read_file '{"path": "../etc/passwd"}'
expect_rc 1 "a path out of the workspace: refused by the peer"
json "... with the contained tools' reason" 'j["ok"] is False and j["error"]["code"] == "escape"'

# MCP on the remote sandbox: the client's policy, the peer's tools.
python3 "$HERE/peer_session.py" '[["shell", {"command": "echo via-mcp > m.txt; cat m.txt"}], ["list_dir", {"path": "."}]]' -- \
    "$SP" mcp "$B" --approval never >"$T/out" 2>"$T/err"
rc=$?
expect_rc 0 "sandpod mcp NAME on a remote sandbox"
json "mcp: shell and list_dir through the peer" \
    '"via-mcp" in j["results"][0]["content"][0]["text"] and "m.txt" in j["results"][1]["content"][0]["text"]'
python3 "$HERE/peer_session.py" '[["write_file", {"path": "denied.txt", "content": "x"}]]' -- \
    "$SP" mcp "$B" --read-only >"$T/out" 2>"$T/err"
rc=$?
check "mcp --read-only: the client offers no write tool" [ "$rc" -ne 0 ]
err_has "Unknown tool: write_file" "... and refuses the call"
run sh "$B" 'test -e /workspace/denied.txt'
expect_rc 1 "... and nothing reached the workspace"

run mcp "$B" --deny 'secret*'
expect 1 "mcp --deny on a remote sandbox: refused, not silently dropped"
err_has "deny globs" "... saying why"
timeout 120 python3 "$HERE/mcp_concurrent.py" "$SP" mcp "$B" --approval never >"$T/out" 2>"$T/err"
rc=$?
expect_rc 0 "mcp: a read answered while a shell call runs (one peer stream, answers by id)"

# Snapshots: the peer's store.
run snapshot "$B" --tag t1
expect 0 "snapshot --tag t1"
run sh "$B" 'echo two > /workspace/src/a.txt; rm /workspace/m.txt'
run snapshots "$B" --json
json "snapshots --json lists base and t1" '[s["tag"] for s in j["snapshots"]] == ["base", "t1"]'
run restore "$B" t1
expect 0 "restore t1"
run sh "$B" 'cat /workspace/src/a.txt /workspace/m.txt'
out_is 'one\nvia-mcp\n' "restore brought the workspace back"

# Snapshots cross engines as archives: out of the Pod's store (peer
# export) and into another store (peer import --no-restore), both ways.
run call "$B" write_file '{"path": "moved.txt", "content": "from the pod\n"}'
run snapshot "$B" --tag out
run export "$B" out -o "$T/out.tar.gz"
expect 0 "export of a remote snapshot"
check "... a gzip tar holding the file" sh -c "tar tzf '$T/out.tar.gz' | grep -qx 'moved.txt'"
run export "$B" no-such-snapshot -o "$T/none.tar"
expect 1 "export of a snapshot that is not there"
check "... leaves no file" sh -c "! ls '$T'/none.tar* 2>/dev/null"
if [ "$E2E" != 1 ]; then
    run create --name "rt$$-local"
    expect 0 "a local sandbox beside it"
    run snapshot import "rt$$-local" "$T/out.tar.gz" --tag frompod
    expect 0 "snapshot import of the Pod's archive into a local store"
    run restore "rt$$-local" frompod
    run sh "rt$$-local" 'cat /workspace/moved.txt'
    out_is 'from the pod\n' "remote → local: the file arrived"
    run sh "rt$$-local" 'echo from the host > /workspace/back.txt'
    run snapshot "rt$$-local" --tag back
    run export "rt$$-local" back -o "$T/back.tar"
    run snapshot import "$B" "$T/back.tar" --tag fromhost
    expect 0 "snapshot import of a local archive into the Pod's store"
    run sh "$B" 'cat /workspace/back.txt'
    expect_rc 1 "... which leaves the workspace alone"
    run restore "$B" fromhost
    run sh "$B" 'cat /workspace/back.txt /workspace/moved.txt'
    out_is 'from the host\nfrom the pod\n' "local → remote: restored there"
    run rm --force "rt$$-local"
fi

# A Pod has no stopped or paused state: stop and restart (pause and
# unpause: remote_python.py) are refused in one line saying how to keep the
# work; start of a running Pod is nothing to do, as locally (fork: test_engine_fork.sh; fs and
# logs: test_engine_fs_logs.sh; apply: test_engine_apply.sh).
for c in stop restart; do
    run "$c" "$B"
    expect 1 "$c: refused"
    err_has "engine fake: its Pod cannot $c" "$c: names the engine and why"
    err_has "template save" "$c: says how to keep the work"
    check "$c: one line" [ "$(wc -l <"$T/err")" = 1 ]
done
run start "$B"
expect 0 "start of a running Pod's sandbox: nothing to do"
run sh "$B" 'echo still'
out_is 'still\n' "... it still runs"

# The Python package on the same sandbox (the plain build: a sanitized
# library needs its runtime preloaded, which the Python tests' runner does).
LIB=$(dirname "$SP")/libsandpod.so
if [ -f "$LIB" ] && ! ldd "$LIB" | grep -q libasan; then
    SANDPOD_LIBRARY=$LIB SANDPOD_TOOLS_LIBRARY=$(dirname "$SP")/libsandpod_tools.so \
        PYTHONPATH=$SRC/contrib/python /usr/bin/python3 "$HERE/remote_python.py" "$B" fake "$WIMG" \
        "rt$$-py" >"$T/out" 2>"$T/err"
    rc=$?
    expect_rc 0 "Python: open, shell, exec, rpc, tools, fs, create(engine=) on the engine"
    out_is 'ok\n' "Python: every check ran"
fi

run inspect "$B" --json
json "inspect: engine and where" 'j["engine"] == "fake" and "'"$POD"'" in j["container"] and j["state"] == "running" and j["workspace"] is None'
run ls
out_has "(engine fake)" "ls: the engine in place of a workspace"

if [ "$E2E" != 1 ]; then
# A peer stream dropped after the call reached the peer: the client opens
# a new stream and sends the call again under its key; it runs once.
fault '{"drop_exec_after_stdin": 3}'
run call "$B" shell '{"command": "sleep 2; echo x >> /workspace/count"}'
expect 0 "a call whose stream dropped mid-call: answered"
run sh "$B" 'wc -l < /workspace/count'
out_is '1\n' "... and run exactly once"

# A v4-only API server: commands and the peer still work (no stdin close
# there: the command's own end ends it).
fault '{"v4_only": true}'
run sh "$B" 'echo v4'
out_is 'v4\n' "v4-only server: sh"
run call "$B" read_file '{"path": "src/a.txt"}'
expect 0 "v4-only server: a tool call"
fault '{"v4_only": false}'
fi

# A Pod deleted under a command.
"$SP" sh "$B" 'sleep 60' >"$T/out2" 2>"$T/err2" &
bg=$!
sleep 2
if [ "$E2E" = 1 ]; then
    kc delete pod "$POD" --wait=false >/dev/null
else
    curl -sf --cacert "$T/ca.pem" -H 'Authorization: Bearer token-one' -X DELETE \
        "https://127.0.0.1:$PORT/api/v1/namespaces/default/pods/$POD" >/dev/null
fi
wait "$bg"
rc=$?
check "a command whose Pod was deleted fails ($rc)" [ "$rc" -eq 1 ]
check "... saying the command was cut short" grep -q "cut short" "$T/err2"
run inspect "$B" --json
json "inspect: the sandbox's Pod is missing or going" 'j["state"] in ("missing", "removing")'
run rm "$B"
expect 0 "rm of a sandbox whose Pod is gone"

# Throttled create: 429 with Retry-After, then success.
fault '{"throttle": 2}'
run create --engine fake --name "rt$$-b" --image "$WIMG"
expect 0 "create (through two 429s on the fake)"
run rm "rt$$-b"
expect 1 "rm of a running remote sandbox wants --force"
err_has "--force" "... and says so"
run rm --force "rt$$-b"
expect 0 "rm --force"

# An image that cannot be had: one line from the Pod's Events, nothing left.
run create --engine fake --name "rt$$-c" --image localhost/sandpod-no-such-image:never
expect 1 "create with an image that is not there fails"
err_has "did not start" "... saying the Pod did not start"
check "... and leaves no sandbox" [ ! -e "$SANDPOD_HOME/sandboxes/rt$$-c" ]

# gc --engine: a Pod whose sandbox record went.
run create --engine fake --name "rt$$-d" --image "$WIMG"
expect 0 "create d"
POD_D=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["remote"]["pod"])' \
    "$SANDPOD_HOME/sandboxes/rt$$-d/sandbox.json")
run create --engine fake --name "rt$$-e" --image "$WIMG"
mv "$SANDPOD_HOME/sandboxes/rt$$-d" "$T/aside"
run gc --engine fake --dry-run
out_has "would remove pod $POD_D" "gc --dry-run names the orphan Pod"
out_lacks "rt$$-e" "... and not a sandbox's own Pod"
run gc --engine fake --json
json "gc removes it" 'len(j["orphans"]) == 1 and j["orphans"][0]["removed"] and j["orphans"][0]["kind"] == "pod"'
check "the orphan Pod is gone" eval "! pod_exists '$POD_D'"
run rm --force "rt$$-e"
expect 0 "rm e"
run create --engine nosuch --name "rt$$-f"
expect 1 "create on an engine that is not configured"
err_has "nosuch" "... names it"

if [ "$E2E" != 1 ]; then
    check "no Pod of the test is left" sh -c "! podman pod ls --format '{{.Name}}' | grep -q '^sp-rt$$-'"
fi
finish
