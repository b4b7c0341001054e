#!/usr/bin/env bash
# End-to-end tests of the sandbox commands of the sandpod CLI on a real
# Podman service: create, ls, inspect, sh, exec, fs NAME, stop, start,
# restart, rm, run, image, and bad usage.
#
# Usage: test_sandbox_cli.sh PATH/TO/sandpod
# Exits 77 (skip) when Podman is unavailable, unless CI=true.
set -u

SP=${1:?usage: test_sandbox_cli.sh PATH/TO/sandpod}

PREFIX=sandpod-sbcli
. "$(dirname "$0")/podman_lib.sh"
SRC=$T/src # the host folder mounted into the sandbox
mkdir -p "$SRC/sub"
printf 'hello from the host\n' >"$SRC/hello.txt"
printf 'nested\n' >"$SRC/sub/nested.txt"

# ------------------------------------------------------ Podman, image --
need_image
run image exists --json
json "image exists --json" 'j["ok"] is True and j["exists"] is True'
run image exists localhost/sandpod-no-such-image:latest
expect_rc 1 "image exists on a missing image"
out_is 'false\n' "image exists prints false"

# ---------------------------------------------------------------- create --
N=box-$$
run create --name "$N" --mount "$SRC" --memory 256M --cpus 0.5 --pids 128 -e GREETING=hi
expect 0 "create"
out_is "$N\n" "create prints the name"
run create --name "$N"
expect 1 "create with a taken name"
err_has "already exists" "create says the name is taken"
check "the workspace holds the mount" test -f "$SANDPOD_HOME/sandboxes/$N/workspace/sub/nested.txt"

# -------------------------------------------------------- ls, inspect --
run ls
expect 0 "ls"
if grep -qE "^$N +running +" "$T/out"; then ok; else bad "ls shows $N running: $(cat "$T/out")"; fi
out_has "NAME" "ls prints a header"
run ls --json
json "ls --json" "j['ok'] and any(s['name'] == '$N' and s['state'] == 'running' for s in j['sandboxes'])"
run inspect --json "$N"
expect 0 "inspect --json"
json "inspect --json fields" "j['ok'] and j['name'] == '$N' and j['running'] is True and j['workspace'].endswith('/workspace') and j['created_at']"
json "inspect --json config" "j['config']['network'] == 'none' and j['config']['memory_bytes'] == 256 << 20 and j['config']['nano_cpus'] == 500000000 and j['config']['pids_limit'] == 128 and j['config']['env'] == ['GREETING=***']"
out_lacks "GREETING=hi" "inspect --json masks env values"
run inspect --json --show-secrets "$N"
json "inspect --json --show-secrets" "j['config']['env'] == ['GREETING=hi']"
# Isolation facts: a user namespace of its own, sandpod's seccomp profile.
json "inspect --json isolation" "j['config']['userns'] == 'private' and j['config']['seccomp'] == 'sandpod' and j['config']['host_uid'] >= 0 and (j['config']['rootless'] or j['config']['host_uid'] > 65535)"
unpausable=$(python3 -c 'import json,sys; c=json.load(sys.stdin)["config"]; print(int(c["rootless"] and not c["limits_apply"]))' <"$T/out")
run snapshot "$N" --tag cli-note
expect 0 "snapshot of a running sandbox"
if [ "$unpausable" = 1 ]; then
    check "snapshot says the container kept running (no freezer)" grep -q "kept running" "$T/err"
else
    check "snapshot paused the container (no note)" sh -c '! grep -q "kept running" "$1"' _ "$T/err"
fi
run inspect "$N"
expect 0 "inspect"
out_has "running" "inspect shows the state"
out_has "GREETING=***" "inspect names the env variable"
out_lacks "GREETING=hi" "inspect masks env values"
run inspect no-such-box
expect 1 "inspect of a missing sandbox"
run ls --url unix://"$T"/no-podman.sock
expect 0 "ls without Podman still lists"
if grep -qE "^$N +unknown +" "$T/out"; then ok; else bad "ls shows unknown without Podman: $(cat "$T/out")"; fi

