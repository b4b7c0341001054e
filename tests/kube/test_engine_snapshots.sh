#!/usr/bin/env bash
# The library's and the Python package's snapshot operations on a sandbox
# of a kubernetes engine, through the Podman-backed fake (fake_podman.py):
# sp_sandbox_snapshot_create/list/get/restore/delete/diff ask the peer
# beside the workload, whose store it is; Sandbox.snapshot, snapshots,
# get_snapshot, diff, restore, delete_snapshot, export and import_ (and
# their asyncio twins) give the same records, diffs and exceptions as on a
# local sandbox (remote_snapshots.py). The CLI's `snapshots NAME SNAP`
# agrees with what Python took. Interactive sessions (sp_session_*) run
# through the peer's exec_command and write_stdin (remote_sessions.py).
# Sandbox.fs gives the Filesystem protocol through the peer's tools, with
# HostFilesystem's results and exceptions for the same tree (remote_fs.py).
#
# Usage: test_engine_snapshots.sh PATH/TO/sandpod
set -u

SP=${1:?usage: test_engine_snapshots.sh PATH/TO/sandpod}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
PREFIX=sandpod-rsnap
. "$SRC/tests/cmd/podman_lib.sh"
podman info >/dev/null 2>&1 || skip "podman does not work for $(id -un): $(podman info 2>&1 | tail -n 1)"
LIB=$(dirname "$SP")/libsandpod.so
[ -f "$LIB" ] || skip "no libsandpod.so beside $SP"
# A sanitized library needs its runtimes loaded before the interpreter
# (as tests/contrib/python/run.sh does); CPython's own allocations are not
# leaks of ours. These scripts start no other program, so the preload
# reaches only them.
PRE=$(ldd "$LIB" 2>/dev/null | awk '/lib(asan|ubsan)\.so/ {print $3}' | paste -sd:)
py() {
    if [ -n "$PRE" ]; then
        LD_PRELOAD=$PRE ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 /usr/bin/python3 "$@"
    else
        /usr/bin/python3 "$@"
    fi
}
. "$HERE/fake_lib.sh"
fake_engine "rs$$-"
B=rs$$-a

run create --engine fake --name "$B" --image "$WIMG"
skip_if_play_fails
expect 0 "create --engine fake"
run sh "$B" 'printf "one\n" >/workspace/one.txt'
expect 0 "a file in the workspace"

mkdir -p "$T/py"
SANDPOD_LIBRARY=$LIB SANDPOD_TOOLS_LIBRARY=$(dirname "$SP")/libsandpod_tools.so \
    PYTHONPATH=$SRC/contrib/python py "$HERE/remote_snapshots.py" "$B" "$T/py" \
    >"$T/out" 2>"$T/err"
rc=$?
ran_ok "Python snapshots on the engine (take, list, get, diff, restore, delete, export, import, bad refs, asyncio)" "$T/out" "$T/err"
out_is 'ok\n' "Python: every check ran"

# Interactive sessions on the engine: the peer's exec_command/write_stdin.
SANDPOD_LIBRARY=$LIB SANDPOD_TOOLS_LIBRARY=$(dirname "$SP")/libsandpod_tools.so \
    PYTHONPATH=$SRC/contrib/python py "$HERE/remote_sessions.py" "$B" \
    >"$T/out" 2>"$T/err"
rc=$?
ran_ok "Python sessions on the engine (pipes, terminal, interrupt, close_stdin, kill, refusals, close)" "$T/out" "$T/err"
out_is 'ok\n' "Python sessions: every check ran"

# Sandbox.fs on the engine: the Filesystem protocol through the peer's
# tools, compared call for call with HostFilesystem over the same tree.
SANDPOD_LIBRARY=$LIB SANDPOD_TOOLS_LIBRARY=$(dirname "$SP")/libsandpod_tools.so \
    PYTHONPATH=$SRC/contrib/python py "$HERE/remote_fs.py" "$B" "$T/fs" \
    >"$T/out" 2>"$T/err"
rc=$?
ran_ok "Python Sandbox.fs on the engine (every method, the local one's results and errors, snapshots)" "$T/out" "$T/err" 40
out_is 'ok\n' "Python fs: every check ran"
sed -n 's/^remote_fs: /    /p' "$T/err"

# What the library takes there, the CLI finds there (the same store).
run snapshot "$B" --tag cli-side
expect 0 "snapshot on the engine (CLI)"
run snapshots --json "$B" cli-side
expect 0 "snapshots NAME SNAP on the engine"
json "snapshots NAME SNAP: its record, from the peer" 'j["ok"] and j["tag"] == "cli-side" and j["store"] == "/sandpod/store"'
run snapshots --json "$B" no-such-snap
expect 1 "snapshots NAME SNAP that is none, on the engine"
json "... not_found, from the peer" 'not j["ok"] and j["error"]["code"] == "not_found"'

run rm --force "$B"
expect 0 "rm"
finish
