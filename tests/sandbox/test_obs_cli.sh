#!/usr/bin/env bash
# What the CLI tells its user about a sandbox, on a real Podman service
# (issue 13): exec's exit codes (127/126/125, one line of ours) on both exec
# paths, --debug, logs, inspect's mounts, progress lines, and the hint for
# an unreachable service.
#
# Usage: test_obs_cli.sh PATH/TO/sandpod
# Exits 77 (skip) when Podman is unavailable, unless CI=true.
set -u

SP=${1:?usage: test_obs_cli.sh PATH/TO/sandpod}

PREFIX=sandpod-obs
. "$(dirname "$0")/../cmd/podman_lib.sh"
SRC=$T/src
mkdir -p "$SRC/sub" "$SRC/skip"
printf 'hello\n' >"$SRC/hello.txt"
printf 'x\n' >"$SRC/skip/x.txt"
N=obs-$$

run image exists
[ "$rc" -eq 0 ] || skip "podman or the image is not there: $(head -n 1 "$T/err")"

run create --name "$N" --mount "$SRC" -e SECRETKEY=hunter2-secret
expect 0 "create"

# ------------------------------------------------- exec: 127, 126, 125 --
for path in rest fast; do
    export SANDPOD_EXEC_PATH=$path
    run exec "$N" -- nosuchcmd
    expect_rc 127 "$path: exec of a missing command"
    if [ "$(cat "$T/err")" = "sandpod: command not found in the sandbox: nosuchcmd" ]; then ok; else
        bad "$path: not found: stderr was '$(cat "$T/err")'"
    fi
    out_is '' "$path: not found prints nothing on stdout"
    run exec "$N" -- /etc/passwd
    expect_rc 126 "$path: exec of a file that cannot run"
    if [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qx 'sandpod: command cannot be run in the sandbox: /etc/passwd: .*' "$T/err"; then ok; else
        bad "$path: cannot run: stderr was '$(cat "$T/err")'"
    fi
    # A command that prints the runtime's very words and exits 0 is a
    # command that ran: its lines and its 0 are its own.
    run exec "$N" -- sh -c 'echo "Error: runc: exec failed: OCI runtime attempted to invoke a command that was not found" >&2'
    expect_rc 0 "$path: the runtime's words from a command that exits 0"
    if grep -q '^Error: runc: exec failed' "$T/err" && ! grep -q '^sandpod:' "$T/err"; then ok; else
        bad "$path: the command's own runtime-like line: stderr was '$(cat "$T/err")'"
    fi
    # The command's own 127 and its own "Error: ..." lines pass through.
    run exec "$N" -- sh -c 'echo out; echo "Error: mine" >&2; exit 127'
    expect_rc 127 "$path: a command's own 127"
    out_is 'out\n' "$path: a command's own output"
    if [ "$(cat "$T/err")" = "Error: mine" ]; then ok; else bad "$path: own stderr was '$(cat "$T/err")'"; fi
    run exec "$N" -- sh -c 'echo "Error: runc: exec failed: OCI runtime lookalike" >&2; exit 5'
    expect_rc 5 "$path: a command that prints a runtime-like line"
    err_has "OCI runtime lookalike" "$path: runtime-like lines of the command are kept"
    runin 'abc' exec -i "$N" -- cat
    expect_rc 0 "$path: exec -i cat"
    out_is 'abc' "$path: stdin reaches the command"
    # 4 MiB through `exec -i cat`: stdin streams with the output.
    head -c 4194304 /dev/urandom >"$T/big"
    "$SP" exec -i "$N" -- cat <"$T/big" >"$T/big.out" 2>"$T/err"
    rc=$?
    expect_rc 0 "$path: 4 MiB through exec -i cat"
    check "$path: 4 MiB came back intact" cmp -s "$T/big" "$T/big.out"
    run exec "$N"-nosuch -- true
    expect_rc 125 "$path: sandpod's own failure"
    check "$path: own failure says why" err_lines_ok
done
unset SANDPOD_EXEC_PATH

# ---------------------------------------------------------------- --debug --
for path in rest fast; do
    export SANDPOD_EXEC_PATH=$path
    run --debug exec -e KEY=hunter2-exec "$N" -- sh -c 'echo "[$KEY]"'
    expect_rc 0 "$path: --debug exec"
    out_is '[hunter2-exec]\n' "$path: --debug leaves stdout alone"
    err_has 'sandpod: debug: podman: GET /v4.0.0/libpod/containers/' "$path: --debug logs REST calls"
    err_has 'sandpod: debug: exec path: ' "$path: --debug says which exec path"
    if grep -v '^sandpod: debug: ' "$T/err" | grep -q .; then bad "$path: --debug: other stderr lines"; else ok; fi
    if grep -q 'hunter2' "$T/err"; then bad "$path: --debug logged an env value"; else ok; fi
    run exec -e KEY=hunter2-exec "$N" -- true
    if [ -s "$T/err" ]; then bad "$path: no --debug, yet stderr: $(head -n 2 "$T/err")"; else ok; fi
done
export SANDPOD_EXEC_PATH=fast
run --debug exec "$N" -- true
err_has 'sandpod: debug: agent: sent frame R, ' "--debug logs agent frames"
err_has 'sandpod: debug: agent: received frame X, 4 bytes' "--debug logs the exit frame"
unset SANDPOD_EXEC_PATH
SANDPOD_DEBUG=1 run sh "$N" 'echo "$SECRETKEY" >/dev/null'
expect_rc 0 "SANDPOD_DEBUG=1 sh"
err_has 'sandpod: debug: exec path: the agent' "SANDPOD_DEBUG=1 logs"
if grep -q 'hunter2' "$T/err"; then bad "SANDPOD_DEBUG logged the create-time env value"; else ok; fi
SANDPOD_DEBUG=0 run sh "$N" true
if grep -q 'debug' "$T/err"; then bad "SANDPOD_DEBUG=0 logged"; else ok; fi

# ------------------------------------------------------------------- logs --
run logs "$N"
expect 0 "logs"
out_has 'sandpod-agent: ready, listening on /.sandpod/run/agent.sock' "logs shows the agent's start"
run logs --json --timestamps "$N"
json "logs --json --timestamps" 'j["stream"] == "stdout" and j["text"].startswith("sandpod-agent: ready") and j["time"][:2] == "20"'
# Follow until the container stops; then the stopped sandbox still has its logs.
"$SP" logs -f "$N" >"$T/follow" 2>&1 &
fpid=$!
sleep 1
run stop "$N"
expect 0 "stop"
for _ in $(seq 50); do kill -0 "$fpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$fpid" 2>/dev/null; then
    kill "$fpid"
    bad "logs -f did not end when the container stopped"
else
    wait "$fpid"
    if [ $? -eq 0 ]; then ok; else bad "logs -f exit status"; fi
fi
if grep -q 'sandpod-agent: stopping on signal' "$T/follow"; then ok; else bad "logs -f missed the stop: $(cat "$T/follow")"; fi
run logs --tail 1 "$N"
expect 0 "logs of a stopped sandbox"
out_is 'sandpod-agent: stopping on signal 15\n' "logs --tail 1 of a stopped sandbox"
run logs --since 2099-01-01T00:00:00Z "$N"
expect 0 "logs --since the future"
out_is '' "logs --since the future shows nothing"
run logs --since 10m "$N"
out_has 'sandpod-agent: ready' "logs --since 10m"
run logs --tail x "$N"
expect 2 "logs --tail x"
run logs --since yesterday "$N"
expect 2 "logs --since yesterday"
run logs --since 2024-05-01T10:00:00 "$N"
expect 2 "logs --since without a zone"
run logs "$N"-nosuch
expect 1 "logs of no sandbox"
run logs --json "$N"-nosuch
expect_rc 1 "logs --json of no sandbox"
json "logs --json error" 'j["ok"] is False'
run start "$N"
expect 0 "start again"

# ---------------------------------------------------------------- inspect --
run create --name "$N-m" --mount "src=$SRC,dst=code,include=*.txt,exclude=skip,max-bytes=1M" --mount "$SRC/sub"
expect 0 "create with filtered mounts"
run inspect --json "$N-m"
json "inspect --json mounts" 'len(j["mounts"]) == 2 and j["mounts"][0]["host_path"] == "'"$SRC"'" and j["mounts"][0]["mount_path"] == "code" and j["mounts"][0]["include"] == ["*.txt"] and j["mounts"][0]["exclude"] == ["skip"] and j["mounts"][0]["max_bytes"] == 1048576 and j["mounts"][0]["files"] == 1 and j["mounts"][1]["mount_path"] == "." and j["mounts"][1]["include"] == []'
run inspect "$N-m"
out_has "mounts:     $SRC -> /workspace/code (1 file, 6 B)" "inspect shows a mount"
out_has "  include: *.txt" "inspect shows includes"
out_has "  exclude: skip" "inspect shows excludes"
out_has "  max bytes: 1 MiB" "inspect shows the cap"
out_has "$SRC/sub -> /workspace (0 files" "inspect shows the second mount"
check "sandbox.json stays 0600" test "$(stat -c %a "$SANDPOD_HOME/sandboxes/$N-m/sandbox.json")" = 600
# A sandbox.json from before mounts were recorded still works.
python3 - "$SANDPOD_HOME/sandboxes/$N-m/sandbox.json" <<'PY'
import json, sys
p = sys.argv[1]
j = json.load(open(p))
del j["mounts"]
json.dump(j, open(p, "w"))
PY
run inspect --json "$N-m"
json "inspect of an old sandbox.json" 'j["mounts"] == [] and j["state"] == "running"'
run inspect "$N-m"
out_has "mounts:     (none recorded)" "inspect of an old sandbox.json, human"
run sh "$N-m" 'cat code/hello.txt'
out_is 'hello\n' "an old sandbox.json still runs commands"

# --------------------------------------------------------------- progress --
# Not a terminal: one summary line at the end (none with --json).
mkdir -p "$T/many"
for i in $(seq 1500); do printf '%s\n' "$i" >"$T/many/f$i"; done
run create --name "$N-p" --mount "$T/many"
expect 0 "create with 1500 files"
if [ "$(grep -c '^sandpod: hydrated ' "$T/err")" -eq 1 ] && grep -qE '^sandpod: hydrated [0-9.]+ (B|KiB) in [0-9]+\.[0-9]s( \([0-9.]+ [KMG]?i?B/s\))?: 1500 files$' "$T/err"; then ok; else
    bad "create's summary line: $(cat "$T/err")"
fi
if grep -q $'\r' "$T/err"; then bad "a redrawn line off a terminal"; else ok; fi
run create --json --name "$N-pj" --mount "$T/many"
expect 0 "create --json"
# Podman's own warnings (rootless on cgroup v1 drops the limits) are the
# only lines allowed; no progress summary.
if grep -v '^sandpod: warning: ' "$T/err" | grep -q .; then
    bad "create --json printed on stderr: $(cat "$T/err")"
else ok; fi
# create's baseline snapshot read the 1500 files: give this one a file to read.
run sh "$N-p" 'echo new >new.txt'
expect 0 "a new file in the workspace"
run snapshot "$N-p"
expect 0 "snapshot of 1500 files"
if grep -qE '^sandpod: scanned [0-9.]+ (B|KiB) in [0-9]+\.[0-9]s.*: 150[0-9] entries, [0-9]+ files read$' "$T/err"; then ok; else
    bad "snapshot's summary line: $(cat "$T/err")"
fi
snap=$(head -n 1 "$T/out" | awk '{print $2}')
run sh "$N-p" 'rm f1 f2 f3'
run restore "$N-p" "$snap"
expect 0 "restore"
if grep -qE '^sandpod: restored .*: [0-9]+ entries looked at, 3 changed$' "$T/err"; then ok; else
    bad "restore's summary line: $(cat "$T/err")"
fi
run restore "$N-p" no-such-snapshot
expect 1 "a failed restore"
if grep -q 'restored' "$T/err"; then bad "a failed restore printed a summary"; else ok; fi

# ------------------------------------------------- the service is not there --
run image exists --url "unix://$T/nosuch.sock"
expect 1 "no service"
err_has "start it with 'podman system service --time=0 unix://$T/nosuch.sock &'" "the hint for another socket"
err_has "(in this build tree: '" "a build-tree program names the repository's script"
check "the hint is one line" test "$(wc -l <"$T/err")" -eq 1
# Installed elsewhere, the same program does not mention the script.
mkdir -p "$T/bin"
cp "$SP" "$T/bin/sandpod"
"$T/bin/sandpod" image exists --url "unix://$T/nosuch.sock" >"$T/out" 2>"$T/err"
rc=$?
expect 1 "no service, installed"
err_has "start it with 'podman system service" "the installed hint"
if grep -q 'podman-service.sh' "$T/err"; then bad "an installed sandpod named the repository's script"; else ok; fi

finish