# -------------------------------------------------------------------- sh --
run sh "$N" 'echo hi; exit 3'
expect_rc 3 "sh exits with the command's code"
out_is 'hi\n' "sh prints the command's stdout"
run sh "$N" 'cat hello.txt; echo "$GREETING"; echo oops >&2'
expect_rc 0 "sh sees the workspace"
out_is 'hello from the host\nhi\n' "sh reads the mounted file and the env"
if grep -qx oops "$T/err"; then ok; else bad "sh passes stderr on"; fi
run sh --json "$N" 'echo out; echo err >&2; exit 5'
expect 0 "sh --json exits 0 when the command ran"
json "sh --json fields" 'j["ok"] is True and j["exit_code"] == 5 and j["stdout"] == "out\n" and j["stderr"] == "err\n" and j["timed_out"] is False and j["stdout_truncated"] is False and j["stderr_truncated"] is False and j["stdout_bytes"] == 4 and j["stderr_bytes"] == 4 and j["duration_ms"] >= 0'
start=$(date +%s)
run sh --timeout 500 "$N" 'sleep 60'
end=$(date +%s)
expect_rc 124 "sh --timeout exits 124"
err_has "timed out" "sh --timeout notes it on stderr"
# Semantics, not speed: it did not wait for the command to end.
check "sh --timeout does not wait for the command" test $((end - start)) -lt 30
run sh --json --timeout 500 "$N" 'echo partial; sleep 5'
expect 0 "sh --json --timeout"
json "sh --json reports timed_out" 'j["timed_out"] is True and j["stdout"] == "partial\n"'
# What a command leaves behind goes when it returns, however it left: a
# setsid with an emptied environment, a double fork (issue 25).
run sh "$N" 'setsid env -i sleep 1171 >/dev/null 2>&1 & (setsid env -i sleep 1172 >/dev/null 2>&1 &); echo started'
out_is 'started\n' "a command that leaves processes behind returns"
run sh "$N" 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " <"$f"; echo; done | grep -c "^sleep 117[12]"; true'
out_is '0\n' "... and what it left, out of its group, session and environment, is gone"
run sh --json --max-bytes 100 "$N" 'seq 1 5000'
json "sh --max-bytes caps stdout" 'j["stdout_truncated"] is True and j["stdout_bytes"] > 100 and j["stdout"].startswith("1\n")'
run sh -w /tmp -e X=y "$N" 'pwd; echo $X'
out_is '/tmp\ny\n' "sh -w and -e"
# A command's output may carry escape sequences aimed at the user's
# terminal (clipboard, title, cursor): shown as text there, exact elsewhere.
ESC_CMD='printf "a\033]52;c;SGVsbG8=\007b\033[2Jc\rd\n"; printf "e\033]0;t\007\n" >&2'
run_tty sh "$N" "$ESC_CMD"
expect_rc 0 "sh on a terminal"
out_is 'a\\x1b]52;c;SGVsbG8=\\x07b\\x1b[2Jc\\x0dd\ne\\x1b]0;t\\x07\n' \
    "sh on a terminal shows control characters of stdout and stderr as text"
run sh "$N" "$ESC_CMD"
out_is 'a\033]52;c;SGVsbG8=\007b\033[2Jc\rd\n' "sh to a pipe is byte-exact"
if [ "$(cat "$T/err")" = "$(printf 'e\033]0;t\007')" ]; then ok; else bad "sh stderr to a file is byte-exact"; fi
run_tty sh --raw "$N" "$ESC_CMD"
out_is 'a\033]52;c;SGVsbG8=\007b\033[2Jc\rd\ne\033]0;t\007\n' "sh --raw on a terminal is byte-exact"

