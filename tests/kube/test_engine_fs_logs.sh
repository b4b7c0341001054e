#!/usr/bin/env bash
# `sandpod fs` and `sandpod logs` on a sandbox of a kubernetes engine,
# through the Podman-backed fake API server (fake_podman.py).
#
# fs: the same command line runs in the peer on its workspace; every
# operation's stdout, stderr and exit status are compared with the same
# operation run here with `fs --root` on a folder holding the same files
# (text, binary through --base64 and cat, stdin for write/insert/patch,
# edit's host files); escapes (.., absolute paths, a symlink out) are
# refused there as here.
# logs: the workload container's log from GET pods/POD/log: what the agent
# (pid 1) printed, the same bytes as `kubectl logs POD -c workload`; --tail
# and --timestamps; --json refused in one line; -f follows, and ends when
# the Pod is deleted or on SIGINT; a missing sandbox is one clear line.
#
# Usage: test_engine_fs_logs.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_engine_fs_logs.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)

PREFIX=sandpod-fslogs
. "$SRC/tests/cmd/podman_lib.sh"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
. "$HERE/fake_lib.sh"
fake_engine "fl$$-"
B=fl$$-a

run create --engine fake --name "$B" --image "$WIMG"
skip_if_play_fails
expect 0 "create --engine fake"
[ "$rc" -eq 0 ] || { finish; exit 1; }
POD=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["remote"]["pod"])' \
    "$SANDPOD_HOME/sandboxes/$B/sandbox.json")
kc() { kubectl --kubeconfig "$T/kubeconfig" "$@"; }

# ---------------------------------------------------------------------- fs --
L=$T/local
mkdir -p "$L"
head -c 70000 /dev/urandom >"$T/bin"
printf 'a\0b\377\n' >>"$T/bin"
base64 "$T/bin" >"$T/bin.b64"
printf 'one\ntwo\nthree\n' >"$T/text"
printf 'two\n' >"$T/old"
printf 'TWO\nand a half\n' >"$T/new"
cat >"$T/patch" <<'EOP'
*** Begin Patch
*** Update File: t.txt
@@
 one
-TWO
+2
*** End Patch
EOP

# untimed FILE: the JSON in FILE with the value of every time field (when
# the two workspaces' files were written, read, changed) made "T": those
# legitimately differ; which fields there are, and all else, must not.
untimed() {
    python3 - "$1" <<'EOPY'
import json, re, sys
TIME = re.compile(r"^(mtime|atime|ctime|btime)(_ns)?$|^(modified|accessed|changed|created)$")
def strip(v):
    if isinstance(v, dict):
        return {k: "T" if TIME.match(k) else strip(x) for k, x in v.items()}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
with open(sys.argv[1]) as f:
    docs = [json.loads(line) for line in f]
with open(sys.argv[1], "w") as f:
    for d in docs:
        f.write(json.dumps(strip(d)) + "\n")
EOPY
}