# ------------------------------------------------------------------ exec --
runin $'line one\nline two\n' exec -i "$N" -- cat
expect_rc 0 "exec -i cat"
out_is 'line one\nline two\n' "exec -i forwards stdin and closes it at EOF"
head -c 200000 /dev/urandom >"$T/blob"
"$SP" exec -i "$N" -- cat <"$T/blob" >"$T/out" 2>"$T/err"
rc=$?
expect_rc 0 "exec -i with 200 kB of binary"
check "exec -i round-trips binary data" cmp -s "$T/blob" "$T/out"
run exec "$N" -- sh -c 'echo to-out; echo to-err >&2; exit 7'
expect_rc 7 "exec exits with the command's code"
out_is 'to-out\n' "exec keeps stdout apart"
if grep -qx to-err "$T/err"; then ok; else bad "exec keeps stderr apart"; fi
runin 'not forwarded' exec "$N" -- cat
expect_rc 0 "exec without -i"
out_is '' "exec without -i gives the command no stdin"
run exec "$N" -- sh -c 'exit 1'
expect_rc 1 "exec: the command's own 1 stays 1"
run exec "$N" -- no-such-command
expect_rc 127 "exec of a missing command exits 127"
run exec "$N" -- /etc/passwd
expect_rc 126 "exec of something not executable exits 126"
run exec no-such-box -- true
expect_rc 125 "exec on a missing sandbox exits 125"
run exec -w /tmp -e FOO=bar -u 0 "$N" sh -c 'pwd; echo $FOO; id -u'
out_is '/tmp\nbar\n0\n' "exec -w -e -u (and no '--')"
if python3 -c 'import pty' 2>/dev/null; then
    # -t with a terminal: its size reaches the command and the code comes back.
    python3 - "$SP" "$N" >"$T/out" 2>"$T/err" <<'EOF'
import fcntl, os, pty, select, struct, sys, termios, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "exec", "-it", sys.argv[2], "--", "sh", "-c",
                           "read x; stty size; echo got $x; exit 6"])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
# The size is sent just after the session starts; type once it is there.
start = time.time()
out, sent, end = b"", False, start + 15
while time.time() < end:
    if not sent and time.time() > start + 1:
        os.write(fd, b"abc\r")
        sent = True
    r, _, _ = select.select([fd], [], [], 0.1)
    if r:
        try:
            d = os.read(fd, 4096)
        except OSError:
            break
        if not d:
            break
        out += d
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
sys.stdout.write("exit=%d\n" % os.waitstatus_to_exitcode(st))
EOF
    out_has "33 101" "exec -t passes the terminal size"
    out_has "got abc" "exec -it forwards typed input"
    out_has "exit=6" "exec -it exits with the command's code"
fi

printf 'piped\n' >"$T/in"
timeout 30 "$SP" exec -it "$N" -- cat <"$T/in" >"$T/out" 2>"$T/err"
rc=$?
expect_rc 0 "exec -it with piped stdin ends at its end (^D)"
out_has "piped" "exec -it with piped stdin echoes through the terminal"

# ------------------------------------------------------------ fs NAME --
runin $'written by the host\n' fs "$N" write notes/host.txt
expect 0 "fs NAME write"
run fs "$N" read notes/host.txt
out_is 'written by the host\n' "fs NAME read round trip"
run sh "$N" 'cat notes/host.txt && echo appended >> notes/host.txt && echo made-inside > inside.txt'
expect_rc 0 "the container reads and writes a file the host wrote"
run fs "$N" cat notes/host.txt
out_is 'written by the host\nappended\n' "the host reads the container's append"
run fs "$N" read inside.txt
out_is 'made-inside\n' "fs NAME reads a file written via sh"
run fs --json "$N" stat /workspace/inside.txt
json "fs NAME --json with a /workspace path" 'j["ok"] and j["type"] == "file"'
run fs "$N" read ../../../etc/passwd
expect 1 "fs NAME refuses a path leaving the workspace"
run fs no-such-box read x
expect 1 "fs with a missing sandbox"

# ------------------------------------------------------------- events --
# sh, exec and fs each leave one "command" record in events.jsonl, with
# call numbers that are unique and increase in file order.
EV=$SANDPOD_HOME/sandboxes/$N/events.jsonl
run sh "$N" 'exit 4'
run exec "$N" -- true
run fs "$N" read notes/host.txt
check "events.jsonl has unique, increasing calls and the CLI's commands" python3 -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
calls = [r["call"] for r in recs]
assert calls == sorted(set(calls)), calls
cmds = [r for r in recs if r.get("event") == "command" and r.get("source") == "cli"]
last = {c["command"]: c for c in cmds}
assert last["sh"]["summary"] == "exit 4" and last["sh"]["status"] == 4 and not last["sh"]["ok"], last["sh"]
assert last["exec"]["summary"] == "true" and last["exec"]["ok"], last["exec"]
assert last["fs"]["summary"] == "read notes/host.txt" and last["fs"]["ok"], last["fs"]
assert cmds[-3:] == [last["sh"], last["exec"], last["fs"]]
assert all(r["sandbox"] == sys.argv[2] for r in cmds)
' "$EV" "$N"

# ---------------------------------------------- stop, start, restart --
run stop --time 1 "$N"
expect 0 "stop"
out_is "$N\n" "stop prints the name"
run ls --json
json "ls shows the stopped state" "any(s['name'] == '$N' and s['running'] is False and s['state'] in ('exited', 'stopped') for s in j['sandboxes'])"
run sh "$N" 'echo hi'
expect 1 "sh on a stopped sandbox"
err_has "sandpod start $N" "sh on a stopped sandbox names 'sandpod start'"
run sh --json "$N" 'echo hi'
expect 1 "sh --json on a stopped sandbox"
json "sh --json error object" 'j["ok"] is False and "sandpod start" in j["error"]["message"]'
run exec "$N" -- true
expect_rc 125 "exec on a stopped sandbox exits 125 (sandpod's own failure)"
check "exec's own failure is one 'sandpod:' line" sh -c '[ "$(wc -l <"$1")" = 1 ] && grep -q "^sandpod: " "$1"' _ "$T/err"
err_has "sandpod start $N" "exec on a stopped sandbox names 'sandpod start'"
run start "$N"
expect 0 "start"
run sh "$N" 'cat inside.txt'
expect_rc 0 "sh works after start"
out_is 'made-inside\n' "the workspace survives stop and start"
run restart "$N"
expect 0 "restart"
run sh "$N" 'echo again'
out_is 'again\n' "sh works after restart"
run start --json "$N" no-such-box
expect 1 "start with one missing sandbox"
json "start --json reports each" "j['ok'] is False and j['sandboxes'][0]['ok'] is True and j['sandboxes'][1]['ok'] is False"

# -------------------------------------------------------------------- rm --
run sh "$N" 'printf x >suid && chmod 6755 suid && mkdir -p d && printf y >d/sgid && chmod 2711 d/sgid'
expect 0 "the workload makes set-id files"
run rm "$N"
expect 1 "rm refuses a running sandbox"
err_has "--force" "rm says how to go on"
run rm --force --keep-workspace "$N"
expect 0 "rm --force --keep-workspace"
out_has "$SANDPOD_HOME/kept-workspaces/$N" "rm prints where the workspace went"
check "the kept workspace holds the files" test -f "$SANDPOD_HOME/kept-workspaces/$N/inside.txt"
check "a kept set-uid file keeps no set-id bit" test "$(stat -c %a "$SANDPOD_HOME/kept-workspaces/$N/suid")" = 755
check "a kept set-gid file keeps no set-id bit" test "$(stat -c %a "$SANDPOD_HOME/kept-workspaces/$N/d/sgid")" = 711
check "the state folder is gone" test ! -e "$SANDPOD_HOME/sandboxes/$N"
run ls
out_lacks "$N " "ls no longer shows the sandbox"
run rm "$N"
expect 1 "rm of a missing sandbox"
run rm --force "$N"
expect 0 "rm --force of a missing sandbox"