# both [--json-times] STDIN ARGS...: `fs ARGS` here on $L and `fs B ARGS`
# remotely, with STDIN (a file) on stdin; the same stdout, stderr and
# status (with --json-times: stdout is JSON compared through untimed).
n=0
both() {
    local times=
    [ "$1" = --json-times ] && { times=1; shift; }
    local in=$1
    shift
    n=$((n + 1))
    "$SP" fs --root "$L" "$@" <"$in" >"$T/l.out" 2>"$T/l.err"
    local lrc=$?
    "$SP" fs "$B" "$@" <"$in" >"$T/out" 2>"$T/err"
    rc=$?
    if [ -n "$times" ]; then
        cp "$T/out" "$T/out.raw"
        untimed "$T/out" && untimed "$T/l.out" ||
            bad "fs $* (#$n): stdout is not JSON: $(head -c 200 "$T/out.raw")"
        grep -q '"mtime": "T"' "$T/out" || bad "fs $* (#$n): no mtime in $(head -c 200 "$T/out.raw")"
    fi
    if [ "$rc" -ne "$lrc" ]; then
        bad "fs $* (#$n): exit $rc remotely, $lrc here"
    elif ! cmp -s "$T/out" "$T/l.out"; then
        bad "fs $* (#$n): stdout differs: $(head -c 200 "$T/out" | od -c | head -n 3)"
        diff "$T/l.out" "$T/out" | head -n 5
    elif ! cmp -s "$T/err" "$T/l.err"; then
        bad "fs $* (#$n): stderr differs: '$(head -n 1 "$T/err")' vs '$(head -n 1 "$T/l.err")'"
    else
        ok
    fi
}
E=$T/empty
# pin_times: every entry of both workspaces gets the same times, 2000-01-01
# 00:00:00 UTC. The two sides write their files moments apart, and a text
# listing shows mtimes to the minute: a minute that turned in between
# (21:38 here, 21:39 there) failed the comparison once. The clock is taken
# out of it, not blurred: the times shown must still agree.
PINNED=946684800
pin_times() {
    find "$L" -exec touch -h -d "@$PINNED" {} + &&
        "$SP" sh "$B" "find /workspace -exec touch -h -d @$PINNED {} +" <"$E" >"$T/pin.out" 2>&1 ||
        bad "pin the workspaces' times: $(head -c 300 "$T/pin.out")"
}
# one_line DESC: the last failure said why in exactly one `sandpod: ` line.
one_line() {
    check "$1: one 'sandpod: ' line" sh -c "[ \"\$(wc -l <'$T/err')\" -eq 1 ] && grep -q '^sandpod: ' '$T/err'"
}
both "$T/text" write t.txt
both "$E" read t.txt
both "$E" read t.txt --json
both "$E" cat t.txt
both "$T/bin.b64" write --base64 d/bin.dat
both "$E" cat d/bin.dat
"$SP" fs "$B" cat d/bin.dat <"$E" >"$T/bin.got" 2>"$T/err"
check "fs cat of a binary file gives its bytes" cmp -s "$T/bin.got" "$T/bin"
both "$E" read --base64 d/bin.dat
both "$E" read d/bin.dat
both --json-times "$E" stat d/bin.dat --json
pin_times
both "$E" ls
check "fs ls shows the pinned times" grep -q '2000-01-01 00:00' "$T/out"
both --json-times "$E" ls --depth 3 --json
both "$E" exists t.txt
both "$E" exists nope.txt
expect_rc 1 "fs exists of a missing file exits 1"
both "$E" read nope.txt
expect 1 "fs read of a missing file"
one_line "fs read of a missing file"
both "$E" write --mode create t.txt
both "$E" mkdir -p x/y
both "$E" glob '**/*.dat'
both "$E" grep -i TWO
both "$E" edit t.txt --old-file "$T/old" --new-file "$T/new"
both "$T/old" edit t.txt --old-file - --new "two\n"
both "$E" read t.txt
both "$T/text" insert t.txt --line 1
both "$T/patch" patch
both "$E" cat t.txt
both "$E" rm -r x
both --json-times "$E" ls --json
# Escapes: refused by the peer's fs code as by this one.
both "$E" read ../etc/passwd
expect 1 "fs read ../etc/passwd is refused remotely"
err_has "escapes the workspace" "fs read ../etc/passwd: why"
one_line "fs read ../etc/passwd"
both "$T/text" write /etc/x
expect 1 "fs write /etc/x is refused remotely"
both "$T/text" write ../../x
ln -s /etc/passwd "$L/link"
run sh "$B" 'ln -s /etc/passwd /workspace/link'
expect 0 "a symlink out made in the workload"
both "$E" read link
expect 1 "fs read of a symlink out is refused remotely"
err_has "symlink points" "fs read link: why"
# --state-root (before or after NAME, joined or not) is this host's, not
# passed on to the peer: the same answer as without it.
"$SP" fs "$B" read t.txt >"$T/plain.out" 2>&1
for sr in "--state-root $SANDPOD_HOME" "--state-root=$SANDPOD_HOME"; do
    # shellcheck disable=SC2086  # two words, or one
    run fs $sr "$B" read t.txt
    expect 0 "fs $sr NAME read"
    check "fs $sr NAME read reads the file" cmp -s "$T/out" "$T/plain.out"
done
run fs "$B" read t.txt --state-root "$SANDPOD_HOME"
expect 0 "fs NAME read PATH --state-root DIR"
check "fs NAME read PATH --state-root DIR reads the file" cmp -s "$T/out" "$T/plain.out"
run fs "$B" read --root /tmp t.txt
expect 2 "fs NAME with --root is bad usage"
run fs nosuch-$$ read t.txt
expect 1 "fs on a missing sandbox"
err_has "nosuch-$$" "fs on a missing sandbox names it"

# -------------------------------------------------------------------- logs --
run logs "$B"
expect 0 "logs"
out_has "sandpod-agent: ready" "logs shows what the agent (pid 1) printed"
cp "$T/out" "$T/logs.out"
kc logs "$POD" -c workload >"$T/kc.out" 2>"$T/kc.err"
check "kubectl logs -c workload gives the same bytes" cmp -s "$T/kc.out" "$T/logs.out"
run logs --tail 1 "$B"
expect 0 "logs --tail 1"
check "logs --tail 1 is the last line" sh -c "[ \"\$(wc -l <'$T/out')\" -eq 1 ] && [ \"\$(cat '$T/out')\" = \"\$(tail -n 1 '$T/logs.out')\" ]"
run logs --timestamps "$B"
expect 0 "logs --timestamps"
check "logs --timestamps: each line starts with an RFC 3339 time" sh -c "! grep -Evq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9:]+) ' '$T/out'"
kc logs --timestamps "$POD" -c workload >"$T/kc.out" 2>"$T/kc.err"
check "kubectl logs --timestamps agrees" cmp -s "$T/kc.out" "$T/out"
run logs --since 1h "$B"
expect 0 "logs --since 1h"
check "logs --since 1h has the agent's start" cmp -s "$T/out" "$T/logs.out"
run logs --since 2000-01-01T00:00:00Z "$B"
expect 0 "logs --since an RFC 3339 time"
check "logs --since 2000 has everything" cmp -s "$T/out" "$T/logs.out"
run logs --since "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%S.5+00:00)" "$B"
expect 0 "logs --since a future time with fraction and offset"
check "logs --since the future is empty" test ! -s "$T/out"
run logs --since $(($(date +%s) + 3600)) "$B"
expect 0 "logs --since future Unix seconds"
check "logs --since future Unix seconds is empty" test ! -s "$T/out"
run logs --since "$(date +%s -d '-1 hour')" "$B"
expect 0 "logs --since Unix seconds an hour ago"
check "logs --since an hour ago has the agent's start" cmp -s "$T/out" "$T/logs.out"
for bad in yesterday 10x 2024-05-01 "2024-05-01 10:00:00Z" 2024-05-01T10:00:00 ""; do
    run logs --since "$bad" "$B"
    expect 2 "logs --since '$bad' is bad usage"