# ------------------------------------------------------------------- run --
run run -- echo ok
expect_rc 0 "run -- echo ok"
out_is 'ok\n' "run prints the command's output"
runin $'piped\n' run --mount "$SRC" -- sh -c 'cat; cat hello.txt; exit 4'
expect_rc 4 "run exits with the command's code"
out_is 'piped\nhello from the host\n' "run forwards stdin and hydrates the mount"
run run -- sh -c 'exit 1'
expect_rc 1 "run: the command's own 1 stays 1"
run run --mount "$T/no-such-folder" -- true
expect_rc 125 "run: sandpod's own failure (a mount that does not exist) is 125"
check "run: its failure is one 'sandpod: ' line" [ "$(grep -c '^sandpod: ' "$T/err")" -eq 1 ]
run run -- no-such-command-here
expect_rc 127 "run: a command not found in the sandbox is 127"
"$SP" run -- sleep 60 <"$T/empty" >"$T/out" 2>"$T/err" &
bg=$!
for _ in $(seq 1 100); do
    [ -n "$(ls -A "$SANDPOD_HOME/sandboxes" 2>/dev/null)" ] && break
    sleep 0.1
done
sleep 0.5
kill -TERM "$bg"
wait "$bg"
rc=$?
expect_rc 143 "run ends on SIGTERM with 128+15"
check "run leaves no sandbox behind" test -z "$(ls -A "$SANDPOD_HOME/sandboxes" 2>/dev/null)"

# -------------------------------------------------------------------- gc --
# Orphans: a state folder deleted by hand, and a sandbox.json that names
# another container (a create killed between the container and the save).
# gc judges every state root on the service, so each check looks only at
# this run's containers.
run create --name gc-live
expect 0 "create gc-live"
run create --name gc-lost
expect 0 "create gc-lost"
run create --name gc-stale
expect 0 "create gc-stale"
lost_cid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["container_id"])' \
    "$SANDPOD_HOME/sandboxes/gc-lost/sandbox.json")
stale_cid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["container_id"])' \
    "$SANDPOD_HOME/sandboxes/gc-stale/sandbox.json")
rm -rf "$SANDPOD_HOME/sandboxes/gc-lost"
python3 - "$SANDPOD_HOME/sandboxes/gc-stale/sandbox.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["container_id"] = "0" * 64
json.dump(j, open(sys.argv[1], "w"))
PY
run gc --dry-run --json
expect 0 "gc --dry-run"
json "gc --dry-run lists both orphans, removes nothing" \
    "sorted(o['state_dir'].rsplit('/',1)[1] for o in j['orphans'] if (o['state_dir'] or '').startswith('$SANDPOD_HOME/')) == ['gc-lost', 'gc-stale'] and not any(o['removed'] for o in j['orphans'])"
# --state-root: only the containers of that state root are judged.
# (--url names the service this test's sandboxes use, found as the library
# finds it: $SANDPOD_URL, the caller's shared service, else the private one
# in $SANDPOD_HOME.)
svc_url=${SANDPOD_URL:-}
if [ -z "$svc_url" ]; then
    for sock in ${XDG_RUNTIME_DIR:+"$XDG_RUNTIME_DIR/podman/podman.sock"} \
        $([ "$(id -u)" = 0 ] && echo /run/podman/podman.sock) "$SANDPOD_HOME/podman.sock"; do
        if python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' \
            "$sock" 2>/dev/null; then
            svc_url=unix://$sock
            break
        fi
    done
fi
run gc --dry-run --json --state-root "$T/no-such-root" --url "$svc_url"
expect 0 "gc --dry-run --state-root elsewhere"
json "gc --state-root elsewhere leaves this root's orphans alone" \
    "not any((o['state_dir'] or '').startswith('$SANDPOD_HOME/') for o in j['orphans'])"
run gc --dry-run --json --state-root "$SANDPOD_HOME"
expect 0 "gc --dry-run --state-root this one"
json "gc --state-root judges that root's containers and no other" \
    "sorted(o['state_dir'].rsplit('/',1)[1] for o in j['orphans'] if o['kind'] == 'container') == ['gc-lost', 'gc-stale']"
json "gc --json says what kind each one is" \
    "all(o['kind'] == 'container' and o['pid'] is None for o in j['orphans'] if (o['state_dir'] or '').startswith('$SANDPOD_HOME/')) and all(o['kind'] in ('container', 'runtime', 'service') for o in j['orphans'])"
check "dry run kept the lost container" podman container exists "$lost_cid"
# A held lock means busy (a create may be half-way): left alone.
flock "$SANDPOD_HOME/sandboxes/gc-stale/lock" "$SP" gc --json <"$T/empty" >"$T/out" 2>"$T/err"
rc=$?
expect 0 "gc while gc-stale is locked"
json "gc removed the lost one and skipped the locked one" \
    "[o['state_dir'].rsplit('/',1)[1] for o in j['orphans'] if (o['state_dir'] or '').startswith('$SANDPOD_HOME/')] == ['gc-lost'] and all(o['removed'] for o in j['orphans'] if (o['state_dir'] or '').startswith('$SANDPOD_HOME/'))"
container_gone() { ! podman container exists "$1"; }
check "the lost container is gone" container_gone "$lost_cid"
check "the locked sandbox's container stays" podman container exists "$stale_cid"
run gc
expect 0 "gc"
out_has "gc-stale" "gc names what it removed"
check "the stale container is gone" container_gone "$stale_cid"
run sh gc-live 'echo alive'
out_is 'alive\n' "gc left the live sandbox alone"
run rm --force gc-live gc-stale
expect 0 "rm the gc sandboxes"

# --------------------------------------------------- incomplete sandboxes --
# A create killed mid-hydration leaves a state folder without sandbox.json:
# ls shows it, gc collects it once its lock is free and it is a minute old,
# rm removes it. Made once by killing a create (many small files make the
# hydration long enough to land in), once by hand for determinism.
python3 - "$T/big" <<'PY'
import os, sys
for d in range(100):
    p = os.path.join(sys.argv[1], "d%03d" % d)
    os.makedirs(p)
    for f in range(200):
        with open(os.path.join(p, "f%03d" % f), "w") as fh:
            fh.write("x")
PY
HK=$SANDPOD_HOME/sandboxes/half-killed
made=0
for _ in $(seq 1 20); do
    "$SP" create --name half-killed --mount "$T/big" <"$T/empty" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 500); do
        [ -d "$HK/workspace" ] && break
        sleep 0.01
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if [ -d "$HK" ] && [ ! -e "$HK/sandbox.json" ]; then
        made=1
        break
    fi
    "$SP" rm --force half-killed >/dev/null 2>&1
done
check "a create killed mid-hydration left a state folder without sandbox.json" [ "$made" = 1 ]
HH=$SANDPOD_HOME/sandboxes/half-hand
mkdir -p "$HH/workspace/sub" "$T/outside"
: >"$HH/lock"
printf 'keep me\n' >"$T/outside/canary"
ln -s "$T/outside" "$HH/workspace/out"
ln -s "$T/outside/canary" "$HH/workspace/sub/canary-link"
run ls
expect 0 "ls with incomplete sandboxes"
if grep -qE '^half-hand +incomplete +- +- +-$' "$T/out" && grep -qE '^half-killed +incomplete ' "$T/out"; then
    ok
else
    bad "ls shows the incomplete sandboxes: $(cat "$T/out")"
fi
run ls --json
json "ls --json shows them, state incomplete" \
    "[(s['name'], s['state'], s['running'], s['container'], s['state_dir']) for s in j['sandboxes'] if s['name'].startswith('half-')] == [('half-hand', 'incomplete', False, None, '$HH'), ('half-killed', 'incomplete', False, None, '$HK')]"
run ls --quiet
out_lacks "half-" "ls --quiet names the complete sandboxes only"
# While a create holds the lock: creating, and rm and gc leave it alone.
flock "$HH/lock" "$SP" ls --json <"$T/empty" >"$T/out" 2>"$T/err"
json "ls says creating while a create holds the lock" \
    "[s['state'] for s in j['sandboxes'] if s['name'] == 'half-hand'] == ['creating']"
flock "$HH/lock" "$SP" rm --force half-hand <"$T/empty" >"$T/out" 2>"$T/err"
rc=$?
expect 1 "rm --force of a sandbox being created"
err_has "being created" "rm says the sandbox is being created"
check "rm left the locked folder alone" test -d "$HH/workspace/sub"
# gc: a folder changed within the minute may be a create about to lock it
# (changed now, not when this test made it: a slow run gets there later).
touch "$HH" "$HK"
run gc --dry-run --json --state-root "$SANDPOD_HOME"
expect 0 "gc --dry-run with fresh incomplete sandboxes"
json "gc leaves fresh incomplete sandboxes alone and counts them" \
    "not any(o['kind'] == 'incomplete' for o in j['orphans']) and j['incomplete_busy'] == 2"