done
err_has "not a time" "logs --since bad: why"
run logs --json "$B"
expect 1 "logs --json on a remote sandbox is refused"
err_has "merges stdout and stderr" "logs --json: why"
one_line "logs --json on a remote sandbox"
run logs nosuch-$$
expect 1 "logs of a missing sandbox"
err_has "nosuch-$$" "logs of a missing sandbox names it"
one_line "logs of a missing sandbox"

# -f: follows what pid 1 prints, ends on SIGINT (and SIGTERM) at once,
# leaving nothing behind: not its reader in the fake (`podman logs -f`).
# A background job of a non-interactive shell starts with SIGINT ignored:
# python3 -c "$SIG_DEFAULT" CMD... runs CMD with SIGINT's default, as a
# terminal's ^C finds it (in place: $! is CMD's pid).
SIG_DEFAULT='import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])'
readers() { pgrep -f "podman logs --follow $POD-workload" | wc -l; }
# shows TEXT FILE: wait until TEXT is in FILE, by what -f printed, not by a
# pause (up to 30 s: a sanitized build on a loaded machine is slow to start).
shows() {
    for _ in $(seq 300); do grep -q "$1" "$2" && return 0; sleep 0.1; done
    return 1
}
for sig in INT TERM; do
    /usr/bin/python3 -c "$SIG_DEFAULT" "$SP" logs -f "$B" >"$T/f1.out" 2>"$T/f1.err" &
    F1=$!
    shows "sandpod-agent: ready" "$T/f1.out"
    run sh "$B" "echo followed-line-$sig >/proc/1/fd/1"
    shows "followed-line-$sig" "$T/f1.out"
    check "logs -f shows a line pid 1 writes later ($sig)" grep -q "followed-line-$sig" "$T/f1.out"
    check "logs -f is still running ($sig)" kill -0 "$F1"
    check "the fake follows with one podman logs ($sig)" test "$(readers)" -eq 1
    kill -"$sig" "$F1"
    for _ in $(seq 50); do kill -0 "$F1" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$F1" 2>/dev/null; then
        bad "logs -f did not end within 5 s of SIG$sig"
        kill -KILL "$F1"
    fi
    wait "$F1"
    frc=$?
    want=$((128 + $(kill -l "$sig")))
    check "logs -f ends on SIG$sig as killed by it (exit $frc, want $want)" test "$frc" -eq "$want"
    check "logs -f said nothing on SIG$sig" test ! -s "$T/f1.err"
    for _ in $(seq 300); do [ "$(readers)" -eq 0 ] && break; sleep 0.1; done
    check "nothing of logs -f is left in the fake after SIG$sig" test "$(readers)" -eq 0
done

# -f ends when the Pod is deleted: deleted once -f follows (it printed the
# log so far). A fixed second here was not always enough under load: the
# Pod went before -f asked for its log, and -f had nothing to print.
"$SP" logs -f "$B" >"$T/f2.out" 2>"$T/f2.err" &
F2=$!
shows "sandpod-agent: ready" "$T/f2.out"
check "logs -f runs" kill -0 "$F2"
kc delete pod "$POD" --wait=false >/dev/null 2>&1
for _ in $(seq 300); do kill -0 "$F2" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$F2" 2>/dev/null; then
    bad "logs -f did not end within 30 s of the Pod's deletion"
    kill "$F2"
else
    ok
fi
wait "$F2"
rc=$?
check "logs -f after the Pod's deletion exits 0 (exit $rc: $(head -n 1 "$T/f2.err"))" test "$rc" -eq 0
check "logs -f printed the log before it ended" grep -q "sandpod-agent: ready" "$T/f2.out"
for _ in $(seq 100); do podman pod exists "$POD" || break; sleep 0.2; done
run logs "$B"
expect 1 "logs of a sandbox whose Pod is gone"
err_has "$B" "logs of a gone Pod names the sandbox"
one_line "logs of a gone Pod"
run rm --force "$B"
finish