touch -d '2 minutes ago' "$HH" "$HK"
run gc --dry-run --json --state-root "$SANDPOD_HOME"
json "gc --dry-run lists the incomplete sandboxes, removes nothing" \
    "sorted(o['container'] for o in j['orphans'] if o['kind'] == 'incomplete') == ['half-hand', 'half-killed'] and not any(o['removed'] for o in j['orphans']) and j['incomplete_busy'] == 0"
check "gc --dry-run kept them" test -d "$HH/workspace/sub" -a -d "$HK/workspace"
run gc --dry-run --state-root "$SANDPOD_HOME"
out_has "would remove incomplete sandbox half-killed: its create never finished" \
    "gc --dry-run says why"
flock "$HH/lock" "$SP" gc --json --state-root "$SANDPOD_HOME" <"$T/empty" >"$T/out" 2>"$T/err"
rc=$?
expect 0 "gc while half-hand is locked"
json "gc removed the free incomplete sandbox, skipped the locked one" \
    "[(o['container'], o['removed']) for o in j['orphans'] if o['kind'] == 'incomplete'] == [('half-killed', True)] and j['incomplete_busy'] == 1"
check "half-killed is gone" test ! -e "$HK"
check "half-hand stays" test -d "$HH/workspace/sub"
run rm half-hand
expect 0 "rm of an incomplete sandbox"
out_is 'half-hand (incomplete: a create that never finished left it)\n' "rm says it was incomplete"
check "half-hand is gone" test ! -e "$HH"
file_is "$T/outside/canary" 'keep me\n' "removal followed no symlink out"
check "nothing was left aside" sh -c '! ls -d "$1"/removed-* 2>/dev/null' _ "$SANDPOD_HOME"
mkdir -p "$SANDPOD_HOME/sandboxes/half-3/workspace"
run rm --keep-workspace half-3
expect 1 "rm --keep-workspace of an incomplete sandbox"
err_has "is incomplete" "rm --keep-workspace says why it keeps nothing"
check "rm --keep-workspace removed nothing" test -d "$SANDPOD_HOME/sandboxes/half-3/workspace"
run rm --force --json half-3 no-such-box
expect 0 "rm --force --json of an incomplete sandbox"
json "rm --json says it was incomplete" \
    "j['ok'] and [(s['name'], s['incomplete']) for s in j['sandboxes']] == [('half-3', True)]"

# ------------------------------------------------------------- gc --kept --
# Sandboxes MCP sessions made (made_by "mcp"; no CLI flag sets it, so the
# test writes it) go when stopped and unused for --older-than.
for n in kept-old kept-new kept-run mine-old; do
    run create --name "$n"
    expect 0 "create $n"
done
for n in kept-old kept-new mine-old; do
    run stop "$n"
    expect 0 "stop $n"
done
for n in kept-old kept-new kept-run; do
    python3 - "$SANDPOD_HOME/sandboxes/$n/sandbox.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["made_by"] = "mcp"
json.dump(j, open(sys.argv[1], "w"))
PY
done
# Ten days of seconds, not '10 days ago': that is ten calendar days in
# local time, an hour short across a change to summer time, and gc would
# then say "last used 9d ago".
for n in kept-old kept-run mine-old; do
    touch -d "@$(($(date +%s) - 10 * 86400))" "$SANDPOD_HOME/sandboxes/$n/sandbox.json" \
        "$SANDPOD_HOME/sandboxes/$n/events.jsonl"
done
old_cid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["container_id"])' \
    "$SANDPOD_HOME/sandboxes/kept-old/sandbox.json")
run inspect --json kept-old
json "inspect --json shows made_by" "j['made_by'] == 'mcp'"
run inspect kept-old
if grep -qE '^made by: +mcp$' "$T/out"; then ok; else bad "inspect shows made by: $(cat "$T/out")"; fi
run inspect --json mine-old
json "inspect --json: made_by null for a sandbox a user made" "j['made_by'] is None"
run inspect mine-old
out_lacks "made by" "inspect prints no made by for a sandbox a user made"
run ls --json
json "ls --json shows made_by" \
    "{s['name']: s['made_by'] for s in j['sandboxes'] if s['name'].startswith(('kept-', 'mine-'))} == {'kept-new': 'mcp', 'kept-old': 'mcp', 'kept-run': 'mcp', 'mine-old': None}"
run gc --kept --dry-run --json --state-root "$SANDPOD_HOME"
expect 0 "gc --kept --dry-run"
json "gc --kept: a week by default; only the stopped, unused MCP sandbox" \
    "[(o['container'], o['removed']) for o in j['orphans'] if o['kind'] == 'kept'] == [('kept-old', False)]"
run gc --kept --older-than 30d --dry-run --json --state-root "$SANDPOD_HOME"
json "gc --kept --older-than 30d: none" "not any(o['kind'] == 'kept' for o in j['orphans'])"
run gc --kept --older-than 1d12h --dry-run --state-root "$SANDPOD_HOME"
out_has "would remove kept sandbox kept-old: an MCP session made and kept it; exited; last used 10d ago" \
    "gc --kept --dry-run says why"
check "the dry run removed nothing" test -f "$SANDPOD_HOME/sandboxes/kept-old/sandbox.json"
flock "$SANDPOD_HOME/sandboxes/kept-old/lock" "$SP" gc --kept --json --state-root "$SANDPOD_HOME" \
    <"$T/empty" >"$T/out" 2>"$T/err"
rc=$?
expect 0 "gc --kept while kept-old is locked"
json "gc --kept leaves a locked sandbox alone" "not any(o['kind'] == 'kept' for o in j['orphans'])"
run gc --kept --state-root "$SANDPOD_HOME"
expect 0 "gc --kept"
out_has "removed kept sandbox kept-old" "gc --kept says what it removed"
check "kept-old is gone" test ! -e "$SANDPOD_HOME/sandboxes/kept-old"
check "kept-old's container is gone" container_gone "$old_cid"
for n in kept-new kept-run mine-old; do
    check "gc --kept left $n" test -f "$SANDPOD_HOME/sandboxes/$n/sandbox.json"
done
run gc --kept --older-than 0s --json --state-root "$SANDPOD_HOME"
expect 0 "gc --kept --older-than 0s"
json "gc --kept never removes a running sandbox" \
    "[(o['container'], o['removed']) for o in j['orphans'] if o['kind'] == 'kept'] == [('kept-new', True)]"
run sh kept-run 'echo alive'
out_is 'alive\n' "the running MCP sandbox is alive"
run rm --force kept-run mine-old
expect 0 "rm the --kept sandboxes"
run gc --older-than 1d
expect 2 "gc --older-than without --kept"
run gc --kept --older-than soon
expect 2 "gc --kept with a bad --older-than"
run gc --kept --older-than 7
expect 2 "gc --kept --older-than without a unit"

# ------------------------------------------------------------- bad usage --
run create --bogus
expect 2 "create with an unknown option"
run create --memory 12X
expect 2 "create with a bad size"
run create --cpus 0
expect 2 "create with zero CPUs"
run create --network bridge
expect 2 "create with a bad network"
run create --mount 'src='
expect 2 "create with a bad mount spec"
run sh only-a-name
expect 2 "sh without a command"
run sh a b c
expect 2 "sh with an unquoted command line"
run exec some-box
expect 2 "exec without a command"
run exec
expect 2 "exec without a name"
run stop --time soon some-box
expect 2 "stop with a bad --time"
run start --time 3 some-box
expect 2 "start with --time"
run rm
expect 2 "rm without a name"
run inspect a b
expect 2 "inspect with two names"
run run
expect 2 "run without a command"
run ls extra
expect 2 "ls with an operand"
run image frobnicate
expect 2 "image with an unknown operation"
run gc extra
expect 2 "gc with an operand"

finish
